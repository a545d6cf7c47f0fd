#include "kv/kv_cache.h"

#include <algorithm>
#include <optional>

#include "core/check.h"
#include "core/log.h"

namespace glm::kv {

KvCache::KvCache(int n_blocks, int block_tokens, int max_conversations)
    : alloc_(n_blocks, block_tokens), max_conversations_(max_conversations) {}

int KvCache::blocks_for(int n_positions) const {
  const int bt = alloc_.block_tokens();
  return (n_positions + bt - 1) / bt;
}

int KvCache::fork_blocks(int n_prompt, int extra) const {
  // The full blocks of the prompt are shared; the partial one is copied, the rest grows.
  return blocks_for(n_prompt + extra) - n_prompt / alloc_.block_tokens();
}

uint64_t chain_root(uint64_t salt) {
  if (salt == 0) return BlockAllocator::kRootHash;
  uint64_t z = BlockAllocator::kRootHash ^ salt;  // SplitMix64's finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void KvCache::match_prefix(const std::vector<int32_t>& prompt, int max_cached, SeqKv* seq) {
  const int bt = alloc_.block_tokens();
  const int max_blocks = max_cached / bt;
  uint64_t parent = seq->root;
  for (int i = 0; i < max_blocks; ++i) {
    const int32_t* t = prompt.data() + static_cast<size_t>(i) * bt;
    const uint64_t h = BlockAllocator::hash_block(parent, t, bt);
    const int block = alloc_.lookup(parent, h, t);
    if (block < 0) break;
    seq->blocks.push_back(block);
    seq->tokens.insert(seq->tokens.end(), t, t + bt);
    seq->n_published = i + 1;
    seq->chain_hash = h;
    parent = h;
  }
}

AdmitResult KvCache::admit(const AdmitInput& in, Admitted* out) {
  GLM_CHECK(in.prompt != nullptr && !in.prompt->empty());
  *out = Admitted();
  const int extra = std::max(in.max_new_tokens - 1, 0);  // the last token is never fed back

  // 1. The conversation path: saved tokens + the new turn's tail.
  auto conv = in.conversation.empty() || !in.reuse ? convs_.end() : convs_.find(in.conversation);
  if (conv != convs_.end()) {
    Conversation& c = conv->second;
    const int n =
        static_cast<int>(c.kv.tokens.size() + c.pending.size() + (in.tail ? in.tail->size() : 0));
    const bool usable = c.tag == in.history_tag && in.tail && !in.tail->empty() &&
                        n + in.max_new_tokens <= in.n_ctx;
    if (usable) {
      const int forks = in.n_forks * fork_blocks(n, extra);
      const int need = blocks_for(n + extra) - static_cast<int>(c.kv.blocks.size()) + forks;
      if (blocks_for(n + extra) + forks > alloc_.n_blocks()) return AdmitResult::kNeverFits;
      SeqKv kv = std::move(c.kv);
      std::vector<int32_t> pending = std::move(c.pending);
      const uint64_t tag = c.tag;
      const bool on_disk = c.on_disk;
      convs_.erase(conv);  // in use now: not evictable while we make room
      while (!alloc_.reserve(need)) {
        if (!evict_oldest_conversation()) {
          // Put it back as it was and wait for running sequences to finish.
          Conversation& back = convs_[in.conversation];
          back.kv = std::move(kv);
          back.pending = std::move(pending);
          back.tag = tag;
          back.on_disk = on_disk;
          back.last_used = ++clock_;
          return AdmitResult::kWait;
        }
      }
      kv.reserved = need;
      out->prompt = kv.tokens;
      out->prompt.insert(out->prompt.end(), pending.begin(), pending.end());
      out->prompt.insert(out->prompt.end(), in.tail->begin(), in.tail->end());
      out->n_cached = static_cast<int>(kv.tokens.size());
      out->from_conversation = true;
      out->fork_reserve = fork_blocks(n, extra);
      out->kv = std::move(kv);
      return AdmitResult::kAdmitted;
    }
    // Stale (the history changed) or too long: the full prompt replaces it.
    SeqKv old = std::move(c.kv);
    convs_.erase(conv);
    release(&old);
    if (disk_ != nullptr) disk_->remove_conversation(in.conversation);
  } else if (disk_ != nullptr && in.reuse && !in.conversation.empty() && in.tail &&
             !in.tail->empty() && disk_->has_conversation(in.conversation)) {
    // 1b. Not in memory, on disk (saved by an earlier engine): its tokens, then its blocks.
    std::optional<DiskConversation> d = disk_->get_conversation(in.conversation);
    if (d && d->tag != in.history_tag) {
      disk_->remove_conversation(in.conversation);  // the history moved on
    } else if (d) {
      const int n_saved = static_cast<int>(d->tokens.size());
      std::vector<int32_t> prompt = std::move(d->tokens);
      prompt.insert(prompt.end(), d->pending.begin(), d->pending.end());
      prompt.insert(prompt.end(), in.tail->begin(), in.tail->end());
      if (static_cast<int>(prompt.size()) + in.max_new_tokens <= in.n_ctx) {
        const int max_cached = static_cast<int>(prompt.size()) - 1;
        const AdmitResult r = admit_prompt(std::move(prompt), n_saved, max_cached, in, out);
        if (r == AdmitResult::kAdmitted) {
          out->from_conversation = true;
          GLM_LOG_INFO("kv-disk: a conversation's %d tokens restored: %d from memory or disk",
                       n_saved, out->n_cached);
        }
        return r;
      }
    }
  }

  // 2. The full prompt, reusing cached full blocks of any earlier sequence (and its last
  // partial one), leaving a token to run for its logits unless the caller keeps them.
  const int n_prompt = static_cast<int>(in.prompt->size());
  const int max_cached = in.logits_kept ? n_prompt : n_prompt - 1;
  return admit_prompt(*in.prompt, max_cached, max_cached, in, out);
}

AdmitResult KvCache::admit_prompt(std::vector<int32_t> prompt, int n_restorable, int max_cached,
                                  const AdmitInput& in, Admitted* out) {
  const int extra = std::max(in.max_new_tokens - 1, 0);
  const int n_prompt = static_cast<int>(prompt.size());
  const int total = blocks_for(n_prompt + extra) + in.n_forks * fork_blocks(n_prompt, extra);
  if (total > alloc_.n_blocks()) return AdmitResult::kNeverFits;
  SeqKv kv;
  kv.shared = in.reuse;
  kv.root = kv.chain_hash = chain_root(in.salt);
  BlockAllocator::Match partial;  // retained until copied or dropped
  if (in.reuse) {
    match_prefix(prompt, max_cached, &kv);
    // The next block's first tokens, from any cached block after the matched chain.
    const int at = static_cast<int>(kv.tokens.size());
    const int n = std::min(alloc_.block_tokens(), max_cached - at);
    if (n > 0 && copy_block_) partial = alloc_.longest_prefix(kv.chain_hash, prompt.data() + at, n);
  }
  const int need = total - static_cast<int>(kv.blocks.size());
  while (!alloc_.reserve(need)) {
    if (!evict_oldest_conversation()) {
      if (partial.block >= 0) alloc_.release(partial.block);
      release(&kv);
      return AdmitResult::kWait;
    }
  }
  kv.reserved = need;
  const size_t n_matched = kv.tokens.size();
  if (in.reuse) restore_from_disk(prompt, std::min(n_restorable, max_cached), &kv);
  if (partial.block >= 0 && kv.tokens.size() == n_matched) {
    // Copy-on-write: the cached block is only read; the sequence writes on into its own copy.
    const int dst = alloc_.allocate_reserved();
    --kv.reserved;
    copy_block_(partial.block, dst);
    kv.blocks.push_back(dst);
    kv.tokens.insert(kv.tokens.end(), prompt.begin() + static_cast<std::ptrdiff_t>(n_matched),
                     prompt.begin() + static_cast<std::ptrdiff_t>(n_matched) + partial.n);
  }
  if (partial.block >= 0) alloc_.release(partial.block);  // copied, or the disk had more
  out->n_cached = static_cast<int>(kv.tokens.size());
  out->fork_reserve = fork_blocks(n_prompt, extra);
  out->prompt = std::move(prompt);
  out->kv = std::move(kv);
  return AdmitResult::kAdmitted;
}

void KvCache::restore_from_disk(const std::vector<int32_t>& prompt, int limit, SeqKv* seq) {
  if (disk_ == nullptr || !disk_->enabled()) return;
  const int bt = alloc_.block_tokens();
  for (;;) {
    const int at = static_cast<int>(seq->tokens.size());
    const int n = std::min(bt, limit - at);
    if (n <= 0 || at % bt != 0) return;
    const int32_t* t = prompt.data() + at;
    const uint64_t parent = seq->chain_hash;
    const uint64_t h = BlockAllocator::hash_block(parent, t, n);
    int block = n == bt ? alloc_.lookup(parent, h, t) : -1;  // a deeper block may be in memory
    if (block < 0) {
      if (!disk_->has_block(h)) return;
      std::optional<DiskBlock> d = disk_->get_block(h);
      if (!d || d->parent != parent || !std::equal(t, t + n, d->tokens.begin(), d->tokens.end())) {
        return;
      }
      GLM_CHECK(seq->reserved > 0);  // the reservation covers every block of the prompt
      block = alloc_.allocate_reserved();
      --seq->reserved;
      io_->load(block, d->data.data());
      if (n == bt) alloc_.publish(block, parent, h, t);
    }
    seq->blocks.push_back(block);
    seq->tokens.insert(seq->tokens.end(), t, t + n);
    if (n < bt) return;  // a partial last block: the sequence writes on into it
    seq->n_published = static_cast<int>(seq->blocks.size());
    seq->chain_hash = h;
  }
}

void KvCache::grow(SeqKv* seq, int n_positions) {
  const int want = blocks_for(n_positions);
  while (static_cast<int>(seq->blocks.size()) < want) {
    GLM_CHECK(seq->reserved > 0);  // admission reserved every block the sequence may need
    seq->blocks.push_back(alloc_.allocate_reserved());
    --seq->reserved;
  }
}

void KvCache::commit(SeqKv* seq, const int32_t* tokens, int n) {
  seq->tokens.insert(seq->tokens.end(), tokens, tokens + n);
  if (!seq->shared) return;
  const int bt = alloc_.block_tokens();
  const int full = static_cast<int>(seq->tokens.size()) / bt;
  GLM_CHECK(full <= static_cast<int>(seq->blocks.size()));
  for (int i = seq->n_published; i < full; ++i) {
    const int32_t* t = seq->tokens.data() + static_cast<size_t>(i) * bt;
    const uint64_t h = BlockAllocator::hash_block(seq->chain_hash, t, bt);
    alloc_.publish(seq->blocks[i], seq->chain_hash, h, t);
    seq->chain_hash = h;
  }
  seq->n_published = std::max(seq->n_published, full);
  const int partial = static_cast<int>(seq->tokens.size()) - full * bt;
  if (partial > 0 && seq->n_published == full) {
    alloc_.publish_partial(seq->blocks[full], seq->chain_hash,
                           seq->tokens.data() + static_cast<size_t>(full) * bt, partial);
  }
}

ForkCopy KvCache::fork(SeqKv* parent, int reserve, SeqKv* child) {
  GLM_CHECK(child->blocks.empty() && child->tokens.empty() && child->reserved == 0);
  GLM_CHECK(reserve >= 0 && parent->reserved >= reserve);
  parent->reserved -= reserve;
  child->reserved = reserve;
  const int bt = alloc_.block_tokens();
  const int n = static_cast<int>(parent->tokens.size());
  const int full = n / bt;
  GLM_CHECK(static_cast<int>(parent->blocks.size()) >= blocks_for(n));
  for (int i = 0; i < full; ++i) {
    alloc_.retain(parent->blocks[i]);
    child->blocks.push_back(parent->blocks[i]);
  }
  ForkCopy copy;
  if (n % bt != 0) {
    copy.src = parent->blocks[full];
    copy.dst = alloc_.allocate_reserved();
    GLM_CHECK(child->reserved > 0);  // fork_blocks() counted the copy
    --child->reserved;
    child->blocks.push_back(copy.dst);
  }
  child->tokens = parent->tokens;
  child->n_published = parent->n_published;
  child->chain_hash = parent->chain_hash;
  child->root = parent->root;
  child->shared = parent->shared;
  return copy;
}

void KvCache::drop_unwritten_blocks(SeqKv* seq) {
  const size_t keep = blocks_for(static_cast<int>(seq->tokens.size()));
  while (seq->blocks.size() > keep) {
    alloc_.release(seq->blocks.back());
    seq->blocks.pop_back();
  }
}

void KvCache::release(SeqKv* seq) {
  // Last block first: the idle prefix cache then evicts the deepest blocks of a chain first.
  for (auto it = seq->blocks.rbegin(); it != seq->blocks.rend(); ++it) alloc_.release(*it);
  alloc_.unreserve(seq->reserved);
  *seq = SeqKv();
}

void KvCache::save_conversation(const std::string& key, uint64_t tag, SeqKv* seq,
                                std::vector<int32_t> pending) {
  drop_conversation(key);
  alloc_.unreserve(seq->reserved);
  seq->reserved = 0;
  // Blocks past the written positions were never allocated (grow() is lazy; the scheduler
  // drops those a rejected draft grew), so the entry holds exactly the blocks of its tokens.
  Conversation& c = convs_[key];
  c.tag = tag;
  c.kv = std::move(*seq);
  c.pending = std::move(pending);
  c.last_used = ++clock_;
  c.on_disk = false;
  if (disk_ != nullptr && disk_->enabled()) unwritten_.push_back(key);
  *seq = SeqKv();
  while (static_cast<int>(convs_.size()) > max_conversations_) evict_oldest_conversation();
}

void KvCache::drop_conversation(const std::string& key) {
  auto it = convs_.find(key);
  if (it == convs_.end()) return;
  SeqKv kv = std::move(it->second.kv);
  convs_.erase(it);
  release(&kv);
}

void KvCache::clear_conversations() {
  while (evict_oldest_conversation()) {
  }
}

bool KvCache::evict_oldest_conversation() {
  if (convs_.empty()) return false;
  auto oldest = convs_.begin();
  for (auto it = convs_.begin(); it != convs_.end(); ++it) {
    if (it->second.last_used < oldest->second.last_used) oldest = it;
  }
  if (!oldest->second.on_disk && disk_ != nullptr && disk_->enabled()) {
    write_conversation(oldest->first, &oldest->second);  // before its blocks can be reused
  }
  SeqKv kv = std::move(oldest->second.kv);
  convs_.erase(oldest);
  release(&kv);
  return true;
}

void KvCache::attach_disk(DiskStore* store, BlockIo* io) {
  GLM_CHECK(store == nullptr ||
            (io != nullptr && io->block_bytes() == store->options().block_bytes &&
             store->options().block_tokens == alloc_.block_tokens()));
  disk_ = store;
  io_ = io;
  unwritten_.clear();
  if (disk_ == nullptr) return;
  for (auto& [key, c] : convs_) {
    if (!c.on_disk) unwritten_.push_back(key);
  }
}

bool KvCache::has_unwritten() {
  if (disk_ == nullptr || !disk_->enabled()) return false;
  while (!unwritten_.empty()) {
    auto it = convs_.find(unwritten_.front());
    if (it != convs_.end() && !it->second.on_disk) return true;
    unwritten_.pop_front();  // written since, continued or evicted
  }
  return false;
}

bool KvCache::write_next() {
  if (!has_unwritten()) return false;
  const std::string key = std::move(unwritten_.front());
  unwritten_.pop_front();
  write_conversation(key, &convs_.at(key));
  return true;
}

bool KvCache::write_conversation(const std::string& key, Conversation* c) {
  const int bt = alloc_.block_tokens();
  const std::vector<int32_t>& tokens = c->kv.tokens;
  const int n = static_cast<int>(tokens.size());
  GLM_CHECK(static_cast<int>(c->kv.blocks.size()) >= blocks_for(n));
  DiskBlock b;
  b.data.resize(io_->block_bytes());
  uint64_t parent = c->kv.root;
  for (int i = 0, at = 0; at < n; ++i, at += bt) {
    const int m = std::min(bt, n - at);
    const uint64_t h = BlockAllocator::hash_block(parent, tokens.data() + at, m);
    if (!disk_->keep_block(h)) {
      b.parent = parent;
      b.tokens.assign(tokens.begin() + at, tokens.begin() + at + m);
      io_->save(c->kv.blocks[i], b.data.data());
      if (!disk_->put_block(h, b)) return false;
      ++n_blocks_written_;
    }
    parent = h;
  }
  DiskConversation d;
  d.key = key;
  d.tag = c->tag;
  d.tokens = tokens;
  d.pending = c->pending;
  if (!disk_->put_conversation(d)) return false;
  c->on_disk = true;
  return true;
}

int KvCache::write_all() {
  if (disk_ == nullptr || !disk_->enabled()) return 0;
  const int before = n_blocks_written_;
  while (write_next()) {
  }
  DiskBlock b;
  b.data.resize(io_->block_bytes());
  const int bt = alloc_.block_tokens();
  for (int block = 0; block < alloc_.n_blocks() && disk_->enabled(); ++block) {
    if (!alloc_.is_cached(block) || disk_->keep_block(alloc_.cached_hash(block))) continue;
    b.parent = alloc_.cached_parent(block);
    b.tokens.assign(alloc_.cached_tokens(block), alloc_.cached_tokens(block) + bt);
    io_->save(block, b.data.data());
    if (disk_->put_block(alloc_.cached_hash(block), b)) ++n_blocks_written_;
  }
  return n_blocks_written_ - before;
}

}  // namespace glm::kv
