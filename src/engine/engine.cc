// The engine: prompt planning and text at the edges, the scheduler loop on its own thread.
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "core/check.h"
#include "core/json.h"
#include "core/log.h"
#include "engine/constrain.h"
#include "engine/engine_parts.h"
#include "engine/kv_disk.h"
#include "engine/memory_plan.h"
#include "engine/prompt.h"
#include "engine/request_observer.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "model/kv_pool.h"
#include "scheduler/scheduler.h"
#include "tokenizer/reasoning.h"
#include "tokenizer/tokenizer.h"

namespace glm::engine {

StatusOr<ReadAdapter> read_adapter(const AdapterSpec& spec, const model::Config& config) {
  auto file = gguf::File::open(spec.path);
  if (!file.ok()) return file.status();
  auto adapter = model::load_adapter(**file, config, spec.scale, spec.name);
  if (!adapter.ok()) return adapter.status();
  return ReadAdapter{std::move(*adapter), adapter_fingerprint(**file, spec.scale) | 1};
}

// The scheduler of an engine of `options` serving a context of n_ctx.
scheduler::Options scheduler_options(const Options& options, int n_ctx) {
  scheduler::Options so;
  so.max_batch = std::max(options.max_batch, 1);
  so.prefill_chunk = std::max(options.prefill_chunk, 1);
  so.max_stall_ms = std::max(options.max_stall_ms, 0);
  so.n_ctx = n_ctx;
  so.spec = options.spec;
  so.max_draft = options.max_draft;
  so.draft_cost = options.draft_cost;
  return so;
}

namespace {

using scheduler::Clock;

class EngineImpl final : public Engine, public RequestLedger {
 public:
  EngineImpl(std::unique_ptr<model::Model> model, std::unique_ptr<tok::Tokenizer> tokenizer,
             std::unique_ptr<tok::ChatTemplate> chat_template, const Options& options,
             Extras extras)
      : file_(std::move(extras.file)),
        model_(std::move(model)),
        tokenizer_(std::move(tokenizer)),
        template_(std::move(chat_template)),
        options_(options),
        name_(extras.name.empty() ? model_->config().arch_name : extras.name) {
    const model::Config& c = model_->config();
    n_ctx_ = context_size(options, c);
    const int bt = std::max(options.block_tokens, 1);
    const int n_blocks = kv_block_count(options, n_ctx_);
    pool_ =
        std::make_unique<model::KvPool>(c, n_blocks, bt, options.kv_type, model_->kv_host_layers());
    cache_ = std::make_unique<kv::KvCache>(n_blocks, bt);
    if (!options.kv_disk.empty()) open_kv_disk(extras.fingerprint, bt);
    scheduler::Options so = scheduler_options(options, n_ctx_);
    scheduler::DraftModel draft;
    if (extras.draft) {
      // Its own KV for max_batch full contexts: drafting never waits for a block.
      draft_file_ = std::move(extras.draft_file);
      draft_model_ = std::move(extras.draft);
      const int n_draft_blocks = draft_kv_block_count(options, n_ctx_);
      draft_pool_ =
          std::make_unique<model::KvPool>(draft_model_->config(), n_draft_blocks, bt,
                                          options.kv_type, draft_model_->kv_host_layers());
      draft_cache_ = std::make_unique<kv::KvCache>(n_draft_blocks, bt);
      draft = {draft_model_.get(), draft_pool_.get(), draft_cache_.get()};
      GLM_LOG_INFO("engine: draft model %s, KV %d blocks (%.1f MiB)",
                   draft_model_->config().arch_name.c_str(), n_draft_blocks,
                   draft_pool_->bytes() / 1048576.0);
    }
    if (so.spec == generation::SpecMode::kMtp && !model_->has_mtp()) {
      GLM_LOG_WARN(
          "--spec mtp: the model has no MTP block: no speculation");  // load_engine refuses
      so.spec = generation::SpecMode::kOff;
    }
    if (so.spec == generation::SpecMode::kMtp) {
      // The MTP block's own K/V: one layer, max_batch full contexts.
      const int n_mtp_blocks = draft_kv_block_count(options, n_ctx_);
      // Its one layer in host memory on the CPU; on a GPU in the device's (GpuModel).
      draft_pool_ =
          std::make_unique<model::KvPool>(model::mtp_kv_config(c), n_mtp_blocks, bt,
                                          options.kv_type, model_->device_name() == "cpu" ? 1 : 0);
      draft_cache_ = std::make_unique<kv::KvCache>(n_mtp_blocks, bt);
      draft = {nullptr, draft_pool_.get(), draft_cache_.get()};
      GLM_LOG_INFO("engine: MTP drafts, KV %d blocks (%.1f MiB)", n_mtp_blocks,
                   draft_pool_->bytes() / 1048576.0);
    }
    sched_ =
        std::make_unique<scheduler::Scheduler>(model_.get(), pool_.get(), cache_.get(), so, draft);
    stop_ids_ = template_->stop_ids();
    raw_affixes_ =
        raw_affixes(*tokenizer_, extras.add_bos, model_->capabilities().bidirectional_prompt);
    GLM_LOG_INFO(
        "engine: %s, context %d, KV cache %d blocks x %d tokens of %s (%.1f MiB), batch %d",
        name_.c_str(), n_ctx_, n_blocks, bt, dtype_name(options.kv_type),
        pool_->bytes() / 1048576.0, so.max_batch);
  }

