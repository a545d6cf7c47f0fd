#include "sampler/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace glm::sampler {
namespace {

std::vector<float> logits_of_probs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

TEST(Sampler, GreedyIsArgmax) {
  std::vector<float> l = {0.1f, -2.0f, 3.5f, 3.4f, 0.0f};
  Sampler s(SamplingParams{.temperature = 0.0f}, 5);
  EXPECT_EQ(s.sample(l.data()), 2);
  l[4] = 9.0f;
  EXPECT_EQ(s.sample(l.data()), 4);
  auto d = s.distribution(l.data());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 4);
  EXPECT_FLOAT_EQ(d[0].p, 1.0f);
}

TEST(Sampler, ArgmaxFirstOnTies) {
  std::vector<float> l = {1.0f, 7.0f, 7.0f};
  EXPECT_EQ(argmax(l.data(), 3), 1);
}

TEST(Sampler, SoftmaxWithoutFilters) {
  const std::vector<double> p = {0.5, 0.25, 0.125, 0.125};
  auto l = logits_of_probs(p);
  Sampler s(SamplingParams{.temperature = 1.0f, .top_p = 1.0f}, 4);
  auto d = s.distribution(l.data());
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].id, 0);
  EXPECT_EQ(d[1].id, 1);
  EXPECT_EQ(d[2].id, 2);  // tie: lower id first
  for (const Candidate& c : d) EXPECT_NEAR(c.p, p[c.id], 1e-6);
}

TEST(Sampler, TopPKeepsExactlyTheNucleus) {
  // Sorted probs 0.4, 0.3, 0.2, 0.1: top_p 0.65 needs {0.4, 0.3}; 0.69 is reached by
  // the same two; 0.75 needs three.
  const std::vector<double> p = {0.2, 0.4, 0.1, 0.3};
  auto l = logits_of_probs(p);
  for (auto [top_p, want] : std::vector<std::pair<float, size_t>>{
           {0.3f, 1}, {0.65f, 2}, {0.69f, 2}, {0.75f, 3}, {0.95f, 4}}) {
    Sampler s(SamplingParams{.temperature = 1.0f, .top_p = top_p}, 4);
    auto d = s.distribution(l.data());
    ASSERT_EQ(d.size(), want) << "top_p " << top_p;
    double kept_mass = 0;
    for (size_t i = 0; i < want; ++i) kept_mass += p[d[i].id];
    for (const Candidate& c : d) EXPECT_NEAR(c.p, p[c.id] / kept_mass, 1e-6);
  }
}

TEST(Sampler, TopPOverAFlatLargeVocabularyBeyondThePartialSort) {
  // 4000 equal tokens: top_p 0.5 must keep 2000 of them (wider than the partial sort).
  std::vector<float> l(4000, 0.0f);
  Sampler s(SamplingParams{.temperature = 1.0f, .top_p = 0.5f}, 4000);
  auto d = s.distribution(l.data());
  EXPECT_NEAR(static_cast<double>(d.size()), 2000.0, 1.0);
  for (size_t i = 1; i < d.size(); ++i) EXPECT_LT(d[i - 1].id, d[i].id);
}

TEST(Sampler, TopKKeepsTheKBest) {
  std::vector<float> l = {0.0f, 5.0f, 1.0f, 4.0f, 3.0f, 2.0f};
  Sampler s(SamplingParams{.temperature = 1.0f, .top_p = 1.0f, .top_k = 3}, 6);
  auto d = s.distribution(l.data());
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].id, 1);
  EXPECT_EQ(d[1].id, 3);
  EXPECT_EQ(d[2].id, 4);
  const double z = std::exp(5.0) + std::exp(4.0) + std::exp(3.0);
  EXPECT_NEAR(d[0].p, std::exp(5.0) / z, 1e-6);
  // Never draws outside the top k.
  for (int i = 0; i < 500; ++i) {
    const int t = s.sample(l.data());
    EXPECT_TRUE(t == 1 || t == 3 || t == 4) << t;
  }
}

