// The model architectures of glmserve's files (GGUF general.architecture) and the one table of
// tensor names, shapes and roles per architecture, read by both the loader (model/weights.cc)
// and the writers (convert/model_spec.cc: gen-model, convert, quantize), as llama.cpp keeps one
// LLM_TENSOR_NAMES table for its loader and its saver. docs/models.md describes the layouts;
// docs/adding-a-model.md lists what a new architecture touches.
// Pure functions and value types; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace glm::arch {

enum class Arch {
  kChatGLM,   // "chatglm": ChatGLM2-6B, ChatGLM3-6B, GLM-4-9B (llama.cpp's layout)
  kChatGLM1,  // "chatglm1": ChatGLM-6B (v1), glmserve's own layout
  kLlama,     // "llama": LLaMA family (llama.cpp's layout)
  kGLM4,      // "glm4": GLM-4-0414, GLM-Z1 (llama.cpp's layout: sandwich norms)
  kGLM4MoE,   // "glm4moe": GLM-4.5, GLM-4.5-Air (llama.cpp's layout: routed + shared experts)
  // "deepseek2": GLM-4.7-Flash (llama.cpp's layout for HF Glm4MoeLiteForCausalLM: multi-head
  // latent attention, glm4moe's experts). DeepSeek-V2/V3 files share the name; their softmax
  // routing is refused (model/moe.cc).
  kDeepSeek2,
};

const char* arch_name(Arch arch);  // the general.architecture string
// unsupported naming the supported list when `name` is none of them.
StatusOr<Arch> arch_from_name(std::string_view name);

// What a tensor is for: decides how gen-model initialises it and which type it gets under a
// target weight type (convert::choose_type).
enum class Role {
  kTokenEmbd,
  kOutput,
  kNorm,
  kBias,
  kAttnQkv,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnOut,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kRouter,      // glm4moe ffn_gate_inp: kept F32 under every target (as llama.cpp's quantizer)
  kExpertBias,  // glm4moe exp_probs_b: the score-correction bias (selection only); F32
  kOther,       // an unknown 2-D weight: quantized like the others
};

// Where the loader puts a tensor (one field of model::Weights / model::LayerWeights each).
enum class Slot {
  kTokenEmbd,
  kOutputNorm,
  kOutputNormBias,
  kOutput,
  kAttnNorm,
  kAttnNormBias,
  kAttnQkv,
  kAttnQkvBias,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnQBias,
  kAttnKBias,
  kAttnVBias,
  kAttnOut,
  kAttnOutBias,
  kFfnNorm,
  kFfnNormBias,
  kFfnGate,
  kFfnUp,
  kFfnUpBias,
  kFfnDown,
  kFfnDownBias,
  kAttnPostNorm,  // glm4: RMSNorm of the attention output before the residual add
  kAttnQNorm,     // glm4moe (GLM-4.5 355B): RMSNorm of each query head before the rotary
  kAttnKNorm,     // glm4moe (GLM-4.5 355B): RMSNorm of each key head before the rotary
  kFfnPostNorm,   // glm4: RMSNorm of the MLP output before the residual add
  // glm4moe's MoE layers (model/moe.h): the router, its selection bias, the experts' 3-D
  // matrices and the shared expert.
  kFfnGateInp,
  kFfnExpProbsB,
  kFfnGateExps,
  kFfnUpExps,
  kFfnDownExps,
  kFfnGateShexp,
  kFfnUpShexp,
  kFfnDownShexp,
  // deepseek2's multi-head latent attention (model/mla.cc): the query's low-rank pair and its
  // norm, the joint K/V compression (plus the rotary part of the key) and its norm, and per head
  // the key's and the value's expansions of the compressed row (3-D: {row, rows, n_head}).
  kAttnQA,
  kAttnQANorm,
  kAttnQB,
  kAttnKvAMqa,
  kAttnKvANorm,
  kAttnKB,
  kAttnVB,
  // glm4moe's multi-token-prediction block (nextn, after the trunk's layers; model/mtp.h): the
  // projection of [normed embedding; normed hidden], the two norms, and its own embeddings, LM
  // head and head norm (optional in a file: the trunk's then).
  kNextnEhProj,
  kNextnEnorm,
  kNextnHnorm,
  kNextnEmbedTokens,
  kNextnHeadNorm,
  kNextnHead,
};

// The sizes a table depends on.
struct Dims {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;  // chatglm, glm4: per half of the fused ffn_up (gate rows, then up rows)
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  // chatglm: attn_qkv.bias; llama, glm4: attn_{q,k,v}.bias (chatglm1: always)
  bool qkv_bias = false;
  bool tied_output = false;  // no output.weight: the LM head reuses token_embd.weight
  // glm4moe: attn_q_norm and attn_k_norm, [head_dim] each (GLM-4.5 355B; not GLM-4.5-Air).
  bool qk_norm = false;
  // glm4moe: layers [0, n_dense_lead) have a dense SwiGLU of n_ff; the others route each token
  // to n_expert experts of n_ff_exp (3-D tensors) plus n_expert_shared shared ones.
  int64_t n_expert = 0;
  int64_t n_ff_exp = 0;
  int64_t n_expert_shared = 0;
  int64_t n_dense_lead = 0;
  // glm4moe: MTP blocks after the n_layer trunk layers (blk.<n_layer + i>, i < n_nextn): a MoE
  // layer with the nextn.* tensors.
  int64_t n_nextn = 0;

  // The head width: n_embd / n_head unless the file states another (attention.key_length:
  // GLM-4.5's 96 heads of 128 over 4096 or 5120).
  int64_t head_width = 0;  // 0: n_embd / n_head
  // deepseek2's latent attention (GLM-4.7-Flash: 768, 512, 192, 64, 256): the query's rank, the
  // compressed K/V row, each head's key part without and with rotary, its value width.
  int64_t q_lora = 0;
  int64_t kv_lora = 0;
  int64_t mla_nope = 0;
  int64_t mla_rope = 0;
  int64_t mla_v = 0;

  int64_t head_dim() const {
    return head_width > 0 ? head_width : n_head > 0 ? n_embd / n_head : 0;
  }
  int64_t q_dim() const { return n_head * head_dim(); }
  int64_t kv_dim() const { return n_head_kv * head_dim(); }
};

struct TensorSpec {
  std::string name;  // "blk.3.attn_qkv.weight"
  int layer = -1;    // block index, -1 outside the blocks
  Slot slot = Slot::kTokenEmbd;
  Role role = Role::kOther;
  // ggml order: shape[0] is the row length; 1 or 2 dimensions, 3 for experts ({row length,
  // rows per expert, n_expert})
  std::vector<int64_t> shape;
};

// Every tensor of `arch` with sizes `d`, in file order (token_embd, the blocks, output_norm,
// output). Cost: O(n_layer) strings.
std::vector<TensorSpec> tensor_table(Arch arch, const Dims& d);

}  // namespace glm::arch
