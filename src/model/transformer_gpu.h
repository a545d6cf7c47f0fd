// GpuTransformer: the Transformer (transformer.h: ChatGLM2/3, GLM-4, GLM-4-0414, GLM-4.5's
// mixture of experts, GLM-4.7-Flash's latent attention, llama) on a Vulkan device, whole or split:
// with --gpu-layers N below the layer count, the first layers run on the CPU (a Transformer holding
// only their weights, its K/V in the KvPool's host memory) and the last N layers and the output
// head on the GPU, as llama.cpp's -ngl. GLM-4.5's MTP block runs on the device too when --spec mtp
// asks for it (LoadOptions::mtp_kv_bytes): forward() then reads back the hidden rows it is fed
// (SeqInput::hidden_out), and forward_mtp() runs it over its own one-layer cache.
// The device, the weights' upload, the KV cache in device memory and the step's inputs and
// outputs are GpuModel's (gpu_model.h); this class records the decoder's layers: every op runs
// on the device, the embeddings and rotary tables come from the host (computed as the CPU path
// does). The CPU Transformer is its reference.
// Ownership: keeps the GGUF file (for the embedding rows) and the device alive.
// Thread-safety: as Transformer (forward from one thread). Cost: a step uploads
// T * (n_embd + n_rot + 1) floats and block tables, reads back R * n_vocab floats.
#pragma once

#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "model/gpu_model.h"
#include "model/moe.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace glm::model {

class GpuTransformer : public GpuModel {
 public:
  // Uploads the GPU's layers of `weights` (views into `file`) to `device` and keeps the others
  // for the CPU (options.gpu_layers; -1 = as many as fit beside their K/V: model/gpu_plan.h; a
  // CPU Transformer when none does). Errors: unsupported (a weight type or shape the GPU kernels
  // do not take), out_of_memory (the layers asked for do not fit: both sizes named).
  static StatusOr<std::unique_ptr<Model>> create(std::shared_ptr<const gguf::File> file,
                                                 Config config, Weights weights,
                                                 std::unique_ptr<gpu::Device> device,
                                                 const LoadOptions& options);

  Status forward(const std::vector<SeqInput>& batch, KvPool* kv, std::vector<float>* out,
                 OutputKind kind = OutputKind::kLogits) override;
  bool has_mtp() const override { return mtp_ != nullptr; }
  size_t host_expert_bytes() const override { return host_ == nullptr ? 0 : host_->bytes; }
  // The CPU layers' pool, else the host experts', else GpuModel's own.
  kernels::ThreadPool* host_threads() override;
  Status forward_mtp(const std::vector<MtpInput>& batch, KvPool* kv, std::vector<float>* logits,
                     std::vector<float>* hidden) override;
  // Floats a token of mla_ (latent_attention's scratch): 0 without latent attention.
  static int mla_floats_per_token(const Config& c);

