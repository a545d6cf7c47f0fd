#include "kv/block_allocator.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace glm::kv {

BlockAllocator::BlockAllocator(int n_blocks, int block_tokens)
    : block_tokens_(block_tokens), meta_(n_blocks) {
  GLM_CHECK(n_blocks > 0 && block_tokens > 0);
  tokens_.assign(static_cast<size_t>(n_blocks) * block_tokens, 0);
  free_.reserve(n_blocks);
  // Stack: block 0 is handed out first.
  for (int b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool BlockAllocator::reserve(int n) {
  GLM_CHECK(n >= 0);
  if (n > n_available()) return false;
  reserved_ += n;
  return true;
}

void BlockAllocator::unreserve(int n) {
  GLM_CHECK(n >= 0 && n <= reserved_);
  reserved_ -= n;
}

int BlockAllocator::allocate_reserved() {
  GLM_CHECK(reserved_ > 0);
  int block;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else {
    GLM_CHECK(!idle_.empty());  // reservations never exceed n_free()
    block = idle_.front();
    idle_.pop_front();
    uncache(block);
  }
  --reserved_;
  meta_[block].refs = 1;
  return block;
}

void BlockAllocator::retain(int block) {
  Meta& m = meta_[block];
  if (m.refs == 0) {
    // Only idle cached blocks can be retained from refcount 0 (through lookup()).
    GLM_CHECK(m.cached);
    idle_.erase(m.idle_pos);
    // Leaving the free set must not break promises already made.
    GLM_CHECK(n_free() >= reserved_);
  }
  ++m.refs;
}

void BlockAllocator::release(int block) {
  Meta& m = meta_[block];
  GLM_CHECK(m.refs > 0);
  if (--m.refs > 0) return;
  if (m.cached) {
    idle_.push_back(block);
    m.idle_pos = std::prev(idle_.end());
  } else {
    free_.push_back(block);
  }
}

uint64_t BlockAllocator::hash_block(uint64_t parent, const int32_t* tokens, int n) {
  // FNV-1a style mixing over 32-bit ids, seeded by the parent hash, then a final avalanche.
  uint64_t h = parent ^ 0xcbf29ce484222325ull;
  for (int i = 0; i < n; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

int BlockAllocator::lookup(uint64_t parent, uint64_t hash, const int32_t* tokens) {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const int block = it->second;
  const Meta& m = meta_[block];
  if (m.parent != parent || std::memcmp(&tokens_[static_cast<size_t>(block) * block_tokens_],
                                        tokens, sizeof(int32_t) * block_tokens_) != 0) {
    return -1;  // hash collision
  }
  if (m.refs == 0 && n_free() - 1 < reserved_) return -1;  // taking it would break a promise
  retain(block);
  return block;
}

void BlockAllocator::publish(int block, uint64_t parent, uint64_t hash, const int32_t* tokens) {
  Meta& m = meta_[block];
  GLM_CHECK(m.refs > 0);
  if (m.cached && !is_partial(block)) return;
  if (by_hash_.count(hash)) return;  // a partial entry stays: its tokens are still valid
  if (m.cached) remove_child(block);
  m.cached = true;
  m.parent = parent;
  m.hash = hash;
  m.n_tokens = block_tokens_;
  std::memcpy(&tokens_[static_cast<size_t>(block) * block_tokens_], tokens,
              sizeof(int32_t) * block_tokens_);
  by_hash_[hash] = block;
  add_child(block);
}

void BlockAllocator::publish_partial(int block, uint64_t parent, const int32_t* tokens, int n) {
  Meta& m = meta_[block];
  GLM_CHECK(m.refs > 0 && n > 0 && n < block_tokens_);
  const bool indexed = m.cached;  // a partial entry of this block: its holder wrote on
  if (indexed && (!is_partial(block) || m.parent != parent || n <= m.n_tokens)) return;
  m.cached = true;
  m.parent = parent;
  m.hash = 0;
  m.n_tokens = n;
  std::memcpy(&tokens_[static_cast<size_t>(block) * block_tokens_], tokens, sizeof(int32_t) * n);
  if (!indexed) add_child(block);
}

BlockAllocator::Match BlockAllocator::longest_prefix(uint64_t parent, const int32_t* tokens,
                                                     int n) {
  GLM_CHECK(n >= 0 && n <= block_tokens_);
  Match best;
  auto it = by_parent_.find(parent);
  if (it == by_parent_.end()) return best;
  for (int block : it->second) {
    const Meta& m = meta_[block];
    if (m.refs == 0 && n_free() - 1 < reserved_) continue;  // taking it would break a promise
    const int32_t* t = &tokens_[static_cast<size_t>(block) * block_tokens_];
    const int limit = std::min(n, m.n_tokens);
    int k = 0;
    while (k < limit && t[k] == tokens[k]) ++k;
    if (k > best.n) best = Match{block, k};
  }
  if (best.block >= 0) retain(best.block);
  return best;
}
void BlockAllocator::uncache(int block) {
  Meta& m = meta_[block];
  if (!m.cached) return;
  if (!is_partial(block)) by_hash_.erase(m.hash);
  remove_child(block);
  m.cached = false;
  m.n_tokens = 0;
}

void BlockAllocator::add_child(int block) { by_parent_[meta_[block].parent].push_back(block); }

void BlockAllocator::remove_child(int block) {
  auto it = by_parent_.find(meta_[block].parent);
  GLM_CHECK(it != by_parent_.end());
  std::vector<int>& v = it->second;
  auto pos = std::find(v.begin(), v.end(), block);
  GLM_CHECK(pos != v.end());
  *pos = v.back();
  v.pop_back();
  if (v.empty()) by_parent_.erase(it);
}
}  // namespace glm::kv
