#include "sampler/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "sampler/softmax.h"

namespace glm::sampler {
namespace {

std::vector<float> logits_of_probs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// Log-probabilities over a real vocabulary's size: the chosen token's and the 20 best
// alternatives' (by logit, ties by lower id: logits on a grid of 1/8 tie often) against a
// double-precision log-softmax and a full sort of the ids, with masked tokens among them.
TEST(Sampler, LogprobsOfALargeVocabularyAreTheFullSortsWithinTheSumsRounding) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  const int n_vocab = 65024;
  std::vector<float> l(n_vocab);
  for (float& f : l) f = std::round(normal(rng) * 8.0f) / 8.0f;
  for (int i = 0; i < n_vocab; i += 13) l[i] = -INFINITY;  // a grammar's mask
  for (float t : {1.0f, 0.7f}) {
    SCOPED_TRACE(::testing::Message() << "temperature " << t);
    std::vector<double> x(n_vocab);
    const float inv_t = 1.0f / t;
    for (int i = 0; i < n_vocab; ++i) x[i] = t == 1.0f ? l[i] : l[i] * inv_t;
    const double m = *std::max_element(x.begin(), x.end());
    double z = 0;
    for (double v : x) z += std::exp(v - m);
    const double log_z = m + std::log(z);
    std::vector<int32_t> order(n_vocab);
    for (int i = 0; i < n_vocab; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
    Sampler s(SamplingParams{.temperature = t, .top_logprobs = 20, .seed = 4}, n_vocab);
    for (int k = 0; k < 5; ++k) {
      generation::GeneratedLogprobs lp;
      const int32_t id = s.sample(l.data(), &lp);
      EXPECT_EQ(lp.chosen.id, id);
      EXPECT_NE(id % 13, 0);
      EXPECT_NEAR(lp.chosen.logprob, x[id] - log_z, 1e-5);
      ASSERT_EQ(lp.top.size(), 20u);
      for (int r = 0; r < 20; ++r) {
        EXPECT_EQ(lp.top[r].id, order[r]) << r;
        EXPECT_NEAR(lp.top[r].logprob, x[order[r]] - log_z, 1e-5) << r;
      }
    }
  }
}

// copy_history_from (the draft model's sampler, reset to the target's each step): afterwards the
// two samplers prepare logits alike, whatever each accepted before.
TEST(Sampler, CopiedHistoryGivesTheSameDistribution) {
  const SamplingParams p{.temperature = 1.0f,
                         .top_p = 1.0f,
                         .repetition_penalty = 1.5f,
                         .presence_penalty = 0.3f,
                         .frequency_penalty = 0.4f};
  const std::vector<float> l = {0.5f, 1.0f, -0.5f, 2.0f, 0.0f, 1.5f};
  auto probs = [&](const Sampler& s) {
    std::vector<float> out(l.size(), 0.0f);
    for (const Candidate& c : s.distribution(l.data())) out[c.id] = c.p;
    return out;
  };
  Sampler from(p, 6);
  from.accept_prompt(0);
  for (int32_t t : {3, 3, 5}) from.accept(t);
  Sampler to(from);
  for (int32_t t : {1, 1, 2, 4}) to.accept(t);
  ASSERT_NE(probs(to), probs(from));  // diverged, so the copy below has something to undo
  to.copy_history_from(from);
  EXPECT_EQ(probs(to), probs(from));
  from.accept(2);  // and they go on alike
  to.accept(2);
  EXPECT_EQ(probs(to), probs(from));
}

// restart (the scheduler gives a finished sequence's sampler to the next one): afterwards it
// draws exactly what a new sampler of the new parameters draws, whatever the old one's
// parameters, penalties and history were; with or without penalties on either side.
TEST(Sampler, RestartedDrawsWhatANewSamplerDraws) {
  const int n_vocab = 300;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<std::vector<float>> rows(24, std::vector<float>(n_vocab));
  for (auto& r : rows) {
    for (float& f : r) f = normal(rng);
  }
  const SamplingParams plain{.temperature = 0.9f, .top_p = 0.95f, .seed = 11};
  const SamplingParams penalised{.temperature = 1.1f,
                                 .top_k = 50,
                                 .repetition_penalty = 1.3f,
                                 .presence_penalty = 0.5f,
                                 .frequency_penalty = 0.25f,
                                 .seed = 12};
  auto run = [&](Sampler& s) {
    std::vector<int32_t> out;
    for (int32_t t : {3, 7, 7, 42}) s.accept_prompt(t);
    for (const auto& r : rows) {
      out.push_back(s.sample(r.data()));
      s.accept(out.back());
    }
    return out;
  };
  for (const SamplingParams& before : {plain, penalised}) {
    for (const SamplingParams& after : {plain, penalised}) {
      SCOPED_TRACE(::testing::Message() << "seeds " << before.seed << " -> " << after.seed);
      Sampler fresh(after, n_vocab);
      const std::vector<int32_t> want = run(fresh);
      Sampler reused(before, n_vocab);
      run(reused);  // a whole sequence's history and buffers
      reused.restart(after);
      EXPECT_EQ(run(reused), want);
    }
  }
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

// A vocabulary's row (past the eight running maxima's unrolled part, and a tail after it): the
// first place of the largest wherever the ties fall, every position in turn; NaNs passed over;
// a masked row (-inf but one); a row led by NaN (then nothing compares greater: 0, as before).
TEST(Sampler, ArgmaxOfALongRowIsTheFirstOfItsLargest) {
  const int n = 1003;
  std::vector<float> l(n);
  for (int i = 0; i < n; ++i) l[i] = static_cast<float>((i * 37) % 101) * 0.01f;
  for (int at = 0; at < n; ++at) {
    std::vector<float> r = l;
    r[at] = 5.0f;
    r[(at + 517) % n] = 5.0f;
    ASSERT_EQ(argmax(r.data(), n), std::min(at, (at + 517) % n)) << at;
  }
  std::vector<float> r = l;
  r[10] = std::numeric_limits<float>::quiet_NaN();
  r[900] = 2.0f;
  EXPECT_EQ(argmax(r.data(), n), 900);
  std::vector<float> masked(n, -std::numeric_limits<float>::infinity());
  masked[1001] = -3.0f;
  EXPECT_EQ(argmax(masked.data(), n), 1001);
  r[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax(r.data(), n), 0);
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

// Pearson's statistic of counts against probabilities (cells of probability 0 must be empty).
double chi_square_stat(const std::vector<int>& count, const std::vector<double>& p, int n) {
  double x = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      x += count[i] > 0 ? 1e9 : 0;
      continue;
    }
    const double e = n * p[i];
    x += (count[i] - e) * (count[i] - e) / e;
  }
  return x;
}

// Speculative sampling with a deterministic draft keeps the distribution whatever the draft
// (the drafted token's p of 0, small or large); a wrong rule (accepting the draft with
// min(1, 2 p), then the residual) is caught by the same test.
TEST(Sampler, DraftedSamplingKeepsTheDistributionAndAWrongRuleIsCaught) {
  const std::vector<double> p = {0.4, 0.3, 0.15, 0.1, 0.05};
  auto l = logits_of_probs(p);
  const SamplingParams params{.temperature = 1.0f, .top_p = 0.9f, .seed = 11};
  Sampler ref(params, 5);
  std::vector<double> want(5, 0.0);  // top_p 0.9 keeps the first four (mass 0.95)
  for (const Candidate& c : ref.distribution(l.data())) want[c.id] = c.p;
  // 3 degrees of freedom: 16.27 is the 0.001 quantile.
  constexpr double kCritical = 16.27;
  const int n = 40000;
  for (int32_t draft : {-1, 0, 2, 3, 4}) {
    Sampler s(params, 5);
    std::vector<int> count(5, 0);
    for (int i = 0; i < n; ++i) ++count[s.sample_with_draft(l.data(), draft)];
    EXPECT_LT(chi_square_stat(count, want, n), kCritical) << "draft " << draft;
  }
  // The wrong rule, on the same draws.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<int> count(5, 0);
  const int32_t draft = 3;
  for (int i = 0; i < n; ++i) {
    if (uniform(rng) < std::min(1.0, 2 * want[draft])) {
      ++count[draft];
      continue;
    }
    double u = uniform(rng) * (1 - want[draft]), acc = 0;
    int32_t chosen = 0;
    for (int32_t id = 0; id < 5; ++id) {
      if (id == draft) continue;
      acc += want[id];
      chosen = id;
      if (u < acc) break;
    }
    ++count[chosen];
  }
  EXPECT_GT(chi_square_stat(count, want, n), kCritical);
}

// Speculative sampling with a draft model's distribution q that differs from p (and puts mass
// where p has none: token 4, outside top_p) keeps p, for several q; two wrong rules are caught
// by the same test: accepting the draft always (that samples q) and resampling a rejection
// from p instead of the residual.
TEST(Sampler, DraftDistributionSamplingKeepsTheDistributionAndWrongRulesAreCaught) {
  const std::vector<double> p = {0.4, 0.3, 0.15, 0.1, 0.05};
  auto l = logits_of_probs(p);
  const SamplingParams params{.temperature = 1.0f, .top_p = 0.9f, .seed = 23};
  Sampler ref(params, 5);
  std::vector<double> want(5, 0.0);  // top_p 0.9 keeps the first four (mass 0.95)
  const std::vector<Candidate> p_cand = ref.distribution(l.data());
  for (const Candidate& c : p_cand) want[c.id] = c.p;
  constexpr double kCritical = 16.27;  // 3 degrees of freedom, the 0.001 quantile
  const int n = 40000;
  const std::vector<std::vector<Candidate>> qs = {
      {{3, 0.5f}, {4, 0.2f}, {1, 0.2f}, {0, 0.1f}},
      {{0, 1.0f}},
      {{2, 0.25f}, {1, 0.25f}, {0, 0.25f}, {3, 0.25f}},
      p_cand,
  };
  for (size_t qi = 0; qi < qs.size(); ++qi) {
    Sampler s(params, 5);
    std::mt19937_64 draft_rng(100 + qi);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    std::vector<int> count(5, 0);
    int accepted = 0;
    for (int i = 0; i < n; ++i) {
      const int32_t x = Sampler::draw(qs[qi], uniform(draft_rng));
      const int32_t t = s.sample_with_draft_distribution(l.data(), x, qs[qi]);
      ++count[t];
      accepted += t == x;
    }
    EXPECT_LT(chi_square_stat(count, want, n), kCritical) << "q " << qi;
    if (qi == qs.size() - 1) {
      EXPECT_EQ(accepted, n);  // q = p: every draft is accepted
    }
  }
  // Wrong rules on the first q, with the same draws.
  const std::vector<Candidate>& q = qs[0];
  std::vector<double> qd(5, 0.0);
  for (const Candidate& c : q) qd[c.id] = c.p;
  for (int rule = 0; rule < 2; ++rule) {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    std::vector<int> count(5, 0);
    for (int i = 0; i < n; ++i) {
      const int32_t x = Sampler::draw(q, uniform(rng));
      const double u = uniform(rng);
      if (rule == 0 || u < std::min(1.0, want[x] / qd[x])) {
        ++count[x];  // rule 0: accept always
        continue;
      }
      ++count[Sampler::draw(p_cand, uniform(rng))];  // rule 1: rejection resampled from p
    }
    EXPECT_GT(chi_square_stat(count, want, n), kCritical) << "wrong rule " << rule;
  }
}

TEST(Sampler, GreedyWithADraftDistributionIsTheArgmax) {
  std::vector<float> l = {0.1f, 2.0f, 1.9f};
  Sampler s(SamplingParams{.temperature = 0.0f}, 3);
  EXPECT_EQ(s.sample_with_draft_distribution(l.data(), 2, {{2, 1.0f}}), 1);
}

TEST(Sampler, GreedyWithADraftIsTheArgmax) {
  std::vector<float> l = {0.1f, 2.0f, 1.9f};
  Sampler s(SamplingParams{.temperature = 0.0f}, 3);
  EXPECT_EQ(s.sample_with_draft(l.data(), 2), 1);
  EXPECT_EQ(s.sample_with_draft(l.data(), 1), 1);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountGeneratedTokensOnly) {
  // Logits 3, 2.5, 0: token 0 leads until its penalty exceeds 0.5.
  std::vector<float> l = {3.0f, 2.5f, 0.0f};
  Sampler s(
      SamplingParams{.temperature = 0.0f, .presence_penalty = 0.2f, .frequency_penalty = 0.2f}, 3);
  s.accept_prompt(0);  // prompt tokens never count
  s.accept_prompt(0);
  EXPECT_EQ(s.sample(l.data()), 0);
  s.accept(0);  // 3 - 0.2 - 0.2 = 2.6 > 2.5
  EXPECT_EQ(s.sample(l.data()), 0);
  s.accept(0);  // 3 - 0.2 - 0.4 = 2.4 < 2.5
  EXPECT_EQ(s.sample(l.data()), 1);

  // The distribution after the penalties: softmax of (3 - 0.2 - 2 * 0.2, 2.5, 0).
  Sampler t(
      SamplingParams{
          .temperature = 1.0f, .top_p = 1.0f, .presence_penalty = 0.2f, .frequency_penalty = 0.2f},
      3);
  t.accept(0);
  t.accept(0);
  t.accept(7);  // out of range: ignored
  std::map<int, double> got;
  for (const Candidate& c : t.distribution(l.data())) got[c.id] = c.p;
  const double z = std::exp(2.4) + std::exp(2.5) + std::exp(0.0);
  EXPECT_NEAR(got[0], std::exp(2.4) / z, 1e-6);
  EXPECT_NEAR(got[1], std::exp(2.5) / z, 1e-6);

  // A negative presence penalty encourages repeats.
  Sampler u(SamplingParams{.temperature = 0.0f, .presence_penalty = -1.0f}, 3);
  u.accept(1);
  EXPECT_EQ(u.sample(l.data()), 1);  // 2.5 + 1 > 3
}

TEST(Sampler, LogitBiasIsAddedBeforeEverythingElse) {
  std::vector<float> l = {1.0f, 0.5f, 0.0f};
  Sampler ban(SamplingParams{.temperature = 0.0f, .logit_bias = {{0, -100.0f}}}, 3);
  EXPECT_EQ(ban.sample(l.data()), 1);
  Sampler force(SamplingParams{.temperature = 1.0f, .top_p = 1.0f, .logit_bias = {{2, 100.0f}}}, 3);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(force.sample(l.data()), 2);
  // With a temperature the bias is scaled like the logit it is added to: softmax((l + b) / T).
  Sampler t(SamplingParams{.temperature = 2.0f, .top_p = 1.0f, .logit_bias = {{1, 1.5f}}}, 3);
  std::map<int, double> got;
  for (const Candidate& c : t.distribution(l.data())) got[c.id] = c.p;
  const double z = std::exp(0.5) + std::exp(1.0) + std::exp(0.0);
  EXPECT_NEAR(got[1], std::exp(1.0) / z, 1e-6);
}

TEST(Sampler, LogprobsAreTheLogSoftmaxOfTheBiasedTemperedLogits) {
  std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  auto log_softmax = [](std::vector<double> x) {
    double m = *std::max_element(x.begin(), x.end());
    double z = 0;
    for (double v : x) z += std::exp(v - m);
    for (double& v : x) v = v - m - std::log(z);
    return x;
  };
  // Greedy: the chosen token is the best, and the first of the alternatives (ties: lower id).
  {
    Sampler s(SamplingParams{.temperature = 0.0f, .top_logprobs = 3}, 5);
    generation::GeneratedLogprobs lp;
    EXPECT_EQ(s.sample(l.data(), &lp), 1);
    const auto want = log_softmax({0.5, 2.0, -1.0, 2.0, 1.0});
    EXPECT_EQ(lp.chosen.id, 1);
    EXPECT_NEAR(lp.chosen.logprob, want[1], 1e-6);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].id, 1);
    EXPECT_EQ(lp.top[1].id, 3);
    EXPECT_EQ(lp.top[2].id, 4);
    for (const auto& t : lp.top) EXPECT_NEAR(t.logprob, want[t.id], 1e-6);
  }
  // Temperature 2 and a bias: the log-softmax of (l + bias) / 2, the chosen token included
  // whatever top-p kept.
  {
    Sampler s(SamplingParams{.temperature = 2.0f,
                             .top_p = 0.5f,
                             .top_logprobs = 0,
                             .seed = 3,
                             .logit_bias = {{2, 4.0f}}},
              5);
    const auto want = log_softmax({0.25, 1.0, 1.5, 1.0, 0.5});
    for (int i = 0; i < 10; ++i) {
      generation::GeneratedLogprobs lp;
      const int32_t id = s.sample(l.data(), &lp);
      EXPECT_EQ(lp.chosen.id, id);
      EXPECT_NEAR(lp.chosen.logprob, want[id], 1e-6);
      EXPECT_TRUE(lp.top.empty());
    }
  }
  // Masked tokens (a grammar's -inf) are never among the alternatives.
  {
    std::vector<float> m = {-INFINITY, 1.0f, -INFINITY, 0.0f, -INFINITY};
    Sampler s(SamplingParams{.temperature = 0.0f, .top_logprobs = 4}, 5);
    generation::GeneratedLogprobs lp;
    EXPECT_EQ(s.sample(m.data(), &lp), 1);
    ASSERT_EQ(lp.top.size(), 2u);
    EXPECT_NEAR(std::exp(lp.top[0].logprob) + std::exp(lp.top[1].logprob), 1.0, 1e-6);
  }
  // Not asked for: nothing is filled in, and the draws are the same as without the argument.
  {
    Sampler a(SamplingParams{.temperature = 1.0f, .seed = 9}, 5);
    Sampler b(SamplingParams{.temperature = 1.0f, .top_logprobs = 2, .seed = 9}, 5);
    for (int i = 0; i < 20; ++i) {
      generation::GeneratedLogprobs lp;
      EXPECT_EQ(a.sample(l.data()), b.sample(l.data(), &lp));
    }
  }
}

}  // namespace
}  // namespace glm::sampler

