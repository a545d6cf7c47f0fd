// Transformer: the pre-norm decoder shared by the "chatglm" (ChatGLM2/3, GLM-4), "llama" and
// "glm4" (GLM-4-0414, GLM-Z1) architectures. Per layer: RMSNorm, Q/K/V projection (fused with
// bias for chatglm), rotary on the first n_rot dims of each head (interleaved pairs),
// grouped-query attention over the paged KV cache, output projection, [glm4: RMSNorm],
// residual, RMSNorm, SwiGLU MLP, [glm4: RMSNorm], residual; then the final RMSNorm and the LM
// head. A batch of several sequences runs every weight matrix ONCE over all their
// tokens; attention runs per sequence over its own blocks.
// Ownership: keeps the GGUF file (and so the mapping the weight views point into) alive.
// Thread-safety: forward() is not reentrant (it reuses preallocated scratch buffers and the
// model's thread pool); call it from one thread (the engine loop). config() is safe anywhere.
// Cost: one forward over T tokens reads every weight once (T-token matmuls); scratch grows to
// the largest batch seen and is then reused (no allocation per decode step).
#pragma once

#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/thread_pool.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/weights.h"

namespace glm::model {

class Transformer : public Model {
 public:
  // `weights` must point into `file`.
  Transformer(std::shared_ptr<const gguf::File> file, Config config, Weights weights,
              const LoadOptions& options);

  const Config& config() const override { return config_; }
  Status forward(const std::vector<SeqInput>& batch, KvPool* kv, std::vector<float>* out,
                 OutputKind kind = OutputKind::kLogits) override;
  kernels::ThreadPool* host_threads() override { return pool_.get(); }
  size_t repacked_bytes() const override { return repacked_bytes_; }
  // glm4moe's MTP block: x = eh_proj [enorm(embedding); hnorm(hidden)], then one MoE layer like
  // the trunk's over the MTP pool's layer 0, then the head norm and head (the trunk's where the
  // file has none). Cost: one layer and, per output row, the LM head.
  bool has_mtp() const override { return weights_.mtp.present(); }
  Status forward_mtp(const std::vector<MtpInput>& batch, KvPool* kv, std::vector<float>* logits,
                     std::vector<float>* hidden) override;

  // The CPU part of a model split with the GPU (GpuTransformer, --gpu-layers): the embeddings
  // and layers [0, n_layers) of the batch, their K/V written into kv; appends the residual
  // stream after them to *x ([T, n_embd], T = the batch's tokens). Layers at and past n_layers
  // may have no weights. Errors as forward().
  Status forward_layers(const std::vector<SeqInput>& batch, KvPool* kv, int n_layers,
                        std::vector<float>* x);

 private:
  // Embeddings and rotary tables of the batch's tokens into x_ and rope_*; then layers
  // [0, n_layers). Returns T. Call after validate_batch.
  int run_layers(const std::vector<SeqInput>& batch, KvPool* kv, int n_layers);
  // One layer (weights lw, LoRA and K/V layer l) over the n rows of x_, in place.
  void run_layer(const std::vector<SeqInput>& batch, KvPool* kv, const LayerWeights& lw, int l,
                 int n);
  // Scratch buffers sized for n_tokens rows (grow only).
  void reserve(int n_tokens, int n_block_ptrs);
  // Projects cur_ into q_/k_/v_ and applies rotary and biases; [T, *] each.
  void project_qkv(int layer, const LayerWeights& lw, int n_tokens);
  // deepseek2's latent attention (mla.cc): cur_ into the absorbed queries q_ [T, n_head,
  // kv_lora + n_rot] and the cache rows k_ [T, kv_lora + n_rot] (compressed, normed; the key's
  // rotary part), rotary applied.
  void project_mla(const LayerWeights& lw, int n_tokens);
  // Each head's attention output attn_ [T, n_head, kv_lora + n_rot] (its first kv_lora values:
  // a weighted sum of compressed rows) expanded by the head's wv_b into mla_v_ [T, n_head *
  // v_head], wo's input.
  void expand_mla_values(const LayerWeights& lw, int n_tokens);
  // For each head h of n tokens: dst[t * dst_stride + h * dst_head + r] (r < rows) = the head's
  // `rows` rows of the stacked w (model::expert_slice) times src[t * src_stride + h * src_head
  // + c] (c < cols), through mla_in_ and mla_out_. Up to kMlaHeadTasksMaxTokens tokens (a
  // decode) a head is a task of the pool (one parallel_for for them all, each head's product on
  // its thread); more, each head's product over the pool in turn.
  static constexpr int kMlaHeadTasksMaxTokens = 8;
  void per_head_matmul(const kernels::WeightView& w, int rows, int cols, const float* src,
                       size_t src_stride, size_t src_head, float* dst, size_t dst_stride,
                       size_t dst_head, int n_tokens);
  // Writes k_/v_ rows into the cache and runs attention into attn_ for each sequence (deepseek2:
  // the K rows only, which are the values too).
  void attend(const std::vector<SeqInput>& batch, int layer, KvPool* kv);
  // SwiGLU MLP of cur_ into ffn_out_ ([T, n_embd]).
  void mlp(int layer, const LayerWeights& lw, int n_tokens);
  // glm4's sandwich norm: proj_ [T, n_embd] RMS-normed in place by `w`; nothing if w is null.
  void post_norm(const float* w, int n_tokens);
  // Groups the batch's rows by LoRA adapter into lora_groups_ (none when no sequence has one).
  void group_lora(const std::vector<SeqInput>& batch);
  // The LoRA side path of one matrix of layer l: for each adapter of the batch with a pair on
  // it, y [T, y_stride] rows of its sequences += scale * B (A x [T, x_stride] rows).
  void add_lora(int l, LoraPair LoraLayer::*pair, const float* x, int x_stride, float* y,
                int y_stride);

