#include "gateway/metrics.h"

#include <gtest/gtest.h>

namespace glm::gateway {
namespace {

TEST(Histogram, CumulativeBucketsSumAndCount) {
  Histogram h({0.01, 0.1, 1});
  h.observe(0.005);
  h.observe(0.05);
  h.observe(0.05);
  h.observe(5);
  std::string out;
  h.render("x_seconds", "help", &out);
  EXPECT_NE(out.find("# TYPE x_seconds histogram"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{le=\"0.01\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{le=\"0.1\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{le=\"1\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{le=\"+Inf\"} 4\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_sum 5.105\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_count 4\n"), std::string::npos);
}

TEST(Metrics, GenerationsTokensAndErrors) {
  Metrics m;
  Metrics::Generation g;
  g.route = "openai";
  g.outcome = api::Outcome::kStop;
  g.prompt_tokens = 10;
  g.completion_tokens = 5;
  g.engine_ttft_ms = 40;
  g.engine_tpot_ms = 100;
  g.queue_ms = 1;
  g.e2e_ms = 600;
  m.record_generation(g);
  g.outcome = api::Outcome::kCancelled;
  g.engine_ttft_ms = -1;  // not measured: not observed
  m.record_generation(g);
  m.record_error("busy");
  const std::string out = m.render();
  EXPECT_NE(out.find("glmserve_ttft_seconds_count 1\n"), std::string::npos);
  EXPECT_NE(out.find("glmserve_ttft_seconds_bucket{le=\"0.05\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("glmserve_e2e_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(out.find("glmserve_generations_total{route=\"openai\",outcome=\"stop\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("glmserve_generations_total{route=\"openai\",outcome=\"cancelled\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("glmserve_completion_tokens_total 10\n"), std::string::npos);
  EXPECT_NE(out.find("glmserve_prompt_tokens_total 20\n"), std::string::npos);
  EXPECT_NE(out.find("glmserve_errors_total{code=\"busy\"} 1\n"), std::string::npos);
  EXPECT_EQ(m.generations(), 2u);
}

TEST(VllmMetrics, GaugesWithVllmNamesTypesAndModelLabel) {
  generation::Stats s;
  s.queued = 3;
  s.running = 2;
  s.kv_blocks_used = 25;
  s.kv_blocks_free = 75;
  const std::string out = vllm_metrics(s, "chat\"glm");
  for (const char* name : {"vllm:num_requests_waiting", "vllm:num_requests_running",
                           "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}) {
    EXPECT_NE(out.find(std::string("# TYPE ") + name + " gauge\n"), std::string::npos) << name;
  }
  EXPECT_NE(out.find("vllm:num_requests_waiting{model_name=\"chat\\\"glm\"} 3\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("vllm:num_requests_running{model_name=\"chat\\\"glm\"} 2\n"),
            std::string::npos);
  // A fraction, not a percentage (the name says perc; vLLM and the endpoint picker use 0..1).
  EXPECT_NE(out.find("vllm:kv_cache_usage_perc{model_name=\"chat\\\"glm\"} 0.25\n"),
            std::string::npos);
  EXPECT_NE(out.find("vllm:gpu_cache_usage_perc{model_name=\"chat\\\"glm\"} 0.25\n"),
            std::string::npos);
  generation::Stats empty;  // no blocks yet: 0, never a division by zero
  EXPECT_NE(vllm_metrics(empty, "m").find("vllm:kv_cache_usage_perc{model_name=\"m\"} 0\n"),
            std::string::npos);
}

}  // namespace
}  // namespace glm::gateway