  void open_kv_disk(uint64_t fingerprint, int block_tokens) {
    if (model_->capabilities().bidirectional_prompt) {
      GLM_LOG_WARN(
          "kv-disk: this model's prompts are bidirectional (ChatGLM-6B): no KV is ever "
          "reused, so --kv-disk is ignored");
      return;
    }
    block_io_ = std::make_unique<ModelBlockIo>(model_.get(), pool_.get());
    kv::DiskOptions d;
    d.dir = options_.kv_disk;
    d.max_bytes = static_cast<uint64_t>(std::max<int64_t>(options_.kv_disk_max_mb, 0)) << 20;
    d.block_tokens = block_tokens;
    d.block_bytes = block_io_->block_bytes();
    d.identity =
        kv_identity(fingerprint, model_->config(), options_.kv_type, block_tokens, d.block_bytes);
    d.n_vocab = model_->config().n_vocab;
    d.max_tokens = n_ctx_;
    disk_ = kv::DiskStore::open(d);
    if (disk_) cache_->attach_disk(disk_.get(), block_io_.get());
  }

  ~EngineImpl() override {
    if (thread_.joinable()) drain(std::chrono::milliseconds(0));
  }

  // Runs the model's warm-up passes in the pool's first blocks, and the draft model's in its
  // own (model::warm_up: the weights touched, a GPU's shaders compiled), then starts the loop.
  void start(bool warm_up) {
    if (warm_up) {
      // A bidirectional prompt (ChatGLM-6B) begins with [gMASK] <sop>.
      const std::vector<int32_t>& marks =
          raw_affixes_.suffix.empty() ? raw_affixes_.prefix : raw_affixes_.suffix;
      const auto t0 = Clock::now();
      if (model_->device_name().rfind("vulkan", 0) == 0) {
        // A driver compiles each shader at its first use: seconds on a first start, which its
        // own cache then saves.
        GLM_LOG_INFO(
            "engine: warm-up forward: compiling the GPU's shaders (cached by the driver "
            "after a first start)");
      }
      Status st = model::warm_up(model_.get(), pool_.get(), marks);
      if (st.ok() && draft_model_) {
        st = model::warm_up(draft_model_.get(), draft_pool_.get(), marks);
      }
      GLM_LOG_INFO("engine: warm-up forward %s in %.0f ms", st.ok() ? "done" : "failed",
                   std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    health_ = Health::kReady;
    thread_ = std::thread([this] { loop(); });
  }

  Status submit(Request request, EventSink sink) override {
    if (!sink) return invalid_argument("submit: no event sink");
    const Health h = health_.load();
    if (h != Health::kReady) {
      return Status(ErrorCode::kUnavailable, std::string("the engine is ") + health_name(h) +
                                                 ": retry later or on another instance");
    }
    if (request.id.empty()) return invalid_argument("request id is empty: give each request one");
    GLM_RETURN_IF_ERROR(generation::validate(request.params));
    for (const generation::LogitBias& b : request.params.logit_bias) {
      if (b.token >= model_->config().n_vocab) {
        return invalid_argument("logit_bias: token " + std::to_string(b.token) +
                                " is not in this model's vocabulary of " +
                                std::to_string(model_->config().n_vocab) + " ids");
      }
    }
    const int max_batch = std::max(options_.max_batch, 1);  // as the scheduler's
    if (request.n < 1 || request.n > max_batch) {
      return invalid_argument("n must be 1 to " + std::to_string(max_batch) +
                              " (the choices this server decodes together), got " +
                              std::to_string(request.n));
    }
    if (request.n > 1 && !request.resume.empty()) {
      return invalid_argument("resume: a request with several choices cannot be resumed");
    }
    const auto submitted = Clock::now();
    const bool chat = !request.raw;
    StatusOr<PromptPlan> plan = plan_prompt(&request);
    if (!plan.ok()) return plan.status();

    scheduler::SeqRequest r;
    r.id = request.id;
    // The adapter named, or the one served under the client's model name (else the bare model).
    const bool named = !request.adapter.empty();
    if (named || !request.model.empty()) {
      GLM_RETURN_IF_ERROR(resolve_adapter(named ? request.adapter : request.model, !named, &r));
      // A conversation's KV belongs to its adapter: another adapter's turn starts afresh.
      if (r.adapter != nullptr && !request.conversation.empty()) {
        char tag[24];
        std::snprintf(tag, sizeof(tag), "#%016llx",
                      static_cast<unsigned long long>(r.adapter_salt));
        request.conversation += tag;
      }
    }
    std::shared_ptr<ChoiceGroup> group;
    auto filter = [&]() { return chat ? template_->answer_filter() : nullptr; };
    // --reasoning-format: think always splits a leading <think>; auto when the template is a
    // reasoning model's (and starts inside the thinking when its prompt opens it).
    const tok::ReasoningFormat rf = options_.reasoning;
    const bool split = chat && (rf == tok::ReasoningFormat::kThink ||
                                (rf == tok::ReasoningFormat::kAuto && template_->reasoning()));
    auto splitter = [&]() {
      return split ? std::make_unique<tok::ReasoningSplitter>(
                         template_->opens_reasoning(tok::TemplateOptions{request.enable_thinking}))
                   : nullptr;
    };
    if (request.n > 1) {
      group = std::make_shared<ChoiceGroup>(this, request.id, std::move(sink), request.n);
      r.observer = std::make_unique<RequestObserver>(
          this, request.id, group->sink(), *tokenizer_, request.params.stop, plan.value(), chat,
          request.resume, filter(), splitter(), group, 0);
      // One conversation entry cannot hold several answers: the prefix cache keeps the
      // prompt's full blocks for the next turn whichever choice the client continues.
      request.conversation.clear();
    } else {
      auto observer = std::make_unique<RequestObserver>(
          this, request.id, std::move(sink), *tokenizer_, request.params.stop, plan.value(), chat,
          request.resume, filter(), splitter());
      r.unconstrained_resumed = observer->unconstrained_resumed();
      r.observer = std::move(observer);
    }
    for (int i = 1; i < request.n; ++i) {
      scheduler::SeqRequest::Fork f;
      f.sampling = request.params;
      f.sampling.max_tokens = plan->max_tokens;
      if (f.sampling.seed != 0) f.sampling.seed += i;
      f.observer = std::make_unique<RequestObserver>(
          this, request.id, group->sink(), *tokenizer_, request.params.stop, plan.value(), chat,
          request.resume, filter(), splitter(), group, i);
      r.forks.push_back(std::move(f));
    }
    r.prompt = std::move(plan->prompt);
    r.conversation = request.conversation;
    r.history_tag = plan->history_tag;
    r.tail = std::move(plan->tail);
    // Resumed tokens follow the prompt (and the tail a saved conversation continues with).
    r.prompt.insert(r.prompt.end(), request.resume.begin(), request.resume.end());
    if (!r.tail.empty()) r.tail.insert(r.tail.end(), request.resume.begin(), request.resume.end());
    r.resumed = static_cast<int>(request.resume.size());
    r.sampling = request.params;
    r.sampling.max_tokens = plan->max_tokens;
    r.stop_ids = stop_ids_;
    r.submitted = submitted;
    if (request.constraint.active()) {
      StatusOr<grammar::Grammar> g = compile_constraint(request.constraint, template_->name());
      if (!g.ok()) return g.status();
      for (int i = 0; i < request.n; ++i) {  // a matcher per choice
        StatusOr<std::unique_ptr<grammar::Matcher>> m = start_matcher(g.value(), vocab());
        if (!m.ok()) return m.status();
        (i == 0 ? r.matcher : r.forks[i - 1].matcher) = std::move(m).value();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (health_.load() != Health::kReady) {
        return Status(ErrorCode::kUnavailable, "the engine is shutting down: retry later");
      }
      if (in_flight_.count(request.id)) {
        return invalid_argument("request id '" + request.id +
                                "' is already in flight: use a "
                                "unique id per request");
      }
      const int waiting = queued_.load();
      if (waiting >= options_.max_queue) {
        return Status(ErrorCode::kQueueFull, "engine busy: " + std::to_string(waiting) +
                                                 " requests are waiting; retry in a few seconds");
      }
      in_flight_.insert(request.id);
      ++queued_;
      inbox_.push_back(std::move(r));
    }
    cv_.notify_all();
    return Status::Ok();
  }

  // The adapter a request names (GenerateRequest::adapter): a served name, or "BASE:NAME"
  // with this engine's model name as BASE; not_found naming the served ones otherwise, or,
  // `if_served` (GenerateRequest::model), the bare model (r->adapter left null).
  Status resolve_adapter(const std::string& wanted, bool if_served,
                         scheduler::SeqRequest* r) const {
    std::lock_guard<std::mutex> lock(adapters_mu_);
    auto it = adapters_.find(wanted);
    const size_t colon = wanted.rfind(':');
    if (it == adapters_.end() && colon != std::string::npos && wanted.substr(0, colon) == name_) {
      it = adapters_.find(wanted.substr(colon + 1));
    }
    if (it == adapters_.end()) {
      if (if_served) return Status::Ok();
      return not_found("adapter '" + wanted + "' is not served here" + served_adapters_locked());
    }
    r->adapter = it->second.adapter;
    r->adapter_salt = it->second.salt;
    return Status::Ok();
  }

  std::string served_adapters_locked() const {
    if (adapters_.empty()) return " (this engine serves none: serve --adapter NAME=PATH)";
    std::string names;
    for (const auto& [name, s] : adapters_) names += (names.empty() ? "" : ", ") + name;
    return "; served: " + names;
  }

  // The prompt of a request, as submit() builds it (consumes request.messages).
  StatusOr<PromptPlan> plan_prompt(Request* request) const {
    const generation::SharedJson tools = request->tools;
    if (!request->raw && !tools.empty()) {
      // The tools travel in a system message of their own, first (the template writes them
      // in its format and never drops a system message to fit the context).
      tok::Message system{"system", "", "", tools};
      request->messages.insert(request->messages.begin(), std::move(system));
    } else if (!tools.empty()) {
      return invalid_argument("tools need a chat request (raw prompts take none)");
    }
    if (request->raw) {
      return plan_raw_prompt(*tokenizer_, raw_affixes_, request->prompt, request->params.max_tokens,
                             n_ctx_);
    }
    auto plan = plan_chat_prompt(*template_, *tokenizer_, std::move(request->messages),
                                 request->params.max_tokens, n_ctx_, !request->conversation.empty(),
                                 tok::TemplateOptions{request->enable_thinking});
    if (plan.ok()) {
      plan->tool_names = generation::tool_names(*tools);
      plan->tool_reading = tok::tool_reading(*tools, request->parallel_tool_calls);
    }
    return plan;
  }

  StatusOr<std::vector<int32_t>> prompt_tokens(Request request) const override {
    GLM_RETURN_IF_ERROR(generation::validate(request.params));
    StatusOr<PromptPlan> plan = plan_prompt(&request);
    if (!plan.ok()) return plan.status();
    return std::move(plan->prompt);
  }

  std::string detokenize(const std::vector<int32_t>& ids, bool render_special) const override {
    std::vector<int32_t> known;
    for (int32_t id : ids) {
      if (id >= 0 && id < tokenizer_->n_vocab()) known.push_back(id);
    }
    return tokenizer_->decode(known, render_special);
  }

  void cancel(const std::string& id) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!in_flight_.count(id)) return;
      cancels_.push_back(id);
    }
    cv_.notify_all();
  }