  std::shared_ptr<const gguf::File> file_;
  Config config_;
  Weights weights_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  size_t repacked_bytes_ = 0;

  // Scratch, [T, width] row-major; T = tokens in the batch.
  std::vector<float> x_;         // [T, n_embd] residual stream
  std::vector<float> cur_;       // [T, n_embd] normed input of a sub-block
  std::vector<float> qkv_;       // [T, q_dim + 2 kv_dim] fused projection output
  std::vector<float> q_;         // [T, q_dim]
  std::vector<float> k_;         // [T, kv_dim]
  std::vector<float> v_;         // [T, kv_dim]
  std::vector<float> attn_;      // [T, q_dim] attention output
  std::vector<float> proj_;      // [T, n_embd] output of wo / ffn_down
  std::vector<float> up_;        // [T, 2 n_ff] (fused) or [T, n_ff]
  std::vector<float> gate_;      // [T, n_ff]
  std::vector<float> act_;       // [T, n_ff]
  std::vector<float> rope_cos_;  // [T, n_rot / 2]
  std::vector<float> rope_sin_;  // [T, n_rot / 2]
  std::vector<int> pos_;         // [T] position of each token
  std::vector<float> rows_;      // [R, n_embd] final-norm rows to output
  // deepseek2 (project_mla): [T, q_lora], [T, n_head * k_head], a head's rows gathered in and
  // expanded out ([T, max(nope, kv_lora)], [T, max(kv_lora, v_head)]), [T, n_head * v_head].
  std::vector<float> mla_qa_, mla_q_, mla_in_, mla_out_, mla_v_;
  Config mtp_config_;                // config_ with one layer: the MTP block's pool's shape
  std::vector<float> mtp_in_;        // [T, 2 n_embd] forward_mtp's [enorm(e); hnorm(h)] rows
  std::vector<SeqInput> mtp_seqs_;   // forward_mtp's batch as SeqInputs
  std::vector<const void*> k_ptrs_;  // per sequence: its blocks' K pointers of one layer
  std::vector<const void*> v_ptrs_;
  // LoRA: the batch's adapters with pairs, each with its rows in the batch (grouped once per
  // forward, so each A and B runs once over all rows of its adapter).
  struct LoraGroup {
    const Adapter* adapter = nullptr;
    std::vector<int> rows;  // [rows of the adapter's sequences]
  };
  std::vector<LoraGroup> lora_groups_;
  std::vector<float> lora_scratch_;  // lora_apply_rows' [rows, n_in + rank + n_out]
  MoeFfn moe_;                       // glm4moe's MoE layers (scratch of its own)
};

// Checks a P-Tuning prefix against a model config: kv_dim and [n_layer, n_tokens, kv_dim] K/V
// (empty is fine). invalid_argument otherwise.
Status check_prefix(const Config& config, const PrefixKv& prefix);

// Checks a batch against a model config and a KV pool: token ids in range, n_past >= 0,
// n_tokens >= 1, blocks present and in range for every position, a P-Tuning prefix of the
// model's shape. invalid_argument otherwise.
Status validate_batch(const Config& config, const std::vector<SeqInput>& batch, const KvPool* kv);
// The MTP block's input row of one token (forward_mtp, on the CPU and the GPU): row [2 n_embd] =
// [enorm(the token's embedding); hnorm(hidden [n_embd])] (MtpWeights' enorm, hnorm [n_embd]);
// e: [n_embd] scratch. `embed`: the block's embedding (MtpWeights::embed) or the model's.
void mtp_input_row(const Config& config, const kernels::WeightView& embed, const float* enorm,
                   const float* hnorm, int32_t token, const float* hidden, float* e, float* row);

// unsupported naming `model` when a sequence of the batch has an adapter with LoRA pairs: for
// the models that cannot apply them per request yet (GPU, ChatGLM-6B).
Status refuse_lora(const std::vector<SeqInput>& batch, const char* model);

}  // namespace glm::model
