// KvCache: the server's KV bookkeeping on top of BlockAllocator: block tables of running
// sequences, admission with reservation (a request is admitted only when every block it may need
// is promised to it, so decoding never runs out of memory), prefix reuse, and saved conversations.
//
// Prefix reuse, two ways (docs/engine.md):
//   1. By conversation: when a sequence of conversation C finishes, its block table and its ACTUAL
//      token sequence (prompt + generated tokens, not a re-rendering of the text) are saved under
//      C with a tag (a digest of the messages so far). The next turn whose history digest equals
//      the tag continues from those tokens and prefills only its new tokens (`tail`).
//   2. By token prefix: every full block is published in the allocator's hash-chain cache, so any
//      prompt starting with the same tokens (a shared system prompt, a re-sent history) reuses
//      those blocks; and the tokens after them, down to a single token: a sequence's partly
//      written last block is published too, and the cached block sharing the most tokens with
//      the prompt's next ones is copied into the sequence's own block at admission (through
//      set_copy_block's function), so a repeated short prompt, or one that leaves a cached
//      prompt inside a block, prefills only what differs: at least its last token, or none where
//      the caller keeps that prompt's logits (AdmitInput::logits_kept, PromptLogits).
// Memory pressure: admission evicts idle saved conversations least recently used first; their
// full blocks stay in the prefix cache until the allocator evicts them (also LRU).
// On disk (optional, attach_disk; docs/engine.md#kv-disk): saved conversations are written to a
// DiskStore (when the engine is idle, before one is evicted, and all of them with the prefix
// cache's blocks on a graceful stop); admission reads back what memory misses: a conversation
// key (its tokens, then its blocks) and the blocks of a prompt's chain after the in-memory
// prefix. A block that is missing or refused on disk just ends what is restored: the rest is
// prefilled.
//
// Thread-safety: none; owned by the scheduler loop. Cost: admission is O(prompt / block_tokens)
// hash lookups plus O(n_conversations) per conversation evicted; with a disk, one file read per
// block restored (and the writes of a conversation evicted before it is on disk).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_allocator.h"
#include "kv/disk_store.h"

namespace glm::kv {

// The KV state of one sequence. Owned by the scheduler; changed only through KvCache.
struct SeqKv {
  std::vector<int32_t> blocks;  // block table: block i holds positions [i*bt, (i+1)*bt)
  std::vector<int32_t> tokens;  // tokens whose K/V are written, position order
  int reserved = 0;             // blocks promised to this sequence, not yet allocated
  int n_published = 0;          // leading full blocks already offered to the prefix cache
  uint64_t chain_hash = BlockAllocator::kRootHash;  // hash of the last published block
  // The chain's root: kRootHash for the bare model, chain_root(salt) for an adapter's.
  uint64_t root = BlockAllocator::kRootHash;
  bool shared = true;  // false: its blocks are never offered to the prefix cache
};

struct AdmitInput {
  std::string conversation;                      // empty: no conversation reuse
  uint64_t history_tag = 0;                      // digest of the messages before `tail`
  const std::vector<int32_t>* tail = nullptr;    // tokens after the history (conversation path)
  const std::vector<int32_t>* prompt = nullptr;  // the full prompt (fallback path), non-empty
  int max_new_tokens = 0;
  int n_ctx = 0;
  // false: the sequence's K/V depend on its whole prompt (a bidirectional prefix): no
  // conversation or prefix reuse, and its blocks are never shared with later prompts.
  bool reuse = true;
  // More choices of the same prompt (n > 1), forked from this sequence once its prompt is
  // written (fork()): their blocks are reserved now, with this sequence's.
  int n_forks = 0;
  // The identity of the adapter the sequence runs with (docs/adapters.md); 0 = the bare model.
  // Its blocks chain from chain_root(salt): K/V is never shared across adapters. (The caller
  // keys conversations by adapter too.)
  uint64_t salt = 0;
  // The caller keeps the logits of *prompt's last position (PromptLogits): on the full-prompt
  // path every prompt token may then come from the cache (Admitted::n_cached = its size), so
  // that none runs. Else at least one runs, for its logits.
  bool logits_kept = false;
};

// The prefix cache's chain root for an adapter's identity (kRootHash for 0).
uint64_t chain_root(uint64_t salt);

enum class AdmitResult {
  kAdmitted,   // *out filled, blocks reserved
  kWait,       // not enough free blocks now; try again after others finish
  kNeverFits,  // more blocks than the whole cache has
};

struct Admitted {
  std::vector<int32_t> prompt;     // what the sequence runs: cached tokens first
  int n_cached = 0;                // prompt tokens whose K/V are already in kv.blocks
  bool from_conversation = false;  // prompt built from a saved conversation
  int fork_reserve = 0;            // blocks each fork takes from kv.reserved (AdmitInput::n_forks)
  SeqKv kv;
};

// The block a fork must copy: the parent's last, partly written block (its positions after the
// shared full blocks), into the fork's own block. src < 0: the prompt ended on a block boundary,
// nothing to copy.
struct ForkCopy {
  int src = -1;
  int dst = -1;
};

// How blocks' K/V travel between the KV memory and the disk (the engine implements it over
// model::Model and its KvPool; tests over plain memory). Loop thread only.
class BlockIo {
 public:
  virtual ~BlockIo() = default;
  virtual size_t block_bytes() const = 0;
  virtual void save(int block, uint8_t* data) const = 0;  // [block_bytes]
  virtual void load(int block, const uint8_t* data) = 0;  // [block_bytes]
};

class KvCache {
 public:
  KvCache(int n_blocks, int block_tokens, int max_conversations = 4096);

