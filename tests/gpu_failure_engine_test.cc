// A GPU lost in the middle of an answer, seen from the engine (docs/gpu.md#failures): the
// requests fail with a clear error that says the engine stops to be restarted (Event::restart,
// which a gateway reads as "resume this answer on the engine that comes back"), the engine takes
// no new request from then on, and its owner hears of it once (Options::on_fatal).

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/scoped_env_test_util.h"
#include "engine/engine.h"
#include "engine/test_util.h"

namespace glm {
namespace {

engine::Request story(const std::string& id) {
  engine::Request r;
  r.id = id;
  r.raw = true;
  r.prompt = "Once upon a time, there was a little girl named Lily.";
  r.params.temperature = 0.0f;
  r.params.max_tokens = 40;
  return r;
}

TEST(GpuFailureEngine, ALostDeviceFailsItsRequestsForARestartRefusesNewOnesTellsTheOwnerOnce) {
  const std::string& stories = engine::testing::kStories;
  if (access(stories.c_str(), R_OK) != 0) GTEST_SKIP() << stories << " is absent";
  // The engine's own steps count from its warm-up at load (a few steps): the 12th is the
  // answer's prefill or one of its first decode steps.
  glm::testing::ScopedEnv fail("GLMSERVE_VULKAN_FAIL_AT_STEP", "12");
  std::vector<Status> fatal;  // on_fatal runs on the engine's loop; read after the waits
  engine::Options o;
  o.model_path = stories;
  o.device = "vulkan";
  o.n_threads = 2;
  o.n_ctx = 256;
  o.max_batch = 2;
  o.on_fatal = [&fatal](const Status& st) { fatal.push_back(st); };
  auto e = engine::load_engine(o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_EQ((*e)->device().rfind("vulkan:", 0), 0u) << "not on the GPU: " << (*e)->device();

  engine::testing::Results res;
  ASSERT_TRUE((*e)->submit(story("lost"), res.sink()).ok());
  ASSERT_TRUE(res.wait("lost"));
  const engine::Event& lost = res.done["lost"];
  ASSERT_EQ(lost.type, engine::EventType::kError) << "the answer ended without the loss";
  EXPECT_EQ(lost.error.code(), ErrorCode::kUnavailable);
  EXPECT_NE(lost.error.message().find("VK_ERROR_DEVICE_LOST"), std::string::npos)
      << lost.error.message();
  EXPECT_TRUE(lost.restart);

  // From the first such error the engine takes no new request (a gateway resumes the answer at
  // once: it must be refused, to be retried on the engine that comes back, not run here).
  EXPECT_EQ((*e)->health(), generation::Health::kDraining);
  const Status after = (*e)->submit(story("after"), res.sink());
  EXPECT_EQ(after.code(), ErrorCode::kUnavailable) << after.to_string();
  e->reset();  // stops the loop: on_fatal has run, or never will
  ASSERT_EQ(fatal.size(), 1u);
  EXPECT_NE(fatal[0].message().find("was lost"), std::string::npos) << fatal[0].message();
}

}  // namespace
}  // namespace glm
