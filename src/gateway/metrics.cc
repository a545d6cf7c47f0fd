#include "gateway/metrics.h"

#include <cstdio>

namespace glm::gateway {
namespace {

// Latency buckets from 1 ms to 2 min: covers a cached-prefix TTFT on a fast machine and a 6B
// model's multi-minute answers on 2 cores.
std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

std::string escape_label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

Histogram::Histogram(std::vector<double> bounds_s)
    : bounds_(std::move(bounds_s)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < bounds_.size() && seconds > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += seconds;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string* out) const {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += name + "_bucket{le=\"" + fmt_double(bounds_[i]) + "\"} " + std::to_string(cumulative) +
            "\n";
  }
  cumulative += counts_.back();
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  *out += name + "_sum " + fmt_double(sum_) + "\n";
  *out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_(latency_buckets()),
      tpot_(latency_buckets()),
      queue_(latency_buckets()),
      e2e_(latency_buckets()),
      gateway_ttft_(latency_buckets()) {}

void Metrics::record_generation(const Generation& g) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++generations_[{g.route, api::outcome_name(g.outcome)}];
  prompt_tokens_ += static_cast<uint64_t>(std::max(0, g.prompt_tokens));
  cached_tokens_ += static_cast<uint64_t>(std::max(0, g.cached_tokens));
  completion_tokens_ += static_cast<uint64_t>(std::max(0, g.completion_tokens));
  resumes_ += static_cast<uint64_t>(std::max(0, g.resumes));
  if (g.engine_ttft_ms >= 0) ttft_.observe(g.engine_ttft_ms / 1000.0);
  if (g.engine_tpot_ms >= 0 && g.completion_tokens > 1) tpot_.observe(g.engine_tpot_ms / 1000.0);
  if (g.queue_ms >= 0) queue_.observe(g.queue_ms / 1000.0);
  if (g.gateway_ttft_ms >= 0) gateway_ttft_.observe(g.gateway_ttft_ms / 1000.0);
  if (g.e2e_ms >= 0) e2e_.observe(g.e2e_ms / 1000.0);
}

void Metrics::record_error(const std::string& code) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++errors_[code];
}

void Metrics::http_request() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++http_requests_;
}

void Metrics::inflight_add(int delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  inflight_ += delta;
}

std::string vllm_metrics(const generation::Stats& stats, const std::string& model_name) {
  const std::string label = "{model_name=\"" + escape_label(model_name) + "\"} ";
  std::string out;
  auto gauge = [&](const char* name, const char* help, const std::string& value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name +
           label + value + "\n";
  };
  gauge("vllm:num_requests_waiting", "Requests waiting for admission (glmserve_engine_queued).",
        std::to_string(stats.queued));
  gauge("vllm:num_requests_running", "Sequences in the running batch (glmserve_engine_running).",
        std::to_string(stats.running));
  const long long total =
      static_cast<long long>(stats.kv_blocks_used) + static_cast<long long>(stats.kv_blocks_free);
  char usage[32];
  std::snprintf(usage, sizeof usage, "%.6g",
                total > 0 ? static_cast<double>(stats.kv_blocks_used) / total : 0.0);
  gauge("vllm:kv_cache_usage_perc", "Fraction of KV cache blocks in use (0..1).", usage);
  gauge("vllm:gpu_cache_usage_perc",
        "Fraction of KV cache blocks in use (0..1); vLLM's older name, on every device.", usage);
  return out;
}

uint64_t Metrics::generations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t n = 0;
  for (const auto& [key, count] : generations_) n += count;
  return n;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  ttft_.render("glmserve_ttft_seconds", "Engine time to first token.", &out);
  tpot_.render("glmserve_tpot_seconds", "Engine mean time per output token after the first.", &out);
  queue_.render("glmserve_queue_seconds", "Time requests waited in the engine queue.", &out);
  e2e_.render("glmserve_e2e_seconds", "Gateway end-to-end latency of generation requests.", &out);
  gateway_ttft_.render("glmserve_gateway_ttft_seconds",
                       "Gateway: request received to first token written to the client.", &out);
  out +=
      "# HELP glmserve_generations_total Finished generation requests by route and outcome.\n"
      "# TYPE glmserve_generations_total counter\n";
  for (const auto& [key, count] : generations_) {
    out += "glmserve_generations_total{route=\"" + escape_label(key.first) + "\",outcome=\"" +
           escape_label(key.second) + "\"} " + std::to_string(count) + "\n";
  }
  out +=
      "# HELP glmserve_errors_total Errors answered to clients, by error code.\n"
      "# TYPE glmserve_errors_total counter\n";
  for (const auto& [code, count] : errors_) {
    out += "glmserve_errors_total{code=\"" + escape_label(code) + "\"} " + std::to_string(count) +
           "\n";
  }
  auto counter = [&out](const char* name, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name +
           " " + std::to_string(v) + "\n";
  };
  counter("glmserve_prompt_tokens_total", "Prompt tokens of finished requests.", prompt_tokens_);
  counter("glmserve_cached_tokens_total", "Prompt tokens served from the KV cache.",
          cached_tokens_);
  counter("glmserve_completion_tokens_total", "Generated tokens.", completion_tokens_);
  counter("glmserve_http_requests_total", "HTTP requests received.", http_requests_);
  counter("glmserve_resumed_total",
          "Answers resumed after the engine died mid-answer (each resume counted).", resumes_);
  out +=
      "# HELP glmserve_inflight_requests Generation requests in progress.\n"
      "# TYPE glmserve_inflight_requests gauge\nglmserve_inflight_requests " +
      std::to_string(inflight_) + "\n";
  return out;
}

}  // namespace glm::gateway
