// The engine over a real model file (../shared/data/reference/chatglm3-small.gguf: ChatGLM3
// architecture, real vocabulary and template, random weights): batching must not change greedy
// output, and a conversation's next turn must reuse every token of the previous ones.
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include "engine/engine.h"

namespace glm::engine {
namespace {

const std::string kModel = std::string(GLM_SHARED_DATA) + "/reference/chatglm3-small.gguf";

struct Results {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> text;
  std::map<std::string, Event> start, done;
  EventSink sink() {
    return [this](const Event& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (e.type == EventType::kToken) text[e.id] += e.text;
      if (e.type == EventType::kStart) start[e.id] = e;
      if (e.type == EventType::kDone || e.type == EventType::kError) done[e.id] = e;
      cv.notify_all();
    };
  }
  bool wait(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(300), [&] { return done.count(id) > 0; });
  }
};

std::unique_ptr<Engine> load(int max_batch) {
  Options o;
  o.model_path = kModel;
  o.n_threads = 2;
  o.n_ctx = 512;
  o.max_batch = max_batch;
  o.prefill_chunk = 16;
  auto e = load_engine(o);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e.value()) : nullptr;
}

Request greedy(const std::string& id, std::vector<tok::Message> m, int n) {
  Request r;
  r.id = id;
  r.messages = std::move(m);
  r.params.temperature = 0.0f;
  r.params.max_tokens = n;
  return r;
}

TEST(EngineReal, BatchedGreedyOutputIsIdenticalToEachRequestAlone) {
  if (access(kModel.c_str(), R_OK) != 0) GTEST_SKIP() << kModel << " is absent";
  const std::vector<std::string> prompts = {"hello", "What is the capital of France?",
                                            "写一首关于秋天的诗", "1 2 3 4 5 6 7 8 9 10 11 12"};
  std::vector<std::string> alone;
  {
    auto e = load(1);
    ASSERT_NE(e, nullptr);
    Results r;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string id = "a" + std::to_string(i);
      ASSERT_TRUE(e->submit(greedy(id, {{"user", prompts[i]}}, 12), r.sink()).ok());
      ASSERT_TRUE(r.wait(id));
      alone.push_back(r.text[id]);
    }
  }
  auto e = load(4);
  ASSERT_NE(e, nullptr);
  Results r;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(
        e->submit(greedy("b" + std::to_string(i), {{"user", prompts[i]}}, 12), r.sink()).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = "b" + std::to_string(i);
    ASSERT_TRUE(r.wait(id));
    EXPECT_EQ(r.text[id], alone[i]) << "prompt " << i;
    EXPECT_GT(r.done[id].usage.completion_tokens, 0);
  }
}

TEST(EngineReal, NextTurnCachesThePreviousTurnsPromptAndReply) {
  if (access(kModel.c_str(), R_OK) != 0) GTEST_SKIP() << kModel << " is absent";
  auto e = load(2);
  ASSERT_NE(e, nullptr);
  Results r;
  std::vector<tok::Message> m = {{"system", "You are a helpful assistant."}, {"user", "hi"}};
  int fed = 0;
  for (int turn = 0; turn < 3; ++turn) {
    const std::string id = "t" + std::to_string(turn);
    Request q = greedy(id, m, 8);
    q.conversation = "c";
    ASSERT_TRUE(e->submit(q, r.sink()).ok());
    ASSERT_TRUE(r.wait(id));
    const Event& d = r.done[id];
    ASSERT_EQ(d.type, EventType::kDone) << d.error.to_string();
    if (turn > 0) {
      EXPECT_EQ(r.start[id].usage.cached_tokens, fed) << id;
    }
    fed = d.usage.prompt_tokens + d.usage.completion_tokens -
          (d.finish_reason == FinishReason::kLength ? 1 : 0);
    m.push_back({"assistant", r.text[id]});
    m.push_back({"user", "and then? " + std::to_string(turn)});
  }
}

}  // namespace
}  // namespace glm::engine
