// The Vulkan Transformer (transformer_gpu.h) against the CPU Transformer, its reference, on
// random-weight models of every weight type the GPU kernels take; the KV cache operations a
// server uses (a fork's block copy, the disk cache's save and load); a device lost in the middle
// of a step. Runs on lavapipe in CI. The goldens of independent implementations run on the GPU
// path in golden_test.cc (GoldenGpu) and batching in batch_test.cc (BatchGpu).
#include "model/transformer_gpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/smaps_test_util.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "model/gpu_test_util.h"
#include "model/test_util.h"

namespace glm::model {
namespace {

using testing::gpu_layers_of;
using testing::max_rel_diff;
using testing::Outputs;
using testing::run;

struct Case {
  const char* arch;
  DType type;
  DType kv;
  bool mixed = false;  // v and up in Q6_K (a Q4_K_M file's mix): llama's matrices kept apart
  int head_dim = 0;    // heads wider than n_embd / n_head (attention.key_length); 0: as wide
};

class GpuVsCpu : public ::testing::TestWithParam<Case> {};

TEST_P(GpuVsCpu, SameLogits) {
  const Case c = GetParam();
  testing::RandomSpec spec;
  spec.arch = c.arch;
  spec.type = c.type;
  // Row lengths the k-quants take (256) and GQA; vocabulary not a multiple of the tiles.
  spec.n_embd = 256;
  spec.n_ff = 512;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_vocab = 77;
  spec.head_dim = c.head_dim;
  if (c.mixed)
    spec.types_by_suffix = {{"attn_v.weight", DType::kQ6_K}, {"ffn_up.weight", DType::kQ6_K}};
  const std::string path =
      testing::temp_path(std::string("gpu_") + c.arch + "_" + dtype_name(c.type) +
                         (c.mixed ? "_mixed" : "") + (c.head_dim > 0 ? "_wide" : "") + ".gguf");
  ASSERT_TRUE(testing::write_random_model(spec, path).ok());
  // The reference: the same weights decoded to f32 on the CPU. (The CPU kernels of quantized
  // weights also quantize the activations to 8 bits, as llama.cpp's do; the GPU kernels multiply
  // by f32 activations, so the decoded model is what they compute.)
  const std::string f32_path = path + ".f32.gguf";
  ASSERT_TRUE(testing::requantize(path, f32_path, DType::kF32).ok());
  auto cpu = testing::load(f32_path, 2, true, "cpu");
  auto gpu = testing::load(path, 2, true, "vulkan");
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  ASSERT_EQ((*gpu)->device_name().substr(0, 7), "vulkan:");
  // 21 prompt tokens: the prefill takes the tiled matmul (gpu::MatmulTuning).
  static_assert(gpu::MatmulTuning{}.tiled_min_tokens <= 21);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 58,
                                       9, 7, 9, 3, 2, 3, 8, 4, 6, 26};
  const std::vector<int32_t> next = {76, 0, 12};
  Outputs a = run(**cpu, c.kv, prompt, next);
  Outputs b = run(**gpu, c.kv, prompt, next);
  // f32 sums in another order; a K/V value on a rounding boundary of the cache's type in one
  // computation and not the other moves by one f16 ulp (2^-11) or one q8_0 code: 5e-4 for f16
  // as the goldens' f16 bound (golden_test.cc), 2e-3 for q8_0.
  float tol = c.kv == DType::kQ8_0 ? 2e-3f : c.kv == DType::kF16 ? 5e-4f : 1e-4f;
  // A prefill of fp16 products (tensor cores; 1.1e-3 to 2.3e-3 seen in the coop.* variant on
  // lavapipe) moves more K/V values across a q8_0 code's boundary (9.5e-3 seen).
  if (c.type != DType::kF32 && testing::gpu_prefill_in_fp16()) {
    tol = c.kv == DType::kQ8_0 ? 2e-2f : 5e-3f;
  }
  EXPECT_LT(max_rel_diff(b.prefill, a.prefill), tol);
  // Decode steps of quantized weights may take 8-bit activations (testing::gpu_decode_in_int8).
  const bool int8 = dtype_info(c.type).block_size > 1 && testing::gpu_decode_in_int8();
  EXPECT_LT(max_rel_diff(b.decode, a.decode), int8 ? testing::kInt8DecodeTol : tol);
}

INSTANTIATE_TEST_SUITE_P(
    Weights, GpuVsCpu,
    ::testing::Values(
        Case{"chatglm", DType::kF32, DType::kF32}, Case{"chatglm", DType::kF16, DType::kF16},
        Case{"chatglm", DType::kQ4_0, DType::kF16}, Case{"chatglm", DType::kQ8_0, DType::kQ8_0},
        Case{"chatglm", DType::kQ4_K, DType::kF16}, Case{"chatglm", DType::kQ6_K, DType::kF16},
        Case{"llama", DType::kBF16, DType::kF32}, Case{"llama", DType::kQ5_K, DType::kF16},
        Case{"llama", DType::kQ5_1, DType::kF16}, Case{"llama", DType::kQ4_K, DType::kF16, true},
        // 4 heads of 128 over 256 (q rows of 512):
        // GLM-4.5-Air's, Mistral-Nemo's geometry.
        Case{"llama", DType::kF16, DType::kF16, false, 128},
        Case{"chatglm", DType::kQ8_0, DType::kF16, false, 128}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return std::string(i.param.arch) + "_" + dtype_name(i.param.type) +
             (i.param.mixed ? "_mixed" : "") + (i.param.head_dim > 0 ? "_wide" : "") + "_kv_" +
             dtype_name(i.param.kv);
    });

// A llama layer's q, k and v, and its gate and up, run as one matmul each where their types
// agree (stacked at upload: GpuModel::Uploader::stacked), apart where they differ (the logits
// of both: GpuVsCpu above, a Q4_K file with v and up in Q6_K): the one-token matmuls of two
// decode steps, from the device's profile, are the LM head's and 4 a layer (QKV, output, gate
// and up, down), else 7.
TEST(GpuStacked, LlamaMatricesAreOneMatmulWhereTheirTypesAgree) {
  for (const bool mixed : {false, true}) {
    SCOPED_TRACE(mixed ? "v and up in Q8_0" : "every matrix in Q4_0");
    testing::RandomSpec spec;
    spec.arch = "llama";
    spec.type = DType::kQ4_0;
    if (mixed) {
      spec.types_by_suffix = {{"attn_v.weight", DType::kQ8_0}, {"ffn_up.weight", DType::kQ8_0}};
    }
    const std::string path =
        testing::temp_path(std::string("gpu_stacked") + (mixed ? "_mixed" : "") + ".gguf");
    ASSERT_TRUE(testing::write_random_model(spec, path).ok());
    auto m = testing::load(path, 2, true, "vulkan");
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(testing::decode_matvecs(**m, DType::kF16),
              2u * (spec.n_layer * (mixed ? 7u : 4u) + 1u));
  }
}

// A ChatGLM2/3 (GLM-4) and a llama layer's decode step: 6 dispatches (QKV with its norm, the
// K/V store with the rotary, attention, the output projection with the residual, gate and up
// with the norm and SwiGLU, down with the residual), and the step's final norm and LM head: the
// device's profile of two decode steps (docs/gpu.md). Not among the *Gpu* variants, whose
// matmul settings run the norms and activations as dispatches of their own.
TEST(VulkanDecode, AChatglmOrLlamaLayerIsSixDispatches) {
  for (const std::string arch : {"chatglm", "llama"}) {
    SCOPED_TRACE(arch);
    testing::RandomSpec spec;
    spec.arch = arch;
    spec.type = DType::kQ8_0;
    const std::string path = testing::temp_path("vulkan_decode_" + arch + ".gguf");
    ASSERT_TRUE(testing::write_random_model(spec, path).ok());
    auto m = testing::load_on_gpu(path);
    ASSERT_TRUE(m.ok()) << m.status().message();
    uint64_t dispatches = 0;
    std::string names;
    for (const auto& [name, calls] : testing::decode_op_calls(**m, DType::kF16)) {
      names += " " + name + " " + std::to_string(calls);
      if (name != "copy") dispatches += calls;
    }
    EXPECT_EQ(dispatches, 2u * (6u * spec.n_layer + 2u)) << names;
  }
}

std::unique_ptr<Model> small_gpu_model(const std::string& name) {
  testing::RandomSpec spec;
  const std::string path = testing::temp_path(name + ".gguf");
  EXPECT_TRUE(testing::write_random_model(spec, path).ok());
  auto m = testing::load(path, 2, true, "vulkan");
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return nullptr;
  // --device vulkan falls back to the CPU without a device: these test the GPU.
  EXPECT_EQ((*m)->device_name().substr(0, 7), "vulkan:");
  return (*m)->device_name().rfind("vulkan:", 0) == 0 ? std::move(*m) : nullptr;
}

// model::warm_up (the engine's at load) runs the shaders of a conversation's first turn: a
// fresh sequence's 20-token prompt and 3 decode steps after it compile no pipeline.
TEST(GpuWarmUp, TheFirstTurnCompilesNoShaderAfterIt) {
  auto m = small_gpu_model("gpu_warm_up");
  ASSERT_NE(m, nullptr);
  KvPool kv(m->config(), 4, 16, DType::kF16);
  const uint64_t before = gpu::Device::pipelines_created();
  ASSERT_TRUE(warm_up(m.get(), &kv, {5, 6}).ok());
  const uint64_t warmed = gpu::Device::pipelines_created();
  EXPECT_GT(warmed, before);  // the model's device is new: the warm-up compiled its shaders
  std::vector<int32_t> prompt(20);
  for (int i = 0; i < 20; ++i) prompt[i] = 3 + i;
  const std::vector<int32_t> blocks = {2, 3};
  std::vector<float> out;
  ASSERT_TRUE(m->forward({SeqInput{prompt.data(), 20, 0, blocks.data(), 2}}, &kv, &out).ok());
  for (int step = 0; step < 3; ++step) {
    const int32_t tok = 7 + step;
    ASSERT_TRUE(m->forward({SeqInput{&tok, 1, 20 + step, blocks.data(), 2}}, &kv, &out).ok());
  }
  EXPECT_EQ(gpu::Device::pipelines_created(), warmed);
}

// A fork copies a shared partial block (copy_kv_block) and goes on from the copy: its logits
// equal the original's going on from its own block.
TEST(GpuKv, ForkedBlockContinuesAsTheOriginal) {
  auto m = small_gpu_model("gpu_fork");
  ASSERT_NE(m, nullptr);
  KvPool kv(m->config(), 4, 4, DType::kF16);
  const std::vector<int32_t> prompt = {7, 3, 9, 11, 2, 5};  // block 0 full, block 1 partial
  std::vector<int32_t> orig = {0, 1}, fork = {0, 2};
  std::vector<float> ignore, a, b;
  SeqInput in{prompt.data(), 6, 0, orig.data(), 2, false};
  ASSERT_TRUE(m->forward({in}, &kv, &ignore).ok());
  m->copy_kv_block(&kv, 1, 2);
  const int32_t tok = 13;
  SeqInput sa{&tok, 1, 6, orig.data(), 2, false};
  SeqInput sb{&tok, 1, 6, fork.data(), 2, false};
  ASSERT_TRUE(m->forward({sa}, &kv, &a).ok());
  ASSERT_TRUE(m->forward({sb}, &kv, &b).ok());
  EXPECT_EQ(a, b);
  // Without the copy, block 3 holds no K/V of positions 4, 5: the logits differ.
  std::vector<int32_t> empty = {0, 3};
  std::vector<float> c;
  SeqInput sc{&tok, 1, 6, empty.data(), 2, false};
  ASSERT_TRUE(m->forward({sc}, &kv, &c).ok());
  EXPECT_NE(a, c);
}

// The disk cache's save and load: a block saved from one pool and loaded into another gives
// the same continuation; the saved bytes have KvPool's layout (the CPU model's save of the same
// tokens agrees within the f16 rounding of the two computations).
TEST(GpuKv, SavedBlockLoadsIntoAnotherPool) {
  auto m = small_gpu_model("gpu_save");
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = {7, 3, 9, 11};
  std::vector<int32_t> blocks = {1, 0};
  std::vector<float> ignore, a, b;
  std::vector<uint8_t> saved;
  {
    KvPool kv(m->config(), 2, 4, DType::kF32);
    SeqInput in{prompt.data(), 4, 0, blocks.data(), 2, false};
    ASSERT_TRUE(m->forward({in}, &kv, &ignore).ok());
    saved.resize(m->kv_block_bytes(&kv));
    m->save_kv_block(&kv, 1, saved.data());
    const int32_t tok = 13;
    SeqInput s{&tok, 1, 4, blocks.data(), 2, false};
    ASSERT_TRUE(m->forward({s}, &kv, &a).ok());
  }
  KvPool other(m->config(), 3, 4, DType::kF32);
  std::vector<int32_t> moved = {2, 0};
  m->load_kv_block(&other, 2, saved.data());
  const int32_t tok = 13;
  SeqInput s{&tok, 1, 4, moved.data(), 2, false};
  ASSERT_TRUE(m->forward({s}, &other, &b).ok());
  EXPECT_LT(max_rel_diff(b, a), 1e-6f);

  auto cpu = testing::load(testing::temp_path("gpu_save.gguf"), 1, true, "cpu");
  ASSERT_TRUE(cpu.ok());
  KvPool ckv((*cpu)->config(), 2, 4, DType::kF32);
  SeqInput in{prompt.data(), 4, 0, blocks.data(), 2, false};
  ASSERT_TRUE((*cpu)->forward({in}, &ckv, &ignore).ok());
  std::vector<uint8_t> cpu_saved((*cpu)->kv_block_bytes(&ckv));
  (*cpu)->save_kv_block(&ckv, 1, cpu_saved.data());
  ASSERT_EQ(cpu_saved.size(), saved.size());
  const float* x = reinterpret_cast<const float*>(saved.data());
  const float* y = reinterpret_cast<const float*>(cpu_saved.data());
  float d = 0;
  for (size_t i = 0; i < saved.size() / 4; ++i) d = std::max(d, std::fabs(x[i] - y[i]));
  EXPECT_LT(d, 1e-4f);
}

// A device lost in the middle of a step fails that forward with a clear error, writes no
// output, and every later step fails the same way (the engine is restarted; docs/gpu.md).
TEST(GpuFailure, LostDeviceFailsTheStepCleanly) {
  auto m = small_gpu_model("gpu_lost");
  ASSERT_NE(m, nullptr);
  auto* g = dynamic_cast<GpuTransformer*>(m.get());
  ASSERT_NE(g, nullptr);
  KvPool kv(m->config(), 2, 4, DType::kF16);
  std::vector<int32_t> blocks = {0, 1};
  const std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<float> out;
  SeqInput in{prompt.data(), 3, 0, blocks.data(), 2, false};
  ASSERT_TRUE(m->forward({in}, &kv, &out).ok());
  out.clear();
  g->device()->inject_failure_after(1);
  SeqInput step{prompt.data(), 1, 3, blocks.data(), 2, false};
  Status s = m->forward({step}, &kv, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
  EXPECT_NE(s.message().find("VK_ERROR_DEVICE_LOST"), std::string::npos) << s.message();
  EXPECT_TRUE(out.empty());
  Status again = m->forward({step}, &kv, &out);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("restart"), std::string::npos) << again.message();
}

TEST(GpuLoad, DeviceFlagIsChecked) {
  EXPECT_TRUE(validate_device("vulkan:0").ok());
  EXPECT_TRUE(validate_device("auto").ok());
  Status s = validate_device("cuda");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("auto, cpu, vulkan or vulkan:N"), std::string::npos);
  EXPECT_FALSE(validate_device("vulkan:").ok());
  EXPECT_FALSE(validate_device("vulkan:x").ok());
}

