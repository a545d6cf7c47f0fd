#include "scheduler/scheduler.h"

#include <algorithm>

#include "core/check.h"
#include "core/log.h"
#include "scheduler/seq.h"

namespace glm::scheduler {

using generation::FinishReason;

Scheduler::Scheduler(model::Model* model, model::KvPool* pool, kv::KvCache* cache,
                     const Options& options, DraftModel draft)
    : model_(model),
      pool_(pool),
      cache_(cache),
      options_(options),
      n_vocab_(model->config().n_vocab),
      caps_(model->capabilities()),
      draft_(draft) {
  GLM_CHECK(options_.max_batch > 0 && options_.prefill_chunk > 0 && options_.n_ctx > 0);
  const bool want_draft = options_.spec == generation::SpecMode::kDraft;
  const bool want_mtp = options_.spec == generation::SpecMode::kMtp;
  if (want_draft) {  // the edges load and check the draft model
    GLM_CHECK(draft_.model != nullptr && draft_.cache != nullptr);
    GLM_CHECK(draft_.model->config().n_vocab == n_vocab_);
  }
  if (want_mtp) {  // the edges check the model has the block and make its pool (one layer)
    GLM_CHECK(model_->has_mtp() && draft_.cache != nullptr);
    GLM_CHECK(draft_.pool == nullptr || draft_.pool->n_layer() == 1);
  }
  spec_on_ = options_.spec != generation::SpecMode::kOff && options_.max_draft > 0 &&
             !caps_.bidirectional_prompt &&
             (!want_draft || !draft_.model->capabilities().bidirectional_prompt);
  draft_on_ = spec_on_ && want_draft;
  mtp_on_ = spec_on_ && want_mtp;
  if (!caps_.bidirectional_prompt && !draft_on_ && !mtp_on_) {
    prompt_logits_ = kv::PromptLogits(options_.prompt_logits_bytes);
  }
  // Token-granular prefix reuse copies a cached block's K/V at admission (kv_cache.h).
  cache_->set_copy_block([this](int src, int dst) { model_->copy_kv_block(pool_, src, dst); });
}

Scheduler::~Scheduler() { cache_->set_copy_block(nullptr); }

Status Scheduler::add(SeqRequest&& request) {
  GLM_CHECK(request.observer != nullptr);
  if (request.prompt.empty()) return invalid_argument("the prompt is empty: send some text");
  if (request.sampling.max_tokens < 1) {
    return invalid_argument("max_tokens must be at least 1, got " +
                            std::to_string(request.sampling.max_tokens));
  }
  for (const std::vector<int32_t>* list : {&request.prompt, &request.tail}) {
    for (int32_t t : *list) {
      if (t < 0 || t >= n_vocab_) {
        return invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary (" +
                                std::to_string(n_vocab_) + " tokens)");
      }
    }
  }
  const int resumed = request.resumed;
  if (resumed < 0 || resumed > request.sampling.max_tokens ||
      resumed >= static_cast<int>(request.prompt.size()) ||
      (!request.tail.empty() && resumed > static_cast<int>(request.tail.size()))) {
    return invalid_argument("resume: " + std::to_string(resumed) +
                            " generated tokens do not fit this request (max_tokens " +
                            std::to_string(request.sampling.max_tokens) +
                            "); resume only the tokens the same request generated");
  }
  const int n_prompt = static_cast<int>(request.prompt.size()) - resumed;
  const int need = n_prompt + request.sampling.max_tokens;
  if (need > options_.n_ctx) {
    GLM_LOG_INFO("prompt %zu + max_tokens %d tokens exceed the context of %d (raise --ctx-size)",
                 request.prompt.size(), request.sampling.max_tokens, options_.n_ctx);
    return Status(ErrorCode::kContextOverflow,
                  "the prompt (" + std::to_string(n_prompt) + " tokens) and max_tokens (" +
                      std::to_string(request.sampling.max_tokens) +
                      ") do not fit this server's context of " + std::to_string(options_.n_ctx) +
                      " tokens: lower max_tokens, shorten the conversation or start a new one");
  }
  if (request.matcher) {
    if (request.unconstrained_resumed < 0 || request.unconstrained_resumed > resumed) {
      return invalid_argument("resume: more unconstrained tokens than resumed ones");
    }
    for (size_t i = request.prompt.size() - resumed + request.unconstrained_resumed;
         i < request.prompt.size(); ++i) {
      if (!request.matcher->accept_token(request.prompt[i]).ok()) {
        return invalid_argument("resume: generated token " + std::to_string(request.prompt[i]) +
                                " is not allowed by the request's constraint");
      }
    }
  }
  if (!request.forks.empty()) {
    if (resumed > 0)
      return invalid_argument("resume: a request with several choices is not resumed");
    if (1 + static_cast<int>(request.forks.size()) > options_.max_batch) {
      return invalid_argument(std::to_string(1 + request.forks.size()) +
                              " choices: this server decodes at most " +
                              std::to_string(options_.max_batch) + " sequences at once");
    }
  }
  auto seq = std::make_unique<Seq>();
  for (SeqRequest::Fork& f : request.forks) {
    GLM_CHECK(f.observer != nullptr);
    auto fork = std::make_unique<Seq>();
    fork->req.id = request.id;
    fork->req.sampling = std::move(f.sampling);
    fork->req.sampling.max_tokens = request.sampling.max_tokens;
    fork->req.stop_ids = request.stop_ids;
    fork->req.matcher = std::move(f.matcher);
    fork->req.submitted = request.submitted;
    fork->req.observer = std::move(f.observer);
    fork->req.adapter = request.adapter;
    fork->req.adapter_salt = request.adapter_salt;
    seq->forks.push_back(std::move(fork));
  }
  request.forks.clear();
  seq->req = std::move(request);
  seq->n_generated = resumed;
  ++totals_.requests_total;
  Seq* s = seq.get();
  waiting_.push_back(std::move(seq));
  const int position = static_cast<int>(waiting_.size()) - 1;
  s->req.observer->on_queued(position);
  for (auto& fork : s->forks) fork->req.observer->on_queued(position);
  return Status::Ok();
}

void Scheduler::cancel(const std::string& id) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->req.id == id) {
      std::unique_ptr<Seq> seq = std::move(*it);
      waiting_.erase(it);
      finish(seq.get(), FinishReason::kCancelled, std::nullopt);
      return;
    }
  }
  bool found = false;  // a request and its running forks
  for (auto& seq : running_) {
    if (seq->req.id == id && !seq->done) {
      finish(seq.get(), FinishReason::kCancelled, std::nullopt);
      found = true;
    }
  }
  if (found) remove_finished();
}

