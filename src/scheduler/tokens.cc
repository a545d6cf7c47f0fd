// How the scheduler's sequences get their tokens (docs/engine.md, "Sampling"): each one's
// sampler, forks started from a written prompt, grammar masks, a step's samplers in parallel on
// the model's host threads, and the delivery of each token (stop ids, max_tokens, the
// observer). The n-gram drafts' guess is in sample(); the other drafts in speculate.cc.
#include <algorithm>
#include <random>

#include "core/check.h"
#include "core/log.h"
#include "kernels/thread_pool.h"
#include "scheduler/ngram_draft.h"
#include "scheduler/scheduler.h"
#include "scheduler/seq.h"

namespace glm::scheduler {

using generation::FinishReason;

void Scheduler::start_sampler(Seq* seq) {
  if (spare_samplers_.empty()) {
    seq->sampler = std::make_unique<sampler::Sampler>(seq->req.sampling, n_vocab_);
  } else {
    seq->sampler = std::move(spare_samplers_.back());
    spare_samplers_.pop_back();
    seq->sampler->restart(seq->req.sampling);
  }
  // The prompt's tokens count for the repetition penalty only; resumed ones were generated
  // (every penalty counts them, and their draws are skipped).
  const int n_prompt = static_cast<int>(seq->adm.prompt.size()) - seq->req.resumed;
  for (int i = 0; i < static_cast<int>(seq->adm.prompt.size()); ++i) {
    if (i < n_prompt) {
      seq->sampler->accept_prompt(seq->adm.prompt[i]);
    } else {
      seq->sampler->accept(seq->adm.prompt[i]);
    }
  }
  seq->sampler->skip_draws(seq->req.resumed);
  seq->drafts = spec_on_;
  if (draft_on_ || mtp_on_) {
    // Every position this sequence may write (admission checked it against n_ctx).
    const int n_positions = n_prompt + static_cast<int>(seq->req.sampling.max_tokens);
    const int n_blocks = draft_.cache->blocks_for(n_positions);
    seq->drafts = draft_.cache->allocator().reserve(n_blocks);
    if (seq->drafts) {
      seq->dkv.reserved = n_blocks;
      seq->dkv.shared = false;  // never offered to a prefix cache
      const uint64_t seed = seq->req.sampling.seed;
      seq->draft_rng.seed(seed != 0 ? seed ^ 0xd1a5'7e11'5eed'0001ull : std::random_device{}());
    } else {
      GLM_LOG_WARN("%s: no KV blocks left for a sequence (%d wanted): it does not draft",
                   mtp_on_ ? "MTP" : "draft model", n_blocks);
    }
  }
  seq->draft_len = DraftLength(seq->drafts ? options_.max_draft : 0);
}

void Scheduler::start_forks(Seq* seq, const float* row) {
  std::vector<float> logits;
  std::vector<std::unique_ptr<Seq>> forks = std::move(seq->forks);
  seq->forks.clear();
  for (std::unique_ptr<Seq>& fork : forks) {
    const kv::ForkCopy copy = cache_->fork(&seq->adm.kv, seq->adm.fork_reserve, &fork->adm.kv);
    if (copy.src >= 0) model_->copy_kv_block(pool_, copy.src, copy.dst);
    fork->adm.prompt = seq->adm.prompt;
    fork->adm.n_cached = seq->adm.n_cached;
    fork->admitted = true;
    fork->admitted_at = seq->admitted_at;
    start_sampler(fork.get());
    const size_t d = model_->config().n_embd;
    if (mtp_on_ && fork->drafts && seq->mtp_h.size() >= d) {
      // The prompt's last hidden row: the fork's MTP block starts at that position.
      fork->mtp_base = static_cast<int>(fork->adm.kv.tokens.size()) - 1;
      fork->mtp_h.assign(seq->mtp_h.end() - static_cast<std::ptrdiff_t>(d), seq->mtp_h.end());
    }
    Seq* f = fork.get();
    running_.push_back(std::move(fork));
    logits.assign(row, row + n_vocab_);
    if (constrained(*f) && !constrain(f, logits.data())) continue;
    generation::GeneratedLogprobs lp;
    const bool want_logprobs = f->req.sampling.top_logprobs >= 0;
    const int32_t token = sample(f, logits.data(), want_logprobs ? &lp : nullptr);
    deliver(f, token, want_logprobs ? &lp : nullptr);
  }
}

void Scheduler::first_token(Seq* seq, float* row) {
  if (!seq->forks.empty()) start_forks(seq, row);
  picks_.push_back(Pick{seq, row});
}

void Scheduler::choose_tokens() {
  for (Pick& p : picks_) {
    if (constrained(*p.seq) && !constrain(p.seq, p.row)) p.seq = nullptr;
  }
  auto sample_range = [this](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      Pick& p = picks_[i];
      if (p.seq == nullptr) continue;
      const bool want_logprobs = p.seq->req.sampling.top_logprobs >= 0;
      p.token = sample(p.seq, p.row, want_logprobs ? &p.logprobs : nullptr);
    }
  };
  kernels::ThreadPool* threads = picks_.size() > 1 ? model_->host_threads() : nullptr;
  if (threads != nullptr) {
    threads->parallel_for(static_cast<int64_t>(picks_.size()), sample_range);
  } else {
    sample_range(0, static_cast<int64_t>(picks_.size()), 0);
  }
  for (Pick& p : picks_) {
    if (p.seq == nullptr) continue;
    const bool want_logprobs = p.seq->req.sampling.top_logprobs >= 0;
    deliver(p.seq, p.token, want_logprobs ? &p.logprobs : nullptr);
  }
  picks_.clear();
}

int32_t Scheduler::sample(Seq* seq, const float* row, generation::GeneratedLogprobs* logprobs) {
  if (!spec_on_ || draft_on_ || mtp_on_ || seq->req.sampling.temperature <= 0.0f)
    return seq->sampler->sample(row, logprobs);
  const std::vector<int32_t>& context = seq->adm.kv.tokens;  // this row's context
  const int32_t guess = ngram_next(context.data(), static_cast<int>(context.size()));
  return seq->sampler->sample_with_draft(row, guess, logprobs);
}

bool Scheduler::constrained(const Seq& seq) const {
  return seq.req.matcher != nullptr && seq.req.observer->constraint_armed();
}

bool Scheduler::constrain(Seq* seq, float* logits) {
  grammar::Matcher& m = *seq->req.matcher;
  const grammar::MaskInfo info = m.fill_mask(&seq->mask);
  if (info.dead()) {
    fail(seq, invalid_argument("the constraint allows no token after " +
                               std::to_string(seq->n_generated) +
                               " generated tokens (the grammar needs text this model's "
                               "vocabulary cannot spell)"));
    return false;
  }
  size_t n_stops_allowed = 0;
  for (int32_t stop : seq->req.stop_ids) {
    if (stop >= 0 && static_cast<size_t>(stop) < seq->mask.size() && seq->mask.allowed(stop)) {
      ++n_stops_allowed;
    }
  }
  if (info.stop_allowed && info.n_allowed <= n_stops_allowed) {
    finish(seq, FinishReason::kStop, std::nullopt);  // every sampled token is in the KV
    return false;
  }
  GLM_CHECK(seq->mask.size() == static_cast<size_t>(n_vocab_));
  seq->mask.apply_to_logits(logits);
  return true;
}

bool Scheduler::deliver(Seq* seq, int32_t token, const generation::GeneratedLogprobs* logprobs) {
  const Clock::time_point now = Clock::now();
  if (seq->first_token_at == Clock::time_point()) seq->first_token_at = now;
  const auto& stops = seq->req.stop_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    finish(seq, FinishReason::kStop, std::nullopt);
    return false;
  }
  if (constrained(*seq)) {  // armed before this token (on_token below may arm it)
    const Status st = seq->req.matcher->accept_token(token);
    if (!st.ok()) {  // the mask allowed it: a bug in the grammar engine, not the request's
      GLM_LOG_ERROR("grammar refused the token %d it allowed: %s", token, st.to_string().c_str());
      fail(seq, Status(ErrorCode::kInternal, "constrained decoding: " + st.message()));
      return false;
    }
  }
  ++seq->n_generated;
  ++totals_.generated_tokens_total;
  seq->last_token_at = now;
  seq->sampler->accept(token);
  if (!seq->req.observer->on_token(token, logprobs)) {
    finish(seq, FinishReason::kStop, token);
    return false;
  }
  if (seq->n_generated >= seq->req.sampling.max_tokens) {
    finish(seq, FinishReason::kLength, token);
    return false;
  }
  seq->next_token = token;
  seq->decoding = true;
  return true;
}

}  // namespace glm::scheduler
