// Scheduler: continuous batching over token ids. Each step() builds ONE batch for
// Model::forward: the next token of every decoding sequence plus a budget of prompt tokens of
// the sequences still prefilling (chunked prefill: a long prompt is spread over several steps,
// so it cannot stall the others): prefill_chunk, or more while their measured cost fits
// max_stall_ms; shared fewest-tokens-left first, with no starvation (docs/engine.md#prefill-order).
// Sequences join (admission) and leave (stop, length, cancel) at every step. Admission is FIFO and
// only when the KV cache can reserve every block the request may need (kv::KvCache), so a running
// sequence never runs out of memory. The model's Capabilities are honoured: a bidirectional prompt
// (ChatGLM-6B) is prefilled whole in one step (alone in the step's prefill budget when longer than
// a chunk), every step of it carries SeqInput::prefix_len, and its blocks are neither reused nor
// saved for a conversation.
//
// The scheduler speaks token ids only; text, templates and stop strings belong to the engine,
// which sees each token through SeqObserver and can end a sequence by returning false.
//
// Thread-safety: none. The engine calls every method from its one loop thread; observers are
// called on that thread, inside add()/cancel()/step().
// Cost: step() = one forward pass of the batch + O(batch * n_vocab) sampling (with speculative
// decoding: of every verified position, plus a few O(context) n-gram scans per sequence; with a
// draft model, up to max_draft passes of the draft model over the drafting sequences, each
// O(n_vocab) sampling per sequence, the first also feeding the draft the committed tokens it
// has not seen yet, at most 128 per sequence: a prompt takes a few steps), plus for
// each constrained sequence one Matcher::fill_mask (a copy of a cached mask, or a walk of the live
// part of the vocabulary trie) and an O(n_vocab) masking pass; unconstrained ones pay nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "generation/logprobs.h"
#include "generation/outcome.h"
#include "generation/sampling.h"
#include "generation/speculation.h"
#include "generation/usage.h"
#include "grammar/matcher.h"
#include "kv/kv_cache.h"
#include "kv/prompt_logits.h"
#include "model/model.h"
#include "sampler/sampler.h"

