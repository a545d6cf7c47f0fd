#include "kv/kv_cache.h"

#include <algorithm>

#include "core/check.h"

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

void KvCache::match_prefix(const std::vector<int32_t>& prompt, SeqKv* seq) {
  const int bt = alloc_.block_tokens();
  // At least one prompt token must run through the model to produce logits.
  const int max_blocks = (static_cast<int>(prompt.size()) - 1) / bt;
  uint64_t parent = BlockAllocator::kRootHash;
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
      convs_.erase(conv);  // in use now: not evictable while we make room
      while (!alloc_.reserve(need)) {
        if (!evict_oldest_conversation()) {
          // Put it back as it was and wait for running sequences to finish.
          Conversation& back = convs_[in.conversation];
          back.kv = std::move(kv);
          back.pending = std::move(pending);
          back.tag = tag;
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
  }

  // 2. The full prompt, reusing cached full blocks of any earlier sequence.
  const std::vector<int32_t>& prompt = *in.prompt;
  const int n_prompt = static_cast<int>(prompt.size());
  const int total = blocks_for(n_prompt + extra) + in.n_forks * fork_blocks(n_prompt, extra);
  if (total > alloc_.n_blocks()) return AdmitResult::kNeverFits;
  SeqKv kv;
  kv.shared = in.reuse;
  if (in.reuse) match_prefix(prompt, &kv);
  const int need = total - static_cast<int>(kv.blocks.size());
  while (!alloc_.reserve(need)) {
    if (!evict_oldest_conversation()) {
      release(&kv);
      return AdmitResult::kWait;
    }
  }
  kv.reserved = need;
  out->prompt = prompt;
  out->n_cached = static_cast<int>(kv.tokens.size());
  out->fork_reserve = fork_blocks(n_prompt, extra);
  out->kv = std::move(kv);
  return AdmitResult::kAdmitted;
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
  child->shared = parent->shared;
  return copy;
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
  // Blocks past the written positions were never allocated (grow() is lazy), so the entry
  // holds exactly the blocks of its tokens.
  Conversation& c = convs_[key];
  c.tag = tag;
  c.kv = std::move(*seq);
  c.pending = std::move(pending);
  c.last_used = ++clock_;
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
  SeqKv kv = std::move(oldest->second.kv);
  convs_.erase(oldest);
  release(&kv);
  return true;
}

}  // namespace glm::kv
