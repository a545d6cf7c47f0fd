// Scheduler::Seq, a sequence as the scheduler holds it, and the helpers its parts share
// (scheduler.cc: admission and steps; tokens.cc: samplers, grammar masks, delivery; speculate.cc:
// drafts and their verification).
// Internal to the scheduler module. Loop thread only, as the Scheduler.
#pragma once

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "scheduler/ngram_draft.h"
#include "scheduler/scheduler.h"

namespace glm::scheduler {

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The step costs' estimates keep this much of themselves per step measured.
inline constexpr double kCostKeep = 0.75;

// *v, a moving average (< 0: none yet), updated by x.
inline void average(double* v, double x) { *v = *v < 0 ? x : kCostKeep * *v + (1 - kCostKeep) * x; }

struct Scheduler::Seq {
  SeqRequest req;
  kv::Admitted adm;  // prompt actually run, cached prefix, block table
  std::unique_ptr<sampler::Sampler> sampler;
  grammar::TokenMask mask;  // constrained sequences: the mask of the current step
  bool admitted = false;
  bool decoding = false;  // prompt done; next_token is the sampled token to feed
  bool done = false;
  int32_t next_token = -1;
  int n_generated = 0;
  int chunk = 0;              // prefilling: the prompt tokens it runs this step (plan_prefill)
  int passed_over = 0;        // prefilling: consecutive steps it got no prompt tokens
  std::vector<int32_t> feed;  // decoding: next_token, then the draft this step verifies
  DraftLength draft_len{0};
  generation::Speculation spec;
  // Draft-model speculation: the draft model's KV (its tokens always a prefix of kv.tokens: the
  // draft's committed positions), the sampler that picks the draft's tokens (a copy of
  // `sampler` per step, so its penalties see the drafted tokens), its own RNG (never the
  // target's: the acceptance draw must be independent of the draft), and the draft's
  // distribution q of each drafted token in feed (sampled requests only).
  kv::SeqKv dkv;
  bool drafts = false;  // dkv holds a reservation: this sequence drafts
  std::unique_ptr<sampler::Sampler> draft_sampler;
  std::mt19937_64 draft_rng;
  std::vector<std::vector<sampler::Candidate>> q;
  std::vector<int32_t> draft_in;  // draft_with_model's tokens of this sequence's first pass
  int catch_up = 0;  // > 0: this step only feeds its draft model this many committed tokens
  // MTP speculation: the MTP block's position i (dkv) is the trunk's position mtp_base + i
  // (-1: not started), fed that position's hidden row and the token after it (dkv.tokens[i]).
  // mtp_h holds the rows of the committed positions it has not been fed ([rows, n_embd]: from
  // mtp_base + dkv.tokens.size() to the last committed), mtp_out this step's forward's rows, and
  // mtp_chain the block's own output row of its last draft.
  int mtp_base = -1;
  std::vector<float> mtp_h;
  std::vector<float> mtp_out;
  std::vector<float> mtp_chain;
  std::vector<std::unique_ptr<Seq>> forks;  // SeqRequest::forks until the prompt is written
  int width() const { return 1 + static_cast<int>(forks.size()); }  // batch slots it needs
  Clock::time_point admitted_at;
  Clock::time_point first_token_at;
  Clock::time_point last_token_at;
};

}  // namespace glm::scheduler
