// Engine benchmarks for the scheduler issue, in-process (no socket):
//   1. multi-turn: TTFT of turns 1..5 of one conversation, each new user message the same
//      length; turn N+1 should prefill only its new message (KV reuse), so TTFT stays flat;
//   2. concurrency: aggregate generated tokens/s with 4 simultaneous users vs 1 user;
//   3. constrained decoding: time per output token (tpot) of one user with a 10-property JSON
//      schema vs unconstrained, runs alternated (the difference is the mask's cost per step).
// Usage: engine_bench MODEL.gguf [threads=2] [repeats=3]
// Prints medians and the ratios side by side (one run; ratios are what matter,
// docs/performance.md).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace {

using glm::engine::Event;
using glm::engine::EventType;

struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Event> done;
  glm::engine::EventSink sink() {
    return [this](const Event& e) {
      if (e.type != EventType::kDone && e.type != EventType::kError) return;
      std::lock_guard<std::mutex> lock(mu);
      done.push_back(e);
      cv.notify_all();
    };
  }
  void wait(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done.size() >= n; });
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A user message of about 24 tokens that differs per turn only in a number.
std::string message(int i) {
  return "Question " + std::to_string(i) +
         ": please explain in two sentences why the sky looks blue during the day.";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: engine_bench MODEL.gguf [threads=2] [repeats=3]\n");
    return 2;
  }
  glm::engine::Options o;
  o.model_path = argv[1];
  o.n_threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  o.n_ctx = 2048;
  o.max_batch = 4;
  auto loaded = glm::engine::load_engine(o);
  if (!loaded.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", loaded.status().message().c_str());
    return 1;
  }
  glm::engine::Engine& engine = **loaded;
  glm::engine::SamplingParams greedy;
  greedy.temperature = 0.0f;

  // 1. Multi-turn TTFT.
  constexpr int kTurns = 5;
  std::vector<std::vector<double>> ttft(kTurns);
  std::vector<int> cached(kTurns), prompt(kTurns);
  for (int rep = 0; rep < repeats; ++rep) {
    std::vector<glm::tok::Message> history;
    for (int turn = 0; turn < kTurns; ++turn) {
      history.push_back({"user", message(turn + 10 * rep)});
      glm::engine::Request r;
      r.id = "mt-" + std::to_string(rep) + "-" + std::to_string(turn);
      r.conversation = "bench-" + std::to_string(rep);
      r.messages = history;
      r.params = greedy;
      r.params.max_tokens = 16;
      std::string reply;
      Waiter w;
      auto sink = w.sink();
      glm::Status st = engine.submit(r, [&](const Event& e) {
        if (e.type == EventType::kToken) reply += e.text;
        sink(e);
      });
      if (!st.ok()) {
        std::fprintf(stderr, "engine_bench: %s\n", st.message().c_str());
        return 1;
      }
      w.wait(1);
      const Event& d = w.done[0];
      ttft[turn].push_back(d.timings.ttft_ms);
      cached[turn] = d.usage.cached_tokens;
      prompt[turn] = d.usage.prompt_tokens;
      history.push_back({"assistant", reply});
    }
  }
  std::printf("multi-turn TTFT (median of %d conversations, 16 new tokens per turn)\n", repeats);
  for (int t = 0; t < kTurns; ++t) {
    std::printf("  turn %d: prompt %4d tokens, cached %4d, ttft %8.1f ms\n", t + 1, prompt[t],
                cached[t], median(ttft[t]));
  }
  std::printf("  turn 5 / turn 1 TTFT = %.2f\n", median(ttft[4]) / median(ttft[0]));

  // 2. Aggregate generation speed: 1 user vs 4 users at once.
  auto aggregate = [&](int users, int round) {
    Waiter w;
    const auto t0 = std::chrono::steady_clock::now();
    for (int u = 0; u < users; ++u) {
      glm::engine::Request r;
      r.id = "cc-" + std::to_string(users) + "-" + std::to_string(round) + "-" + std::to_string(u);
      r.messages = {{"user", message(100 + 7 * u + round)}};
      r.params = greedy;
      r.params.max_tokens = 64;
      if (!engine.submit(r, w.sink()).ok()) return 0.0;
    }
    w.wait(users);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int tokens = 0;
    for (const Event& e : w.done) tokens += e.usage.completion_tokens;
    return tokens / s;
  };
  std::vector<double> one, four;
  for (int round = 0; round < repeats; ++round) {
    one.push_back(aggregate(1, round));
    four.push_back(aggregate(4, round));
  }
  std::printf("aggregate generation (prefill included, 64 tokens per user, median of %d)\n",
              repeats);
  std::printf("  1 user : %7.2f tokens/s\n  4 users: %7.2f tokens/s\n  ratio  : %.2f\n",
              median(one), median(four), median(four) / median(one));

  // 3. Constrained vs unconstrained decoding, alternated.
  const char* schema = R"({"type":"object","properties":{
    "name":{"type":"string"},"city":{"type":"string"},"age":{"type":"integer"},
    "ok":{"type":"boolean"},"unit":{"enum":["celsius","fahrenheit"]},"score":{"type":"number"},
    "day":{"type":"string","format":"date"},"tags":{"type":"array","items":{"type":"string"}},
    "note":{"type":["string","null"]},"pos":{"type":"object","properties":{"x":{"type":"number"},
    "y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}},
    "required":["name","city","age","ok","unit","score","day","tags","note","pos"],
    "additionalProperties":false})";
  auto tpot = [&](bool constrained, int round, int* n_tokens) {
    Waiter w;
    glm::engine::Request r;
    r.id = std::string(constrained ? "js-" : "free-") + std::to_string(round);
    r.messages = {{"user", message(200 + round)}};
    r.params.temperature = 1.0f;
    r.params.seed = static_cast<uint64_t>(round) + 1;
    r.params.max_tokens = 64;
    if (constrained) r.constraint = {glm::engine::Constraint::Kind::kJsonSchema, schema};
    const glm::Status st = engine.submit(r, w.sink());
    if (!st.ok()) {
      std::fprintf(stderr, "engine_bench: %s\n", st.message().c_str());
      return 0.0;
    }
    w.wait(1);
    *n_tokens += w.done[0].usage.completion_tokens;
    return w.done[0].timings.tpot_ms;
  };
  std::vector<double> free_ms, json_ms;
  int free_tokens = 0, json_tokens = 0;
  for (int round = 0; round < std::max(repeats, 3); ++round) {
    free_ms.push_back(tpot(false, round, &free_tokens));
    json_ms.push_back(tpot(true, round, &json_tokens));
  }
  std::printf("constrained decoding (1 user, temperature 1, up to 64 tokens, median of %zu)\n",
              free_ms.size());
  std::printf("  unconstrained: tpot %8.2f ms (%d tokens in all)\n", median(free_ms), free_tokens);
  std::printf("  json_schema  : tpot %8.2f ms (%d tokens in all)\n", median(json_ms), json_tokens);
  std::printf("  ratio        : %.3f\n", median(json_ms) / median(free_ms));
  engine.drain(std::chrono::milliseconds(0));
  return 0;
}
