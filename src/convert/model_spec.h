// What a model file holds, independent of where the weights come from: the model family and its
// hyperparameters, presets for generated models, the tensor plan (the architecture's tensor
// table, arch/arch.h, with a type per tensor), the weight-type policy shared by gen-model,
// quantize and convert, and the architecture metadata keys. Pure functions and value types;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arch/arch.h"
#include "core/dtype.h"
#include "core/status.h"
#include "gguf/gguf.h"

namespace glm::convert {

// A model family: what gen-model's --arch names. Several share one file layout (arch::Arch).
enum class Family {
  kChatGLM1,    // ChatGLM-6B:  gguf "chatglm1", context 2048
  kChatGLM2,    // ChatGLM2-6B: gguf "chatglm", context 32768
  kChatGLM3,    // ChatGLM3-6B: gguf "chatglm", context 8192
  kGLM4,        // GLM-4-9B:    gguf "chatglm", rope base 5e6, eps 1.5625e-7
  kLlama,       // LLaMA:       gguf "llama"
  kGLM4_0414,   // GLM-4-9B-0414, GLM-Z1-9B-0414: gguf "glm4" (sandwich norms), eps 1e-5
  kGLM4MoE,     // GLM-4.5, GLM-4.5-Air: gguf "glm4moe" (routed + shared experts)
  kGLM47Flash,  // GLM-4.7-Flash: gguf "deepseek2" (latent attention, glm4moe's experts)
};

StatusOr<Family> parse_family(const std::string& name);  // "chatglm3", "glm4-0414" ...
const char* family_name(Family family);                  // "chatglm3"
arch::Arch layout_of(Family family);                     // the file's architecture
const char* gguf_arch(Family family);                    // "chatglm", "chatglm1", "llama" or "glm4"

struct Hparams {
  Family family = Family::kChatGLM3;
  std::string name;  // general.name
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;  // per half of ffn_up for chatglm (ffn_up has 2 * n_ff rows)
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ctx = 0;
  float norm_eps = 1e-5f;  // RMSNorm (chatglm, llama) or LayerNorm (chatglm1) epsilon
  float rope_base = 10000.0f;
  // > 1: linear RoPE scaling (positions / factor), rope.scaling.type "linear" (ChatGLM2-6B-32K's
  // rope_ratio); 1: none.
  float rope_scale_linear = 1.0f;
  bool tied_output = false;  // no output.weight: the LM head reuses token_embd.weight
  // glm4moe (arch::Dims says what they shape; model::MoeConfig what they mean).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_expert_shared = 0;
  int64_t n_ff_exp = 0;
  int64_t n_dense_lead = 0;
  float expert_weights_scale = 1.0f;
  bool expert_weights_norm = false;
  // glm4moe: multi-token-prediction blocks after the trunk (nextn_predict_layers; GLM-4.5's
  // files carry 1). block_count counts them too.
  int64_t n_nextn = 0;
  // The head width where it is not n_embd / n_head (GLM-4.5-Air: 96 heads of 128 over 4096),
  // written as attention.key_length / value_length; 0: n_embd / n_head.
  int64_t head_width = 0;
  // glm4moe: attn_q_norm and attn_k_norm, each query and key head RMS-normed before the rotary
  // (GLM-4.5 355B, GLM-4.6; GLM-4.5-Air has none).
  bool qk_norm = false;
  // deepseek2 (GLM-4.7-Flash): the latent attention's sizes (arch::Dims says what they shape);
  // n_head_kv is 1 and head_dim() the cache row, kv_lora + mla_rope.
  int64_t q_lora = 0;
  int64_t kv_lora = 0;
  int64_t mla_nope = 0;
  int64_t mla_rope = 0;
  int64_t mla_v = 0;

  arch::Arch layout() const { return layout_of(family); }
  int64_t head_dim() const {
    if (layout() == arch::Arch::kDeepSeek2) return kv_lora + mla_rope;  // a cache row
    return head_width > 0 ? head_width : n_embd / n_head;
  }
  int64_t n_embd_kv() const { return n_head_kv * head_dim(); }
  // Rotary dimensions per head as written in <arch>.rope.dimension_count: head_dim / 2 for the
  // chatglm layouts (rotary on the first half of each head; chatglm1: each half by its own
  // position), glm4 and glm4moe (partial_rotary_factor 0.5), head_dim for llama.
  int64_t n_rot() const {
    if (layout() == arch::Arch::kDeepSeek2) return mla_rope;
    return layout() == arch::Arch::kLlama ? head_dim() : head_dim() / 2;
  }
  // The sizes of the tensor table (chatglm layouts carry QKV biases).
  arch::Dims dims() const;
  // invalid_argument when the shape is not a model (heads do not divide, odd head_dim, ...).
  Status validate() const;
};

// Presets "tiny", "small", "6b" (docs/model-files.md lists the numbers).
StatusOr<Hparams> preset(Family family, const std::string& preset_name);

using arch::Role;

// Role from a llama.cpp tensor name ("blk.3.ffn_down.weight" -> kFfnDown). 1-D tensors that are
// not recognised are reported as kNorm (kept F32).
Role role_from_name(const std::string& name, size_t n_dims);

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row length
  DType type = DType::kF32;
  Role role = Role::kOther;
  int64_t n_elements() const;
  int64_t row_len() const { return shape[0]; }
  int64_t n_rows() const { return n_elements() / shape[0]; }
  uint64_t n_bytes() const;
};

// Weight types accepted on the command line: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k
// q6_k. invalid_argument naming the accepted list otherwise.
StatusOr<DType> parse_weight_type(const std::string& name);
// llama.cpp's general.file_type (llama_ftype) for a target type: f16 -> 1, q4_0 -> 2,
// q8_0 -> 7, q4_k -> 14 (Q4_K_S), q6_k -> 18, bf16 -> 32 ...
uint32_t file_type_of(DType target);
bool is_float_type(DType t);  // f32, f16, bf16

// The stored type of one tensor for a target weight type, as llama.cpp's quantizer chooses it:
// norms and biases F32; float targets everywhere else; for quantized targets the output head
// Q6_K (Q8_0 stays Q8_0), and a row length the type's block does not divide falls back
// (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16). When a fallback happens and `note` is
// not null, a one-line explanation is appended to it.
DType choose_type(DType target, Role role, int64_t row_len, std::string* note = nullptr);

// The tensors of a model in file order (arch::tensor_table of its layout), with their types
// under `target`. Cost: O(n_layer).
std::vector<TensorPlan> tensor_plan(const Hparams& hp, DType target,
                                    std::vector<std::string>* notes = nullptr);
uint64_t plan_bytes(const std::vector<TensorPlan>& plan);       // tensor data, no padding
uint64_t plan_parameters(const std::vector<TensorPlan>& plan);  // number of weights

// Writes general.architecture, general.name, general.file_type, general.quantization_version
// (quantized targets only) and the <arch>.* hyperparameter keys, in llama.cpp's converter order.
void write_arch_metadata(const Hparams& hp, DType target, gguf::Writer* writer);

}  // namespace glm::convert
