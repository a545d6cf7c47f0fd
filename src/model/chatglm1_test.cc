// ChatGLM-6B (v1) against the HF golden of chatglm.cpp (oracle/chatglm-v1/, FORMAT.md there):
// the raw arrays are written into glmserve's "chatglm1" GGUF layout (docs/models.md), with the
// QKV rows un-interleaved from HF's per-head [q k v] order, then `evaluate` runs the prefill
// [0, 1, 2] and the decode steps 3 and 4, on the CPU and on the Vulkan path (GoldenGpu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "model/chatglm1_golden.h"
#include "model/eval.h"
#include "model/test_util.h"

namespace glm::model {
namespace {

using testing::Golden;
using testing::kH;
using testing::read_golden;
using testing::write_gguf;

// device: "cpu", or "vulkan" (the GPU path, lavapipe in CI: the same golden and tolerances).
float run(DType kv_type, const std::string& device = "cpu") {
  const std::string data = testing::data_path("oracle/chatglm-v1/glm_model.data");
  Golden g;
  EXPECT_TRUE(read_golden(data, &g)) << "unexpected size of " << data;
  const std::string path = testing::temp_path("chatglm1.gguf");
  EXPECT_TRUE(write_gguf(g, path).ok());
  auto m = testing::load(path, 1, true, device);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return 1e9f;
  EXPECT_EQ((*m)->device_name().substr(0, 3), device.substr(0, 3));
  EvalOptions o;
  o.output = OutputKind::kHidden;
  o.kv_type = kv_type;
  o.block_tokens = 2;
  auto rows = evaluate(**m, {0, 1, 2}, {3, 4}, o);
  EXPECT_TRUE(rows.ok()) << rows.status().message();
  if (!rows.ok()) return 1e9f;
  float max_diff = 0;
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ((*rows)[r].values.size(), static_cast<size_t>(kH));
    for (int i = 0; i < kH; ++i) {
      max_diff = std::max(max_diff, std::fabs((*rows)[r].values[i] - g.y[r][i]));
    }
  }
  return max_diff;
}

TEST(ChatGLM1, HiddenStatesMatchHfGolden) {
  if (!testing::file_exists(testing::data_path("oracle/chatglm-v1/glm_model.data"))) {
    GTEST_SKIP() << "oracle/chatglm-v1/glm_model.data is absent";
  }
  const float f32 = run(DType::kF32);
  const float f16 = run(DType::kF16);
  const float q8 = run(DType::kQ8_0);
  std::printf("chatglm-v1 hidden: max |diff| %.3g (f32 KV), %.3g (f16 KV), %.3g (q8_0 KV)\n", f32,
              f16, q8);
  EXPECT_LT(f32, 1e-5f);
  EXPECT_LT(f16, 5e-4f);
  EXPECT_LT(q8, 3e-3f);  // measured 1.5e-3: the 8-bit KV cache's rounding (hidden 32)
}

TEST(GoldenGpu, Chatglm1HiddenStatesMatchHfGolden) {
  if (!testing::file_exists(testing::data_path("oracle/chatglm-v1/glm_model.data"))) {
    GTEST_SKIP() << "oracle/chatglm-v1/glm_model.data is absent";
  }
  const float f32 = run(DType::kF32, "vulkan");
  const float f16 = run(DType::kF16, "vulkan");
  const float q8 = run(DType::kQ8_0, "vulkan");
  std::printf("vulkan chatglm-v1 hidden: max |diff| %.3g (f32 KV), %.3g (f16 KV), %.3g (q8_0 KV)\n",
              f32, f16, q8);
  // The CPU path's bounds.
  EXPECT_LT(f32, 1e-5f);
  EXPECT_LT(f16, 5e-4f);
  EXPECT_LT(q8, 3e-3f);
}

}  // namespace
}  // namespace glm::model
