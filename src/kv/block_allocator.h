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
//   - token granularity: a sequence's last, partly written block is published too, with the
//     tokens written so far (publish_partial), and every cached block is also indexed under its
//     chain's parent. longest_prefix() finds the cached block after a chain that shares the most
//     leading tokens with a prompt's next ones, full or partial: its first tokens' K/V are valid
//     for any prompt that starts the same way (a position's K/V depend only on the tokens up to
//     it), so the caller copies that block and runs only the rest (copy-on-write: the copy is
//     the new sequence's own block, written on from where the match ends).
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
  // content is already cached in another block or this block is already published full.
  void publish(int block, uint64_t parent, uint64_t hash, const int32_t* tokens);
  // Records that `block` (held by the caller) holds its first n tokens ([n], 0 < n <
  // block_tokens) after `parent`, and that its holder only ever writes on after them (a later
  // call with more tokens, or publish() once full, updates the entry). The positions past n
  // may be written later: they are never part of a match.
  void publish_partial(int block, uint64_t parent, const int32_t* tokens, int n);
  // The cached block (full or partial) after `parent` whose tokens share the longest common
  // start with `tokens` ([n], n <= block_tokens), retained for the caller, and how many tokens
  // it shares (>= 1); {-1, 0} if none (or taking an idle one would break a reservation).
  struct Match {
    int block = -1;
    int n = 0;
  };
  Match longest_prefix(uint64_t parent, const int32_t* tokens, int n);
  // The block is in the prefix cache as a FULL block (partial ones are not: is_partial()).
  bool is_cached(int block) const { return meta_[block].cached && !is_partial(block); }
  bool is_partial(int block) const {
    return meta_[block].cached && meta_[block].n_tokens < block_tokens_;
  }
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
    uint64_t hash = 0;                  // full blocks only
    int n_tokens = 0;                   // tokens cached: block_tokens (full) or fewer (partial)
    std::list<int>::iterator idle_pos;  // valid while idle
  };
  void uncache(int block);
  void add_child(int block);
  void remove_child(int block);

  int block_tokens_;
  int reserved_ = 0;
  std::vector<Meta> meta_;
  std::vector<int> free_;                      // never-used or uncached free blocks (a stack)
  std::list<int> idle_;                        // cached, refcount 0; front = evicted first
  std::vector<int32_t> tokens_;                // [n_blocks, block_tokens] tokens of cached blocks
  std::unordered_map<uint64_t, int> by_hash_;  // full blocks by content
  std::unordered_map<uint64_t, std::vector<int>> by_parent_;  // every cached block by parent
};

}  // namespace glm::kv