void Scheduler::cancel_all() {
  while (!waiting_.empty()) cancel(waiting_.front()->req.id);
  for (auto& seq : running_) {
    if (!seq->done) finish(seq.get(), FinishReason::kCancelled, std::nullopt);
  }
  remove_finished();
}

void Scheduler::admit() {
  while (!waiting_.empty() &&
         static_cast<int>(running_.size()) + waiting_.front()->width() <= options_.max_batch) {
    Seq* s = waiting_.front().get();
    kv::AdmitInput in;
    in.conversation = s->req.conversation;
    in.history_tag = s->req.history_tag;
    in.tail = &s->req.tail;
    in.prompt = &s->req.prompt;
    in.max_new_tokens = s->req.sampling.max_tokens;
    in.n_ctx = options_.n_ctx;
    in.reuse = !caps_.bidirectional_prompt;
    in.n_forks = static_cast<int>(s->forks.size());
    in.salt = s->req.adapter_salt;
    // A prompt run whole before: its K/V may all come from the cache, its logits from here.
    const float* kept = s->req.resumed == 0 ? prompt_logits_.find(in.salt, s->req.prompt) : nullptr;
    in.logits_kept = kept != nullptr;
    const kv::AdmitResult r = cache_->admit(in, &s->adm);
    if (r == kv::AdmitResult::kWait) return;  // FIFO: nobody overtakes the head
    std::unique_ptr<Seq> seq = std::move(waiting_.front());
    waiting_.pop_front();
    if (r == kv::AdmitResult::kNeverFits) {
      GLM_LOG_INFO("a request needs more KV blocks than the cache has (raise --kv-blocks)");
      fail(seq.get(), Status(ErrorCode::kOutOfMemory,
                             "the request needs more memory than this server's KV cache holds: "
                             "lower max_tokens or shorten the conversation"));
      continue;
    }
    seq->admitted = true;
    seq->admitted_at = Clock::now();
    start_sampler(seq.get());
    const int n_prompt = static_cast<int>(seq->adm.prompt.size()) - seq->req.resumed;
    totals_.prompt_tokens_total += n_prompt;
    totals_.cached_tokens_total += std::min(seq->adm.n_cached, n_prompt);
    StartInfo info;
    info.prompt_tokens = n_prompt;
    info.cached_tokens = std::min(seq->adm.n_cached, n_prompt);
    info.from_conversation = seq->adm.from_conversation;
    seq->req.observer->on_start(info);
    for (auto& fork : seq->forks) fork->req.observer->on_start(info);
    // (The conversation paths always leave their new turn to run: never whole.)
    const bool whole =
        kept != nullptr && seq->adm.n_cached == static_cast<int>(seq->adm.prompt.size());
    Seq* admitted = seq.get();
    running_.push_back(std::move(seq));
    if (whole) {  // no forward pass: its first token now (it may end the sequence)
      ++totals_.whole_prompts_total;
      std::vector<float> row(kept, kept + n_vocab_);
      first_token(admitted, row.data());
      choose_tokens();  // while `row` lives
    }
  }
  remove_finished();
}

