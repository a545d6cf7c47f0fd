// Metrics: the gateway's counters and latency histograms, rendered in the Prometheus text
// exposition format (version 0.0.4) for GET /metrics.
//
//   glmserve_ttft_seconds        engine time to first token (from the engine's done event)
//   glmserve_tpot_seconds        engine time per output token after the first
//   glmserve_queue_seconds       time the request waited in the engine's queue
//   glmserve_e2e_seconds         gateway: HTTP request received -> last byte of the answer
//   glmserve_gateway_ttft_seconds gateway: HTTP request received -> first token written
//   counters: requests by route and outcome, prompt/cached/completion tokens, errors by code,
//   answers resumed after an engine crash.
// vllm_metrics() adds the engine's load under vLLM's names, for schedulers that score workers
// by them (docs/operations.md, "Several nodes").
//
// Thread-safety: every method may be called from any thread (one mutex; each update is a few
// hundred nanoseconds, far below one token).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "api/outcome.h"
#include "generation/usage.h"

namespace glm::gateway {

// A Prometheus label value: backslash, double quote and newline escaped (a model's name or a
// device's may hold anything; our own label words need none of it).
std::string escape_label(const std::string& s);

// Cumulative histogram over fixed bucket bounds (seconds), Prometheus style.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds_s);
  void observe(double seconds);
  // Appends "# TYPE", the _bucket lines (with +Inf), _sum and _count for `name`.
  void render(const std::string& name, const std::string& help, std::string* out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The gauges the Kubernetes Gateway API Inference Extension's endpoint picker (and llm-d, vLLM's
// production stack) read from a model server, under vLLM's names and types, labelled
// model_name: vllm:num_requests_waiting (the engine's queue), vllm:num_requests_running
// (sequences in the batch), vllm:kv_cache_usage_perc and its older name
// vllm:gpu_cache_usage_perc (KV blocks in use / all blocks, a fraction 0..1; 0 with no blocks).
// Cost: a few hundred bytes of text.
std::string vllm_metrics(const generation::Stats& stats, const std::string& model_name);

class Metrics {
 public:
  Metrics();

  // One finished generation (any route). Times in milliseconds; negative = not measured.
  struct Generation {
    std::string route;  // "openai", "chat"
    api::Outcome outcome = api::Outcome::kError;
    int prompt_tokens = 0;
    int cached_tokens = 0;
    int completion_tokens = 0;
    double engine_ttft_ms = -1;
    double engine_tpot_ms = -1;
    double queue_ms = -1;
    double gateway_ttft_ms = -1;
    double e2e_ms = -1;
    int resumes = 0;  // times it was resumed after the engine died
  };
  void record_generation(const Generation& g);
  // An error answered to a client, by protocol code name ("busy", "unavailable", ...).
  void record_error(const std::string& code);
  void http_request();
  void inflight_add(int delta);

  std::string render() const;
  uint64_t generations() const;

 private:
  mutable std::mutex mutex_;
  Histogram ttft_, tpot_, queue_, e2e_, gateway_ttft_;
  std::map<std::pair<std::string, std::string>, uint64_t> generations_;  // (route, outcome)
  std::map<std::string, uint64_t> errors_;
  uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0, http_requests_ = 0,
           resumes_ = 0;
  int64_t inflight_ = 0;
};

}  // namespace glm::gateway