namespace glm::scheduler {

using Clock = std::chrono::steady_clock;

struct StartInfo {
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose K/V came from the cache (not prefilled)
  bool from_conversation = false;
};

struct FinishInfo {
  generation::FinishReason reason = generation::FinishReason::kStop;
  generation::Usage usage;  // completion_tokens: the tokens handed to on_token
  generation::Timings timings;
  generation::Speculation speculation;  // this sequence's drafted / accepted tokens
  // Set by the observer in on_finish: keep this sequence's KV as its conversation's next
  // starting point, under this tag (the digest of the conversation's messages so far).
  bool save_conversation = false;
  uint64_t conversation_tag = 0;
};

// Per-request callbacks, on the loop thread. Exactly one of on_finish / on_error ends a request.
class SeqObserver {
 public:
  virtual ~SeqObserver() = default;
  virtual void on_queued(int position) {}
  virtual void on_start(const StartInfo& info) {}
  // After each step that wrote a chunk of the prompt but not its last: `prefilled` of the
  // `to_prefill` prompt tokens that were not cached (the page shows "reading the prompt N%").
  virtual void on_prefill(int prefilled, int to_prefill) {}
  // A generated token (never a stop id), with its log-probabilities when the request asked for
  // them (sampling.top_logprobs >= 0; null otherwise). Return false to end the sequence now
  // (kStop).
  virtual bool on_token(int32_t token, const generation::GeneratedLogprobs* logprobs) = 0;
  // False while the sequence's constraint must wait (a reasoning model's thinking: the grammar
  // applies to the answer after it, docs/engine.md#reasoning): its tokens are then sampled
  // unmasked and never shown to the matcher, which starts from its first state at the first
  // token sampled while this is true. Asked before each token.
  virtual bool constraint_armed() const { return true; }
  virtual void on_finish(FinishInfo* info) = 0;
  virtual void on_error(const Status& status) = 0;
};

struct SeqRequest {
  std::string id;               // unique among requests in flight
  std::vector<int32_t> prompt;  // full prompt, non-empty
  // Conversation reuse (optional): if the saved conversation's tag equals history_tag, the
  // sequence runs saved tokens + tail instead of `prompt`.
  std::string conversation;
  uint64_t history_tag = 0;
  std::vector<int32_t> tail;
  generation::SamplingParams sampling;  // the sampler's fields; max_tokens bounds generation,
                                        // stop strings are the engine's (ignored here)
  std::vector<int32_t> stop_ids;
  // Grammar-constrained decoding (optional; the engine compiles generation::Constraint into
  // it): before each sampled token the logits outside the grammar's mask are set to -inf; a
  // stop id is possible only where the grammar is complete, and a complete grammar that allows
  // nothing else ends the sequence (kStop). A state with no continuation ends it with
  // invalid_argument. Its vocabulary must cover the model's n_vocab.
  std::unique_ptr<grammar::Matcher> matcher;
  // Of the resumed tokens (below), the leading ones that were sampled while the observer's
  // constraint_armed() was false: the matcher never saw them.
  int unconstrained_resumed = 0;
  // Resume (docs/protocol.md#resume): the last `resumed` tokens of `prompt` (and of `tail`)
  // were generated by an earlier run of this request. They are prefilled and never delivered;
  // they count as completion tokens (max_tokens included) and not as prompt tokens, the
  // matcher accepts them in add(), and the sampler's RNG skips their draws, so that the rest is
  // what the uninterrupted run would have generated.
  int resumed = 0;
  Clock::time_point submitted = Clock::now();
  std::unique_ptr<SeqObserver> observer;
  // More choices of the same prompt (n > 1; docs/engine.md#choices). The prompt is prefilled
  // once, by this request; when it is written each fork becomes a sequence of its own that
  // continues from its KV (the full blocks shared, the last partial block copied:
  // kv::KvCache::fork) and samples its first token from the same logits. A fork has its own
  // sampling (its seed; max_tokens is the request's), constraint and observer, never saves a
  // conversation, and shares `id`: cancel(id) ends the request and all its forks. Not with
  // `resumed`; 1 + forks must fit in Options::max_batch (they are admitted together).
  struct Fork {
    generation::SamplingParams sampling;
    std::unique_ptr<grammar::Matcher> matcher;
    std::unique_ptr<SeqObserver> observer;
  };
  std::vector<Fork> forks;
  // The adapter the sequence (and its forks) runs with (docs/adapters.md); null = the bare
  // model. Held until the sequence ends, so an adapter unloaded meanwhile stays valid for it.
  // adapter_salt: its identity for the prefix cache (kv::AdmitInput::salt; 0 without one).
  std::shared_ptr<const model::Adapter> adapter;
  uint64_t adapter_salt = 0;
};

struct Options {
  int max_batch = 8;       // sequences in one forward pass
  int prefill_chunk = 64;  // prompt tokens per step, over all prefilling sequences (as
                           // engine::Options: the stall a long prompt causes the others)
  // The prefill budget in time (docs/engine.md#prefill-order). > 0: a step's prompt tokens may
  // grow past prefill_chunk, up to what the measured cost of a prompt token fits in this many
  // ms (beyond the decode step's own time when sequences are decoding), at most
  // kMaxChunkGrowth x prefill_chunk; so a fast device reads a prompt in a few steps while a slow
  // one keeps the stall it causes bounded. 0: prefill_chunk tokens per step.
  int max_stall_ms = 0;
  int n_ctx = 2048;  // positions per sequence
  // Speculative decoding (docs/engine.md#speculative-decoding): kNgram drafts each decoding
  // sequence's next tokens from its own earlier tokens (ngram_draft.h) and verifies them in
  // the same forward pass, as a few-token chunk of that sequence (its last token + the draft,
  // logits of every position); at most max_draft drafted tokens per sequence and step.
  // Greedy output is unchanged; sampled output keeps the target distribution. Not for
  // bidirectional prompts (ChatGLM-6B). kDraft takes its drafts from a draft model
  // (DraftModel, required then): each drafting sequence's next k tokens are the draft model's,
  // sampled from its processed distribution q (argmax when greedy), and verified by standard
  // speculative sampling (Sampler::sample_with_draft_distribution). kMtp drafts the same way
  // with the model's own MTP block (Model::has_mtp; docs/engine.md#mtp-drafts), whose K/V live
  // in DraftModel's pool (one layer) and cache: the first draft from the trunk's hidden row of
  // the last position and the next token, each further one chained on the block's own row.
  generation::SpecMode spec = generation::SpecMode::kOff;
  int max_draft = 8;
  // kMtp: draft lengths follow the measured cost of the block's passes against a plain decode
  // step (DraftLength::Cost; docs/engine.md#mtp-drafts). false: drafts are taken as free (the
  // drafting's own tests).
  bool draft_cost = true;
  // The logits of recent prompts' last positions kept (kv::PromptLogits, at most this many
  // bytes; 0: none), so that a prompt that comes again whole, its K/V still in the prefix
  // cache, samples its first token with no forward pass (docs/engine.md#prompt-logits). Not
  // with a draft model or MTP drafts (their own K/V would need the prompt run) nor for
  // bidirectional prompts (never reused).
  size_t prompt_logits_bytes = size_t{32} << 20;
};

// The draft model of Options::spec == kDraft (docs/engine.md#draft-model): a smaller model of
// the target's vocabulary (the same n_vocab; the edges check the token texts) with its own KV
// memory and bookkeeping. Each sequence holds its own draft blocks (no prefix reuse, never
// saved), reserved when it starts; a sequence whose reservation does not fit simply does not
// draft. Size `cache` for max_batch sequences of n_ctx positions and drafting never waits.
// None is owned; all must outlive the scheduler. pool may be null for a fake.
// For kMtp: model is unused (the target runs its MTP block), pool holds ONE layer of the
// target's kv_dim, and the cache's sequences are the MTP block's.
struct DraftModel {
  model::Model* model = nullptr;
  model::KvPool* pool = nullptr;
  kv::KvCache* cache = nullptr;
};

class Scheduler {
 public:
  // model, pool and cache are not owned and must outlive the scheduler. pool may be null for a
  // model that keeps its own state (test fakes).
  // draft: the draft model for Options::spec == kDraft (GLM_CHECK: set then, same n_vocab);
  // for kMtp its pool and cache (GLM_CHECK: set then, and model->has_mtp()).
  Scheduler(model::Model* model, model::KvPool* pool, kv::KvCache* cache, const Options& options,
            DraftModel draft = {});
  ~Scheduler();

