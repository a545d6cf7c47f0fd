// The engine's warm-up at load on a GPU (docs/gpu.md, "How it works"): a driver compiles a
// shader when its pipeline is created, so the first request must find its shaders compiled,
// the draft model's as well as the target's.

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "engine/engine.h"
#include "engine/test_util.h"
#include "gpu/device.h"

namespace glm {
namespace {

// stories260K drafting for itself on the GPU: the first request (a prompt past the tiled
// matmuls' 16 tokens, then decode steps with drafts verified) compiles no pipeline.
TEST(GpuWarmUpEngine, TheFirstRequestOfASpeculatingEngineCompilesNoShader) {
  const std::string& stories = engine::testing::kStories;
  if (access(stories.c_str(), R_OK) != 0) GTEST_SKIP() << stories << " is absent";
  engine::Options o;
  o.model_path = stories;
  o.draft_path = stories;
  o.spec = generation::SpecMode::kDraft;
  o.device = "vulkan";
  o.n_threads = 2;
  o.n_ctx = 256;
  o.max_batch = 2;
  auto e = engine::load_engine(o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_EQ((*e)->device().rfind("vulkan:", 0), 0u) << "not on the GPU: " << (*e)->device();
  const uint64_t warmed = gpu::Device::pipelines_created();
  engine::Request r;
  r.id = "first";
  r.raw = true;
  r.prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in "
      "the park with her friends and her dog.";
  r.params.temperature = 0.0f;
  r.params.max_tokens = 24;
  engine::testing::Results res;
  ASSERT_TRUE((*e)->submit(r, res.sink()).ok());
  ASSERT_TRUE(res.wait("first"));
  ASSERT_EQ(res.done["first"].type, engine::EventType::kDone);
  EXPECT_GE(res.done["first"].usage.prompt_tokens, 20);
  EXPECT_EQ(gpu::Device::pipelines_created(), warmed);
}

}  // namespace
}  // namespace glm