// The weights go to the device read from the file (gpu::Device::HostBytes::file), not through
// its mapping: after the load the process holds of the file's mapping only what it read itself
// (the metadata, the norms' vectors, the pages the kernel maps around them), a small part of
// the matrices' bytes, where a copy through the mapping left all of them resident.
TEST(GpuLoad, TheWeightsAreReadFromTheFileNotFaultedInThroughItsMapping) {
  testing::RandomSpec spec;
  spec.n_embd = 256;
  spec.n_ff = 1024;
  const std::string path = testing::temp_path("gpu_upload_pages.gguf");
  ASSERT_TRUE(testing::write_random_model(spec, path).ok());
  StatusOr<std::unique_ptr<gguf::File>> opened = gguf::File::open(path);
  ASSERT_TRUE(opened.ok());
  std::shared_ptr<const gguf::File> file(std::move(*opened));
  size_t matrix_bytes = 0;
  for (const gguf::TensorInfo& t : file->tensors()) {
    if (t.shape.size() == 2 && t.name != "token_embd.weight") matrix_bytes += t.n_bytes;
  }
  LoadOptions o;
  o.n_threads = 2;
  o.device = "vulkan";
  StatusOr<std::unique_ptr<Model>> m = load_model(file, o);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(testing::gpu_layers_of(**m), spec.n_layer);
  const long kb = glm::testing::mapping_resident_kb(file->mapping().data());
  ASSERT_GE(kb, 0);
  EXPECT_LT(static_cast<size_t>(kb) * 1024, matrix_bytes / 4)
      << kb << " kB of the mapping resident, of " << matrix_bytes << " bytes of matrices";
}

