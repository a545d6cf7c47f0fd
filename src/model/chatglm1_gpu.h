// GpuChatGLM1: ChatGLM-6B (v1) (chatglm1.h, glmserve's "chatglm1" layout) on a Vulkan device,
// every layer on the GPU (a split with the CPU through --gpu-layers is not built: refused by
// name). The device, the weights' upload, the KV cache in device memory (forks, the KV disk
// cache) and the step's inputs and outputs are GpuModel's (gpu_model.h); this class records
// ChatGLM-6B's layers: LayerNorm with bias, QKV with bias, 2D rotary (rotate-half pairs of each
// half of a head, the host's tables of position and block position), attention with the
// bidirectional prompt prefix, the residual on the normalised input scaled by alpha, the GELU
// MLP with biases. The CPU model (chatglm1.cc) is its reference; both validate a batch the same
// way (chatglm1::prompt_lengths: the prompt in one step, its length in every step).
// Ownership: keeps the GGUF file (for the embedding rows) and the device alive.
// Thread-safety: forward from one thread. Cost: a step uploads T * (n_embd + 2 head_dim / 2 + 1)
// floats and block tables, reads back R * n_vocab floats.
#pragma once

#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "model/gpu_model.h"
#include "model/weights.h"

namespace glm::model {

class GpuChatGLM1 : public GpuModel {
 public:
  // Uploads every layer of `weights` (views into `file`) to `device`; alpha: the residual scale
  // (chatglm1::residual_scale); left to itself (--gpu-layers -1), a model that does not fit
  // whole runs on the CPU (the CPU model of chatglm1.h). Errors: unsupported (a --gpu-layers
  // split, a weight type or shape the GPU kernels do not take), out_of_memory (--gpu-layers
  // that does not fit: both sizes named).
  static StatusOr<std::unique_ptr<Model>> create(std::shared_ptr<const gguf::File> file,
                                                 const Config& config, const Weights& weights,
                                                 float alpha, std::unique_ptr<gpu::Device> device,
                                                 const LoadOptions& options);

  Capabilities capabilities() const override {
    Capabilities c;
    c.bidirectional_prompt = true;
    return c;
  }
  Status forward(const std::vector<SeqInput>& batch, KvPool* kv, std::vector<float>* out,
                 OutputKind kind = OutputKind::kLogits) override;

 private:
  struct Layer {
    gpu::Buffer attn_norm, attn_norm_b;  // [n_embd] each
    gpu::Matrix qkv;                     // [3 n_embd, n_embd]: q heads, k heads, v heads
    gpu::Buffer qkv_b;                   // [3 n_embd]
    gpu::Matrix wo;                      // [n_embd, n_embd]
    gpu::Buffer wo_b;                    // [n_embd]
    gpu::Buffer ffn_norm, ffn_norm_b;    // [n_embd] each
    gpu::Matrix ffn_up;                  // [n_ff, n_embd]
    gpu::Buffer ffn_up_b;                // [n_ff]
    gpu::Matrix ffn_down;                // [n_embd, n_ff]
    gpu::Buffer ffn_down_b;              // [n_embd]
  };
  GpuChatGLM1(std::shared_ptr<const gguf::File> file, const Config& config, const Weights& weights,
              float alpha, std::unique_ptr<gpu::Device> device, const GpuLayerPlan& plan);
  static Widths widths(const Config& config);
  Status upload(const Weights& w, const ProgressFn& progress);

  float alpha_;
  std::vector<Layer> layers_;  // [n_layer]
  std::vector<int> prefixes_;  // [batch] each sequence's prompt length (forward()'s)
  std::vector<int> bidir_;     // [batch] its bidirectional prefix: prompt length - 1
};

}  // namespace glm::model
