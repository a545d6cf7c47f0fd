// Copies of adapters kept on a GPU (LoRA pairs: transformer_gpu_lora.cc; P-Tuning v2 rows:
// gpu_model.cc), found by a key (Adapter::id, with whatever else selects the copy): at most kMax
// of them, the least recently used dropped first, never one the current step uses. An entry
// stays where it is while others come and go (a list), so a step keeps pointers to its entries.
// Thread-safety: none (the model's forward thread).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>

#include "core/status.h"

namespace glm::model {

template <typename T>
class GpuAdapterCache {
 public:
  static constexpr size_t kMax = 8;

  // Begins a step: the entries got from now on are this step's (not dropped before the next).
  void next_step() { ++clock_; }

  // The entry of `key`; when absent, made by make(T*) (Status), and kept unless make fails.
  template <typename Make>
  StatusOr<T*> get(uint64_t key, const Make& make) {
    for (Slot& s : slots_) {
      if (s.key == key) {
        s.used = clock_;
        return &s.value;
      }
    }
    if (slots_.size() >= kMax) {
      auto old = std::min_element(slots_.begin(), slots_.end(),
                                  [](const Slot& a, const Slot& b) { return a.used < b.used; });
      if (old->used < clock_) slots_.erase(old);
    }
    Slot s;
    s.key = key;
    s.used = clock_;
    GLM_RETURN_IF_ERROR(make(&s.value));
    slots_.push_back(std::move(s));
    return &slots_.back().value;
  }

  size_t size() const { return slots_.size(); }

 private:
  struct Slot {
    uint64_t key = 0, used = 0;
    T value;
  };
  std::list<Slot> slots_;
  uint64_t clock_ = 0;
};

}  // namespace glm::model
