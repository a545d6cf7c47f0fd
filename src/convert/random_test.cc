#include "convert/random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace glm::convert {
namespace {

TEST(Random, SplitMix64MatchesTheReferenceSequence) {
  // SplitMix64 seeded with 1234567: the first outputs of the reference C implementation
  // (Vigna, splitmix64.c), computed independently.
  EXPECT_EQ(stream_bits(1234567, 0), 6457827717110365317ull);
  EXPECT_EQ(stream_bits(1234567, 1), 3203168211198807973ull);
  EXPECT_EQ(stream_bits(1234567, 2), 9817491932198370423ull);
}

TEST(Random, Fnv1aMatchesKnownValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(Random, AnyRangeGivesTheSameValues) {
  const uint64_t key = stream_key(7, "blk.0.attn_qkv.weight");
  std::vector<float> whole(1001);
  fill_normal(key, 0, whole.size(), 0.0f, 1.0f, whole.data());
  for (size_t split : {1u, 2u, 333u, 1000u}) {
    std::vector<float> parts(whole.size());
    fill_normal(key, 0, split, 0.0f, 1.0f, parts.data());
    fill_normal(key, split, whole.size() - split, 0.0f, 1.0f, parts.data() + split);
    EXPECT_EQ(parts, whole) << "split at " << split;
  }
}

TEST(Random, StreamsDifferBySeedAndName) {
  std::vector<float> a(64), b(64), c(64);
  fill_normal(stream_key(1, "x"), 0, 64, 0.0f, 1.0f, a.data());
  fill_normal(stream_key(2, "x"), 0, 64, 0.0f, 1.0f, b.data());
  fill_normal(stream_key(1, "y"), 0, 64, 0.0f, 1.0f, c.data());
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

TEST(Random, NormalsHaveTheRequestedMoments) {
  const size_t n = 200000;
  std::vector<float> x(n);
  fill_normal(stream_key(42, "t"), 0, n, 1.0f, 0.5f, x.data());
  double sum = 0, sq = 0, fourth = 0;
  for (float v : x) sum += v;
  const double mean = sum / n;
  for (float v : x) {
    sq += (v - mean) * (v - mean);
    fourth += std::pow((v - mean) / 0.5, 4);
  }
  const double sd = std::sqrt(sq / n);
  // Sampling errors: mean sd/sqrt(n) = 0.0011; sd ~ sd/sqrt(2n) = 0.0008. Bounds at ~5 sigma.
  EXPECT_NEAR(mean, 1.0, 0.006);
  EXPECT_NEAR(sd, 0.5, 0.004);
  EXPECT_NEAR(fourth / n, 3.0, 0.1);  // kurtosis of a normal (a uniform would give 1.8)
}

}  // namespace
}  // namespace glm::convert
