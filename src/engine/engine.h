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
#include "generation/event.h"
#include "generation/outcome.h"
#include "generation/request.h"
#include "generation/sampling.h"
#include "generation/speculation.h"
#include "generation/usage.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/reasoning.h"

namespace glm::engine {

using generation::Constraint;
using generation::FinishReason;
using generation::Health;
using generation::SamplingParams;
using generation::Stats;
using generation::Timings;
using generation::Usage;

// A request to the engine: the generation request (generation/request.h) and its id.
struct Request : generation::GenerateRequest {
  std::string id;  // unique among the requests in flight
};

// A request's events (generation/event.h has their order): kQueued, kNotice (maybe), kStart
// once; kProgress after each chunk of a prompt longer than one step (prefill_chunk); kToken many;
// then exactly one final kDone or kError. With n > 1 choices each choice's end comes as a
// kChoiceDone (index, finish_reason, usage.completion_tokens of that choice, timings) before the
// final kDone (usage: the prompt once, the completion tokens of all choices; finish_reason and
// timings of the choice that ended last). A choice that fails makes the others stop at their
// next token and the request end with kError.
using generation::EventType;

struct Event : generation::Event {
  Status error;  // kError
  // kError: the model cannot run any more (a lost GPU: model::Model::health), so the engine
  // stops to be restarted (Options::on_fatal); the request was not at fault and may be resumed
  // on the engine that comes back (protocol::Event::restart).
  bool restart = false;
};

using EventSink = std::function<void(const Event&)>;

// One adapter served by name: `name` selects it (GenerateRequest::adapter), `path` is its GGUF
// file (model::load_adapter), `scale` the user's scale.
struct AdapterSpec {
  std::string name;
  std::string path;
  float scale = 1.0f;
};
// Parses "NAME=PATH" or "NAME=PATH:SCALE" (--adapter). NAME: 1-64 of [A-Za-z0-9._-].
StatusOr<AdapterSpec> parse_adapter_spec(const std::string& arg);

struct Options {
  std::string model_path;
  ProgressFn load_progress;  // load_engine: weight bytes in place of the total (may be empty)
  int n_threads = 0;         // 0 = physical cores
  // Where the model runs (model::LoadOptions::device: auto, cpu, vulkan, vulkan:N) and how many
  // of its layers go to the GPU (-1 = as many as fit: model::LoadOptions). The commands' --device
  // defaults to auto.
  std::string device = "cpu";
  int gpu_layers = -1;
  // GLM-4.5's routed experts of the first N layers in host memory on a GPU (--cpu-moe
  // N|all|auto: model::LoadOptions::cpu_moe; auto by default).
  int cpu_moe = model::kCpuMoeAuto;
  // LoRA adapters merged into the weights at load (--lora; model::LoadOptions::lora).
  std::vector<model::LoraSpec> lora;
  // Adapters served per request by name (--adapter NAME=PATH[:scale]; docs/adapters.md),
  // loaded at start; more with Engine::load_adapter.
  std::vector<AdapterSpec> adapters;
  // Called once, from the engine's loop, when the model cannot run any more (a lost GPU:
  // model::Model::health); the requests fail with that error. `glmserve engine` exits so that
  // its supervisor restarts it (docs/gpu.md#failures). May be empty.
  std::function<void(const Status&)> on_fatal;
  int n_ctx = 0;           // 0 = min(model's context, 8192)
  int max_batch = 8;       // sequences decoded together
  int max_queue = 64;      // waiting requests beyond this are refused with kQueueFull
  int prefill_chunk = 64;  // prompt tokens per step (chunked prefill): bounds the stall
                           // a long prompt causes to the others (docs/engine.md)
  // More prompt tokens per step while their measured cost fits this stall (ms) of the
  // decoding sequences (scheduler::Options::max_stall_ms); 0 = prefill_chunk exactly.
  int max_stall_ms = 1000;
  int kv_blocks = 0;  // 0 = enough for max_batch full contexts
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
  int max_draft = 8;  // drafted tokens per sequence and step, at most
  // kMtp: draft lengths follow the measured cost of the block's passes (scheduler::Options::
  // draft_cost); false takes drafts as free (tests of the drafting itself).
  bool draft_cost = true;
  // A reasoning model's thinking ("<think>...</think>") goes out as the token events'
  // `reasoning`, apart from their text (docs/engine.md#reasoning): kAuto when the chat template
  // is a reasoning model's, kThink for any chat answer that starts with <think>, kNone never.
  tok::ReasoningFormat reasoning = tok::ReasoningFormat::kAuto;
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
  // Adapters served per request (docs/adapters.md). load_adapter reads `spec.path` onto this
  // model (errors name the part that does not fit; nothing is half-loaded) and serves it as
  // spec.name (a name already served is invalid_argument); unload_adapter stops serving it:
  // requests running with it finish with it (each holds its adapter), new ones get not_found.
  // Thread-safe; a load costs the file's read on the calling thread, never the engine loop.
  virtual Status load_adapter(const AdapterSpec& spec) {
    return unsupported("this engine serves no adapters (" + spec.name + ")");
  }
  virtual Status unload_adapter(const std::string& name) {
    return not_found("adapter '" + name + "' is not loaded");
  }
  // The adapters served now, in name order.
  virtual std::vector<AdapterSpec> adapters() const { return {}; }
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
