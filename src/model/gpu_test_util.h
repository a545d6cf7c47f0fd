// What the GPU models' tests share: a prompt and decode steps run through any Model, the
// comparison of two models' logits, a file loaded on the GPU, and the layers a loaded model put
// there. Test-only (GoogleTest assertions).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/scoped_env_test_util.h"
#include "gguf/gguf.h"
#include "gpu/ops.h"
#include "gpu/validation_test_util.h"
#include "model/gpu_model.h"
#include "model/model.h"

namespace glm::model::testing {

struct Outputs {
  std::vector<float> prefill;  // [n_prompt, n_vocab]
  std::vector<float> decode;   // [n_decode, n_vocab]
};

// Prefills `prompt` in one step (all logits) then decodes `next` one token a step, blocks in a
// scattered table of 4-position blocks; every step carries the prompt length (ChatGLM-6B's
// bidirectional prefix; the other models ignore it).
inline Outputs run(Model& m, DType kv_type, const std::vector<int32_t>& prompt,
                   const std::vector<int32_t>& next) {
  Outputs r;
  const int bt = 4, n_blocks = 8;
  KvPool kv(m.config(), n_blocks, bt, kv_type);
  const std::vector<int32_t> blocks = {5, 2, 7, 0, 1, 3, 4, 6};
  const int n = static_cast<int>(prompt.size());
  SeqInput in{prompt.data(), n, 0, blocks.data(), n_blocks, true};
  in.prefix_len = n;
  const Status s = m.forward({in}, &kv, &r.prefill);
  EXPECT_TRUE(s.ok()) << s.message();
  for (size_t i = 0; i < next.size(); ++i) {
    SeqInput step{&next[i], 1, n + static_cast<int>(i), blocks.data(), n_blocks, false};
    step.prefix_len = n;
    const Status d = m.forward({step}, &kv, &r.decode);
    EXPECT_TRUE(d.ok()) << d.message();
  }
  return r;
}

// Whether a model loaded on the machine's GPU ("vulkan") prefills with fp16 products
// (gpu::prefill_in_fp16: tensor cores, or their scalar twin in the coop.* test variants), its
// logits then an fp16 rounding away from an f32 computation's. Asked once a process, of the
// device that loading opens.
inline bool gpu_prefill_in_fp16() {
  static const bool fp16 = [] {
    StatusOr<std::unique_ptr<gpu::Device>> dev = gpu::Device::open(-1);
    return dev.ok() && gpu::check_coop_matmul(dev->get()).ok() && gpu::prefill_in_fp16(**dev);
  }();
  return fp16;
}

// Whether a model loaded on the machine's GPU decodes quantized weights with 8-bit activations
// (gpu::decode_in_int8: where the device accelerates integer dot products, as NVIDIA's do, or
// the subgroup16.* test variants force them). Its decode logits are then as far from an f32
// computation's as the CPU kernels' 8-bit activations take theirs: up to ~2.5% of their range
// (weight_types_test), 2.0e-2 to 3.5e-2 measured on the GPU-vs-CPU tests' models (lavapipe,
// GLMSERVE_VULKAN_MATMUL=2,2,16,1), against 5e-4 with f32 activations: kInt8DecodeTol.
inline bool gpu_decode_in_int8() {
  static const bool int8 = [] {
    StatusOr<std::unique_ptr<gpu::Device>> dev = gpu::Device::open(-1);
    return dev.ok() && gpu::decode_in_int8(**dev);
  }();
  return int8;
}
inline constexpr float kInt8DecodeTol = 5e-2f;

// max |a - b| / max(1, max |b|).
inline float max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0, m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    d = std::max(d, std::fabs(a[i] - b[i]));
    m = std::max(m, std::fabs(b[i]));
  }
  EXPECT_GT(m, 0.1f);  // the comparison is not between zeros
  return d / std::max(1.0f, m);
}