int Scheduler::max_step_tokens(const Options& options) {
  const int prompt =
      std::max(options.prefill_chunk, 1) * (options.max_stall_ms > 0 ? kMaxChunkGrowth : 1);
  const int drafts =
      options.spec == generation::SpecMode::kOff ? 0 : std::max(options.max_draft, 0);
  return prompt + std::max(options.max_batch, 1) * (1 + drafts);
}

int Scheduler::prefill_budget(bool decoding) const {
  const int chunk = options_.prefill_chunk;
  if (options_.max_stall_ms <= 0 || prompt_tokens_sum_ <= 0) return chunk;
  const double token_ms = prompt_ms_sum_ / prompt_tokens_sum_;
  const double room = options_.max_stall_ms - (decoding ? std::max(decode_step_ms_, 0.0) : 0.0);
  const double fits = token_ms > 0 ? room / token_ms : 1e9;
  return static_cast<int>(
      std::clamp(fits, static_cast<double>(chunk), static_cast<double>(chunk) * kMaxChunkGrowth));
}

void Scheduler::measure_step(int prompt_tokens, double ms) {
  if (prompt_tokens == 0) {
    average(&decode_step_ms_, ms);
    return;
  }
  // Sums decayed per step, so that a prompt token's cost is weighted by the tokens measured (a
  // one-token step says little about it). Without a decode-only step measured yet, the whole
  // step counts: an overestimate, so smaller budgets, never a longer stall.
  prompt_ms_sum_ = kCostKeep * prompt_ms_sum_ + std::max(ms - std::max(decode_step_ms_, 0.0), 0.0);
  prompt_tokens_sum_ = kCostKeep * prompt_tokens_sum_ + prompt_tokens;
}

void Scheduler::plan_prefill() {
  std::vector<Seq*>& order = prefill_order_;  // in the order they draw on the budget
  order.clear();
  for (auto& seq : running_) {
    if (!seq->decoding) order.push_back(seq.get());
  }
  // Passed over kMaxPassedOver steps in a row: first; then the fewest prompt tokens left (its
  // first token comes soonest); then admission order (a stable sort).
  std::stable_sort(order.begin(), order.end(), [](const Seq* a, const Seq* b) {
    const bool aged_a = a->passed_over >= kMaxPassedOver;
    const bool aged_b = b->passed_over >= kMaxPassedOver;
    if (aged_a != aged_b) return aged_a;
    return a->adm.prompt.size() - a->adm.kv.tokens.size() <
           b->adm.prompt.size() - b->adm.kv.tokens.size();
  });
  const int chunk = options_.prefill_chunk;
  bool decoding = false;
  for (auto& seq : running_) decoding = decoding || seq->decoding;
  const int full = prefill_budget(decoding);
  int budget = full;
  int slack = chunk / 4;  // tokens over the budget, per step, that end a prompt now
  for (Seq* seq : order) {
    const int remaining =
        static_cast<int>(seq->adm.prompt.size()) - static_cast<int>(seq->adm.kv.tokens.size());
    int n = std::min(remaining, budget);
    if (n < remaining && remaining - n <= slack) {  // no stub left to cost its first token a step
      slack -= remaining - n;
      n = remaining;
    }
    if (caps_.bidirectional_prompt && n < remaining) {
      // The whole prompt in one step: alone in a fresh budget if it is longer than a chunk
      // (the others' decode tokens still run with it), never cut.
      n = budget == full ? remaining : 0;
    }
    seq->chunk = n;
    seq->passed_over = n > 0 ? 0 : seq->passed_over + 1;
    budget -= std::min(n, budget);
  }
}

