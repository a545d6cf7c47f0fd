// SamplingParams: how one generation picks its tokens and when it stops. The one definition,
// with the one set of defaults and the one validate(), used by every layer: the sampler reads
// it, the scheduler and engine carry it, the socket protocol and the HTTP gateway map it to and
// from JSON through for_each_field() (protocol/sampling_json.h), so a new field is declared
// here once, implemented in the sampler, and every edge knows it.
//
// Value type; thread-compatible. Cost: validate() is O(number of stop strings).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/status.h"

namespace glm::generation {

// Bounds of the stop list, applied by validate() (the socket and HTTP edges share them).
constexpr int kMaxStop = 8;           // stop strings per request
constexpr size_t kMaxStopBytes = 64;  // bytes per stop string
constexpr int kMaxTokensLimit = 1 << 20;
constexpr int kMaxLogitBias = 1024;        // logit_bias entries per request
constexpr float kMaxLogitBiasValue = 100;  // |bias| at most (OpenAI's range)
constexpr int kMaxTopLogprobs = 20;        // alternatives per token (OpenAI's limit)

// One entry of logit_bias: added to the token's logit before everything else.
struct LogitBias {
  int32_t token = 0;  // >= 0; the engine refuses ids beyond its vocabulary
  float bias = 0;     // [-100, 100]; -100 in practice bans the token, 100 forces it
  bool operator==(const LogitBias&) const = default;
};

struct SamplingParams {
  // Defaults are ChatGLM's own chat defaults (THUDM's `chat()`: temperature 0.8, top_p 0.8).
  float temperature = 0.8f;         // [0, 2]; 0 = greedy (argmax)
  float top_p = 0.8f;               // (0, 1]; 1 = off
  int top_k = 0;                    // [0, 1000]; 0 = off
  float min_p = 0.0f;               // [0, 1]; 0 = off; keeps tokens with p >= min_p * p(best)
  float repetition_penalty = 1.0f;  // (0, 10]; 1 = off; > 1 discourages repeats
  // OpenAI's penalties over the tokens generated so far (not the prompt): a token's logit
  // loses frequency_penalty * count + presence_penalty * (count > 0).
  float presence_penalty = 0.0f;   // [-2, 2]; 0 = off
  float frequency_penalty = 0.0f;  // [-2, 2]; 0 = off
  // -1 = off; n in [0, 20]: report each generated token's log-probability and its n most
  // probable alternatives (generation/logprobs.h says of which distribution).
  int top_logprobs = -1;
  uint64_t seed = 0;                  // 0 = nondeterministic
  int max_tokens = 512;               // [1, 2^20]: generated tokens at most
  std::vector<std::string> stop;      // extra stop strings: at most kMaxStop, each non-empty and
                                      // at most kMaxStopBytes
  std::vector<LogitBias> logit_bias;  // at most kMaxLogitBias, distinct tokens

  bool operator==(const SamplingParams&) const = default;
};

// The range of one numeric field: [lo, hi], or (lo, hi] when lo_open.
struct FieldRange {
  const char* name;  // the wire name (socket protocol and OpenAI API alike)
  double lo;
  double hi;
  bool lo_open;
  const char* meaning;  // what the special value means, for error messages ("0 = greedy")
};

// Calls v(range, member) for every numeric field (member is float&, int& or uint64_t&), in
// wire order; the stop list and logit_bias are not numeric and are handled by name ("stop",
// "logit_bias") by the mappers.
// Template over constness so the same table serves reading, writing and validating.
template <class Params, class Visitor>
void for_each_field(Params& p, Visitor&& v) {
  v(FieldRange{"temperature", 0, 2, false, "0 = greedy"}, p.temperature);
  v(FieldRange{"top_p", 0, 1, true, "1 = off"}, p.top_p);
  v(FieldRange{"top_k", 0, 1000, false, "0 = off"}, p.top_k);
  v(FieldRange{"min_p", 0, 1, false, "0 = off"}, p.min_p);
  v(FieldRange{"repetition_penalty", 0, 10, true, "1 = off"}, p.repetition_penalty);
  v(FieldRange{"presence_penalty", -2, 2, false, "0 = off"}, p.presence_penalty);
  v(FieldRange{"frequency_penalty", -2, 2, false, "0 = off"}, p.frequency_penalty);
  v(FieldRange{"top_logprobs", -1, kMaxTopLogprobs, false, "-1 = off"}, p.top_logprobs);
  v(FieldRange{"seed", 0, static_cast<double>(std::numeric_limits<uint64_t>::max()), false,
               "0 = random"},
    p.seed);
  v(FieldRange{"max_tokens", 1, kMaxTokensLimit, false, ""}, p.max_tokens);
}

// kInvalidArgument naming the first field out of range and the allowed range, e.g.
// "temperature must be in [0, 2] (0 = greedy), got 5".
Status validate(const SamplingParams& p);

// "must be in [0, 2] (0 = greedy), got 5": the message validate() puts after the field's name,
// for the JSON mappers that check a value before they store it.
std::string range_error(const FieldRange& r, double got);
bool in_range(const FieldRange& r, double v);

}  // namespace glm::generation