TEST(Sampler, MinPKeepsTokensNearTheBest) {
  // p = 0.5, 0.3, 0.15, 0.05: min_p 0.5 keeps p >= 0.25 (two tokens), min_p 0.2 keeps >= 0.1.
  auto l = logits_of_probs({0.5, 0.3, 0.15, 0.05});
  Sampler half(SamplingParams{.temperature = 1.0f, .top_p = 1.0f, .min_p = 0.5f}, 4);
  auto d = half.distribution(l.data());
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 0);
  EXPECT_EQ(d[1].id, 1);
  EXPECT_NEAR(d[0].p, 0.5 / 0.8, 1e-5);
  Sampler fifth(SamplingParams{.temperature = 1.0f, .top_p = 1.0f, .min_p = 0.2f}, 4);
  EXPECT_EQ(fifth.distribution(l.data()).size(), 3u);
  // min_p 1 keeps only the best; it never empties the distribution.
  Sampler all(SamplingParams{.temperature = 1.0f, .top_p = 1.0f, .min_p = 1.0f}, 4);
  ASSERT_EQ(all.distribution(l.data()).size(), 1u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(half.sample(l.data()) <= 1, true);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const std::vector<double> p = {0.6, 0.3, 0.1};
  auto l = logits_of_probs(p);
  Sampler cold(SamplingParams{.temperature = 0.5f, .top_p = 1.0f}, 3);
  Sampler hot(SamplingParams{.temperature = 2.0f, .top_p = 1.0f}, 3);
  auto dc = cold.distribution(l.data());
  auto dh = hot.distribution(l.data());
  // p_i^(1/T) normalised.
  const double zc = 0.36 + 0.09 + 0.01;
  EXPECT_NEAR(dc[0].p, 0.36 / zc, 1e-5);
  const double zh = std::sqrt(0.6) + std::sqrt(0.3) + std::sqrt(0.1);
  EXPECT_NEAR(dh[0].p, std::sqrt(0.6) / zh, 1e-5);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  std::vector<float> l = {2.0f, 1.5f, -1.0f, -1.2f};
  Sampler s(SamplingParams{.temperature = 0.0f, .repetition_penalty = 2.0f}, 4);
  EXPECT_EQ(s.sample(l.data()), 0);
  s.accept(0);  // 2.0 -> 1.0 < 1.5
  EXPECT_EQ(s.sample(l.data()), 1);
  s.accept(1);  // 1.5 -> 0.75 < 1.0
  s.accept(1);  // counted once
  EXPECT_EQ(s.sample(l.data()), 0);

  Sampler t(SamplingParams{.temperature = 1.0f, .top_p = 1.0f, .repetition_penalty = 2.0f}, 4);
  t.accept(2);
  t.accept(99);  // out of range: ignored
  auto d = t.distribution(l.data());
  std::map<int, double> got;
  for (const Candidate& c : d) got[c.id] = c.p;
  const double z = std::exp(2.0) + std::exp(1.5) + std::exp(-2.0) + std::exp(-1.2);
  EXPECT_NEAR(got[2], std::exp(-2.0) / z, 1e-6);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = 0.05f * i;
  auto draw = [&](uint64_t seed) {
    Sampler s(SamplingParams{.temperature = 1.0f, .top_p = 0.95f, .seed = seed}, 50);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.sample(l.data()));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, DrawFrequenciesFollowTheDistribution) {
  const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
  auto l = logits_of_probs(p);
  Sampler s(SamplingParams{.temperature = 1.0f, .top_p = 0.9f, .seed = 7}, 4);
  // top_p 0.9 keeps {0.5, 0.3, 0.15} (mass 0.95).
  const int n = 20000;
  std::vector<int> count(4, 0);
  for (int i = 0; i < n; ++i) ++count[s.sample(l.data())];
  EXPECT_EQ(count[3], 0);
  for (int id = 0; id < 3; ++id) {
    const double expect = p[id] / 0.95;
    // 5 standard deviations of a binomial proportion: fails only on a real bias.
    const double sd = std::sqrt(expect * (1 - expect) / n);
    EXPECT_NEAR(static_cast<double>(count[id]) / n, expect, 5 * sd) << "token " << id;
  }
}

}  // namespace
}  // namespace glm::sampler
