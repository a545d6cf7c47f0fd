#include "kv/prompt_logits.h"

#include <iterator>

#include "kv/block_allocator.h"
#include "kv/kv_cache.h"

namespace glm::kv {

uint64_t PromptLogits::key_of(uint64_t salt, const std::vector<int32_t>& tokens) {
  // The tokens hashed as one block of the adapter's chain (the prefix cache's own hashing).
  return BlockAllocator::hash_block(chain_root(salt), tokens.data(),
                                    static_cast<int>(tokens.size()));
}

void PromptLogits::erase(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes();
  by_key_.erase(it->key);
  // The largest row's memory is kept for the next put: a full cache then copies into pages it
  // touched before (fresh ones cost a page fault each, some 10 us apiece in a VM).
  if (it->row.capacity() > spare_row_.capacity()) spare_row_.swap(it->row);
  entries_.erase(it);
}

void PromptLogits::put(uint64_t salt, const std::vector<int32_t>& tokens, const float* row,
                       int n_vocab) {
  if (max_bytes_ == 0) return;
  const uint64_t key = key_of(salt, tokens);
  if (auto it = by_key_.find(key); it != by_key_.end()) erase(it->second);  // same key: replaced
  const size_t need =
      tokens.size() * sizeof(int32_t) + static_cast<size_t>(n_vocab) * sizeof(float);
  if (tokens.empty() || n_vocab <= 0 || need > max_bytes_) return;
  while (bytes_ + need > max_bytes_) erase(std::prev(entries_.end()));
  std::vector<float> kept;
  kept.swap(spare_row_);
  kept.assign(row, row + n_vocab);
  entries_.push_front(Entry{key, salt, tokens, std::move(kept)});
  by_key_[key] = entries_.begin();
  bytes_ += need;
}

const float* PromptLogits::find(uint64_t salt, const std::vector<int32_t>& tokens) {
  if (entries_.empty() || tokens.empty()) return nullptr;
  const auto it = by_key_.find(key_of(salt, tokens));
  if (it == by_key_.end()) return nullptr;
  const Entry& e = *it->second;
  if (e.salt != salt || e.tokens != tokens) return nullptr;  // a hash collision
  entries_.splice(entries_.begin(), entries_, it->second);   // iterators stay valid
  return entries_.front().row.data();
}

}  // namespace glm::kv
