// The host's cost of choosing a token, per decode step and sequence, at the real vocabularies'
// sizes (ChatGLM2/3 65024, GLM-4 151552): greedy, ChatGLM's defaults (temperature 0.8, top-p
// 0.8) and temperature 0.8 without top-p, over logits shaped like a model's (a few tokens far
// ahead of a normal spread). On a GPU this is time the device waits for.
//   build/src/sampler/sampler_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sampler/sampler.h"

namespace {

using glm::generation::SamplingParams;
using glm::sampler::Sampler;

constexpr int kRows = 16;  // distinct rows the calls cycle through (4-10 MB: past the L2 cache)

std::vector<std::vector<float>> logit_rows(int n_vocab) {
  std::mt19937 rng(1);
  std::normal_distribution<float> spread(0.0f, 2.5f);
  std::vector<std::vector<float>> rows(kRows, std::vector<float>(n_vocab));
  for (std::vector<float>& r : rows) {
    for (float& v : r) v = spread(rng);
    for (int k = 0; k < 5; ++k) r[rng() % n_vocab] += 12.0f;
  }
  return rows;
}

// Args: n_vocab, mode (0 greedy, 1 temperature 0.8 top-p 0.8, 2 temperature 0.8 alone, 3 mode 1
// with the chosen token's log-probability and the 5 most probable alternatives').
void BM_Sample(benchmark::State& state) {
  const int n_vocab = static_cast<int>(state.range(0));
  SamplingParams p;
  p.seed = 7;
  if (state.range(1) == 0) p.temperature = 0.0f;
  if (state.range(1) == 2) p.top_p = 1.0f;
  if (state.range(1) == 3) p.top_logprobs = 5;
  Sampler s(p, n_vocab);
  const std::vector<std::vector<float>> rows = logit_rows(n_vocab);
  glm::generation::GeneratedLogprobs lp;
  glm::generation::GeneratedLogprobs* want = state.range(1) == 3 ? &lp : nullptr;
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(rows[i++ % kRows].data(), want));
}
BENCHMARK(BM_Sample)
    ->ArgNames({"vocab", "mode"})
    ->ArgsProduct({{65024, 151552}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
