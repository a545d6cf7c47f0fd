// /metrics behind its own bearer key (GatewayOptions::metrics_key, `--metrics-key-file`):
// Prometheus sends `authorization: credentials`; without a key set /metrics stays open.
#include <gtest/gtest.h>

#include "gateway/http_test_util.h"

namespace glm::gateway::testing {
namespace {

TEST(GatewayMetricsKey, MetricsNeedTheirKeyWhenOneIsSet) {
  GatewayOptions o;
  o.api_key = "api-k";
  o.metrics_key = "metrics-k";
  TestGateway t("metrics-key", o);
  EXPECT_EQ(t.get("/metrics").status, 401);
  auto wrong = t.get("/metrics", {{"Authorization", "Bearer api-k"}});
  EXPECT_EQ(wrong.status, 401) << "the API key is not the metrics key";
  EXPECT_EQ(wrong.header("WWW-Authenticate"), "Bearer");
  auto ok = t.get("/metrics", {{"Authorization", "Bearer metrics-k"}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find("glmserve_"), std::string::npos);
  // The health check stays public; the API keeps its own key.
  EXPECT_EQ(t.get("/health").status, 200);
  EXPECT_EQ(t.get("/v1/models", {{"Authorization", "Bearer metrics-k"}}).status, 401);
}

TEST(GatewayMetricsKey, MetricsOpenWithoutAKeyEvenWithAnApiKey) {
  GatewayOptions o;
  o.api_key = "api-k";
  TestGateway t("metrics-open", o);
  EXPECT_EQ(t.get("/metrics").status, 200);
}

}  // namespace
}  // namespace glm::gateway::testing
