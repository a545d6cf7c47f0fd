// The scheduler's speculative decoding (docs/engine.md): how long a sequence's draft may be,
// the drafts of a draft model and of an MTP block, and what the verification keeps of them.
// The n-gram drafts' guess is in sample() (tokens.cc) and ngram_draft.h.
#include <algorithm>
#include <random>

#include "core/check.h"
#include "core/log.h"
#include "scheduler/ngram_draft.h"
#include "scheduler/seq.h"

namespace glm::scheduler {
namespace {

// A draft model at most this many committed tokens behind the target is fed them with the
// step's draft; more (the prompt, on a sequence's first drafting step) are fed this many a
// step first, without a draft: a long prompt's catch-up cannot stall the batch's step.
constexpr int kDraftCatchUp = 128;

}  // namespace

int Scheduler::draft_room(const Seq& seq) const {
  // The whole draft and the token after it must fit max_tokens (and so the reservation).
  return std::min(seq.draft_len.want(), seq.req.sampling.max_tokens - seq.n_generated - 1);
}

void Scheduler::plan_draft(Seq* seq) {
  seq->feed.assign(1, seq->next_token);
  if (!spec_on_) return;
  const int k = draft_room(*seq);
  if (k <= 0) {
    seq->draft_len.idle_step();
    return;
  }
  std::vector<int32_t>& context = draft_context_;
  context = seq->adm.kv.tokens;
  context.push_back(seq->next_token);
  const size_t n = context.size();
  if (ngram_draft(&context, k) > 0)
    seq->feed.insert(seq->feed.end(), context.begin() + n, context.end());
}

void Scheduler::accept_draft(Seq* seq, float* rows) {
  const int k = static_cast<int>(seq->feed.size()) - 1;
  seq->spec.drafted += k;
  totals_.speculation.drafted += k;
  int accepted = 0;
  const bool want_logprobs = seq->req.sampling.top_logprobs >= 0;
  // Position j's context is the written tokens: the fed token and the j drafted ones accepted.
  for (int j = 0; j <= k; ++j) {
    float* row = rows + static_cast<size_t>(j) * n_vocab_;
    if (constrained(*seq) && !constrain(seq, row)) break;
    generation::GeneratedLogprobs lp;
    int32_t token = -1;
    if ((draft_on_ || mtp_on_) && j < k && seq->req.sampling.temperature > 0.0f) {
      // The draft's token, drawn from q: min(1, p/q), else the residual.
      token = seq->sampler->sample_with_draft_distribution(row, seq->feed[j + 1], seq->q[j],
                                                           want_logprobs ? &lp : nullptr);
    } else {
      token = sample(seq, row, want_logprobs ? &lp : nullptr);
    }
    const bool hit = j < k && token == seq->feed[j + 1];
    if (hit) {
      ++accepted;
      ++seq->spec.accepted;
      ++totals_.speculation.accepted;
    }
    if (!deliver(seq, token, want_logprobs ? &lp : nullptr) || !hit) break;
    // Its K/V were written by this pass from the right context: keep them. The K/V of the
    // positions after the last accepted one are never committed: later passes overwrite them.
    cache_->commit(&seq->adm.kv, &seq->feed[j + 1], 1);
  }
  seq->draft_len.verified(k, accepted);
  if (draft_on_ && seq->drafts && !seq->done) commit_draft_kv(seq, accepted);
}

void Scheduler::draft_with_model() {
  std::vector<Seq*> active;
  for (auto& s : running_) {
    Seq* seq = s.get();
    if (!seq->decoding || seq->done) continue;
    seq->feed.assign(1, seq->next_token);
    seq->q.clear();
    if (!seq->drafts) continue;
    const int k = draft_room(*seq);
    if (k <= 0) {
      seq->draft_len.idle_step();
      continue;
    }
    if (!seq->draft_sampler) {
      seq->draft_sampler = std::make_unique<sampler::Sampler>(*seq->sampler);
    } else {
      // The penalties' state only (not the n_vocab scratch buffers); its RNG is never used.
      seq->draft_sampler->copy_history_from(*seq->sampler);
    }
    // A draft far behind the target (its first step: the prompt) catches up in chunks of
    // kDraftCatchUp and drafts once the rest fits one; the usual few tokens behind (and a
    // pause's) are fed with the draft. Per sequence, so that where it drafts depends on its
    // own tokens only (a seed's answer is the same batched or not).
    const int behind = static_cast<int>(seq->adm.kv.tokens.size() - seq->dkv.tokens.size());
    seq->catch_up = behind > kDraftCatchUp ? kDraftCatchUp : 0;
    active.push_back(seq);
  }
  // Pass 0 feeds each sequence's committed tokens the draft has not seen and next_token (all
  // of which the target keeps this step); pass p > 0 feeds the p-th drafted token, whose K/V
  // stay uncommitted until the target accepts it (commit_draft_kv).
  std::vector<model::SeqInput> batch;
  for (int pass = 0; !active.empty(); ++pass) {
    batch.clear();
    for (Seq* seq : active) {
      model::SeqInput in;
      kv::SeqKv& dkv = seq->dkv;
      if (pass == 0) {
        const std::vector<int32_t>& written = seq->adm.kv.tokens;
        GLM_CHECK(dkv.tokens.size() <= written.size());
        seq->draft_in.assign(written.begin() + dkv.tokens.size(), written.end());
        if (seq->catch_up > 0) {
          seq->draft_in.resize(seq->catch_up);
        } else {
          seq->draft_in.push_back(seq->next_token);
        }
        in.tokens = seq->draft_in.data();
        in.n_tokens = static_cast<int>(seq->draft_in.size());
        in.n_past = static_cast<int>(dkv.tokens.size());
      } else {
        in.tokens = &seq->feed.back();
        in.n_tokens = 1;
        in.n_past = static_cast<int>(dkv.tokens.size()) + pass - 1;
      }
      draft_.cache->grow(&dkv, in.n_past + in.n_tokens);
      in.blocks = dkv.blocks.data();
      in.n_blocks = static_cast<int>(dkv.blocks.size());
      batch.push_back(in);
    }
    draft_logits_.clear();
    const Status st =
        draft_.model->forward(batch, draft_.pool, &draft_logits_, model::OutputKind::kLogits);
    if (!st.ok()) {
      // The drafts so far stand (the target's output does not depend on them); these
      // sequences stop drafting and give their draft blocks back.
      GLM_LOG_WARN("draft model: forward failed for %zu sequences (they stop drafting): %s",
                   batch.size(), st.to_string().c_str());
      for (Seq* seq : active) {
        seq->drafts = false;
        draft_.cache->release(&seq->dkv);
      }
      break;
    }
    GLM_CHECK(draft_logits_.size() == batch.size() * static_cast<size_t>(n_vocab_));
    std::vector<Seq*> next;
    for (size_t i = 0; i < active.size(); ++i) {
      Seq* seq = active[i];
      if (pass == 0) draft_.cache->commit(&seq->dkv, batch[i].tokens, batch[i].n_tokens);
      if (seq->catch_up > 0) continue;  // no draft this step
      if (take_draft(seq, draft_logits_.data() + i * n_vocab_)) next.push_back(seq);
    }
    active.swap(next);
  }
}

bool Scheduler::take_draft(Seq* seq, const float* row) {
  int32_t token = -1;
  if (seq->req.sampling.temperature <= 0.0f) {
    token = seq->draft_sampler->sample(row);  // the argmax after the penalties, no draw
  } else {
    std::vector<sampler::Candidate> q = seq->draft_sampler->distribution(row);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    token = sampler::Sampler::draw(q, uniform(seq->draft_rng));
    seq->q.push_back(std::move(q));
  }
  seq->draft_sampler->accept(token);
  seq->feed.push_back(token);
  const auto& stops = seq->req.stop_ids;
  const bool stop = std::find(stops.begin(), stops.end(), token) != stops.end();
  return !stop && static_cast<int>(seq->feed.size()) - 1 < draft_room(*seq);
}

void Scheduler::keep_mtp_rows(Seq* seq, int n_past) {
  if (seq->done) return;  // its blocks are given back already
  const size_t rows = seq->adm.kv.tokens.size() - static_cast<size_t>(n_past);
  const size_t d = model_->config().n_embd;
  seq->mtp_h.insert(seq->mtp_h.end(), seq->mtp_out.begin(),
                    seq->mtp_out.begin() + static_cast<std::ptrdiff_t>(rows * d));
}

void Scheduler::measure_draft_cost(int drafted, double ms) {
  if (drafted == 0) {
    average(&plain_step_ms_, ms);
  } else if (plain_step_ms_ > 0) {
    average(&verify_token_cost_, std::max(ms / plain_step_ms_ - 1, 0.0) / drafted);
  }
}

void Scheduler::draft_with_mtp() {
  const int d = model_->config().n_embd;
  // What a draft costs, in plain decode steps (docs/engine.md#mtp-drafts). Until a plain step
  // is measured nothing is drafted (that step is one).
  const bool measured = plain_step_ms_ > 0 || !options_.draft_cost;
  DraftLength::Cost cost;
  if (options_.draft_cost && measured) {
    // Before a pass is measured it counts as a step (the first draft is one token); a chained
    // pass, before one is measured, as the first (which also catches up, so costs more).
    cost.first = mtp_first_ms_ < 0 ? 1.0 : mtp_first_ms_ / plain_step_ms_;
    cost.each = mtp_each_ms_ < 0 ? cost.first : mtp_each_ms_ / plain_step_ms_;
    cost.verify = std::max(verify_token_cost_, 0.0);
    cost.measured = mtp_first_ms_ > 0 && verify_token_cost_ >= 0;
  }
  std::vector<Seq*> active;  // this pass's sequences
  std::vector<model::MtpInput> batch;
  for (auto& s : running_) {
    Seq* seq = s.get();
    if (seq->done) continue;
    if (seq->decoding) {
      seq->feed.assign(1, seq->next_token);
      seq->q.clear();
    }
    if (!seq->drafts || seq->mtp_h.empty()) continue;
    const std::vector<int32_t>& written = seq->adm.kv.tokens;
    const int n = static_cast<int>(written.size());
    const int rows = static_cast<int>(seq->mtp_h.size() / d);
    const int first = seq->mtp_base + static_cast<int>(seq->dkv.tokens.size());
    if (first + rows != n) {  // never expected: this sequence stops drafting, nothing else
      GLM_LOG_ERROR("MTP: rows of positions %d.. do not end at %d: the sequence stops drafting",
                    first, n);
      seq->drafts = false;
      seq->mtp_h.clear();
      draft_.cache->release(&seq->dkv);
      continue;
    }
    // Pass 0: each pending position p with the token after it (the prompt's next token while
    // prefilling; next_token after the last written one).
    seq->draft_in.clear();
    for (int p = first; p < n; ++p) {
      seq->draft_in.push_back(p + 1 < n       ? written[p + 1]
                              : seq->decoding ? seq->next_token
                                              : seq->adm.prompt[n]);
    }
    bool draft = false;
    if (seq->decoding) {
      seq->draft_len.set_cost(cost);
      draft = measured && draft_room(*seq) > 0;
      if (!draft) seq->draft_len.idle_step();
      // Not drafting this step (paused after misses, or at max_tokens): its rows wait, to be
      // fed in one pass when it drafts again (a pass reads the block's weights once however
      // many rows), up to kDraftCatchUp of them.
      if (!draft && rows < kDraftCatchUp) continue;
    }
    if (draft) {
      if (!seq->draft_sampler) {
        seq->draft_sampler = std::make_unique<sampler::Sampler>(*seq->sampler);
      } else {
        seq->draft_sampler->copy_history_from(*seq->sampler);
      }
    }
    model::MtpInput in;
    in.seq.tokens = seq->draft_in.data();
    in.seq.n_tokens = rows;
    in.seq.n_past = static_cast<int>(seq->dkv.tokens.size());
    draft_.cache->grow(&seq->dkv, in.seq.n_past + rows);
    in.seq.blocks = seq->dkv.blocks.data();
    in.seq.n_blocks = static_cast<int>(seq->dkv.blocks.size());
    in.hidden = seq->mtp_h.data();
    in.output = draft;
    batch.push_back(in);
    active.push_back(seq);
  }
  // Pass 0 commits its positions (real hidden rows); a chained pass p feeds the p-th draft with
  // the block's own row at the position after, never committed: the next pass 0 rewrites it.
  for (int pass = 0; !active.empty(); ++pass) {
    draft_logits_.clear();
    mtp_hidden_.clear();
    const Clock::time_point pass_start = Clock::now();
    const Status st = model_->forward_mtp(batch, draft_.pool, &draft_logits_, &mtp_hidden_);
    if (st.ok() && !draft_logits_.empty()) {  // a pass that drafted (pass 0 also catches up)
      average(pass == 0 ? &mtp_first_ms_ : &mtp_each_ms_, ms_between(pass_start, Clock::now()));
    }
    if (!st.ok()) {
      // The drafts so far stand (the target's output does not depend on them); these
      // sequences stop drafting and give their MTP blocks back.
      GLM_LOG_WARN("MTP: forward failed for %zu sequences (they stop drafting): %s", batch.size(),
                   st.to_string().c_str());
      for (Seq* seq : active) {
        seq->drafts = false;
        seq->mtp_h.clear();
        draft_.cache->release(&seq->dkv);
      }
      return;
    }
    std::vector<Seq*> next;
    size_t row = 0;
    for (size_t i = 0; i < active.size(); ++i) {
      Seq* seq = active[i];
      if (pass == 0) {
        draft_.cache->commit(&seq->dkv, seq->draft_in.data(), batch[i].seq.n_tokens);
        seq->mtp_h.clear();
      }
      if (!batch[i].output) continue;
      const float* h = mtp_hidden_.data() + row * d;
      const bool more = take_draft(seq, draft_logits_.data() + row * n_vocab_);
      ++row;
      if (!more) continue;
      seq->mtp_chain.assign(h, h + d);
      next.push_back(seq);
    }
    batch.clear();
    for (Seq* seq : next) {
      model::MtpInput in;
      in.seq.tokens = &seq->feed.back();
      in.seq.n_tokens = 1;
      in.seq.n_past = static_cast<int>(seq->dkv.tokens.size()) + pass;
      draft_.cache->grow(&seq->dkv, in.seq.n_past + 1);
      in.seq.blocks = seq->dkv.blocks.data();
      in.seq.n_blocks = static_cast<int>(seq->dkv.blocks.size());
      in.hidden = seq->mtp_chain.data();
      batch.push_back(in);
    }
    active.swap(next);
  }
}

void Scheduler::commit_draft_kv(Seq* seq, int accepted) {
  // The draft model was fed feed[1 .. n_drafted - 1] (its last drafted token never).
  const int n_fed = static_cast<int>(seq->feed.size()) - 2;
  const int n = std::min(accepted, n_fed);
  if (n > 0) draft_.cache->commit(&seq->dkv, &seq->feed[1], n);
}

}  // namespace glm::scheduler