namespace glm::sampler {
namespace {

// The distribution by a full sort of the vocabulary (what candidates() did before it sorted
// only what top-p can keep): softmax (the exponentials and their sum by softmax.h's
// exp_shifted, whose lanes SamplerSoftmax checks against std::exp; each times the sum's
// inverse, as candidates() computes it), top-k, min-p, the smallest sorted prefix whose mass
// reaches top_p, no token of probability 0, renormalised (times the inverse of the kept
// mass). Temperature > 0.
std::vector<Candidate> full_sort_distribution(const std::vector<float>& logits,
                                              const SamplingParams& p) {
  const int n = static_cast<int>(logits.size());
  std::vector<float> x(logits);
  if (p.temperature != 1.0f) {
    const float inv_t = 1.0f / p.temperature;
    for (float& f : x) f *= inv_t;
  }
  const float max_x = *std::max_element(x.begin(), x.end());
  std::vector<float> e(n);
  const double sum = exp_shifted(x.data(), n, 1.0f, max_x, e.data());
  const double inv_sum = 1.0 / sum;
  std::vector<Candidate> cand(n);
  for (int i = 0; i < n; ++i) cand[i] = Candidate{i, static_cast<float>(e[i] * inv_sum)};
  std::sort(cand.begin(), cand.end(), [](const Candidate& a, const Candidate& b) {
    return a.p > b.p || (a.p == b.p && a.id < b.id);
  });
  size_t keep = cand.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) keep = p.top_k;
  if (p.min_p > 0.0f) {
    const float threshold = static_cast<float>(p.min_p / sum);
    size_t k = 0;
    while (k < cand.size() && cand[k].p >= threshold) ++k;
    keep = std::min(keep, std::max<size_t>(k, 1));
  }
  if (p.top_p > 0.0f && p.top_p < 1.0f) {
    double mass = 0;
    size_t k = 0;
    for (; k < keep; ++k) {
      mass += cand[k].p;
      if (mass >= p.top_p) break;
    }
    keep = std::min(keep, k + 1);
  }
  while (keep > 1 && cand[keep - 1].p == 0.0f) --keep;
  cand.resize(keep);
  double kept = 0;
  for (const Candidate& c : cand) kept += c.p;
  const double inv_kept = 1.0 / kept;
  for (Candidate& c : cand) c.p = static_cast<float>(c.p * inv_kept);
  return cand;
}

// The same ids in the same order with the same float probabilities.
void expect_same_candidates(const std::vector<Candidate>& got, const std::vector<Candidate>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].id, want[i].id) << i;
    ASSERT_EQ(got[i].p, want[i].p) << i;
  }
}

