// Mask cost per decode step for a JSON schema of 10 properties on the real vocabularies
// (ChatGLM3 65024 tokens, GLM-4 151552 tokens). The token path is a fixed realistic answer
// tokenized by greedy longest match under the mask (what a model following the schema emits).
//   build/src/grammar/grammar_bench --benchmark_repetitions=3
//   --benchmark_report_aggregates_only=true
// Counters: median_us / p99_us / max_us = fill_mask time per step over all steps of all
// iterations; "Cold" = a new Matcher per answer (a new request: nothing cached), "Warm" = the
// same Matcher reset (transitions and masks cached). Needs ../shared/data (skips otherwise).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/test_util.h"

namespace {

using glm::grammar::Grammar;
using glm::grammar::Matcher;
using glm::grammar::TokenMask;
using json = nlohmann::ordered_json;

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "location": {"type": "string"},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer"},
    "detailed": {"type": "boolean"},
    "lat": {"type": "number"},
    "lon": {"type": "number"},
    "when": {"type": "string", "format": "date-time"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "note": {"type": ["string", "null"]},
    "source": {"type": "object", "properties": {"name": {"type": "string"},
               "url": {"type": "string"}}, "required": ["name", "url"],
               "additionalProperties": false}
  },
  "required": ["location", "unit", "days", "detailed", "lat", "lon", "when", "tags", "note",
               "source"],
  "additionalProperties": false
})";

constexpr const char* kAnswer =
    "{\"location\": \"San Francisco, CA\", \"unit\": \"celsius\", \"days\": 5, \"detailed\": "
    "true, \"lat\": 37.7749, \"lon\": -122.4194, \"when\": \"2024-06-01T12:00:00Z\", \"tags\": "
    "[\"weather\", \"forecast\", \"天气预报\"], \"note\": \"明天可能下雨，记得带伞。\", "
    "\"source\": {\"name\": \"中国气象局\", \"url\": \"https://example.com/api/v1/forecast\"}}";

struct Setup {
  std::shared_ptr<const glm::grammar::TokenVocab> vocab;
  std::vector<int32_t> stop_ids;
  Grammar grammar;
  std::vector<int32_t> path;  // token ids of kAnswer, then a stop token
  bool ok = false;
  std::string why;
};

const Setup& setup(const std::string& kind) {
  static std::map<std::string, Setup> cache;
  auto it = cache.find(kind);
  if (it != cache.end()) return it->second;
  Setup& s = cache[kind];
  std::string path = glm::grammar::testing::shared_data(
      kind == "glm4" ? "vocab/glm4-vocab.gguf" : "vocab/chatglm3-vocab.gguf");
  auto v = glm::grammar::testing::load_vocab(path, kind);
  if (!v.ok()) {
    s.why = v.status().to_string() + " (needs ../shared/data)";
    return s;
  }
  s.vocab = v->vocab;
  s.stop_ids = v->stop_ids;
  s.grammar = *glm::grammar::json_schema_to_grammar(json::parse(kSchema));
  // Greedy longest match under the mask.
  Matcher m(s.grammar, s.vocab);
  TokenMask mask;
  std::string rest = kAnswer;
  while (!rest.empty()) {
    m.fill_mask(&mask);
    int32_t best = -1;
    for (int32_t id = 0; id < static_cast<int32_t>(s.vocab->n_tokens()); ++id) {
      const std::string& t = s.vocab->token(id);
      if (mask.allowed(id) && !t.empty() && rest.compare(0, t.size(), t) == 0 &&
          (best < 0 || t.size() > s.vocab->token(best).size())) {
        best = id;
      }
    }
    if (best < 0 || !m.accept_token(best).ok()) {
      s.why = "answer not tokenizable under the grammar at: " + rest;
      return s;
    }
    s.path.push_back(best);
    rest.erase(0, s.vocab->token(best).size());
  }
  s.path.push_back(s.stop_ids.at(0));
  s.ok = true;
  return s;
}

// CPU time of this thread: the machine is shared, and wall time per step would mostly measure
// who else was scheduled.
double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

void report(benchmark::State& state, std::vector<double>& us, size_t n_tokens, size_t steps) {
  std::sort(us.begin(), us.end());
  state.counters["median_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  state.counters["max_us"] = us.back();
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["n_vocab"] = static_cast<double>(n_tokens);
}

void BM_Mask(benchmark::State& state, const std::string& kind, bool warm) {
  const Setup& s = setup(kind);
  if (!s.ok) {
    state.SkipWithError(s.why.c_str());
    return;
  }
  std::vector<double> us;
  TokenMask mask;
  Matcher reused(s.grammar, s.vocab);
  for (auto _ : state) {
    Matcher fresh(s.grammar, s.vocab);
    Matcher& m = warm ? reused : fresh;
    m.reset();
    for (int32_t id : s.path) {
      const double t0 = thread_cpu_us();
      glm::grammar::MaskInfo info = m.fill_mask(&mask);
      us.push_back(thread_cpu_us() - t0);
      benchmark::DoNotOptimize(info);
      if (!mask.allowed(id) || !m.accept_token(id).ok()) {
        state.SkipWithError("path token refused");
        return;
      }
    }
  }
  report(state, us, s.vocab->n_tokens(), s.path.size());
}

void BM_VocabCreate(benchmark::State& state, const std::string& kind) {
  const Setup& s = setup(kind);
  if (!s.ok) {
    state.SkipWithError(s.why.c_str());
    return;
  }
  std::vector<std::string> toks;
  for (size_t i = 0; i < s.vocab->n_tokens(); ++i)
    toks.push_back(s.vocab->token(static_cast<int32_t>(i)));
  for (auto _ : state) {
    auto v = glm::grammar::TokenVocab::create(toks, s.stop_ids, {});
    benchmark::DoNotOptimize(v);
  }
  state.counters["trie_nodes"] = static_cast<double>(s.vocab->trie().byte.size());
}

void BM_CompileSchema(benchmark::State& state) {
  json schema = json::parse(kSchema);
  for (auto _ : state) {
    auto g = glm::grammar::json_schema_to_grammar(schema);
    benchmark::DoNotOptimize(g);
  }
}

BENCHMARK_CAPTURE(BM_Mask, chatglm3_cold, std::string("chatglm3"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Mask, chatglm3_warm, std::string("chatglm3"), true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Mask, glm4_cold, std::string("glm4"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Mask, glm4_warm, std::string("glm4"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VocabCreate, chatglm3, std::string("chatglm3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VocabCreate, glm4, std::string("glm4"))->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileSchema)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
