// The weights of a decoder-only transformer as views into the GGUF file's mapping (never
// copied), plus the loader that finds each tensor by name and checks its shape and type.
// Only 1-D tensors (norms, biases) that are not stored as f32 are converted into owned f32
// copies (a few KB). Shapes in comments are [rows, cols] (GGUF order is the reverse).
// Thread-safety: immutable after loading.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "arch/arch.h"
#include "core/progress.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "model/moe.h"

namespace glm::model {

struct LayerWeights {
  const float* attn_norm = nullptr;       // [n_embd]
  const float* attn_norm_b = nullptr;     // [n_embd] (LayerNorm models only)
  kernels::WeightView qkv;                // fused: [q_dim + 2 kv_dim, n_embd]; null if separate
  const float* qkv_b = nullptr;           // [q_dim + 2 kv_dim] or null
  kernels::WeightView wq;                 // separate: [q_dim, n_embd]
  kernels::WeightView wk;                 // [kv_dim, n_embd]
  kernels::WeightView wv;                 // [kv_dim, n_embd]
  const float* bq = nullptr;              // [q_dim] or null
  const float* bk = nullptr;              // [kv_dim] or null
  const float* bv = nullptr;              // [kv_dim] or null
  const float* attn_q_norm = nullptr;     // [head_dim] glm4moe: RMSNorm of each q head; or null
  const float* attn_k_norm = nullptr;     // [head_dim] glm4moe: RMSNorm of each k head; or null
  kernels::WeightView wo;                 // [n_embd, q_dim]
  const float* wo_b = nullptr;            // [n_embd] or null
  const float* attn_post_norm = nullptr;  // [n_embd] glm4: RMSNorm of wo's output; else null
  const float* ffn_norm = nullptr;        // [n_embd]
  const float* ffn_norm_b = nullptr;      // [n_embd] (LayerNorm models only)
  kernels::WeightView ffn_up;             // fused SwiGLU: [2 n_ff, n_embd] gate rows then up rows;
                                          // separate: [n_ff, n_embd]
  const float* ffn_up_b = nullptr;        // [rows of ffn_up] or null
  kernels::WeightView ffn_gate;           // separate SwiGLU: [n_ff, n_embd]; null if fused
  kernels::WeightView ffn_down;           // [n_embd, n_ff]
  const float* ffn_down_b = nullptr;      // [n_embd] or null
  const float* ffn_post_norm = nullptr;   // [n_embd] glm4: RMSNorm of the MLP output; else null
  MoeWeights moe;                         // glm4moe's MoE layers; else empty (moe.present())
  // deepseek2's latent attention (Config::mla; wq/wk/wv/qkv empty):
  kernels::WeightView wq_a;          // [q_lora, n_embd]
  const float* q_a_norm = nullptr;   // [q_lora]
  kernels::WeightView wq_b;          // [n_head * k_head, q_lora]: per head nope, then rope
  kernels::WeightView wkv_a;         // [kv_lora + n_rot, n_embd]: compressed row, key's rope
  const float* kv_a_norm = nullptr;  // [kv_lora]
  kernels::WeightView wk_b;          // n_head x [kv_lora, nope] stacked (n_head * kv_lora rows)
  kernels::WeightView wv_b;          // n_head x [v_head, kv_lora] stacked
};

// glm4moe's multi-token-prediction block (blk.<n_layer>; model/model.h forward_mtp): from the
// token t+1's embedding and the trunk's hidden row of position t it predicts token t+2.
// Its embeddings, head norm and head are optional in a file (null: the trunk's are used).
struct MtpWeights {
  LayerWeights layer;                // a MoE layer like the trunk's
  kernels::WeightView eh_proj;       // [n_embd, 2 n_embd] over [enorm(embedding); hnorm(hidden)]
  const float* enorm = nullptr;      // [n_embd]
  const float* hnorm = nullptr;      // [n_embd]
  kernels::WeightView embed;         // [n_vocab, n_embd] or null
  const float* head_norm = nullptr;  // [n_embd] or null
  kernels::WeightView head;          // [n_vocab, n_embd] or null

  bool present() const { return eh_proj.data != nullptr; }
};

struct Weights {
  kernels::WeightView token_embd;        // [n_vocab, n_embd]
  const float* output_norm = nullptr;    // [n_embd]
  const float* output_norm_b = nullptr;  // [n_embd] (LayerNorm models only)
  kernels::WeightView output;            // [n_vocab, n_embd]; = token_embd when tied
  std::vector<LayerWeights> layers;      // [n_layer]
  MtpWeights mtp;                        // glm4moe's MTP block when the file has one
  std::vector<std::unique_ptr<std::vector<float>>> owned;  // converted 1-D tensors
  std::vector<kernels::PackedWeight> packed;               // repacked matrices (repack())
  // Matrices rewritten at load (a LoRA merged in, model/lora.h), each [n_rows, row bytes].
  std::vector<std::unique_ptr<std::vector<uint8_t>>> merged;
};

// The field of `w` (or of its layer `layer`; layer n_layer is the MTP block) that a 2-D slot
// fills; null for a 1-D slot.
kernels::WeightView* matrix_slot(Weights* w, arch::Slot slot, int layer);

// Repacks every matrix that has a faster interleaved layout on this CPU (kernels/packed.h) and
// copies the others as they are into owned huge-page memory; points each view at its copy and
// releases the mapped pages it copied (resident memory stays near the file size). Returns the
// bytes copied. Call once, after loading and before the first forward.
size_t repack(Weights* weights, kernels::ThreadPool* pool, const ProgressFn& progress = nullptr);

// Looks tensors up in one file and fills views. Errors are bad_file/unsupported Statuses that
// name the file, the tensor, the expected and the found shape or type.
class WeightLoader {
 public:
  WeightLoader(const gguf::File& file, Weights* weights) : file_(file), weights_(weights) {}

  // A matrix of `rows` x `cols` (GGUF shape {cols, rows}) of a type matmul can compute with.
  Status matrix(const std::string& name, int64_t rows, int64_t cols, kernels::WeightView* out);
  // n_expert stacked matrices of `rows` x `cols` (GGUF shape {cols, rows, n_expert}) as one view
  // of n_expert * rows rows (model/moe.h slices it per expert).
  Status experts(const std::string& name, int64_t n_expert, int64_t rows, int64_t cols,
                 kernels::WeightView* out);
  // A vector of n floats (any dequantizable type; converted to f32 if needed). Optional: a
  // missing tensor leaves *out null and is not an error.
  Status vector(const std::string& name, int64_t n, const float** out, bool optional = false);
  bool has(const std::string& name) const { return file_.tensor(name) != nullptr; }

 private:
  std::string shape_str(const std::vector<int64_t>& shape) const;
  const gguf::File& file_;
  Weights* weights_;
};

// Loads every tensor of the architecture's table (arch::tensor_table(config.arch,
// config.dims())) into its slot; a tied output points at token_embd. Errors name the tensor.
// The MTP block (config.dims().n_nextn) loads when the file has its nextn.eh_proj; a file that
// announces one without it loads as trunk only.
struct Config;
Status load_weights(const gguf::File& file, const Config& config, Weights* weights);

}  // namespace glm::model