 private:
  struct Layer {
    gpu::Buffer attn_norm;          // [n_embd]
    gpu::Matrix qkv;                // fused [q_dim + 2 kv_dim, n_embd] (the file's, or stacked), or
    gpu::Matrix wq, wk, wv;         // where their types differ
    gpu::Buffer qkv_b, bq, bk, bv;  // biases or empty
    gpu::Buffer qk_norm;            // [2, head_dim] glm4moe's Q/K norms (q's, k's), or empty
    gpu::Matrix wo;                 // [n_embd, q_dim]
    gpu::Buffer ffn_norm;           // [n_embd]
    gpu::Matrix ffn_up;             // fused [2 n_ff, n_embd] (gate rows, then up) or [n_ff, n_embd]
    gpu::Matrix ffn_gate;           // separate [n_ff, n_embd] or empty
    bool gate_up_stacked = false;   // ffn_up: the file's ffn_gate and ffn_up stacked at upload
    gpu::Matrix ffn_down;           // [n_embd, n_ff]
    gpu::Buffer ffn_down_b;         // [n_embd] or empty
    gpu::Buffer attn_post_norm;     // [n_embd] glm4's sandwich norms, or empty
    gpu::Buffer ffn_post_norm;      // [n_embd]
    // glm4moe's MoE layers (model/moe.h; the dense FFN's matrices are then empty):
    gpu::Matrix gate_inp;              // router [n_expert, n_embd]
    gpu::Buffer exp_probs_b;           // [n_expert] selection bias, or empty
    gpu::Matrix gate_up_exps;          // [n_expert * 2 n_ff_exp, n_embd]: an expert's gate rows
                                       // then its up rows, or (types that differ) empty and
    gpu::Matrix gate_exps, up_exps;    // [n_expert * n_ff_exp, n_embd] stacked
    gpu::Matrix down_exps;             // [n_expert * n_embd, n_ff_exp]
    gpu::Matrix gate_up_shexp;         // [2 n_shared * n_ff_exp, n_embd] gate, then up; or
    gpu::Matrix gate_shexp, up_shexp;  // [n_shared * n_ff_exp, n_embd], or empty
    gpu::Matrix down_shexp;            // [n_embd, n_shared * n_ff_exp]
    // --cpu-moe: this MoE layer's router and routed experts in host memory (HostExperts'
    // views; gate_inp and the *_exps above then empty), its shared expert above.
    const MoeWeights* host_moe = nullptr;
    // deepseek2's latent attention (GLM-4.7-Flash; qkv and wq, wk, wv empty):
    gpu::Matrix wq_a;       // [q_lora, n_embd]
    gpu::Buffer q_a_norm;   // [q_lora]
    gpu::Matrix wq_b;       // [n_head * k_head, q_lora]: every head's nope rows, then rope's
    gpu::Matrix wkv_a;      // [kv_lora + n_rot, n_embd]: compressed row, key's rope
    gpu::Buffer kv_a_norm;  // [kv_lora]
    gpu::Matrix wk_b;       // n_head x [kv_lora, nope]: gpu::matmul_experts' experts, a head each
    gpu::Matrix wv_b;       // n_head x [v_head, kv_lora]
  };
  // The routed experts kept in host memory (LoadOptions::cpu_moe) and what runs them: the
  // CPU's MoE FFN (model/moe.h) on the rows read back from the device mid-step.
  struct HostExperts {
    Weights weights;  // [n_layer] layers: only the host layers' router and experts (repacked)
    std::vector<std::vector<float>> bias;  // [n_layer][n_expert] each host layer's exp_probs_b
    std::unique_ptr<kernels::ThreadPool> pool;
    MoeFfn ffn;
    gpu::Buffer rows;  // [T, n_embd] kReadback: the layer's normed rows (cur_)
    gpu::Buffer out;   // [T, n_embd] kUpload: the chosen experts' weighted sum
    size_t bytes = 0;  // the routers' and routed experts' matrices kept here
  };
  // A LoRA adapter's pairs on the device (model/adapter.h), per GPU layer: a [rank, n_in] and
  // b [n_out, rank] times the pair's scale, f32 (empty where the layer's matrix has none).
  struct GpuLoraPair {
    gpu::Matrix a, b;
  };
  struct GpuLoraLayer {
    GpuLoraPair qkv, wq, wk, wv, wo, ffn_up, ffn_gate, ffn_down;
  };
  struct GpuLora {
    int rank = 0;  // the largest of its pairs
    std::vector<GpuLoraLayer> layers;
  };
  // A step's sequence with a LoRA: its rows [first, first + n) and pairs.
  struct LoraRows {
    const GpuLora* lora = nullptr;
    int first = 0, n = 0;
  };