bool Scheduler::step() {
  admit();
  if (running_.empty()) return false;

  // One batch: every decoding sequence's next token, then prompt chunks within the budget.
  if (draft_on_) draft_with_model();
  if (mtp_on_) draft_with_mtp();
  std::vector<model::SeqInput> batch;
  std::vector<Seq*> members;
  plan_prefill();
  for (auto& seq : running_) {
    kv::SeqKv& kv = seq->adm.kv;
    const int n_past = static_cast<int>(kv.tokens.size());
    model::SeqInput in;
    in.n_past = n_past;
    in.adapter = seq->req.adapter.get();
    if (seq->decoding) {
      if (!draft_on_ && !mtp_on_) plan_draft(seq.get());  // else draft_with_*() did
      in.tokens = seq->feed.data();
      in.n_tokens = static_cast<int>(seq->feed.size());
      in.all_logits = in.n_tokens > 1;  // a draft: every position's logits verify it
    } else {
      if (seq->chunk == 0) continue;
      in.tokens = seq->adm.prompt.data() + n_past;
      in.n_tokens = seq->chunk;
    }
    // The prompt proper: resumed tokens after it were generated, so they attend causally.
    if (caps_.bidirectional_prompt) {
      in.prefix_len = static_cast<int>(seq->adm.prompt.size()) - seq->req.resumed;
    }
    cache_->grow(&kv, n_past + in.n_tokens);
    in.blocks = kv.blocks.data();
    in.n_blocks = static_cast<int>(kv.blocks.size());
    if (mtp_on_ && seq->drafts) {  // its hidden rows feed the MTP block next step
      if (seq->mtp_base < 0) seq->mtp_base = n_past;
      seq->mtp_out.resize(static_cast<size_t>(in.n_tokens) * model_->config().n_embd);
      in.hidden_out = seq->mtp_out.data();
    }
    batch.push_back(in);
    members.push_back(seq.get());
  }
  if (batch.empty()) return false;

  logits_.clear();
  const Clock::time_point forward_start = Clock::now();
  const Status st = model_->forward(batch, pool_, &logits_, model::OutputKind::kLogits);
  if (options_.max_stall_ms > 0 || mtp_on_) {  // the prefill budget's and MTP drafts' costs
    const double ms = ms_between(forward_start, Clock::now());
    int prompt_tokens = 0, drafted = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      if (!members[i]->decoding) prompt_tokens += batch[i].n_tokens;
      if (members[i]->decoding) drafted += batch[i].n_tokens - 1;
    }
    measure_step(prompt_tokens, ms);
    if (mtp_on_ && prompt_tokens == 0) measure_draft_cost(drafted, ms);
  }
  if (!st.ok()) {
    GLM_LOG_ERROR("forward failed for a batch of %zu: %s", batch.size(), st.to_string().c_str());
    // A model that says the server's state (a lost GPU: unavailable; a device out of memory)
    // keeps its code, so a client may retry; anything else is a bug inside the step.
    const bool state = st.code() == ErrorCode::kUnavailable || st.code() == ErrorCode::kOutOfMemory;
    const Status why = state ? st : Status(ErrorCode::kInternal, st.message());
    for (Seq* seq : members) fail(seq, why);
    remove_finished();
    return true;
  }
  size_t n_rows = 0;
  for (const model::SeqInput& in : batch) n_rows += in.all_logits ? in.n_tokens : 1;
  GLM_CHECK(logits_.size() == n_rows * static_cast<size_t>(n_vocab_));

  size_t at_row = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    Seq* seq = members[i];
    float* rows = logits_.data() + at_row * n_vocab_;
    at_row += batch[i].all_logits ? batch[i].n_tokens : 1;
    if (batch[i].all_logits) {  // a verified draft: only its fed token's K/V are kept for now
      cache_->commit(&seq->adm.kv, batch[i].tokens, 1);
      accept_draft(seq, rows);
      if (batch[i].hidden_out != nullptr) keep_mtp_rows(seq, batch[i].n_past);
      continue;
    }
    cache_->commit(&seq->adm.kv, batch[i].tokens, batch[i].n_tokens);
    if (batch[i].hidden_out != nullptr) keep_mtp_rows(seq, batch[i].n_past);
    if (!seq->decoding && seq->adm.kv.tokens.size() < seq->adm.prompt.size()) {
      const int to_prefill = static_cast<int>(seq->adm.prompt.size()) - seq->adm.n_cached;
      seq->req.observer->on_prefill(static_cast<int>(seq->adm.kv.tokens.size()) - seq->adm.n_cached,
                                    to_prefill);
      continue;
    }
    if (seq->n_generated >= seq->req.sampling.max_tokens) {  // resumed with all its tokens
      finish(seq, FinishReason::kLength, std::nullopt);
      continue;
    }
    if (seq->decoding) {
      picks_.push_back(Pick{seq, rows});
      continue;
    }
    // The prompt is written: its last position's logits kept for its next time, after its
    // first token is out; before, where a grammar's mask will change the row in place.
    if (constrained(*seq)) {
      prompt_logits_.put(seq->req.adapter_salt, seq->adm.prompt, rows, n_vocab_);
    } else {
      keep_rows_.emplace_back(seq, rows);
    }
    first_token(seq, rows);
  }
  choose_tokens();
  for (const auto& [seq, row] : keep_rows_) {
    prompt_logits_.put(seq->req.adapter_salt, seq->adm.prompt, row, n_vocab_);
  }
  keep_rows_.clear();
  remove_finished();
  return true;
}