TEST(GpuLoad, NamedDeviceThatDoesNotExistIsAnError) {
  testing::RandomSpec spec;
  const std::string path = testing::temp_path("gpu_named.gguf");
  ASSERT_TRUE(testing::write_random_model(spec, path).ok());
  auto m = testing::load(path, 1, true, "vulkan:42");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("vulkan:42 does not exist"), std::string::npos)
      << m.status().message();
}

// auto takes the first usable discrete GPU, else the CPU: lavapipe (a CPU device, CI's) leaves
// the model on the CPU; on a machine with a GPU (the bench-gpu.sh run), the GPU serves.
TEST(GpuLoad, AutoTakesADiscreteGpuElseTheCpu) {
  testing::RandomSpec spec;
  const std::string path = testing::temp_path("gpu_auto.gguf");
  ASSERT_TRUE(testing::write_random_model(spec, path).ok());
  std::string want = "cpu";
  StatusOr<std::vector<gpu::DeviceInfo>> list = gpu::list_devices();
  if (list.ok()) {
    for (const gpu::DeviceInfo& d : *list) {
      if (d.type == "discrete" && d.unusable.empty()) {
        want = "vulkan:" + std::to_string(d.index) + " (" + d.name + ")";
        break;
      }
    }
  }
  auto m = testing::load(path, 1, true, "auto");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->device_name(), want);
}

}  // namespace
}  // namespace glm::model

