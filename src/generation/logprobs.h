// Log-probabilities of generated tokens (requested with SamplingParams::top_logprobs >= 0):
// carried from the sampler through the engine and the socket protocol to the API's `logprobs`.
//
// Of which distribution: the log-softmax of the logits the sampler draws from after logit_bias,
// the penalties, a grammar's mask and the temperature (a temperature of 0 counts as 1), before
// top-k / top-p / min-p truncation. At temperature 0 without penalties or bias this is the
// model's own log-softmax (what `glmserve eval`'s logits give); at temperature 1 without
// truncation it is exactly the distribution sampled from. Truncated tokens are kept (with
// their finite log-probability) because the alternatives are what clients look at; a grammar's
// excluded tokens have probability 0 and never appear among them.
//
// Plain value types; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace glm::generation {

struct TokenLogprob {
  int32_t id = 0;
  // The token's raw bytes as it adds to the answer (may split a character; empty for a
  // control token, which adds nothing): the chosen tokens' bytes in order spell the answer.
  std::string bytes;
  float logprob = 0;  // natural log, <= 0
  bool operator==(const TokenLogprob&) const = default;
};

// One generated token, with its most probable alternatives (most probable first; ties: lower
// id first; the chosen token appears among them when it is one of the best).
struct GeneratedLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
  bool operator==(const GeneratedLogprobs&) const = default;
};

}  // namespace glm::generation