  Stats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    Stats s = snapshot_;
    s.queued = queued_.load();  // exact: the snapshot is a step old
    return s;
  }

  Health health() const override { return health_.load(); }
  std::vector<int32_t> tokenize(const std::string& text) const override {
    return tokenizer_->encode(text);
  }
  int n_ctx() const override { return n_ctx_; }
  std::string device() const override { return model_->device_name(); }
  std::string model_name() const override { return name_; }

  Status load_adapter(const AdapterSpec& spec) override {
    auto read = read_adapter(spec, model_->config());
    if (!read.ok()) return read.status();
    return add_adapter(spec, std::move(*read));
  }
  // An adapter already read (load_engine reads the --adapter files before the model, for a
  // GPU's plan) served by name.
  Status add_adapter(const AdapterSpec& spec, ReadAdapter read) {
    std::lock_guard<std::mutex> lock(adapters_mu_);
    if (adapters_.count(spec.name)) {
      return invalid_argument("adapter '" + spec.name + "' is already loaded (unload it first)");
    }
    adapters_[spec.name] = {spec, std::move(read.adapter), read.salt};
    GLM_LOG_INFO("adapter %s: loaded from %s (scale %g)", spec.name.c_str(), spec.path.c_str(),
                 spec.scale);
    return Status::Ok();
  }