  // GLM-4.5's MTP block on the device (model/weights.h MtpWeights): its layer, eh_proj, head
  // norm and head (empty: the model's); its input norms and embedding are applied on the host.
  struct Mtp {
    Layer layer;
    gpu::Matrix eh_proj;              // [n_embd, 2 n_embd]
    gpu::Matrix head;                 // [n_vocab, n_embd] or empty
    gpu::Buffer head_norm;            // [n_embd] or empty
    std::vector<float> enorm, hnorm;  // [n_embd]
    kernels::WeightView embed;        // [n_vocab, n_embd] (the block's or the model's)
  };
  GpuTransformer(std::shared_ptr<const gguf::File> file, const Config& config,
                 const Weights& weights, std::unique_ptr<gpu::Device> device,
                 const GpuLayerPlan& plan, bool mtp);
  // One decoder layer on the step's residual stream (in_dev_'s x), its K/V in `cache`; l: its
  // GPU layer (LoRA pairs), -1 for the MTP block.
  // Errors: a failed submission (a layer with host experts submits what was recorded).
  Status run_layer(gpu::Stream& st, const std::vector<SeqInput>& batch, const Step& step,
                   const Layer& g, const CacheRef& cache, int l);
  // The step's LoRA rows (lora_rows_) from the batch's adapters, uploading those not on the
  // device yet; lora_tmp_ sized for them.
  Status prepare_lora(const std::vector<SeqInput>& batch, int n);
  // Uploads the adapter's pairs of the GPU layers into *out.
  Status upload_lora(const Adapter& adapter, GpuLora* out);
  // y[r, y_col ..] += scale B (A x[r]) for the rows of every sequence with a pair `pair` on GPU
  // layer l: x [T, n_in] (rows contiguous), y [T, y_stride].
  void add_lora(gpu::Stream& st, int l, GpuLoraPair GpuLoraLayer::*pair, gpu::Addr x, gpu::Addr y,
                int y_stride, int y_col);
  // The step's rotary tables from its positions.
  void rope_tables(const std::vector<SeqInput>& batch, const Step& step) const;
  // The residual of a sub-block's output matrix w on in [n, w.n_cols]: x [n, n_embd] += w in
  // (+ bias), added by the matmul as it writes; or, when `post_norm` is valid (glm4), proj_ =
  // w in (+ bias), then x += RMSNorm(proj_).
  // The LoRA pair of w on GPU layer l (l < 0: none) is added to the product before the norm.
  void project(gpu::Stream& st, const gpu::Matrix& w, gpu::MatmulInput in, const gpu::Buffer& bias,
               const gpu::Buffer& post_norm, gpu::Addr x, int n, int l,
               GpuLoraPair GpuLoraLayer::*lora);
  // glm4moe's routed and shared experts of `in` (the layer's normed rows [n, n_embd]: cur_, or x
  // with its norm fused into the matmuls that read it, a decode step's), added to x [n, n_embd]
  // (model::MoeFfn's definition): the router and the routing, each slot's expert over moe_, the
  // shared expert over up_ / act_.
  void moe(gpu::Stream& st, const Layer& g, const gpu::MatmulInput& in, gpu::Addr x, int n) const;
  // The attention sub-block of the models with q, k and v projections on `in` (the layer's
  // normed rows [n, n_embd], or x with the norm fused): qkv_ (with the LoRA pairs of GPU layer
  // l and GLM-4.5's Q/K norms), the rotary and K/V store, the attention, x += wo of it.
  void qkv_attention(gpu::Stream& st, const std::vector<SeqInput>& batch, const Step& step,
                     const Layer& g, const CacheRef& cache, const gpu::MatmulInput& in, gpu::Addr x,
                     int l);
  // GLM-4.7-Flash's attention sub-block (transformer_gpu_mla.cc; model/mla.cc's absorbed form)
  // on `in` (the layer's normed rows [n, n_embd], or x with the norm fused): the absorbed
  // queries and the compressed K rows into qkv_ (GpuModel::attend's latent layout), the
  // attention, each head's value expansion, and x += wo of them.
  void latent_attention(gpu::Stream& st, const std::vector<SeqInput>& batch, const Step& step,
                        const Layer& g, const CacheRef& cache, const gpu::MatmulInput& in,
                        gpu::Addr x, int l);
  // The same with the router and routed experts on the host (g.host_moe): the step so far is
  // submitted, cur_ read back, the CPU's MoeFfn adds the chosen experts' sum (out), and a new
  // recording adds it to x and runs the shared expert on the device.
  Status host_moe(gpu::Stream& st, const Layer& g, gpu::Addr x, int n);
  // x += the shared expert of `in` (moe's), where the layer has one.
  void shared_expert(gpu::Stream& st, const Layer& g, const gpu::MatmulInput& in, gpu::Addr x,
                     int n) const;
  // Moves the routed experts of layers [0, cpu_moe) out of `weights` (before the device's plan
  // and upload) into *saved: the views, shared experts left behind.
  static void take_host_experts(Weights* weights, int cpu_moe, std::vector<MoeWeights>* saved);
  // --cpu-moe auto with --gpu-layers -1: the fewest leading layers whose router and routed
  // experts must stay on the host for every layer to fit on the device (0 when the model fits
  // whole or has no experts; kAllLayers when even that does not do: the plan then splits).
  // *why: what kept the whole model off, for the log (the budget, or a matrix over a buffer).
  static int auto_cpu_moe(const gpu::Device& device, const Config& config, Weights* weights,
                          Widths widths, const LoadOptions& options, std::string* why);
  // Uploads layers [n_cpu_, n_layer) and the output head; one layer; the MTP block (mtp_).
  Status upload(const Weights& w, const ProgressFn& progress);
  Status upload_layer(Uploader* up, const LayerWeights& lw, Layer* g, const std::string& name);
  Status upload_mtp(const Weights& w);

  std::unique_ptr<Transformer> cpu_;   // layers [0, n_cpu_): weights and kernels; null if none
  std::vector<float> cpu_x_;           // [T, n_embd] the residual stream the CPU part hands over
  std::vector<Layer> layers_;          // [n_layer - n_cpu_] the GPU's layers
  GpuAdapterCache<GpuLora> loras_;     // the adapters on the device, by Adapter::id
  std::vector<LoraRows> lora_rows_;    // this step's
  gpu::Buffer lora_tmp_;               // [T, rank] A x of a sequence's rows
  std::unique_ptr<HostExperts> host_;  // null: every GPU layer's experts are on the device
  std::unique_ptr<Mtp> mtp_;           // null: the MTP block is not on the device
  Config mtp_config_;                  // config_ with one layer: the MTP pool's shape
  std::vector<SeqInput> mtp_seqs_;     // forward_mtp's batch as SeqInputs
  std::vector<float> mtp_embed_;       // [n_embd] a token's embedding row
};

}  // namespace glm::model
