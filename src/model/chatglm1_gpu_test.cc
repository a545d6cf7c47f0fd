// ChatGLM-6B (v1) on the Vulkan path (chatglm1_gpu.h) against the CPU model (chatglm1.cc), its
// reference, on random-weight chatglm1 files: logits over a prompt and decode steps for float
// and quantized weights and every KV type, a batch equal to each sequence alone, a fork's block
// and a block through the disk cache's calls going on as the original, the CPU model's
// validation (one-step prefill, prompt length, a P-Tuning prefix refused), the load rules
// (--device, --gpu-layers) and a lost device. Runs on lavapipe in CI. The HF golden runs on the GPU
// in chatglm1_test.cc.
#include "model/chatglm1_gpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/scoped_env_test_util.h"
#include "gpu/ops.h"
#include "model/adapter.h"
#include "model/gpu_test_util.h"
#include "model/test_util.h"

namespace glm::model {
namespace {

// A random chatglm1 model of odd sizes: head_dim 32 (2D rotary tables of 8 a half), a
// vocabulary not a multiple of the tiles; row lengths the 32-value quant blocks take.
testing::RandomSpec v1_spec(DType type = DType::kF32) {
  testing::RandomSpec spec;
  spec.arch = "chatglm1";
  spec.type = type;
  spec.n_embd = 128;
  spec.n_ff = 256;
  spec.n_head = 4;
  spec.n_vocab = 77;
  spec.std = 0.15f;
  return spec;
}

std::string write_v1(const std::string& name, DType type = DType::kF32) {
  const std::string path = testing::temp_path(name + ".gguf");
  EXPECT_TRUE(testing::write_random_model(v1_spec(type), path).ok());
  return path;
}

using testing::gpu_layers_of;
using testing::max_rel_diff;
using testing::Outputs;
using testing::run;

struct Chatglm1Case {
  DType type;
  DType kv;
};

class GpuVsCpuChatGLM1 : public ::testing::TestWithParam<Chatglm1Case> {};

TEST_P(GpuVsCpuChatGLM1, SameLogits) {
  const Chatglm1Case c = GetParam();
  const std::string path = write_v1(std::string("v1_gpu_") + dtype_name(c.type), c.type);
  // The reference: the same weights decoded to f32 on the CPU (whose kernels of quantized
  // weights also round the activations to 8 bits; the GPU's multiply f32 activations).
  const std::string f32_path = path + ".f32.gguf";
  ASSERT_TRUE(testing::requantize(path, f32_path, DType::kF32).ok());
  auto cpu = testing::load(f32_path, 2, true, "cpu");
  auto gpu = testing::load(path, 2, true, "vulkan");
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  ASSERT_EQ((*gpu)->device_name().substr(0, 7), "vulkan:");
  EXPECT_TRUE((*gpu)->capabilities().bidirectional_prompt);
  static_assert(gpu::MatmulTuning{}.tiled_min_tokens <= 21);
  // 21 prompt tokens: the prefill takes the tiled matmul (gpu::MatmulTuning); the prompt
  // ends in two tokens standing for [gMASK] <sop>. 4 decode steps: block positions 2 to 5.
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5,  3, 58,
                                       9, 7, 9, 3, 2, 3, 8, 4, 70, 71};
  const std::vector<int32_t> next = {76, 0, 12, 40};
  Outputs a = run(**cpu, c.kv, prompt, next);
  Outputs b = run(**gpu, c.kv, prompt, next);
  // As GpuVsCpu (transformer_gpu_test.cc): f32 sums in another order, and a K/V value on a
  // rounding boundary of the cache's type in one computation and not the other.
  const float tol = c.kv == DType::kQ8_0 ? 2e-3f : c.kv == DType::kF16 ? 5e-4f : 1e-4f;
  const float dp = max_rel_diff(b.prefill, a.prefill), dd = max_rel_diff(b.decode, a.decode);
  std::printf("chatglm1 %s weights, %s KV: GPU vs CPU max rel diff %.3g prefill, %.3g decode\n",
              dtype_name(c.type), dtype_name(c.kv), dp, dd);
  EXPECT_LT(dp, tol);
  // Decode steps of quantized weights may take 8-bit activations (testing::gpu_decode_in_int8).
  const bool int8 = dtype_info(c.type).block_size > 1 && testing::gpu_decode_in_int8();
  EXPECT_LT(dd, int8 ? testing::kInt8DecodeTol : tol);
}

INSTANTIATE_TEST_SUITE_P(Weights, GpuVsCpuChatGLM1,
                         ::testing::Values(Chatglm1Case{DType::kF32, DType::kF32},
                                           Chatglm1Case{DType::kF16, DType::kF16},
                                           Chatglm1Case{DType::kQ8_0, DType::kF16},
                                           Chatglm1Case{DType::kQ4_0, DType::kQ8_0}),
                         [](const ::testing::TestParamInfo<Chatglm1Case>& i) {
                           return std::string(dtype_name(i.param.type)) + "_kv_" +
                                  dtype_name(i.param.kv);
                         });

// Two sequences in one step (a prompt, and another's decode step with its own prompt length)
// give what each gives alone, on the GPU and on the CPU.
TEST(BatchGpuChatGLM1, BatchEqualsAlone) {
  const std::string path = write_v1("v1_batch");
  for (const char* device : {"vulkan", "cpu"}) {
    SCOPED_TRACE(device);
    auto model = testing::load(path, 2, true, device);
    ASSERT_TRUE(model.ok()) << model.status().message();
    Model& m = **model;
    const std::vector<int32_t> a = {5, 9, 2, 33, 17, 70, 71};  // prompt of 7, prefilled now
    const std::vector<int32_t> b = {1, 2, 3, 4, 70, 71};       // prompt of 6, then decodes 8
    const int32_t b_next = 8;
    std::vector<int32_t> a_blocks = {0, 3}, b_blocks = {4, 1};  // interleaved in the pool
    KvPool kv(m.config(), 5, 4, DType::kF16);
    std::vector<float> ignore, batched, alone;
    SeqInput bp{b.data(), 6, 0, b_blocks.data(), 2, false};
    ASSERT_TRUE(m.forward({bp}, &kv, &ignore).ok());
    SeqInput sa{a.data(), 7, 0, a_blocks.data(), 2, true};
    SeqInput sb{&b_next, 1, 6, b_blocks.data(), 2, false};
    sb.prefix_len = 6;
    ASSERT_TRUE(m.forward({sa, sb}, &kv, &batched).ok());

    {
      KvPool own(m.config(), 2, 4, DType::kF16);
      std::vector<int32_t> blocks = {0, 1};
      SeqInput in{a.data(), 7, 0, blocks.data(), 2, true};
      ASSERT_TRUE(m.forward({in}, &own, &alone).ok());
    }
    KvPool own(m.config(), 2, 4, DType::kF16);
    std::vector<int32_t> blocks = {1, 0};
    SeqInput in{b.data(), 6, 0, blocks.data(), 2, false};
    ASSERT_TRUE(m.forward({in}, &own, &ignore).ok());
    SeqInput step{&b_next, 1, 6, blocks.data(), 2, false};
    step.prefix_len = 6;
    ASSERT_TRUE(m.forward({step}, &own, &alone).ok());
    ASSERT_EQ(batched.size(), 8u * m.config().n_vocab);
    EXPECT_LT(max_rel_diff(batched, alone), 1e-5f);
  }
}

std::unique_ptr<Model> gpu_v1(const std::string& name) {
  auto m = testing::load(write_v1(name), 2, true, "vulkan");
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return nullptr;
  // --device vulkan falls back to the CPU without a device: these test the GPU.
  EXPECT_EQ((*m)->device_name().substr(0, 7), "vulkan:");
  return (*m)->device_name().rfind("vulkan:", 0) == 0 ? std::move(*m) : nullptr;
}

// A fork copies the shared partial block (copy_kv_block) and goes on from the copy; a block
// saved and loaded through the disk cache's calls does the same: both equal the original going
// on from its own block.
TEST(GpuKvChatGLM1, ForkedAndReloadedBlocksContinueAsTheOriginal) {
  auto m = gpu_v1("v1_fork");
  ASSERT_NE(m, nullptr);
  KvPool kv(m->config(), 5, 4, DType::kF16);
  const std::vector<int32_t> prompt = {7, 3, 9, 11, 70, 71};  // block 0 full, block 1 partial
  std::vector<int32_t> orig = {0, 1}, fork = {0, 2}, loaded = {0, 3}, empty = {0, 4};
  std::vector<float> ignore, a, b, c, d;
  SeqInput in{prompt.data(), 6, 0, orig.data(), 2, false};
  ASSERT_TRUE(m->forward({in}, &kv, &ignore).ok());
  m->copy_kv_block(&kv, 1, 2);
  std::vector<uint8_t> saved(m->kv_block_bytes(&kv));
  m->save_kv_block(&kv, 1, saved.data());
  m->load_kv_block(&kv, 3, saved.data());
  const int32_t tok = 13;
  auto step = [&](std::vector<int32_t>& blocks, std::vector<float>* out) {
    SeqInput s{&tok, 1, 6, blocks.data(), 2, false};
    s.prefix_len = 6;
    ASSERT_TRUE(m->forward({s}, &kv, out).ok());
  };
  step(orig, &a);
  step(fork, &b);
  step(loaded, &c);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  // Without the copy, block 4 holds no K/V of positions 4, 5: the logits differ.
  step(empty, &d);
  EXPECT_NE(a, d);
}

// The CPU model's rules, with its errors: the prompt in one step, its length in later steps.
TEST(GpuChatGLM1, ChunkedPrefillAndMissingPromptLengthAreRefused) {
  auto m = gpu_v1("v1_rules");
  ASSERT_NE(m, nullptr);
  KvPool kv(m->config(), 2, 4, DType::kF16);
  const std::vector<int32_t> prompt = {7, 3, 9, 11, 70, 71};
  std::vector<int32_t> blocks = {0, 1};
  std::vector<float> out;
  SeqInput chunk{prompt.data(), 4, 0, blocks.data(), 2, false};
  chunk.prefix_len = 6;
  Status s = m->forward({chunk}, &kv, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("prefilled in one step"), std::string::npos) << s.message();
  SeqInput whole{prompt.data(), 6, 0, blocks.data(), 2, false};
  ASSERT_TRUE(m->forward({whole}, &kv, &out).ok());
  SeqInput step{prompt.data(), 1, 6, blocks.data(), 2, false};  // no prefix_len
  s = m->forward({step}, &kv, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("prompt length"), std::string::npos) << s.message();
  EXPECT_EQ(out.size(), static_cast<size_t>(m->config().n_vocab));  // nothing written on error
}

StatusOr<std::unique_ptr<Model>> load_v1(const std::string& path, const std::string& device,
                                         int gpu_layers) {
  StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
  if (!f.ok()) return f.status();
  LoadOptions o;
  o.n_threads = 2;
  o.device = device;
  o.gpu_layers = gpu_layers;
  return load_model(std::shared_ptr<const gguf::File>(std::move(*f)), o);
}

// --device vulkan runs it on the GPU; auto keeps it on the CPU without a discrete GPU (as every
// architecture); --gpu-layers 0 is the CPU, all layers (or more) the GPU, a split is refused by
// name; a model that does not fit whole runs on the CPU unless its layers were asked for.
TEST(GpuLoadChatGLM1, DeviceAndGpuLayers) {
  const std::string path = write_v1("v1_load");  // 2 layers
  for (int layers : {-1, 2, 5}) {
    auto m = load_v1(path, "vulkan", layers);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ((*m)->device_name().substr(0, 7), "vulkan:") << (*m)->device_name();
  }
  auto cpu = load_v1(path, "vulkan", 0);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->device_name(), "cpu");
  auto automatic = load_v1(path, "auto", -1);
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ((*automatic)->device_name(), "cpu");
  auto split = load_v1(path, "vulkan", 1);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(split.status().message().find("--gpu-layers 1: ChatGLM-6B (v1)"), std::string::npos)
      << split.status().message();
  // A device too small for the whole model (1 MiB: the output head and scratch alone need
  // more): left to itself it runs on the CPU; asked for every layer, it is refused by size.
  auto [small, asked] = [&] {
    glm::testing::ScopedEnv cap("GLMSERVE_VULKAN_MEMORY_MB", "1");
    return std::make_pair(load_v1(path, "vulkan", -1), load_v1(path, "vulkan", 2));
  }();
  ASSERT_TRUE(small.ok()) << small.status().message();
  EXPECT_EQ((*small)->device_name(), "cpu");
  ASSERT_FALSE(asked.ok());
  EXPECT_EQ(asked.status().code(), ErrorCode::kOutOfMemory);
  EXPECT_NE(asked.status().message().find("--gpu-layers 2: 2 of 2 layers"), std::string::npos)
      << asked.status().message();
  // Buffers of 1 KiB, smaller than every matrix: the same, refused by the matrix.
  auto [narrow, narrow_asked] = [&] {
    glm::testing::ScopedEnv cap("GLMSERVE_VULKAN_MAX_BUFFER_MB", "0.001");
    return std::make_pair(load_v1(path, "vulkan", -1), load_v1(path, "vulkan", 2));
  }();
  ASSERT_TRUE(narrow.ok()) << narrow.status().message();
  EXPECT_EQ((*narrow)->device_name(), "cpu");
  ASSERT_FALSE(narrow_asked.ok());
  EXPECT_EQ(narrow_asked.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(narrow_asked.status().message().find("--gpu-layers 2: the output head ("),
            std::string::npos)
      << narrow_asked.status().message();
  EXPECT_NE(narrow_asked.status().message().find(") is larger than a buffer can be on "),
            std::string::npos)
      << narrow_asked.status().message();
}

// A device lost in the middle of a step fails that forward with a clear error and no output.
TEST(GpuFailure, ChatGLM1LostDeviceFailsTheStepCleanly) {
  auto m = gpu_v1("v1_lost");
  ASSERT_NE(m, nullptr);
  auto* g = dynamic_cast<GpuChatGLM1*>(m.get());
  ASSERT_NE(g, nullptr);
  KvPool kv(m->config(), 2, 4, DType::kF16);
  std::vector<int32_t> blocks = {0, 1};
  const std::vector<int32_t> prompt = {1, 2, 70, 71};
  std::vector<float> out;
  SeqInput in{prompt.data(), 4, 0, blocks.data(), 2, false};
  ASSERT_TRUE(m->forward({in}, &kv, &out).ok());
  out.clear();
  g->device()->inject_failure_after(1);
  SeqInput step{prompt.data(), 1, 4, blocks.data(), 2, false};
  step.prefix_len = 4;
  Status s = m->forward({step}, &kv, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(m->health().ok());
}

}  // namespace
}  // namespace glm::model
