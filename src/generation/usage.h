// What a generation cost and what the engine has done: plain value types carried unchanged from
// the scheduler through the engine and the socket protocol to the gateway's API answers and
// metrics. Thread-compatible value types.
#pragma once

#include <cstdint>

#include "generation/speculation.h"

namespace glm::generation {

struct Usage {
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose K/V came from the cache (not prefilled)
  int completion_tokens = 0;
  bool operator==(const Usage&) const = default;
};

struct Timings {
  double queue_ms = 0;    // submitted -> admitted
  double prefill_ms = 0;  // admitted -> first token sampled
  double ttft_ms = 0;     // submitted -> first token
  double tpot_ms = 0;     // mean gap between output tokens after the first
  double total_ms = 0;    // submitted -> finished
  bool operator==(const Timings&) const = default;
};

// The engine's counters (a snapshot; totals since start).
struct Stats {
  int queued = 0;  // waiting for admission
  int running = 0;
  int kv_blocks_used = 0;
  int kv_blocks_free = 0;
  int64_t requests_total = 0;
  int64_t prompt_tokens_total = 0;
  int64_t cached_tokens_total = 0;  // prefix-cache hits
  int64_t generated_tokens_total = 0;
  Speculation speculation;  // drafted and accepted tokens (speculative decoding), all requests
  // Requests whose prompt came again whole: every token from the KV cache, the first token from
  // the logits kept when it last ran (docs/engine.md#prompt-logits), no forward pass before it.
  int64_t whole_prompts_total = 0;
  bool operator==(const Stats&) const = default;
};

}  // namespace glm::generation