  // Validates and queues a request (calls observer->on_queued, and each fork's). Errors, with no
  // callback: invalid_argument (empty prompt, token out of range, max_tokens < 1, more resumed
  // tokens than max_tokens or than the prompt holds, resumed tokens the constraint refuses,
  // forks with resumed tokens or more of them than a batch holds),
  // context_overflow (prompt + max_tokens > n_ctx, resumed tokens counted once). On error the
  // request is left untouched (observer included).
  Status add(SeqRequest&& request);
  // Ends a request in any state (queued, prefilling, decoding), its forks too: frees its blocks
  // now and calls on_finish with reason kCancelled. Unknown ids are ignored.
  void cancel(const std::string& id);
  void cancel_all();
  // Admits what fits, runs one batch, delivers tokens. Returns false if there was nothing to run.
  bool step();
  // The most tokens one step of a scheduler of `options` forwards: the prompt budget's ceiling
  // (prefill_chunk, or kMaxChunkGrowth times it under max_stall_ms) and a token of each other
  // sequence of the batch with its drafts. What a model plans its scratch for.
  static int max_step_tokens(const Options& options);

  bool idle() const { return waiting_.empty() && running_.empty(); }
  int n_waiting() const { return static_cast<int>(waiting_.size()); }
  int n_running() const { return static_cast<int>(running_.size()); }
  // queued = waiting for admission.
  generation::Stats stats() const;
  kv::KvCache& cache() { return *cache_; }

