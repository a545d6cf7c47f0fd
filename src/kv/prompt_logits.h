// PromptLogits: the logits of the last position of prompts run recently, each kept with the
// exact tokens (and the adapter) that produced it. A prompt that comes again whole (a chat
// page's "regenerate", a client retrying, n requests of one prompt) then has its K/V from the
// prefix cache (KvCache, AdmitInput::logits_kept) and its first token sampled from the row kept
// here: no forward pass before its first token (docs/engine.md#prompt-logits).
//
// Bounded by bytes (rows of n_vocab floats and their tokens), least recently used first out,
// plus the memory of the last row dropped, kept for the next put.
// Thread-safety: none; owned by the scheduler loop. Cost: put and find hash the tokens
// (O(prompt)) and compare them on a hit; put copies the row (O(n_vocab)) into the memory of the
// row it replaces or drops, when it dropped one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace glm::kv {

class PromptLogits {
 public:
  // max_bytes 0: nothing is kept.
  explicit PromptLogits(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps row [n_vocab] as the logits after `tokens` (non-empty) ran with the adapter of
  // identity `salt` (AdmitInput::salt; 0: the bare model), replacing what was kept for the same
  // tokens; drops the least recently used rows to stay within max_bytes (a row over it alone
  // is not kept).
  void put(uint64_t salt, const std::vector<int32_t>& tokens, const float* row, int n_vocab);
  // The row kept for exactly these tokens and salt ([n_vocab] as put), or null. Marks it used.
  // Valid until the next put.
  const float* find(uint64_t salt, const std::vector<int32_t>& tokens);

  int size() const { return static_cast<int>(entries_.size()); }
  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    uint64_t key = 0;
    uint64_t salt = 0;
    std::vector<int32_t> tokens;
    std::vector<float> row;
    size_t bytes() const { return tokens.size() * sizeof(int32_t) + row.size() * sizeof(float); }
  };
  static uint64_t key_of(uint64_t salt, const std::vector<int32_t>& tokens);
  void erase(std::list<Entry>::iterator it);

  size_t max_bytes_;
  size_t bytes_ = 0;
  std::list<Entry> entries_;      // most recently used first
  std::vector<float> spare_row_;  // an erased row's memory, for the next put
  std::unordered_map<uint64_t, std::list<Entry>::iterator> by_key_;
};

}  // namespace glm::kv
