// Scheduler: continuous batching over token ids. Each step() builds ONE batch for
// Model::forward: the next token of every decoding sequence plus up to `prefill_chunk` prompt
// tokens of the sequences still prefilling (chunked prefill: a long prompt is spread over several
// steps, so it cannot stall the others). Sequences join (admission) and leave (stop, length,
// cancel) at every step. Admission is FIFO and only when the KV cache can reserve every block the
// request may need (kv::KvCache), so a running sequence never runs out of memory.
// The model's Capabilities are honoured: a bidirectional prompt (ChatGLM-6B) is prefilled whole
// in one step (alone in the step's prefill budget when longer than a chunk), every step of it
// carries SeqInput::prefix_len, and its blocks are neither reused nor saved for a conversation.
//
// The scheduler speaks token ids only; text, templates and stop strings belong to the engine,
// which sees each token through SeqObserver and can end a sequence by returning false.
//
// Thread-safety: none. The engine calls every method from its one loop thread; observers are
// called on that thread, inside add()/cancel()/step().
// Cost: step() = one forward pass of the batch + O(batch * n_vocab) sampling, plus for each
// constrained sequence one Matcher::fill_mask (a copy of a cached mask, or a walk of the live
// part of the vocabulary trie) and an O(n_vocab) masking pass; unconstrained ones pay nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "generation/logprobs.h"
#include "generation/outcome.h"
#include "generation/sampling.h"
#include "generation/usage.h"
#include "grammar/matcher.h"
#include "kv/kv_cache.h"
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
  // A generated token (never a stop id), with its log-probabilities when the request asked for
  // them (sampling.top_logprobs >= 0; null otherwise). Return false to end the sequence now
  // (kStop).
  virtual bool on_token(int32_t token, const generation::GeneratedLogprobs* logprobs) = 0;
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
  Clock::time_point submitted = Clock::now();
  std::unique_ptr<SeqObserver> observer;
};

struct Options {
  int max_batch = 8;       // sequences in one forward pass
  int prefill_chunk = 64;  // prompt tokens per step, over all prefilling sequences (as
                           // engine::Options: the stall a long prompt causes the others)
  int n_ctx = 2048;        // positions per sequence
};

class Scheduler {
 public:
  // model, pool and cache are not owned and must outlive the scheduler. pool may be null for a
  // model that keeps its own state (test fakes).
  Scheduler(model::Model* model, model::KvPool* pool, kv::KvCache* cache, const Options& options);
  ~Scheduler();

  // Validates and queues a request (calls observer->on_queued). Errors, with no callback:
  // invalid_argument (empty prompt, token out of range, max_tokens < 1), context_overflow
  // (prompt + max_tokens > n_ctx). On error the request is left untouched (observer included).
  Status add(SeqRequest&& request);
  // Ends a request in any state (queued, prefilling, decoding): frees its blocks now and calls
  // on_finish with reason kCancelled. Unknown ids are ignored.
  void cancel(const std::string& id);
  void cancel_all();
  // Admits what fits, runs one batch, delivers tokens. Returns false if there was nothing to run.
  bool step();
  bool idle() const { return waiting_.empty() && running_.empty(); }
  int n_waiting() const { return static_cast<int>(waiting_.size()); }
  int n_running() const { return static_cast<int>(running_.size()); }
  // queued = waiting for admission.
  generation::Stats stats() const;
  kv::KvCache& cache() { return *cache_; }

 private:
  struct Seq;
  void admit();
  void finish(Seq* seq, generation::FinishReason reason, std::optional<int32_t> unfed);
  void fail(Seq* seq, const Status& status);
  // Masks `logits` ([n_vocab]) with the sequence's grammar. Returns false if the sequence
  // ended instead (complete with nothing else allowed, or no continuation).
  bool constrain(Seq* seq, float* logits);
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
  generation::Stats totals_;
};

}  // namespace glm::scheduler