 private:
  struct Seq;
  void admit();
  // Sets each prefilling sequence's prompt tokens of this step (Seq::chunk) within the
  // prefill_chunk budget (docs/engine.md#prefill-order).
  void plan_prefill();
  static constexpr int kMaxPassedOver = 4;
  static constexpr int kMaxChunkGrowth = 32;
  // This step's prompt tokens over all prefilling sequences (Options::max_stall_ms).
  int prefill_budget(bool decoding) const;
  // Updates the step cost estimates from a forward of `prompt_tokens` prompt tokens (and any
  // decode tokens) that took `ms`.
  void measure_step(int prompt_tokens, double ms);
  // Starts seq's sampler over its prompt (prompt tokens for the repetition penalty, resumed
  // ones as generated).
  void start_sampler(Seq* seq);
  // Turns seq's pending forks into running sequences over its written prompt and samples their
  // first tokens from `row` ([n_vocab] logits of the prompt's last position, left unchanged).
  void start_forks(Seq* seq, const float* row);
  void finish(Seq* seq, generation::FinishReason reason, std::optional<int32_t> unfed);
  void fail(Seq* seq, const Status& status);
  // Masks `logits` ([n_vocab]) with the sequence's grammar. Returns false if the sequence
  // ended instead (complete with nothing else allowed, or no continuation).
  bool constrain(Seq* seq, float* logits);
  // seq has a matcher that applies to its next token (SeqObserver::constraint_armed).
  bool constrained(const Seq& seq) const;
  // seq's sampler on `row` ([n_vocab], masked): with n-gram speculation and temperature > 0,
  // the n-gram guess after seq's written tokens goes first in the draw (Sampler::
  // sample_with_draft), at every position, verified or not, so that the tokens depend on the
  // seed and the context only.
  int32_t sample(Seq* seq, const float* row, generation::GeneratedLogprobs* logprobs);
  // Fills seq->feed with its next token and the draft to verify this step (ngram_draft.h).
  // How many tokens seq may draft this step: its DraftLength, within max_tokens.
  int draft_room(const Seq& seq) const;
  void plan_draft(Seq* seq);
  // Draft-model speculation: fills every decoding sequence's feed with its next token and the
  // tokens the draft model proposes after it (draft_len.want() of them at most), in up to
  // max_draft batched passes of the draft model; the first pass of a sequence also feeds the
  // draft model the committed tokens it has not seen (so its KV follows the target's).
  void draft_with_model();
  // MTP speculation (Options::spec == kMtp): feeds the MTP block every sequence's committed
  // positions it has not seen (their hidden rows, each with the token after it; prefilling
  // sequences too, so no rows pile up), and for each decoding sequence drafts its next tokens:
  // the first from that pass, each further one from a pass chained on the block's own row.
  void draft_with_mtp();
  // Keeps the hidden rows of the positions seq committed in this step's forward (they started
  // at n_past) for its next MTP pass.
  void keep_mtp_rows(Seq* seq, int n_past);
  // Updates the MTP drafts' cost estimates from a forward without prompt tokens, of `drafted`
  // drafted tokens over the batch, that took `ms`.
  void measure_draft_cost(int drafted, double ms);
  // The draft's next token from its logits `row` ([n_vocab]): greedy, the argmax after the
  // penalties; sampled, a draw from the draft's distribution q, kept for verification. Appends
  // it to feed; returns whether seq drafts another this step.
  bool take_draft(Seq* seq, const float* row);
  // After a verified draft of which `accepted` tokens held: commits to the draft model's KV the
  // drafted tokens it was fed and that the target kept (the others are never committed).
  void commit_draft_kv(Seq* seq, int accepted);
  // Delivers the tokens of seq's verified draft from `rows` ([feed.size(), n_vocab]): the
  // sampled token of each position while it equals the drafted one (whose K/V are then kept),
  // then the first that differs (or the one after the whole draft).
  void accept_draft(Seq* seq, float* rows);
  // The first token of a sequence whose prompt is written, from the logits of the prompt's last
  // position (row [n_vocab], masked in place where constrained): its forks' now, its own a
  // pick for the next choose_tokens().
  void first_token(Seq* seq, float* row);
  // A step's sequences that choose their next token from their row ([n_vocab] of logits_):
  // decoding, or a written prompt's first token (its forks started already).
  struct Pick {
    Seq* seq = nullptr;  // null once its grammar ended it
    float* row = nullptr;
    int32_t token = -1;
    generation::GeneratedLogprobs logprobs;
  };
  // The next token of each of picks_, the samplers in parallel: the grammar masks in batch order
  // (they may end a sequence), then each sequence's sampler on the model's host threads (a
  // sampler and its row are its sequence's alone: the tokens are those of a serial loop), then
  // the tokens delivered in batch order. On a GPU the device waits for this every step.
  void choose_tokens();
  // Handles a sampled token; returns true if the sequence goes on.
  bool deliver(Seq* seq, int32_t token, const generation::GeneratedLogprobs* logprobs);
  void remove_finished();

