// Sampler: picks the next token from a row of logits. Greedy (temperature 0), temperature,
// top-k, top-p (nucleus) and repetition penalty, with a seeded RNG so that a given seed
// reproduces the same generation.
//
// Order of operations (the same as HF transformers' logits processors):
//   repetition penalty -> temperature -> top-k -> softmax -> min-p -> top-p -> draw.
// Repetition penalty (HF/CTRL style) applies once to every distinct token accepted so far
// (prompt and generated): a positive logit is divided by the penalty, a negative one multiplied.
//
// Ownership: a Sampler owns its RNG and penalty history; one per sequence.
// Thread-safety: not thread-safe; use from one thread (the scheduler loop).
// Cost: sample() is O(n_vocab) plus a partial sort of the few hundred best candidates (a full
// sort only when top-p needs more than that); greedy is one pass.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

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

  const SamplingParams& params() const { return params_; }
  // Records a token for the repetition penalty (call for prompt tokens and generated ones).
  // Ids outside [0, n_vocab) are ignored.
  void accept(int32_t token);
  // Draws the next token from `logits` ([n_vocab]); does not accept() it. Each call with
  // temperature > 0 takes exactly one draw from the RNG (greedy takes none).
  int32_t sample(const float* logits);
  // Advances the RNG past the draws of `n_sampled` earlier sample() calls, so that a sequence
  // resumed after n tokens continues with the draws the uninterrupted one would have made.
  // Cost: n draws.
  void skip_draws(int n_sampled);
  // The distribution sample() draws from, most probable first (ties: lower id first); for
  // greedy, the argmax with p = 1. For tests and diagnostics.
  std::vector<Candidate> distribution(const float* logits) const;

 private:
  // Copies logits into *out with the repetition penalty and temperature applied.
  void prepare(const float* logits, std::vector<float>* out) const;

  SamplingParams params_;
  int n_vocab_ = 0;
  std::mt19937_64 rng_;
  std::vector<uint8_t> seen_;      // [n_vocab] 1 if accepted before
  std::vector<int32_t> seen_ids_;  // distinct accepted ids
  std::vector<float> scratch_;     // [n_vocab]
};

}  // namespace glm::sampler
