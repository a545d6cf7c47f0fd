#include "sampler/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace glm::sampler {
namespace {

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof(ia));
  std::memcpy(&ib, &b, sizeof(ib));
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

TEST(SamplerSoftmax, ExpIsWithinTwoUlpOfTheLibrary) {
  int64_t worst = 0;
  float worst_at = 0;
  // Every 1/4096 from -87 to 0, and a million random points between.
  std::vector<float> ds;
  for (int k = 0; k <= 87 * 4096; ++k) ds.push_back(-static_cast<float>(k) / 4096.0f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> any(-87.0f, 0.0f);
  for (int k = 0; k < 1000000; ++k) ds.push_back(any(rng));
  for (float d : ds) {
    const float want = std::exp(d);
    const float got = exp_nonpositive(d);
    if (want < std::numeric_limits<float>::min()) continue;  // subnormal results: not promised
    const int64_t u = ulps(got, want);
    if (u > worst) worst = u, worst_at = d;
  }
  EXPECT_LE(worst, 2) << "at " << worst_at;
}

TEST(SamplerSoftmax, ExpIsExactAtTheEnds) {
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-0.0f), 1.0f);
  for (float d : {-87.01f, -88.0f, -100.0f, -1e30f, -std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(exp_nonpositive(d), 0.0f) << d;
  }
  EXPECT_GT(exp_nonpositive(-86.9f), 0.0f);
  EXPECT_TRUE(std::isnan(exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

// Every lane of the vector loop, the tail's included, computes what the scalar function does
// of x * scale - max, and the sum is theirs (to the 2e-6 softmax.h promises; the same value
// whether the values are stored or not); gather_near finds exactly the ids whose
// x * scale - max reaches its bound.
TEST(SamplerSoftmax, RowIsTheScalarExpOfEachValueAndItsSum) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 6.0f);
  for (int n : {1, 7, 8, 9, 64, 1001, 65024}) {
    for (float scale : {1.0f, 1.25f, 0.3f}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " scale " << scale);
      std::vector<float> x(n);
      for (float& v : x) v = normal(rng);
      const int masked = n > 1 ? n / 2 : -1;  // a masked token (not the row's only one)
      if (masked >= 0) x[masked] = -std::numeric_limits<float>::infinity();
      float max = x[0] * scale;
      for (float v : x) max = std::max(max, v * scale);
      std::vector<float> e(n, -1.0f);
      const double sum = exp_shifted(x.data(), n, scale, max, e.data());
      double want_sum = 0;
      std::vector<int32_t> want_near;
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(e[i], exp_nonpositive(x[i] * scale - max)) << i;
        want_sum += e[i];
        if (x[i] * scale - max >= -7.0f) want_near.push_back(i);
      }
      if (masked >= 0) {
        EXPECT_EQ(e[masked], 0.0f);
      }
      EXPECT_NEAR(sum, want_sum, 2e-6 * want_sum);  // float within chunks of 256 (softmax.h)
      EXPECT_EQ(exp_shifted(x.data(), n, scale, max, nullptr), sum);
      EXPECT_EQ(max_value(x.data(), n) * scale, max);
      std::vector<int32_t> near(n);
      ASSERT_EQ(gather_near(x.data(), n, scale, max, -7.0f, near.data(), n),
                static_cast<int>(want_near.size()));
      near.resize(want_near.size());
      EXPECT_EQ(near, want_near);
      if (!want_near.empty()) {
        EXPECT_EQ(gather_near(x.data(), n, scale, max, -7.0f, near.data(),
                              static_cast<int>(want_near.size()) - 1),
                  -1);
      }
      // In place.
      std::vector<float> y = x;
      EXPECT_EQ(exp_shifted(y.data(), n, scale, max, y.data()), sum);
      EXPECT_EQ(y, e);
    }
  }
}

}  // namespace
}  // namespace glm::sampler
