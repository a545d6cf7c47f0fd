// Sampler: picks the next token from a row of logits. Greedy (temperature 0), temperature,
// top-k, top-p (nucleus), min-p, logit bias and the repetition, presence and frequency
// penalties, with a seeded RNG so that a given seed reproduces the same generation; on request
// the log-probabilities of what it picked (generation/logprobs.h).
//
// Order of operations (HF transformers' logits processors, with OpenAI's bias and penalties
// first):
//   logit_bias -> repetition penalty -> presence / frequency penalties -> temperature ->
//   top-k -> softmax -> min-p -> top-p -> draw.
// Repetition penalty (HF/CTRL style) applies once to every distinct token accepted so far
// (prompt and generated): a positive logit is divided by the penalty, a negative one multiplied.
// Presence and frequency penalties (OpenAI) count generated tokens only: a token's logit loses
// frequency_penalty * count + presence_penalty * (count > 0).
//
// Ownership: a Sampler owns its RNG and penalty history; one per sequence.
// Thread-safety: not thread-safe; use from one thread (the scheduler loop).
// Cost: sample() reads the row three times in vectors (its maximum, the softmax's sum, the
// tokens within 7 nats of the best: softmax.h) and sorts those few when top-k, top-p or min-p
// ends among them (a model's peaked distribution); else the exponentials once more, a partial
// sort of the few hundred best candidates, or, when more can be kept (a flat distribution), a
// radix sort of only the candidates top-p can reach (found by a histogram of their
// probabilities); with no filter at all nothing is sorted, and the draw walks the
// exponentials (by blocks of 64, then inside one) with no candidate list. The logits are copied
// only when a bias or penalty changes them. Greedy is two passes (the largest logit, then its first
// place). sampler_bench times it at the real vocabularies' sizes (on a GPU, the device waits for it
// every step: docs/performance.md).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "generation/logprobs.h"
#include "generation/sampling.h"

namespace glm::sampler {

using generation::SamplingParams;

struct Candidate {
  int32_t id = 0;
  float p = 0;  // probability after all filters (the kept candidates sum to 1)
};

// Index of the largest value (the first one on ties). n must be > 0.
int32_t argmax(const float* values, int n);

class Sampler {
 public:
  // Uses the sampling fields of `params` (max_tokens and stop belong to the scheduler and the
  // engine). A seed of 0 is drawn from std::random_device.
  Sampler(const SamplingParams& params, int n_vocab);

  // Makes this sampler what Sampler(params, n_vocab) would make, for a new sequence, keeping
  // the memory of its buffers: a finished sequence's sampler serves the next one without
  // megabytes of fresh pages, whose first touches (page faults) would delay its first token.
  // Cost: O(distinct tokens seen), plus O(n_vocab) where a penalty needs a table it had not.
  void restart(const SamplingParams& params);

  const SamplingParams& params() const { return params_; }
  // Records a prompt token (for the repetition penalty). Ids outside [0, n_vocab) are ignored.
  void accept_prompt(int32_t token);
  // Records a generated token (for all penalties). Ids outside [0, n_vocab) are ignored.
  void accept(int32_t token);
  // Makes this sampler's penalty history (the tokens seen and generated) that of `from`, a
  // sampler of the same parameters and vocabulary (a copy of it, then diverged). Cost:
  // O(distinct tokens of both); neither the scratch buffers nor the RNG are touched.
  void copy_history_from(const Sampler& from);
  // Draws the next token from `logits` ([n_vocab]); does not accept() it. Each call with
  // temperature > 0 takes exactly one draw from the RNG (greedy takes none). With `logprobs`
  // (when params().top_logprobs >= 0), also its log-probability and the top_logprobs most
  // probable alternatives (ids and log-probabilities; bytes are left empty).
  int32_t sample(const float* logits, generation::GeneratedLogprobs* logprobs = nullptr);
  // Speculative decoding's rule for a drafted token (scheduler/ngram_draft.h): the same
  // distribution as sample(), with `draft` accepted with probability p(draft) and otherwise a
  // token of the residual (p without `draft`, renormalised). That is standard speculative
  // sampling for a deterministic draft (q = a point mass: accept with min(1, p/q) = p(draft),
  // resample from norm(max(0, p - q))). It takes the same one draw as sample(): the draw walks
  // the cumulative distribution with `draft` put first, so u < p(draft) accepts it and the
  // rest of [0, 1) samples the residual. Greedy returns the argmax (as sample()). A draft of
  // -1 (none), or one outside the kept candidates, is sample().
  int32_t sample_with_draft(const float* logits, int32_t draft,
                            generation::GeneratedLogprobs* logprobs = nullptr);
  // Speculative sampling with a draft model (scheduler's --spec draft): `draft` was drawn from
  // the draft model's processed distribution `q` (its candidates, as distribution() returns
  // them; q(draft) > 0). Returns `draft` with probability min(1, p(draft) / q(draft)), else a
  // token of the residual norm(max(0, p - q)), where p is this sampler's processed
  // distribution of `logits` (what sample() draws from): the result is distributed exactly as
  // sample()'s. It takes one draw, as sample() does: u < min(1, p/q) accepts, and on a
  // rejection (u - a) / (1 - a), uniform again, walks the residual. So the returned token
  // equals `draft` exactly when it was accepted (the residual is 0 there). Greedy returns the
  // argmax (as sample()). A draft that q does not hold (q(draft) = 0) is sample().
  // Cost: sample() plus O(n_vocab) for the residual.
  int32_t sample_with_draft_distribution(const float* logits, int32_t draft,
                                         const std::vector<Candidate>& q,
                                         generation::GeneratedLogprobs* logprobs = nullptr);
  // Draws a token from `cand` (probabilities summing to 1) with one uniform `u` in [0, 1): the
  // first whose cumulative probability passes u (the last one on rounding).
  static int32_t draw(const std::vector<Candidate>& cand, double u);
  // Advances the RNG past the draws of `n_sampled` earlier sample() calls, so that a sequence
  // resumed after n tokens continues with the draws the uninterrupted one would have made.
  // Cost: n draws.
  void skip_draws(int n_sampled);
  // The distribution sample() draws from, in the order its draw walks it: most probable first
  // (ties: lower id first) when top-k, top-p or min-p filters, by id when none does (every token
  // of nonzero probability); for greedy, the argmax with p = 1. For tests and diagnostics.
  std::vector<Candidate> distribution(const float* logits) const;

