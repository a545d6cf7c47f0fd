#include "model/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace glm::model::ops {
namespace {

TEST(Ops, RmsNormMatchesDefinition) {
  std::vector<float> x = {1, -2, 3, 0.5f, -0.25f}, w = {1, 2, 0.5f, -1, 3}, y(5);
  rms_norm(x.data(), w.data(), 1e-5f, y.data(), 5);
  double ms = 0;
  for (float v : x) ms += v * v;
  ms /= 5;
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(y[i], x[i] / std::sqrt(ms + 1e-5) * w[i], 1e-6);
  rms_norm(x.data(), w.data(), 1e-5f, x.data(), 5);  // in place
  EXPECT_EQ(x, y);
}

TEST(Ops, LayerNormMatchesDefinition) {
  std::vector<float> x = {1, -2, 3, 0.5f}, w = {1, 2, 0.5f, -1}, b = {0.1f, 0, -0.1f, 1}, y(4);
  layer_norm(x.data(), w.data(), b.data(), 1e-5f, y.data(), 4);
  const double mean = 2.5 / 4;
  double var = 0;
  for (float v : x) var += (v - mean) * (v - mean);
  var /= 4;
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(y[i], (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i], 1e-6);
  }
}

TEST(Ops, RopeInterleavedRotatesAdjacentPairsOfTheFirstDims) {
  // 2 heads of 6, rotary over the first 4 dims: pairs (0,1), (2,3); dims 4, 5 untouched.
  const int n_rot = 4;
  std::vector<float> cs(2), sn(2);
  rope_table(3, n_rot, 100.0f, cs.data(), sn.data());
  EXPECT_NEAR(cs[0], std::cos(3.0), 1e-7);
  EXPECT_NEAR(sn[1], std::sin(3.0 / 10.0), 1e-7);  // 100^(-2/4) = 0.1
  std::vector<float> row = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::vector<float> orig = row;
  rope_interleaved(row.data(), 2, 6, n_rot, cs.data(), sn.data());
  for (int h = 0; h < 2; ++h) {
    const float* o = orig.data() + 6 * h;
    const float* r = row.data() + 6 * h;
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(r[2 * i], o[2 * i] * cs[i] - o[2 * i + 1] * sn[i], 1e-5);
      EXPECT_NEAR(r[2 * i + 1], o[2 * i] * sn[i] + o[2 * i + 1] * cs[i], 1e-5);
    }
    EXPECT_EQ(r[4], o[4]);
    EXPECT_EQ(r[5], o[5]);
  }
  // Position 0 is the identity.
  rope_table(0, n_rot, 100.0f, cs.data(), sn.data());
  row = orig;
  rope_interleaved(row.data(), 2, 6, n_rot, cs.data(), sn.data());
  EXPECT_EQ(row, orig);
}

// Linear scaling (ChatGLM2-6B-32K): position p with factor f turns as position p / f does.
TEST(Ops, RopeLinearScalingDividesThePosition) {
  std::vector<float> c1(4), s1(4), c2(4), s2(4);
  rope_table(32, 8, 10000.0f, c1.data(), s1.data(), 1.0f / 16.0f);
  rope_table(2, 8, 10000.0f, c2.data(), s2.data());
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(c1[i], c2[i]);
    EXPECT_FLOAT_EQ(s1[i], s2[i]);
  }
  rope_table(32, 8, 10000.0f, c2.data(), s2.data());
  EXPECT_NE(c1[0], c2[0]);
}

TEST(Ops, RopeNeoxRotatesHalves) {
  std::vector<float> cs(2), sn(2);
  rope_table(2, 4, 10000.0f, cs.data(), sn.data());
  std::vector<float> row = {1, 2, 3, 4};
  rope_neox(row.data(), 1, 4, 4, cs.data(), sn.data());
  EXPECT_NEAR(row[0], 1 * cs[0] - 3 * sn[0], 1e-6);
  EXPECT_NEAR(row[2], 1 * sn[0] + 3 * cs[0], 1e-6);
  EXPECT_NEAR(row[1], 2 * cs[1] - 4 * sn[1], 1e-6);
}

TEST(Ops, SwigluAndGelu) {
  std::vector<float> g = {-2, 0, 1.5f}, u = {3, 4, -1}, y(3);
  swiglu(g.data(), u.data(), y.data(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(y[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-6);
  std::vector<float> x = {-1, 0, 2};
  gelu_tanh(x.data(), 3);
  EXPECT_NEAR(x[0], -0.158808f, 1e-5);  // 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_NEAR(x[2], 1.954598f, 1e-5);
}

TEST(Ops, StoreRowF16RoundsToNearest) {
  std::vector<float> src = {1.0f, 0.333333f, -65504.0f};
  std::vector<uint16_t> dst(3);
  store_row(src.data(), DType::kF16, dst.data(), 3);
  EXPECT_EQ(dst[0], 0x3c00);
  EXPECT_EQ(dst[1], 0x3555);
  EXPECT_EQ(dst[2], 0xfbff);
}

}  // namespace
}  // namespace glm::model::ops
