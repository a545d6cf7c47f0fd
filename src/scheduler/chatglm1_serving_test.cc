// ChatGLM-6B (v1) through the serving path: the HF golden's tiny model (oracle/chatglm-v1)
// under the scheduler, whose prefill chunk is shorter than the prompt, batched with another
// sequence, gives the greedy tokens of a direct evaluate() of the same prompt; the
// bidirectional prompt is never reused (cached_tokens 0, no conversation saved); on the CPU and
// on the Vulkan path.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "model/chatglm1_golden.h"
#include "model/eval.h"
#include "model/test_util.h"
#include "scheduler/scheduler.h"

namespace glm::scheduler {
namespace {

struct TokenRecorder : SeqObserver {
  std::vector<int32_t>* tokens;
  StartInfo* start;
  std::string* error;
  bool* done;
  TokenRecorder(std::vector<int32_t>* t, StartInfo* s, std::string* e, bool* d)
      : tokens(t), start(s), error(e), done(d) {}
  void on_start(const StartInfo& info) override { *start = info; }
  bool on_token(int32_t token, const generation::GeneratedLogprobs* /*logprobs*/) override {
    tokens->push_back(token);
    return true;
  }
  void on_finish(FinishInfo* info) override {
    info->save_conversation = true;  // asked for: the scheduler must not keep it
    *done = true;
  }
  void on_error(const Status& status) override {
    *error = status.to_string();
    *done = true;
  }
};

// Greedy continuation by evaluate(): the reference the scheduler must match.
std::vector<int32_t> greedy_reference(model::Model& m, const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    model::EvalOptions o;
    o.block_tokens = 2;
    auto rows = model::evaluate(m, prompt, out, o);
    EXPECT_TRUE(rows.ok()) << rows.status().to_string();
    if (!rows.ok()) return out;
    const std::vector<float>& last = rows->back().values;
    out.push_back(static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
  }
  return out;
}

// device: "cpu", or "vulkan" (the GPU model under the same scheduler; lavapipe in CI).
void check_serving(const std::string& device) {
  const std::string data = model::testing::data_path("oracle/chatglm-v1/glm_model.data");
  if (!model::testing::file_exists(data)) GTEST_SKIP() << data << " is absent";
  model::testing::Golden g;
  ASSERT_TRUE(model::testing::read_golden(data, &g));
  const std::string path = model::testing::temp_path("chatglm1-serving-" + device + ".gguf");
  ASSERT_TRUE(model::testing::write_gguf(g, path).ok());
  auto m = model::testing::load(path, 1, true, device);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ((*m)->device_name().substr(0, 3), device.substr(0, 3));
  ASSERT_TRUE((*m)->capabilities().bidirectional_prompt);

  // Prompts of 3 and 2 tokens, 4 generated each: fits the golden's 8 positions.
  const std::vector<std::vector<int32_t>> prompts = {{0, 1, 2}, {3, 1}};
  constexpr int kNew = 4;
  model::KvPool pool((*m)->config(), 16, 2, DType::kF32);
  kv::KvCache cache(16, 2);
  Options o;
  o.max_batch = 2;
  o.prefill_chunk = 2;  // shorter than the first prompt: it must still be prefilled whole
  o.n_ctx = 8;
  Scheduler s(m->get(), &pool, &cache, o);
  for (int round = 0; round < 2; ++round) {  // the second round finds nothing to reuse
    std::map<int, std::vector<int32_t>> tokens;
    std::map<int, StartInfo> starts;
    std::map<int, std::string> errors;
    std::map<int, bool> done;
    for (int i = 0; i < 2; ++i) {
      SeqRequest r;
      r.id = "r" + std::to_string(i);
      r.prompt = prompts[i];
      r.conversation = "c" + std::to_string(i);
      r.sampling.temperature = 0;
      r.sampling.max_tokens = kNew;
      r.observer = std::make_unique<TokenRecorder>(&tokens[i], &starts[i], &errors[i], &done[i]);
      ASSERT_TRUE(s.add(std::move(r)).ok());
    }
    for (int steps = 0; steps < 100 && !s.idle(); ++steps) s.step();
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(done[i]);
      EXPECT_EQ(errors[i], "") << "round " << round << ", request " << i;
      EXPECT_EQ(tokens[i], greedy_reference(**m, prompts[i], kNew)) << "request " << i;
      EXPECT_EQ(starts[i].cached_tokens, 0);
      EXPECT_FALSE(starts[i].from_conversation);
    }
    EXPECT_EQ(cache.n_conversations(), 0);
  }
  EXPECT_EQ(cache.allocator().n_used(), 0);
}

TEST(Chatglm1Serving, SchedulerMatchesDirectEvaluation) { check_serving("cpu"); }

TEST(Chatglm1Serving, OnTheGpuSchedulerMatchesDirectEvaluation) { check_serving("vulkan"); }

}  // namespace
}  // namespace glm::scheduler