  Status unload_adapter(const std::string& name) override {
    std::lock_guard<std::mutex> lock(adapters_mu_);
    if (adapters_.erase(name) == 0) {
      return not_found("adapter '" + name + "' is not loaded" + served_adapters_locked());
    }
    GLM_LOG_INFO("adapter %s: unloaded", name.c_str());
    return Status::Ok();
  }

  std::vector<AdapterSpec> adapters() const override {
    std::lock_guard<std::mutex> lock(adapters_mu_);
    std::vector<AdapterSpec> out;
    for (const auto& [name, s] : adapters_) out.push_back(s.spec);
    return out;
  }

  bool drain(std::chrono::milliseconds bound) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_.joinable()) return in_flight_.empty();
    if (health_.load() == Health::kReady) health_ = Health::kDraining;
    const bool all = done_cv_.wait_for(lock, bound, [this] { return in_flight_.empty(); });
    cancel_all_ = true;
    stop_ = true;
    lock.unlock();
    cv_.notify_all();
    thread_.join();
    if (disk_ && disk_->enabled() && !model_failed_) {  // the loop has stopped: the cache is ours
      const auto t0 = Clock::now();
      const int n = cache_->write_all();
      GLM_LOG_INFO("kv-disk: saved on stop: %d blocks written in %.0f ms; %d files, %.1f MiB", n,
                   std::chrono::duration<double, std::milli>(Clock::now() - t0).count(),
                   disk_->n_files(), disk_->bytes() / 1048576.0);
    }
    health_ = Health::kStopped;
    return all;
  }

  // The vocabulary for constrained decoding, built on the first constrained request (~30-130
  // ms; unconstrained serving never pays it). Thread-safe.
  std::shared_ptr<const grammar::TokenVocab> vocab() {
    std::call_once(vocab_once_, [this] {
      vocab_ = build_token_vocab(*tokenizer_, model_->config().n_vocab, stop_ids_);
    });
    return vocab_;
  }

  // RequestLedger, on the loop thread.
  void left_queue() override { --queued_; }
  void finished(const std::string& id) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.erase(id);
    }
    done_cv_.notify_all();
  }
  bool model_failed() override {
    if (model_->health().ok()) return false;
    Health ready = Health::kReady;
    health_.compare_exchange_strong(ready, Health::kDraining);
    return true;
  }

 private:
  void loop() {
    std::vector<scheduler::SeqRequest> inbox;
    std::vector<std::string> cancels;
    for (;;) {
      bool cancel_all = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        const bool busy = !sched_->idle();
        // Idle with conversations not on disk yet: write one, then look again.
        const bool write = !busy && cache_->has_unwritten();
        cv_.wait(lock,
                 [&] { return busy || write || stop_ || !inbox_.empty() || !cancels_.empty(); });
        inbox.swap(inbox_);
        cancels.swap(cancels_);
        cancel_all = cancel_all_;
        if (stop_ && inbox.empty() && cancels.empty() && sched_->idle()) break;
      }
      for (scheduler::SeqRequest& r : inbox) {
        const Status st = sched_->add(std::move(r));
        // add() leaves the request alone on error, so the observer is still there.
        if (!st.ok()) r.observer->on_error(st);  // NOLINT(bugprone-use-after-move)
      }
      inbox.clear();
      for (const std::string& id : cancels) sched_->cancel(id);
      cancels.clear();
      if (cancel_all) sched_->cancel_all();
      const bool stepped = sched_->step();
      if (!model_failed_ && model_failed()) {
        // A lost GPU: every step fails from now on. Say so once; the owner restarts us.
        model_failed_ = true;
        const Status h = model_->health();
        GLM_LOG_ERROR("engine: the model cannot run any more: %s", h.to_string().c_str());
        if (options_.on_fatal) options_.on_fatal(h);
      }
      if (!stepped && sched_->idle() && !model_failed_) cache_->write_next();
      const Stats s = sched_->stats();
      std::lock_guard<std::mutex> lock(mu_);
      snapshot_ = s;
    }
  }

  // Adapters served by name (load_adapter); a sequence holds its adapter's shared_ptr.
  struct ServedAdapter {
    AdapterSpec spec;
    std::shared_ptr<const model::Adapter> adapter;
    uint64_t salt = 0;  // kv::AdmitInput::salt
  };
  mutable std::mutex adapters_mu_;
  std::map<std::string, ServedAdapter> adapters_;

  std::shared_ptr<const gguf::File> file_;
  std::unique_ptr<model::Model> model_;
  bool model_failed_ = false;  // model_->health() failed (the loop's; read by drain after it)
  std::unique_ptr<tok::Tokenizer> tokenizer_;  // before template_: the template refers to it
  std::unique_ptr<tok::ChatTemplate> template_;
  Options options_;
  std::string name_;
  int n_ctx_ = 0;
  std::vector<int32_t> stop_ids_;
  RawAffixes raw_affixes_;
  std::once_flag vocab_once_;
  std::shared_ptr<const grammar::TokenVocab> vocab_;
  std::unique_ptr<model::KvPool> pool_;
  std::unique_ptr<ModelBlockIo> block_io_;  // with disk_
  std::unique_ptr<kv::DiskStore> disk_;     // null: no KV disk cache
  std::unique_ptr<kv::KvCache> cache_;
  // --spec draft: the draft model and its own KV (null otherwise).
  std::shared_ptr<const gguf::File> draft_file_;
  std::unique_ptr<model::Model> draft_model_;
  std::unique_ptr<model::KvPool> draft_pool_;
  std::unique_ptr<kv::KvCache> draft_cache_;
  std::unique_ptr<scheduler::Scheduler> sched_;  // loop thread only

  std::atomic<Health> health_{Health::kLoading};
  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the loop
  std::condition_variable done_cv_;  // a request finished (drain waits on it)
  std::vector<scheduler::SeqRequest> inbox_;
  // Requests submitted and not yet started (admitted) nor ended: what max_queue bounds. Exact
  // at any moment, unlike the loop's snapshot.
  std::atomic<int> queued_{0};
  std::vector<std::string> cancels_;
  std::unordered_set<std::string> in_flight_;
  Stats snapshot_;
  bool stop_ = false;
  bool cancel_all_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Engine> create_engine(std::unique_ptr<model::Model> model,
                                      std::unique_ptr<tok::Tokenizer> tokenizer,
                                      std::unique_ptr<tok::ChatTemplate> chat_template,
                                      const Options& options) {
  auto e = std::make_unique<EngineImpl>(std::move(model), std::move(tokenizer),
                                        std::move(chat_template), options, Extras{});
  e->start(/*warm_up=*/false);
  return e;
}

StatusOr<std::unique_ptr<Engine>> start_engine(std::unique_ptr<model::Model> model,
                                               std::unique_ptr<tok::Tokenizer> tokenizer,
                                               std::unique_ptr<tok::ChatTemplate> chat_template,
                                               const Options& options, Extras extras,
                                               std::vector<ReadAdapter> adapters) {
  auto e = std::make_unique<EngineImpl>(std::move(model), std::move(tokenizer),
                                        std::move(chat_template), options, std::move(extras));
  for (size_t i = 0; i < adapters.size(); ++i) {
    const AdapterSpec& a = options.adapters[i];
    if (Status s = e->add_adapter(a, std::move(adapters[i])); !s.ok()) {
      return Status(s.code(), "--adapter " + a.name + ": " + s.message());
    }
  }
  e->start(/*warm_up=*/true);
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace glm::engine