void Scheduler::finish(Seq* seq, FinishReason reason, std::optional<int32_t> unfed) {
  const Clock::time_point now = Clock::now();
  FinishInfo info;
  info.reason = reason;
  info.usage.prompt_tokens = static_cast<int>(seq->adm.prompt.size()) - seq->req.resumed;
  info.usage.cached_tokens = std::min(seq->adm.n_cached, info.usage.prompt_tokens);
  info.usage.completion_tokens = seq->n_generated;
  generation::Timings& t = info.timings;
  t.total_ms = ms_between(seq->req.submitted, now);
  info.speculation = seq->spec;
  if (seq->admitted) {
    t.queue_ms = ms_between(seq->req.submitted, seq->admitted_at);
    if (seq->first_token_at != Clock::time_point()) {  // a token was sampled
      t.prefill_ms = ms_between(seq->admitted_at, seq->first_token_at);
      t.ttft_ms = ms_between(seq->req.submitted, seq->first_token_at);
    }
    const int n_this_run = seq->n_generated - seq->req.resumed;  // sampled by this run
    if (n_this_run > 1) {
      t.tpot_ms = ms_between(seq->first_token_at, seq->last_token_at) / (n_this_run - 1);
    }
  } else {
    t.queue_ms = t.total_ms;
  }
  seq->req.observer->on_finish(&info);
  if (seq->admitted) {
    // A bidirectional prompt's K/V cannot start a longer prompt: nothing is saved.
    if (info.save_conversation && !seq->req.conversation.empty() && !caps_.bidirectional_prompt) {
      std::vector<int32_t> pending;
      if (unfed) pending.push_back(*unfed);
      cache_->drop_unwritten_blocks(&seq->adm.kv);  // grown for a rejected draft
      cache_->save_conversation(seq->req.conversation, info.conversation_tag, &seq->adm.kv,
                                std::move(pending));
    } else {
      cache_->release(&seq->adm.kv);
    }
  }
  if (draft_on_ || mtp_on_) draft_.cache->release(&seq->dkv);
  seq->done = true;
  // Forks that never started (the request ended before its prompt was written) end with it.
  for (auto& fork : seq->forks) finish(fork.get(), reason, std::nullopt);
  seq->forks.clear();
}

void Scheduler::fail(Seq* seq, const Status& status) {
  seq->req.observer->on_error(status);
  if (seq->admitted) cache_->release(&seq->adm.kv);
  if (draft_on_ || mtp_on_) draft_.cache->release(&seq->dkv);
  seq->done = true;
  for (auto& fork : seq->forks) fail(fork.get(), status);
  seq->forks.clear();
}

void Scheduler::remove_finished() {
  for (const std::unique_ptr<Seq>& s : running_) {
    if (!s->done || !s->sampler) continue;
    if (spare_samplers_.size() < static_cast<size_t>(options_.max_batch)) {
      spare_samplers_.push_back(std::move(s->sampler));
    }
  }
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const std::unique_ptr<Seq>& s) { return s->done; }),
                 running_.end());
}

generation::Stats Scheduler::stats() const {
  generation::Stats s = totals_;
  s.queued = n_waiting();
  s.running = n_running();
  s.kv_blocks_used = cache_->allocator().n_used();
  s.kv_blocks_free = cache_->allocator().n_free();
  return s;
}

}  // namespace glm::scheduler