 private:
  // A row of logits as the filters see it: x[i] * scale, [n_vocab] (scale = 1 / temperature,
  // or 1: the temperature is applied where the row is read, not in a pass of its own).
  struct Row {
    const float* x = nullptr;
    float scale = 1.0f;
  };
  // `logits` with the bias and penalties applied: `logits` itself when they change nothing,
  // else a copy in *scratch changed where they apply.
  Row prepare(const float* logits, std::vector<float>* scratch) const;
  // What top-k, min-p and top-p ask of candidates(): at most `keep` tokens, each of probability
  // >= min_p (0: no min-p), the smallest prefix whose mass reaches top_p (> 1: no top-p).
  struct Filters {
    size_t keep = 0;
    float min_p = 0.0f;
    double top_p = 2.0;
  };
  // A row's softmax normaliser, computed once for candidates() and log_softmax(): the largest
  // x * scale, and the sum of exp(x * scale - max) (softmax.h's exp_shifted); where nothing
  // filters (temperature > 0 and !filters(): every exponential is read), the exponentials
  // too, in the same pass.
  struct Softmax {
    float max = 0.0f;
    double sum = 0.0;
    const float* e = nullptr;  // [n_vocab] in e_ (valid until its next use), or null
  };
  Softmax softmax_of(const Row& row) const;
  // Whether top-k, min-p or top-p can drop a token (else every token of nonzero probability is
  // a candidate, in id order).
  bool filters() const;
  // distribution() of a prepare()d row whose softmax_of is `sm` (unused when greedy), in cand_
  // (valid until the next call).
  std::vector<Candidate>& candidates(const Row& row, const Softmax& sm) const;
  // candidates()' answer from the few tokens near the best, when it lies there: see sampler.cc.
  size_t near_best(const Row& row, float max_x, double inv_sum, const Filters& f,
                   std::vector<Candidate>* out) const;
  // Sorts the candidates top-p can keep (all of them without top-p): see sampler.cc.
  void sort_wide(std::vector<Candidate>* cand, double top_p) const;
  // Log-softmax of the prepared row at `chosen` and at the n best ids, into *out.
  void log_softmax(const Row& row, const Softmax& sm, int32_t chosen,
                   generation::GeneratedLogprobs* out);

  SamplingParams params_;
  int n_vocab_ = 0;
  std::mt19937_64 rng_;
  std::vector<uint8_t> seen_;         // [n_vocab] 1 if accepted before
  std::vector<int32_t> seen_ids_;     // distinct accepted ids
  std::vector<int32_t> counts_;       // [n_vocab] generated count (presence / frequency only)
  std::vector<int32_t> counted_ids_;  // distinct generated ids
  std::vector<float> scratch_;        // [n_vocab]
  std::vector<int32_t> ids_;          // [top_logprobs] log_softmax's best ids so far
  std::vector<float> q_dense_;        // [n_vocab] sample_with_draft_distribution's q, else 0
  mutable std::vector<Candidate> radix_tmp_;  // [n_vocab] sort_wide's buffer (const callers)
  mutable std::vector<Candidate> cand_;       // [n_vocab] candidates()' softmax (const callers)
  mutable std::vector<float> e_;              // [n_vocab] candidates()' exponentials (wide)
  std::vector<double> block_sums_;            // [n_vocab / 64] an unfiltered draw's block sums
};

}  // namespace glm::sampler
