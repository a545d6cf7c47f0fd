// The router of glm4moe (model/moe.h) against values worked by hand from its definition
// (sigmoid scores, selection by score + bias, weights from the unbiased scores, normalised,
// times the routed scaling factor), and the per-expert slice of a stacked 3-D tensor.
#include "model/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/config.h"

namespace glm::model {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

Config moe_config(int n_expert, int k, bool norm, float scale) {
  Config c;
  c.moe.n_expert = n_expert;
  c.moe.n_expert_used = k;
  c.moe.weights_norm = norm;
  c.moe.weights_scale = scale;
  return c;
}

TEST(MoeRoute, BiasChoosesWeightsComeFromUnbiasedScores) {
  // Scores: e0 0.881, e1 0.5, e2 0.269, e3 0.731. Without bias the top-2 is {e0, e3}; the bias
  // +0.6 on e2 lifts it to 0.869 (above e3's 0.731), so {e0, e2}.
  const float logits[4] = {2.0f, 0.0f, -1.0f, 1.0f};
  const float bias[4] = {0.0f, 0.0f, 0.6f, 0.0f};
  const Config c = moe_config(4, 2, false, 1.0f);
  Route plain = route_token(logits, nullptr, c);
  EXPECT_EQ(plain.experts, (std::vector<int>{0, 3}));
  Route r = route_token(logits, bias, c);
  ASSERT_EQ(r.experts, (std::vector<int>{0, 2}));
  EXPECT_NEAR(r.weights[0], sigmoid(2.0f), 1e-7f);
  EXPECT_NEAR(r.weights[1], sigmoid(-1.0f), 1e-7f);  // not 0.869: the bias only selects
}

TEST(MoeRoute, NormalisedAndScaled) {
  const float logits[3] = {0.5f, -2.0f, 1.5f};
  const Config c = moe_config(3, 2, true, 2.5f);
  Route r = route_token(logits, nullptr, c);
  ASSERT_EQ(r.experts, (std::vector<int>{2, 0}));
  const float s2 = sigmoid(1.5f), s0 = sigmoid(0.5f);
  EXPECT_NEAR(r.weights[0], 2.5f * s2 / (s2 + s0), 1e-6f);
  EXPECT_NEAR(r.weights[1], 2.5f * s0 / (s2 + s0), 1e-6f);
}

TEST(MoeRoute, TopKOfAllExpertsKeepsEveryOne) {
  const float logits[3] = {-1.0f, 0.0f, 1.0f};
  Route r = route_token(logits, nullptr, moe_config(3, 3, false, 1.0f));
  EXPECT_EQ(r.experts, (std::vector<int>{2, 1, 0}));
}

TEST(MoeSlice, ExpertRowsOfAStackedTensor) {
  // 3 experts of 2 rows x 4 cols, f32: element = 100 e + 10 r + c.
  std::vector<float> w(3 * 2 * 4);
  for (int e = 0; e < 3; ++e) {
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 4; ++c) w[(e * 2 + r) * 4 + c] = 100.0f * e + 10.0f * r + c;
    }
  }
  kernels::WeightView stacked;
  stacked.type = DType::kF32;
  stacked.data = w.data();
  stacked.n_rows = 6;
  stacked.n_cols = 4;
  kernels::WeightView e2 = expert_slice(stacked, 2, 2);
  EXPECT_EQ(e2.n_rows, 2);
  EXPECT_EQ(e2.n_cols, 4);
  EXPECT_EQ(static_cast<const float*>(e2.data)[0], 200.0f);
  EXPECT_EQ(static_cast<const float*>(e2.data)[7], 213.0f);
}

}  // namespace
}  // namespace glm::model
