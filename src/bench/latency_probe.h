// Serving-latency measurement for `glmserve bench serve` (docs/performance.md): one generation
// timed at each layer (in-process engine API, engine socket, HTTP gateway), measured by the client
// with a steady clock, and the seed study's statistics (drop min and max, mean and stddev of the
// rest). Thread-safety: the run_* functions are independent and may run concurrently (concurrency
// sweeps); each blocks its thread for one whole generation.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "protocol/protocol.h"

namespace glm::bench {

struct Sample {
  // Every layer times the tokens whose text a client sees (a token event with text; HTTP: a
  // content chunk): a token that completes no character yet (a byte of a multi-byte one, text
  // held back by a stop string's or a tool call's prefix) is no first token.
  double ttft_ms = 0;  // request sent -> first token text received
  double tpot_ms = 0;  // mean gap between tokens after the first (0 if < 2 tokens)
  double e2e_ms = 0;   // request sent -> end of stream
  int tokens = 0;      // token events with text (HTTP: content chunks)
  int prompt_tokens = 0;
  int cached_tokens = 0;
  std::string text;  // the reply
};

// Through the engine API directly (the floor every other layer is compared with).
StatusOr<Sample> run_in_process(engine::Engine& engine, const protocol::Request& request);
// Through a fresh connection to the engine socket.
StatusOr<Sample> run_socket(const std::string& socket_path, const protocol::Request& request);
// Through the gateway's OpenAI-compatible streaming endpoint: `url` like
// "http://127.0.0.1:8080" (POST /v1/chat/completions, stream: true).
StatusOr<Sample> run_http(const std::string& url, const protocol::Request& request);

struct Summary {
  int n = 0;  // values kept after dropping min and max
  double mean = 0;
  double stddev = 0;  // sample standard deviation of the kept values
  double median = 0;  // of all values
};
// Drops one minimum and one maximum when there are at least 3 values.
Summary summarize(std::vector<double> values);

}  // namespace glm::bench
