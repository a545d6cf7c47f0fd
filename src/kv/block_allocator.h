// BlockAllocator: which KV blocks are free, who holds them, and which hold a reusable prefix.
//
// The KV memory (model::KvPool) is cut into n_blocks blocks of block_tokens positions. This class
// only does the bookkeeping with block ids:
//   - reference counts: a block is held by every sequence (or saved conversation) whose block
//     table lists it; release() at refcount 0 makes it reusable;
//   - reservations: admission reserves the blocks a request may ever need, so a running
//     sequence never runs out of memory half-way (allocate_reserved() cannot fail);
//   - a prefix cache of FULL blocks keyed by a hash chain (hash of the parent block's hash and the
//     block's tokens): a new prompt that starts with the same tokens reuses those blocks. An
//     unreferenced cached block stays "idle" (still counted as free) until an allocation needs
//     memory; idle blocks are evicted least recently released first.
//
// Thread-safety: none; owned and used by the scheduler loop only.
// Cost: every operation is O(1) amortised (hash map + intrusive LRU list), except lookups which
// compare block_tokens ids to rule out hash collisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace glm::kv {

class BlockAllocator {
 public:
  BlockAllocator(int n_blocks, int block_tokens);

  int n_blocks() const { return static_cast<int>(meta_.size()); }
  int block_tokens() const { return block_tokens_; }
  // Blocks that can be handed out now (never used, or idle in the prefix cache).
  int n_free() const { return static_cast<int>(free_.size() + idle_.size()); }
  // Of those, the ones still holding a cached prefix.
  int n_idle() const { return static_cast<int>(idle_.size()); }
  // Blocks with refcount > 0.
  int n_used() const { return n_blocks() - n_free(); }
  int n_reserved() const { return reserved_; }
  // Free blocks not promised to a reservation.
  int n_available() const { return n_free() - reserved_; }

  // Promises n blocks to a caller; false (and nothing reserved) if fewer are available.
  bool reserve(int n);
  // Returns unused promises.
  void unreserve(int n);
  // Hands out one promised block with refcount 1 (evicting the oldest idle cached block when no
  // never-used block is left). Calling it without a reservation is a bug.
  int allocate_reserved();

  void retain(int block);
  // Drops one reference; at 0 the block becomes free, or idle if it holds a cached prefix.
  void release(int block);
  int refcount(int block) const { return meta_[block].refs; }

  // Prefix cache. hash_block() chains: pass the previous block's hash (kRootHash for the first).
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;
  static uint64_t hash_block(uint64_t parent, const int32_t* tokens, int n);
  // The cached block holding `tokens` ([block_tokens]) after the chain `parent`, retained for
  // the caller; -1 if none.
  int lookup(uint64_t parent, uint64_t hash, const int32_t* tokens);
  // Records that `block` (held by the caller, full) holds `tokens` after `parent`. No-op if that
  // content is already cached in another block or this block is already published.
  void publish(int block, uint64_t parent, uint64_t hash, const int32_t* tokens);
  bool is_cached(int block) const { return meta_[block].cached; }
  // What a cached block holds (is_cached(block) only): its chain's parent hash, its own hash
  // and its block_tokens tokens.
  uint64_t cached_parent(int block) const { return meta_[block].parent; }
  uint64_t cached_hash(int block) const { return meta_[block].hash; }
  const int32_t* cached_tokens(int block) const {
    return &tokens_[static_cast<size_t>(block) * block_tokens_];
  }

 private:
  struct Meta {
    int refs = 0;
    bool cached = false;
    uint64_t parent = 0;
    uint64_t hash = 0;
    std::list<int>::iterator idle_pos;  // valid while idle
  };
  void uncache(int block);

  int block_tokens_;
  int reserved_ = 0;
  std::vector<Meta> meta_;
  std::vector<int> free_;        // never-used or uncached free blocks (a stack)
  std::list<int> idle_;          // cached, refcount 0; front = evicted first
  std::vector<int32_t> tokens_;  // [n_blocks, block_tokens] tokens of cached blocks
  std::unordered_map<uint64_t, int> by_hash_;
};

}  // namespace glm::kv
