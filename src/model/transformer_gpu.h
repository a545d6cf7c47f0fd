// GpuTransformer: the Transformer (transformer.h: ChatGLM2/3, GLM-4, llama) on a Vulkan device,
// whole or split: with --gpu-layers N below the layer count, the first layers run on the CPU (a
// Transformer holding only their weights, its K/V in the KvPool's host memory) and the last N
// layers and the output head on the GPU, as llama.cpp's -ngl.
// The weights are uploaded once in their GGUF block formats; the KV cache lives in device
// memory, one buffer a layer with model::KvPool's block layout ([2 (K,V), n_blocks,
// block_tokens, row] of the pool's type), while the KvPool keeps the accounting (which blocks
// are whose) for the scheduler. A step is one command buffer: embeddings and rotary tables come
// from the host (computed as the CPU path does), every op runs on the device, and only the
// logits (or hidden rows) come back. The CPU Transformer is its reference.
// Ownership: keeps the GGUF file (for the embedding rows) and the device alive.
// Thread-safety: as Transformer (forward from one thread). Cost: a step uploads
// T * (n_embd + n_rot + 2) floats and block tables, reads back R * n_vocab floats.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "model/model.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace glm::model {

class GpuTransformer : public Model {
 public:
  // Uploads the GPU's layers of `weights` (views into `file`) to `device` and keeps the others
  // for the CPU (options.gpu_layers; -1 = as many as fit beside their K/V: model/gpu_plan.h; a
  // CPU Transformer when none does). Errors: unsupported (a weight type or shape the GPU kernels
  // do not take), out_of_memory (the layers asked for do not fit: both sizes named).
  static StatusOr<std::unique_ptr<Model>> create(std::shared_ptr<const gguf::File> file,
                                                 Config config, Weights weights,
                                                 std::unique_ptr<gpu::Device> device,
                                                 const LoadOptions& options);

  const Config& config() const override { return config_; }
  Status forward(const std::vector<SeqInput>& batch, KvPool* kv, std::vector<float>* out,
                 OutputKind kind = OutputKind::kLogits) override;
  void copy_kv_block(KvPool* kv, int src, int dst) override;
  void save_kv_block(const KvPool* kv, int block, uint8_t* data) const override;
  void load_kv_block(KvPool* kv, int block, const uint8_t* data) override;
  std::string device_name() const override;
  Status health() const override;
  int kv_host_layers() const override { return n_cpu_; }
  size_t device_bytes() const override { return planned_bytes_; }

  gpu::Device* device() { return device_.get(); }
  int gpu_layers() const { return config_.n_layer - n_cpu_; }

 private:
  struct Layer {
    gpu::Buffer attn_norm;  // [n_embd]
    gpu::Matrix qkv;        // fused [q_dim + 2 kv_dim, n_embd], or
    gpu::Matrix wq, wk, wv;
    gpu::Buffer qkv_b, bq, bk, bv;  // biases or empty
    gpu::Matrix wo;                 // [n_embd, q_dim]
    gpu::Buffer ffn_norm;           // [n_embd]
    gpu::Matrix ffn_up;             // fused [2 n_ff, n_embd] or [n_ff, n_embd]
    gpu::Matrix ffn_gate;           // separate [n_ff, n_embd] or empty
    gpu::Matrix ffn_down;           // [n_embd, n_ff]
    gpu::Buffer ffn_down_b;         // [n_embd] or empty
    gpu::Buffer attn_post_norm;     // [n_embd] glm4's sandwich norms, or empty
    gpu::Buffer ffn_post_norm;      // [n_embd]
  };
  GpuTransformer(std::shared_ptr<const gguf::File> file, Config config, const Weights& weights,
                 std::unique_ptr<gpu::Device> device, int n_cpu);
  // x [n, n_embd] += proj_, or += RMSNorm(proj_) by `post_norm` when it is valid (glm4).
  void add_residual(gpu::Stream& st, const gpu::Buffer& post_norm, gpu::Addr x, int n) const;
  // Uploads layers [n_cpu_, n_layer) and the output head.
  Status upload(const Weights& w, const ProgressFn& progress);
  // Scratch for n tokens, r output rows and b block-table entries (grow only).
  Status reserve(int n, int r, int b);
  // The device KV buffers for `kv` (made on first use, and again if the pool changes).
  Status bind_kv(const KvPool* kv);
  // A layer's K rows start at byte 0 of its buffer, its V rows at v_base().
  uint32_t v_base() const;
  // Copies block `block` of every GPU layer between the device cache and block_io_ ([n_layer -
  // n_cpu_, 2, block_tokens, row]) in one submission: to the host, or from it.
  Status block_io(int block, bool to_host);

  std::shared_ptr<const gguf::File> file_;
  Config config_;
  kernels::WeightView token_embd_;  // read on the host: one row per token
  std::unique_ptr<gpu::Device> device_;
  int n_cpu_ = 0;                     // layers [0, n_cpu_) run on the CPU
  size_t planned_bytes_ = 0;          // GpuLayerPlan::need() at load
  std::unique_ptr<Transformer> cpu_;  // their weights and kernels; null if n_cpu_ == 0
  std::vector<float> cpu_x_;          // [T, n_embd] the residual stream the CPU part hands over
  std::vector<Layer> layers_;         // [n_layer - n_cpu_] the GPU's layers
  gpu::Buffer output_norm_;           // [n_embd]
  gpu::Matrix output_;                // [n_vocab, n_embd]

  // The device KV cache: one buffer a GPU layer.
  std::vector<gpu::Buffer> kv_;
  const KvPool* kv_pool_ = nullptr;
  int kv_blocks_ = 0, kv_block_tokens_ = 0;
  DType kv_type_ = DType::kF16;
  size_t kv_row_bytes_ = 0;

  // Scratch on the device, [T, width] f32 rows, sized for cap_tokens_ / cap_rows_.
  int cap_tokens_ = 0, cap_rows_ = 0, cap_blocks_ = 0;
  gpu::Buffer cur_;     // [T, n_embd] normed input of a sub-block
  gpu::Buffer qkv_;     // [T, q_dim + 2 kv_dim]
  gpu::Buffer attn_;    // [T, q_dim]
  gpu::Buffer proj_;    // [T, n_embd]
  gpu::Buffer up_;      // [T, 2 n_ff] gate then up
  gpu::Buffer act_;     // [T, n_ff]
  gpu::Buffer rows_;    // [R, n_embd] final-norm rows
  gpu::Buffer logits_;  // [R, n_vocab]
  // The step's inputs: host-visible staging and its device copy (whose x part is the residual
  // stream [T, n_embd], updated in place by the layers), laid out as
  // [x: T * n_embd f32 | cos: T * n_rot/2 | sin: T * n_rot/2 | slots: T i32 | out rows: R i32 |
  //  block tables: B i32].
  gpu::Buffer in_host_, in_dev_;
  gpu::Buffer out_host_;                           // [R, max(n_vocab, n_embd)] f32 read back
  std::vector<int> seq_first_row_, seq_table_at_;  // [batch] forward()'s, kept: no allocation
  gpu::Buffer block_io_;  // a block's GPU-layer K/V on its way to or from the disk cache
  // Test hook (docs/gpu.md#failures): GLMSERVE_VULKAN_FAIL_AT_STEP=N fails the N-th forward's
  // submission as a lost device would.
  int fail_at_step_ = 0;
  int steps_ = 0;
};

}  // namespace glm::model
