// Engine: the one door into inference. Holds the model, tokenizer, chat template, KV cache and
// the scheduler loop (its own thread). Callers submit requests and receive events through a
// callback; text, chat templates and sampling parameters are resolved here, the scheduler below
// speaks token ids only.
// Thread-safety: submit/cancel/stats/health/tokenize may be called from any thread.
// EventSink callbacks run on the engine thread: they must be quick and must not call back into
// the engine (hand the event to your own queue).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/progress.h"
#include "core/status.h"
#include "generation/constraint.h"
#include "generation/logprobs.h"
#include "generation/outcome.h"
#include "generation/sampling.h"
#include "generation/speculation.h"
#include "generation/usage.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"

namespace glm::engine {

using generation::Constraint;
using generation::FinishReason;
using generation::Health;
using generation::SamplingParams;
using generation::Stats;
using generation::Timings;
using generation::Usage;

struct Request {
  std::string id;                      // unique among the requests in flight
  std::string conversation;            // optional: KV reuse across the turns of one conversation
  std::vector<tok::Message> messages;  // rendered with the model's chat template
  bool raw = false;                    // true: `prompt` is plain text, no template
  std::string prompt;
  SamplingParams params;
  // Grammar-constrained output (docs/grammar.md): compiled at submit; the answer's text is then
  // a sentence of the grammar (or its prefix, when max_tokens cuts it: finish_reason length).
  Constraint constraint;
  // The functions the model may call: JSON array text of function objects, written into the
  // prompt by the chat template (a system message of its own, first). Empty = none.
  std::string tools;
  // Resume (docs/protocol.md#resume): the token ids an earlier run of this same request
  // generated (the kToken events' `tokens`, in order). They are prefilled after the prompt and
  // not sent again; the answer goes on as the uninterrupted run would have (same text at
  // temperature 0, and with a fixed seed: the sampler's RNG skips their draws).
  std::vector<int32_t> resume;
  // Choices (docs/engine.md#choices): n > 1 answers to the same prompt, prefilled once and
  // decoded together. Choice i samples with params.seed + i (when a seed is set), so it equals
  // the answer of a single request with that seed. At most Options::max_batch; not with
  // `resume`; no conversation is saved for such a request.
  int n = 1;
};

// A request's events: kQueued, kNotice (maybe), kStart once; kProgress after each chunk of a
// prompt longer than one step (prefill_chunk); kToken many; then exactly one
// final kDone or kError. With n > 1 choices, kToken carries the choice's `index` and each
// choice's end comes as a kChoiceDone (index, finish_reason, usage.completion_tokens of that
// choice, timings) before the final kDone (usage: the prompt once, the completion tokens of
// all choices; finish_reason and timings of the choice that ended last). A choice that fails
// makes the others stop at their next token and the request end with kError.
enum class EventType { kQueued, kStart, kProgress, kToken, kNotice, kChoiceDone, kDone, kError };

struct Event {
  EventType type = EventType::kToken;
  std::string id;
  int index = 0;           // kToken, kChoiceDone: the choice (Request::n)
  int queue_position = 0;  // kQueued
  int prefilled = 0;       // kProgress: prompt tokens written so far (of to_prefill, the
  int to_prefill = 0;      //   prompt tokens that were not cached)
  Usage usage;             // kStart: prompt and cached tokens; kDone: all three
  std::string text;        // kToken: whole UTF-8 characters; kNotice: message
  // kToken, when the request asked for them (params.top_logprobs >= 0): the tokens this event
  // completes, in order (a token's text may go out with a later event; the tokens that
  // complete a stop string are never reported). May come with empty text at the end.
  std::vector<generation::GeneratedLogprobs> logprobs;
  // kToken: the ids of the tokens generated since the previous kToken event, whose text this
  // event completes (replaying all of them gives exactly the text sent so far: what resume
  // takes).
  std::vector<int32_t> tokens;
  int dropped_messages = 0;  // kNotice: oldest messages dropped to fit the context
  FinishReason finish_reason = FinishReason::kStop;  // kDone, kChoiceDone
  Timings timings;                                   // kDone, kChoiceDone
  // kDone, kChoiceDone: tokens drafted and accepted by speculative decoding (Options::spec;
  // kDone of n > 1 choices: summed over them).
  generation::Speculation speculation;
  Status error;  // kError
};

using EventSink = std::function<void(const Event&)>;

struct Options {
  std::string model_path;
  ProgressFn load_progress;  // load_engine: weight bytes in place of the total (may be empty)
  int n_threads = 0;         // 0 = physical cores
  // Where the model runs (model::LoadOptions::device: auto, cpu, vulkan, vulkan:N) and how many
  // of its layers go to the GPU (-1 = all). The commands' --device defaults to auto.
  std::string device = "cpu";
  int gpu_layers = -1;
  // Called once, from the engine's loop, when the model cannot run any more (a lost GPU:
  // model::Model::health); the requests fail with that error. `glmserve engine` exits so that
  // its supervisor restarts it (docs/gpu.md#failures). May be empty.
  std::function<void(const Status&)> on_fatal;
  int n_ctx = 0;           // 0 = min(model's context, 8192)
  int max_batch = 8;       // sequences decoded together
  int max_queue = 64;      // waiting requests beyond this are refused with kQueueFull
  int prefill_chunk = 64;  // prompt tokens per step (chunked prefill): bounds the stall
                           // a long prompt causes to the others (docs/engine.md)
  int kv_blocks = 0;       // 0 = enough for max_batch full contexts
  int block_tokens = 16;
  DType kv_type = DType::kF16;
  // The KV disk cache (docs/engine.md#kv-disk): a directory where saved conversations and the
  // prefix cache's blocks outlive the engine (written when idle and on drain, read back when
  // memory misses). Empty = none. Bounded by kv_disk_max_mb (least recently used go first).
  std::string kv_disk;
  int64_t kv_disk_max_mb = 4096;
  // Speculative decoding (docs/engine.md#speculative-decoding): kNgram verifies drafts taken
  // from each sequence's own earlier tokens; greedy output is unchanged, sampled output keeps
  // its distribution. kDraft drafts with a second, smaller model of the same vocabulary
  // (draft_path; docs/engine.md#draft-model), with its own KV for max_batch full contexts.
  generation::SpecMode spec = generation::SpecMode::kOff;
  int max_draft = 8;       // drafted tokens per sequence and step, at most
  std::string draft_path;  // the draft model's GGUF file (kDraft only)
};

// The one-line error for a --spec mode and --draft that do not go together (kDraft without a
// draft model, a draft model with another mode); ok otherwise.
Status check_spec_mode(generation::SpecMode mode, const std::string& draft_path);
// A draft model must speak the target's vocabulary: the same size (models and tokenizers),
// BOS/EOS ids, and every token's text and control flag. The error names both sizes (or the
// first token that differs). Cost: O(n_vocab).
Status check_draft_vocabulary(const tok::Tokenizer& target, int target_n_vocab,
                              const tok::Tokenizer& draft, int draft_n_vocab);

class Engine {
 public:
  virtual ~Engine() = default;