namespace glm::model {
namespace {

// --gpu-layers N below the layer count: the first layers on the CPU, the last N and the head on
// the GPU (llama.cpp's -ngl). The logits equal the CPU model's with the same weights in f32,
// and the KV cache operations of a server keep working across the two halves.
StatusOr<std::unique_ptr<Model>> load_split(const std::string& path, int gpu_layers) {
  return testing::load_on_gpu(path, gpu_layers);
}

TEST(GpuSplit, LayersSplitWithTheCpuGiveTheCpuLogits) {
  for (const char* arch : {"chatglm", "llama"}) {
    SCOPED_TRACE(arch);
    testing::RandomSpec spec;
    spec.arch = arch;
    spec.n_layer = 3;
    const std::string path = testing::temp_path(std::string("split_") + arch + ".gguf");
    ASSERT_TRUE(testing::write_random_model(spec, path).ok());
    auto cpu = testing::load(path, 2, true, "cpu");
    ASSERT_TRUE(cpu.ok());
    const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5};
    const std::vector<int32_t> next = {7, 0};
    Outputs want = run(**cpu, DType::kF16, prompt, next);
    for (int n_gpu : {1, 2}) {
      auto split = load_split(path, n_gpu);
      ASSERT_TRUE(split.ok()) << split.status().message();
      EXPECT_NE((*split)->device_name().find(std::to_string(n_gpu) + " of 3 layers"),
                std::string::npos)
          << (*split)->device_name();
      Outputs got = run(**split, DType::kF16, prompt, next);
      EXPECT_LT(max_rel_diff(got.prefill, want.prefill), 1e-4f) << n_gpu << " GPU layers";
      EXPECT_LT(max_rel_diff(got.decode, want.decode), 1e-4f) << n_gpu << " GPU layers";
    }
  }
}

TEST(GpuSplit, ForkAndDiskBlocksCoverBothHalves) {
  testing::RandomSpec spec;
  spec.n_layer = 3;
  const std::string path = testing::temp_path("split_kv.gguf");
  ASSERT_TRUE(testing::write_random_model(spec, path).ok());
  auto m = load_split(path, 2);
  ASSERT_TRUE(m.ok()) << m.status().message();
  Model& model = **m;
  const std::vector<int32_t> prompt = {7, 3, 9, 11, 2, 5};
  std::vector<int32_t> orig = {0, 1}, fork = {0, 2};
  std::vector<float> ignore, a, b, c;
  KvPool kv(model.config(), 4, 4, DType::kF16);
  SeqInput in{prompt.data(), 6, 0, orig.data(), 2, false};
  ASSERT_TRUE(model.forward({in}, &kv, &ignore).ok());
  model.copy_kv_block(&kv, 1, 2);
  // Block 3 gets block 1 through the disk cache's calls.
  std::vector<uint8_t> saved(model.kv_block_bytes(&kv));
  model.save_kv_block(&kv, 1, saved.data());
  model.load_kv_block(&kv, 3, saved.data());
  std::vector<int32_t> loaded = {0, 3};
  const int32_t tok = 13;
  SeqInput sa{&tok, 1, 6, orig.data(), 2, false};
  SeqInput sb{&tok, 1, 6, fork.data(), 2, false};
  SeqInput sc{&tok, 1, 6, loaded.data(), 2, false};
  ASSERT_TRUE(model.forward({sa}, &kv, &a).ok());
  ASSERT_TRUE(model.forward({sb}, &kv, &b).ok());
  ASSERT_TRUE(model.forward({sc}, &kv, &c).ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
}

// A model loaded with --gpu-layers `asked` on a device of `cap_mib` MiB
// (GLMSERVE_VULKAN_MEMORY_MB), planning steps of 16 tokens and a KV cache of kv_bytes.
StatusOr<std::unique_ptr<Model>> load_with(const std::string& path, int asked, int cap_mib,
                                           size_t kv_bytes = 0, size_t adapter_bytes = 0) {
  LoadOptions o;
  o.gpu_layers = asked;
  o.step_tokens = 16;
  o.kv_bytes = kv_bytes;
  o.adapter_bytes = adapter_bytes;
  return testing::load_vulkan(path, o, cap_mib);
}

// The splits' model, written to `name`: an output head of 4 MiB in f32, three layers of about
// 4 MiB. Empty on failure.
std::string split_model(const char* name) {
  testing::RandomSpec spec;
  spec.n_embd = 256;
  spec.n_ff = 1024;
  spec.n_vocab = 4096;
  spec.n_layer = 3;
  const std::string path = testing::temp_path(name);
  return testing::write_random_model(spec, path).ok() ? path : std::string();
}

TEST(GpuSplit, AutomaticPutsAsManyLayersAsFitBesideTheirKvAndTheCpuTheRest) {
  const std::string path = split_model("split_fit.gguf");
  ASSERT_FALSE(path.empty());
  auto cpu = testing::load(path, 2, true, "cpu");
  ASSERT_TRUE(cpu.ok());
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  const std::vector<int32_t> next = {7, 0};
  const Outputs want = run(**cpu, DType::kF16, prompt, next);
  // Growing the device, the automatic count grows from none (the CPU) to all, one at a time,
  // and a split runs with the CPU's logits; the count beyond what fits is refused, naming it.
  int last = -1, splits = 0;
  for (int mib = 2; mib <= 40 && last < 3; ++mib) {
    auto m = load_with(path, -1, mib);
    ASSERT_TRUE(m.ok()) << mib << " MiB: " << m.status().message();
    const int n = gpu_layers_of(**m);
    ASSERT_GE(n, last) << mib << " MiB";
    if (n == last) continue;
    last = n;
    if (n <= 0 || n >= 3) continue;
    ++splits;
    Outputs got = run(**m, DType::kF16, prompt, next);
    EXPECT_LT(max_rel_diff(got.prefill, want.prefill), 1e-4f) << n << " GPU layers";
    EXPECT_LT(max_rel_diff(got.decode, want.decode), 1e-4f) << n << " GPU layers";
    // The KV cache the engine will make is counted: 4 MiB of K/V a layer leave fewer of them.
    auto with_kv = load_with(path, -1, mib, size_t{3} * 4 << 20);
    ASSERT_TRUE(with_kv.ok()) << with_kv.status().message();
    EXPECT_LT(gpu_layers_of(**with_kv), n) << mib << " MiB";
    auto more = load_with(path, n + 1, mib);
    ASSERT_FALSE(more.ok()) << mib << " MiB, " << n + 1 << " layers";
    EXPECT_EQ(more.status().code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(more.status().message().find(std::to_string(n) + " fit"), std::string::npos)
        << more.status().message();
  }
  EXPECT_EQ(last, 3) << "40 MiB should hold every layer";
  EXPECT_EQ(splits, 2) << "1 and then 2 layers on the GPU";
}

// The adapters the engine will serve per request (LoadOptions::adapter_bytes: their LoRA pairs
// and P-Tuning rows on the device) are planned beside the layers: on the smallest device that
// holds every layer, 4 MiB of adapters (about a layer) leave fewer layers there, and the plan's
// fixed share grows by exactly that.
TEST(GpuSplit, AdaptersServedPerRequestArePlannedBesideTheLayers) {
  const std::string path = split_model("split_adapters.gguf");
  ASSERT_FALSE(path.empty());
  int cap = 0;
  size_t scratch = 0;
  for (int mib = 2; mib <= 40 && cap == 0; ++mib) {
    auto m = load_with(path, -1, mib);
    ASSERT_TRUE(m.ok()) << m.status().message();
    if (gpu_layers_of(**m) == 3) {
      cap = mib;
      scratch = (*m)->gpu_plan()->scratch;
    }
  }
  ASSERT_GT(cap, 0) << "40 MiB should hold every layer";
  const size_t adapters = size_t{4} << 20;
  auto with = load_with(path, -1, cap, 0, adapters);
  ASSERT_TRUE(with.ok()) << with.status().message();
  EXPECT_LT(gpu_layers_of(**with), 3) << cap << " MiB";
  const GpuLayerPlan* p = (*with)->gpu_plan();
  ASSERT_NE(p, nullptr) << "a layer and the head still fit in " << cap << " MiB";
  EXPECT_EQ(p->scratch, scratch + adapters);
}

TEST(GpuSplit, LayersThatDoNotFitAreRefusedWithBothSizes) {
  testing::RandomSpec spec;
  spec.n_embd = 256;
  spec.n_ff = 1024;
  spec.n_vocab = 4096;  // an output head of 4 MiB in f32
  const std::string path = testing::temp_path("split_big.gguf");
  ASSERT_TRUE(testing::write_random_model(spec, path).ok());
  auto m = load_with(path, 99, 3);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kOutOfMemory);
  const std::string& why = m.status().message();
  EXPECT_NE(why.find("--gpu-layers 99: 2 of 2 layers: weights"), std::string::npos) << why;
  EXPECT_NE(why.find("has 0.00 GiB"), std::string::npos) << why;
  EXPECT_NE(why.find("not even the output head fits"), std::string::npos) << why;
  // Left to itself, the model runs on the CPU instead.
  auto automatic = load_with(path, -1, 3);
  ASSERT_TRUE(automatic.ok()) << automatic.status().message();
  EXPECT_EQ((*automatic)->device_name(), "cpu");
}

}  // namespace
}  // namespace glm::model