// The model file at `path` loaded with `o` on the first Vulkan device (--device vulkan, two
// threads), on a device capped at cap_mib MiB (GLMSERVE_VULKAN_MEMORY_MB) when cap_mib > 0.
// It may come up on the CPU (nothing fits, no device): the caller checks where.
inline StatusOr<std::unique_ptr<Model>> load_vulkan(const std::string& path, LoadOptions o,
                                                    int cap_mib = 0) {
  StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
  if (!f.ok()) return f.status();
  o.n_threads = 2;
  o.device = "vulkan";
  std::shared_ptr<const gguf::File> file(std::move(*f));
  if (cap_mib == 0) return load_model(file, o);
  glm::testing::ScopedEnv cap("GLMSERVE_VULKAN_MEMORY_MB", std::to_string(cap_mib).c_str());
  return load_model(file, o);
}

// The model file at `path` on the first Vulkan device, `gpu_layers` of its layers there (-1: as
// many as fit), the MTP block too when mtp_kv_bytes > 0 (--spec mtp's), the routed experts of
// the first cpu_moe layers in host memory; unavailable when it came up on the CPU (no device:
// these tests are about the GPU).
inline StatusOr<std::unique_ptr<Model>> load_on_gpu(const std::string& path, int gpu_layers = -1,
                                                    size_t mtp_kv_bytes = 0, int cpu_moe = 0) {
  LoadOptions o;
  o.gpu_layers = gpu_layers;
  o.mtp_kv_bytes = mtp_kv_bytes;
  o.cpu_moe = cpu_moe;
  StatusOr<std::unique_ptr<Model>> m = load_vulkan(path, o);
  if (m.ok() && (*m)->device_name().rfind("vulkan:", 0) != 0) {
    return Status(ErrorCode::kUnavailable, "not on the GPU: " + (*m)->device_name());
  }
  return m;
}

// Each shader's calls (by name, from the device's profile: "copy" is the steps' input uploads
// and output readbacks) in run(m, kv_type, prompt, next), with a fresh cache: what says how
// many dispatches a layer takes. The profile counts over the device's life: what it held
// before is taken away.
inline std::map<std::string, uint64_t> op_calls(Model& m, DType kv_type,
                                                const std::vector<int32_t>& prompt = {3, 1, 4},
                                                const std::vector<int32_t>& next = {1, 5}) {
  std::map<std::string, uint64_t> calls;
  auto* gpu = dynamic_cast<GpuModel*>(&m);
  EXPECT_NE(gpu, nullptr);
  if (gpu == nullptr) return calls;
  EXPECT_TRUE(gpu->device()->enable_profile()) << "no timestamps on this device";
  for (const gpu::OpTime& op : gpu->device()->profile()) calls[op.name] -= op.calls;
  run(m, kv_type, prompt, next);
  for (const gpu::OpTime& op : gpu->device()->profile()) calls[op.name] += op.calls;
  std::erase_if(calls, [](const auto& c) { return c.second == 0; });
  return calls;
}

// op_calls' two decode steps alone: the prompt and steps less the same prompt by itself.
inline std::map<std::string, uint64_t> decode_op_calls(Model& m, DType kv_type) {
  std::map<std::string, uint64_t> calls = op_calls(m, kv_type);
  for (const auto& [name, n] : op_calls(m, kv_type, {3, 1, 4}, {})) {
    EXPECT_GE(calls[name], n) << name;
    calls[name] -= n;
  }
  std::erase_if(calls, [](const auto& c) { return c.second == 0; });
  return calls;
}

// The one-token matmuls (matvec shaders) of op_calls' steps.
inline uint64_t decode_matvecs(Model& m, DType kv_type) {
  uint64_t n = 0;
  for (const auto& [name, calls] : op_calls(m, kv_type)) {
    if (name.rfind("matvec", 0) == 0) n += calls;
  }
  return n;
}

// The layers a loaded model runs on the GPU: -1 when it runs on the CPU.
inline int gpu_layers_of(const Model& m) {
  const auto* g = dynamic_cast<const GpuModel*>(&m);
  return g == nullptr ? -1 : g->gpu_layers();
}

}  // namespace glm::model::testing
