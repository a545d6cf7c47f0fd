// A device's largest buffer (gpu::DeviceInfo::max_buffer_bytes, capped here through
// GLMSERVE_VULKAN_MAX_BUFFER_MB) in a GPU model's plan and upload: a fused matrix over it goes
// up as its parts, a layer with a matrix over it stays on the CPU (and with it every layer
// before), a head over it keeps the whole model on the CPU, a layer's K/V over it is refused
// naming --ctx-size. docs/gpu.md#memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/scoped_env_test_util.h"
#include "model/gpu_test_util.h"
#include "model/test_util.h"

namespace glm::model {
namespace {

// A llama file in f32 of n_embd 256, n_ff 4096 and 2 layers: q 256 KiB, k and v 128 KiB each
// (512 KiB stacked), gate, up and down 4 MiB each (gate and up 8 MiB stacked); the head
// n_vocab x 1 KiB. (A step's own buffers take up to 2.1 MiB: the attention's split scratch.)
std::string limit_model(const std::string& name, int n_vocab) {
  testing::RandomSpec spec;
  spec.arch = "llama";
  spec.n_embd = 256;
  spec.n_ff = 4096;
  spec.n_vocab = n_vocab;
  const std::string path = testing::temp_path(name);
  return testing::write_random_model(spec, path).ok() ? path : std::string();
}

// The file on the first Vulkan device with buffers of at most `cap_mib` MiB, --gpu-layers `asked`.
StatusOr<std::unique_ptr<Model>> load_capped(const std::string& path, const char* cap_mib,
                                             int asked) {
  glm::testing::ScopedEnv cap("GLMSERVE_VULKAN_MAX_BUFFER_MB", cap_mib);
  LoadOptions o;
  o.gpu_layers = asked;
  return testing::load_vulkan(path, o);
}

// Buffers of 4 MiB: q, k and v still go up as one matrix, gate and up (8 MiB together) as two,
// and the logits are the CPU's; under 4 MiB (gate, up and down over it), every layer runs on
// the CPU, and asking for them is refused naming the matrix.
TEST(GpuBufferLimit, AFusedMatrixOverABufferGoesUpAsItsPartsAndALayerOverItStaysOnTheCpu) {
  const std::string path = limit_model("buffer_limit.gguf", 256);
  ASSERT_FALSE(path.empty());
  auto cpu = testing::load(path, 2, true, "cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  const std::vector<int32_t> next = {7, 0};
  const testing::Outputs want = testing::run(**cpu, DType::kF32, prompt, next);

  auto whole = load_capped(path, "4", -1);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_EQ(testing::gpu_layers_of(**whole), 2) << (*whole)->device_name();
  const testing::Outputs got = testing::run(**whole, DType::kF32, prompt, next);
  EXPECT_LT(testing::max_rel_diff(got.prefill, want.prefill), 1e-4f);
  EXPECT_LT(testing::max_rel_diff(got.decode, want.decode), 1e-4f);
  // A layer: QKV, output, gate, up, down; and the head.
  EXPECT_EQ(testing::decode_matvecs(**whole, DType::kF32), 2u * (2 * 5 + 1));
  auto free = load_capped(path, "1024", -1);  // gate and up as one
  ASSERT_TRUE(free.ok()) << free.status().message();
  EXPECT_EQ(testing::decode_matvecs(**free, DType::kF32), 2u * (2 * 4 + 1));

  auto off = load_capped(path, "3.5", -1);
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ((*off)->device_name(), "cpu");
  const testing::Outputs on_cpu = testing::run(**off, DType::kF32, prompt, next);
  EXPECT_EQ(on_cpu.decode, want.decode);
  auto asked = load_capped(path, "3.5", 1);
  ASSERT_FALSE(asked.ok());
  EXPECT_EQ(asked.status().code(), ErrorCode::kUnsupported);
  const std::string& why = asked.status().message();
  EXPECT_NE(why.find("--gpu-layers 1: layer 1's largest matrix (4.0 MiB) is larger than a "
                     "buffer can be on "),
            std::string::npos)
      << why;
  EXPECT_NE(why.find(" (3.5 MiB) (no layer fits;"), std::string::npos) << why;
}

// A head of 8 MiB over buffers of 4 MiB (which every layer's matrices fit): no layer goes
// without it, so the model runs on the CPU left to itself, and --gpu-layers is refused naming
// the head.
TEST(GpuBufferLimit, AHeadOverABufferKeepsTheModelOnTheCpu) {
  const std::string path = limit_model("buffer_limit_head.gguf", 8192);
  ASSERT_FALSE(path.empty());
  auto off = load_capped(path, "4", -1);
  ASSERT_TRUE(off.ok()) << off.status().message();
  EXPECT_EQ((*off)->device_name(), "cpu");
  auto asked = load_capped(path, "4", 2);
  ASSERT_FALSE(asked.ok());
  EXPECT_EQ(asked.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(asked.status().message().find("--gpu-layers 2: the output head (8.0 MiB) is larger "
                                          "than a buffer can be on "),
            std::string::npos)
      << asked.status().message();
  EXPECT_NE(asked.status().message().find(" (4.0 MiB) (no layer fits;"), std::string::npos)
      << asked.status().message();
  auto on = load_capped(path, "8", -1);
  ASSERT_TRUE(on.ok()) << on.status().message();
  EXPECT_EQ(testing::gpu_layers_of(**on), 2) << (*on)->device_name();
}

// A layer's K/V is one buffer on the device: a pool whose layer is over the device's largest is
// refused at its first step, naming --ctx-size; a smaller pool then runs.
TEST(GpuBufferLimit, AKvCacheLayerOverABufferIsRefusedNamingTheContext) {
  const std::string path = limit_model("buffer_limit_kv.gguf", 256);
  ASSERT_FALSE(path.empty());
  auto m = load_capped(path, "4", -1);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(testing::gpu_layers_of(**m), 2) << (*m)->device_name();
  // K and V rows of 128 f16 values: 512 bytes a token and layer; 16384 tokens are 8 MiB.
  const int32_t tok = 3;
  std::vector<int32_t> blocks(1024);
  for (int i = 0; i < 1024; ++i) blocks[i] = i;
  KvPool big((*m)->config(), 1024, 16, DType::kF16);
  std::vector<float> logits;
  const Status s = (*m)->forward({SeqInput{&tok, 1, 0, blocks.data(), 1024, false}}, &big, &logits);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("a KV cache of 8 MiB a layer is larger than a buffer can be on "),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("lower --ctx-size"), std::string::npos) << s.message();
  KvPool small((*m)->config(), 8, 16, DType::kF16);
  const Status ok = (*m)->forward({SeqInput{&tok, 1, 0, blocks.data(), 8, false}}, &small, &logits);
  EXPECT_TRUE(ok.ok()) << ok.message();
}

}  // namespace
}  // namespace glm::model