  // How admission copies a block's K/V (src into dst; the model's copy_kv_block) for token-
  // granular reuse. Without one, only whole cached blocks are reused.
  using CopyBlock = std::function<void(int src, int dst)>;
  void set_copy_block(CopyBlock copy) { copy_block_ = std::move(copy); }

  BlockAllocator& allocator() { return alloc_; }
  const BlockAllocator& allocator() const { return alloc_; }
  int block_tokens() const { return alloc_.block_tokens(); }
  int blocks_for(int n_positions) const;

  AdmitResult admit(const AdmitInput& in, Admitted* out);
  // Makes seq->blocks cover n_positions positions, drawing on its reservation.
  void grow(SeqKv* seq, int n_positions);
  // Records that the K/V of `tokens` ([n]) were written after seq->tokens; publishes the blocks
  // that became full.
  void commit(SeqKv* seq, const int32_t* tokens, int n);
  // A new sequence that continues parent's written tokens (n > 1 choices of one prompt):
  // copy-on-write at fork time. The child holds parent's full blocks (one more reference each)
  // and a new block for the partial last one (returned: the caller copies its K/V), takes
  // `reserve` blocks of parent's reservation (Admitted::fork_reserve), and publishes its later
  // full blocks like any sequence. *child must be empty.
  ForkCopy fork(SeqKv* parent, int reserve, SeqKv* child);
  // Frees the blocks past those its written tokens need (speculative decoding grows blocks for
  // a draft whose rejected tokens are never committed); its reservation does not get them back,
  // so only for a sequence that ends (before save_conversation).
  void drop_unwritten_blocks(SeqKv* seq);
  // Frees everything the sequence holds (references and reservation); leaves it empty.
  void release(SeqKv* seq);
  // Keeps the sequence's cache as conversation `key`, replacing an older entry. `pending` are
  // conversation tokens after seq->tokens whose K/V were not written (the last sampled token).
  // Frees the unused reservation; leaves *seq empty.
  void save_conversation(const std::string& key, uint64_t tag, SeqKv* seq,
                         std::vector<int32_t> pending);
  void drop_conversation(const std::string& key);
  bool has_conversation(const std::string& key) const { return convs_.count(key) > 0; }
  int n_conversations() const { return static_cast<int>(convs_.size()); }
  // Drops every saved conversation (their full blocks stay in the prefix cache; with a disk,
  // conversations not on disk yet are written first).
  void clear_conversations();

  // The disk cache: neither is owned, both must outlive the cache; null store = none.
  void attach_disk(DiskStore* store, BlockIo* io);
  DiskStore* disk() const { return disk_; }
  // A saved conversation is not on disk yet (and the disk is on).
  bool has_unwritten();
  // Writes the unwritten conversation saved longest ago: its blocks not on disk yet, then its
  // tokens. False if there was none. Cost: one file per block written (block_bytes each).
  bool write_next();
  // Writes every unwritten conversation and every cached full block not on disk yet (graceful
  // stop). Returns the blocks written.
  int write_all();

 private:
  struct Conversation {
    uint64_t tag = 0;
    SeqKv kv;
    std::vector<int32_t> pending;
    uint64_t last_used = 0;
    bool on_disk = false;  // this version of it is on disk
  };
  bool evict_oldest_conversation();
  // The full-prompt path: cached blocks in memory, then (after the reservation) on disk for
  // at most the first `n_restorable` positions; at most its first `max_cached` tokens in all
  // (its size - 1: one runs for its logits; its size where AdmitInput::logits_kept).
  AdmitResult admit_prompt(std::vector<int32_t> prompt, int n_restorable, int max_cached,
                           const AdmitInput& in, Admitted* out);
  // Extends seq (its in-memory prefix matched) with blocks of `prompt` found on disk (full
  // blocks, and a last partial one ending at `limit`, at most prompt's size), each drawn from
  // its reservation.
  void restore_from_disk(const std::vector<int32_t>& prompt, int limit, SeqKv* seq);
  // Writes c's blocks and tokens; false if the disk is (now) off.
  bool write_conversation(const std::string& key, Conversation* c);
  // Blocks one fork needs when its prompt is n_prompt positions and it may add `extra`.
  int fork_blocks(int n_prompt, int extra) const;
  // Longest chain of cached full blocks matching the start of prompt, within its first
  // max_cached tokens.
  void match_prefix(const std::vector<int32_t>& prompt, int max_cached, SeqKv* seq);

  BlockAllocator alloc_;
  CopyBlock copy_block_;
  int max_conversations_;
  uint64_t clock_ = 0;
  std::unordered_map<std::string, Conversation> convs_;
  DiskStore* disk_ = nullptr;
  BlockIo* io_ = nullptr;
  std::deque<std::string> unwritten_;  // keys saved since written, oldest first (some stale)
  int n_blocks_written_ = 0;           // by write_conversation and write_all
};

}  // namespace glm::kv