// Top-p without sorting the whole vocabulary gives exactly the full sort's distribution (same
// ids in the same order, the same float probabilities) and, with the same seed, the same tokens
// as drawing from the full sort's distribution with the sampler's RNG: over flat logits (the
// nucleus is most of a 65024-token vocabulary), peaked ones, and ones with many exact ties.
TEST(Sampler, TopPWithoutAFullSortEqualsTheFullSort) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int n_vocab = 65024;
  int n_checked = 0, n_wide = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int kind = trial % 3;  // 0 flat, 1 peaked, 2 ties (logits on a grid of 1/4)
    std::vector<float> logits(n_vocab);
    for (float& f : logits) {
      const float z = normal(rng);
      f = kind == 0 ? 0.05f * z : kind == 1 ? 4.0f * z : std::round(z * 4.0f) / 4.0f;
    }
    for (float top_p : {0.5f, 0.9f, 0.95f, 0.999f}) {
      SamplingParams p;
      p.temperature = trial % 2 == 0 ? 1.0f : 0.7f;
      p.top_p = top_p;
      p.top_k = trial % 4 == 3 ? 3000 : trial % 8 == 1 ? 4 : 0;
      p.min_p = trial % 6 == 5 ? 0.001f : trial % 6 == 4 ? 0.05f : 0.0f;
      p.seed = 1000 + trial;
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " top_p " << top_p);
      const std::vector<Candidate> want = full_sort_distribution(logits, p);
      Sampler s(p, n_vocab);
      const std::vector<Candidate> got = s.distribution(logits.data());
      ASSERT_NO_FATAL_FAILURE(expect_same_candidates(got, want));
      n_wide += want.size() > 256;
      std::mt19937_64 draws(p.seed);
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      for (int k = 0; k < 10; ++k) {
        ASSERT_EQ(s.sample(logits.data()), Sampler::draw(want, uniform(draws))) << k;
        ++n_checked;
      }
    }
  }
  EXPECT_GT(n_wide, 20);  // the radix path ran (nuclei beyond the 256 of the partial sort)
  EXPECT_EQ(n_checked, 24 * 4 * 10);
}