  model::Model* model_;
  model::KvPool* pool_;
  kv::KvCache* cache_;
  Options options_;
  int n_vocab_;
  model::Capabilities caps_;  // what the model needs (whole-prompt prefill, no reuse)
  std::deque<std::unique_ptr<Seq>> waiting_;
  std::vector<std::unique_ptr<Seq>> running_;  // admission order
  std::vector<float> logits_;
  std::vector<Pick> picks_;  // this step's, for choose_tokens
  // Written prompts whose last row goes into prompt_logits_ after their first tokens are out
  // (the row's copy, and on a cold cache its fresh pages, are not on the time to first token).
  std::vector<std::pair<Seq*, const float*>> keep_rows_;
  // Finished sequences' samplers (at most max_batch), restarted for new ones: their buffers'
  // memory, megabytes at a real vocabulary, is not touched fresh before a first token.
  std::vector<std::unique_ptr<sampler::Sampler>> spare_samplers_;
  std::vector<Seq*> prefill_order_;    // plan_prefill's scratch
  kv::PromptLogits prompt_logits_{0};  // empty (0 bytes) where it does not apply (Options)
  DraftModel draft_;
  bool spec_on_ = false;             // speculation (n-gram, draft model or MTP) for this model
  bool draft_on_ = false;            // ... with the draft model
  bool mtp_on_ = false;              // ... with the model's MTP block
  std::vector<float> draft_logits_;  // draft_with_model's and draft_with_mtp's scratch
  std::vector<float> mtp_hidden_;    // draft_with_mtp's output rows [n, n_embd]
  // MTP drafts' costs (moving averages; < 0: not measured yet): a forward with no prompt
  // tokens and no drafts, each drafted token's share of a verify in such steps, the block's
  // first pass of a step (catch-up and first drafts) and each chained pass.
  double plain_step_ms_ = -1;
  double verify_token_cost_ = -1;
  double mtp_first_ms_ = -1;
  double mtp_each_ms_ = -1;
  std::vector<int32_t> draft_context_;  // plan_draft's scratch
  generation::Stats totals_;
  // Step costs (measure_step): a step without prompt tokens (a moving average; < 0 = not
  // measured yet), and the decayed sums of prompt tokens run and of the time they took over it.
  double decode_step_ms_ = -1;
  double prompt_ms_sum_ = 0;
  double prompt_tokens_sum_ = 0;
};

}  // namespace glm::scheduler