  // Submits a request. Returns an error at once (kQueueFull, kInvalidArgument (including
  // generation::validate(request.params) and a constraint that does not compile, or whose
  // first token this vocabulary cannot spell: the message names the offending part),
  // kContextOverflow, kUnavailable) or ok, after which `sink` receives kQueued, kStart, kToken...
  // and exactly one final kDone or kError.
  virtual Status submit(Request request, EventSink sink) = 0;
  // Cancels a request in any state; its sink then gets kDone with finish_reason kCancelled.
  // Unknown ids are ignored.
  virtual void cancel(const std::string& id) = 0;
  virtual Stats stats() const = 0;
  virtual Health health() const = 0;
  virtual std::vector<int32_t> tokenize(const std::string& text) const = 0;
  // Ids -> text; control tokens render as their text ("<|user|>") when render_special.
  // Ids outside the vocabulary render as nothing.
  virtual std::string detokenize(const std::vector<int32_t>& ids, bool render_special) const = 0;
  // The tokens `request` would be prefilled with (its chat template applied, its tools written
  // in, trimmed to fit as submit() does), without running it; errors as submit()'s.
  virtual StatusOr<std::vector<int32_t>> prompt_tokens(Request request) const = 0;
  virtual int n_ctx() const = 0;
  // Where the model runs: "cpu" or "vulkan:0 (NVIDIA H200)" (model::Model::device_name).
  virtual std::string device() const { return "cpu"; }
  virtual std::string model_name() const = 0;
  // Stops accepting requests, lets the ones in flight finish for at most `bound`, cancels the
  // rest, then stops the loop (and, with a KV disk cache, writes what is not on disk yet:
  // not counted in `bound`). Returns true if everything finished within the bound.
  virtual bool drain(std::chrono::milliseconds bound) = 0;
};

// Opens the GGUF file, loads model, tokenizer and chat template, sizes the KV cache, warms up
// and starts the scheduler thread.
StatusOr<std::unique_ptr<Engine>> load_engine(const Options& options);

// An engine over given parts (tests use a fake model). Starts the scheduler thread.
std::unique_ptr<Engine> create_engine(std::unique_ptr<model::Model> model,
                                      std::unique_ptr<tok::Tokenizer> tokenizer,
                                      std::unique_ptr<tok::ChatTemplate> chat_template,
                                      const Options& options);

}  // namespace glm::engine
