// Copies of adapters kept on a GPU (LoRA pairs: transformer_gpu_lora.cc; P-Tuning v2 rows:
// gpu_model.cc), found by a key (Adapter::id, with whatever else selects the copy): at most kMax
// of them, the least recently used dropped first, never one the current step uses. An entry
// stays where it is while others come and go (a list), so a step keeps pointers to its entries.
// Thread-safety: none (the model's forward thread).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/adapter.h"

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

// The device bytes a GPU model keeps of an adapter: its LoRA pairs in f32 (A and B of every
// layer); its P-Tuning v2 rows (K and V of every layer) in the KV cache's type `kv_type`. Every
// layer's, a split's CPU layers too: a bound, not the exact figure.
inline size_t lora_device_bytes(const Adapter& a) {
  size_t n = 0;
  for (const LoraLayer& l : a.lora) {
    for (const LoraPair* p :
         {&l.qkv, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_up, &l.ffn_gate, &l.ffn_down}) {
      n += (p->a.size() + p->b.size()) * sizeof(float);
    }
  }
  return n;
}
inline size_t prefix_device_bytes(const Adapter& a, DType kv_type) {
  const PrefixKv& p = a.prefix;
  if (p.empty()) return 0;
  const size_t rows = p.k.size() / static_cast<size_t>(p.kv_dim);  // n_layer x n_tokens
  return 2 * rows * row_bytes(kv_type, p.kv_dim);
}

// What a GPU model plans for the adapters it serves per request (LoadOptions::adapter_bytes):
// the copies its two caches hold at once, the kMax largest of each kind.
inline size_t adapters_device_bytes(const std::vector<const Adapter*>& adapters, DType kv_type) {
  std::vector<size_t> lora, prefix;
  for (const Adapter* a : adapters) {
    lora.push_back(lora_device_bytes(*a));
    prefix.push_back(prefix_device_bytes(*a, kv_type));
  }
  size_t n = 0;
  for (std::vector<size_t>* v : {&lora, &prefix}) {
    std::sort(v->begin(), v->end(), std::greater<size_t>());
    for (size_t i = 0; i < v->size() && i < GpuAdapterCache<int>::kMax; ++i) n += (*v)[i];
  }
  return n;
}

}  // namespace glm::model