// With no top-k, top-p or min-p, every token of nonzero probability is a candidate, in id
// order (what the draw walks), and nothing is sorted: the same probabilities as the full
// reference's, the same seeded tokens as drawing from them in id order, and a masked token
// (-inf) is never a candidate.
// With nothing filtering, sample() draws from the exponentials by blocks, not from a candidate
// list: each draw is the token a double-precision walk of the same exponentials picks with the
// same uniform (the sampler's RNG replayed), over a real vocabulary's size with masked tokens,
// and with a draft put first (its own chance, then the rest in id order).
TEST(Sampler, UnfilteredDrawsAreTheCumulativeWalksToken) {
  const int n_vocab = 65024;
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> l(n_vocab);
  for (float& f : l) f = normal(rng);
  for (int i = 5; i < n_vocab; i += 17) l[i] = -INFINITY;  // a grammar's mask
  l[40000] = 9.0f;                                         // a likely draft
  l[40001] = 9.0f;  // and a likely token after it in its block of 64 (the walk passes the draft)
  const float t = 0.8f;
  const float scale = 1.0f / t;
  const float max = max_value(l.data(), n_vocab) * scale;
  std::vector<float> e(n_vocab);
  exp_shifted(l.data(), n_vocab, scale, max, e.data());
  std::vector<double> cum(n_vocab);
  double acc = 0;
  for (int i = 0; i < n_vocab; ++i) cum[i] = acc += e[i];
  auto walk = [&](double u, int32_t first) {
    double target = u * cum.back();
    if (first >= 0) {
      if (target < e[first]) return first;
      target -= e[first];
    }
    double a = 0;
    for (int32_t i = 0; i < n_vocab; ++i) {
      if (i == first) continue;
      a += e[i];
      if (target < a) return i;
    }
    return n_vocab - 1;
  };
  for (int32_t draft : {-1, 40000, 123}) {
    SCOPED_TRACE(::testing::Message() << "draft " << draft);
    const uint64_t seed = 77 + draft;
    Sampler s(SamplingParams{.temperature = t, .top_p = 1.0f, .seed = seed}, n_vocab);
    std::mt19937_64 replay(seed);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    int first_drawn = 0;
    for (int k = 0; k < 300; ++k) {
      const int32_t got = s.sample_with_draft(l.data(), draft);
      const int32_t want = walk(uniform(replay), draft);
      ASSERT_EQ(got, want) << k;
      EXPECT_NE(l[got], -INFINITY);
      first_drawn += got == draft;
    }
    // A draft wins the draws its own probability says (within 5 standard deviations).
    if (draft >= 0) {
      const double p = e[draft] / cum.back();
      EXPECT_NEAR(first_drawn, 300 * p, 5 * std::sqrt(300 * p * (1 - p)) + 1) << p;
    }
  }
}

TEST(Sampler, NothingFilteredKeepsEveryPossibleTokenInIdOrder) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int n_vocab = 65024;
  std::vector<float> logits(n_vocab);
  for (float& f : logits) f = normal(rng);
  for (int i = 0; i < n_vocab; i += 97) logits[i] = -std::numeric_limits<float>::infinity();
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 1.0f;
  p.seed = 77;
  std::vector<Candidate> want = full_sort_distribution(logits, p);
  std::sort(want.begin(), want.end(),
            [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  ASSERT_EQ(want.size(), static_cast<size_t>(n_vocab - (n_vocab + 96) / 97));
  Sampler s(p, n_vocab);
  const std::vector<Candidate> got = s.distribution(logits.data());
  ASSERT_NO_FATAL_FAILURE(expect_same_candidates(got, want));
  std::mt19937_64 draws(p.seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int k = 0; k < 200; ++k) {
    const int32_t t = s.sample(logits.data());
    ASSERT_NE(t % 97, 0) << k;
    ASSERT_EQ(t, Sampler::draw(want, uniform(draws))) << k;
  }
}

}  // namespace
}  // namespace glm::sampler
