// Hyperparameters of a loaded model, read from GGUF metadata (docs/models.md).
// Value type; thread-safe to copy and read.
#pragma once

#include <string>

#include "arch/arch.h"
#include "core/status.h"

namespace glm::gguf {
class File;
}

namespace glm::model {

using arch::Arch;  // the file's layout: chatglm, chatglm1, llama, glm4 (arch/arch.h)
using arch::arch_name;

// glm4moe's mixture of experts (GGUF keys in docs/model-files.md; model/moe.h computes it).
struct MoeConfig {
  int n_expert = 0;           // expert_count: routed experts per MoE layer
  int n_expert_used = 0;      // expert_used_count: top-k per token
  int n_expert_shared = 0;    // expert_shared_count: shared experts, one fused SwiGLU
  int n_ff_exp = 0;           // expert_feed_forward_length
  int n_dense_lead = 0;       // leading_dense_block_count: layers [0, n) are dense
  int n_layer_nextn = 0;      // nextn_predict_layers: trailing MTP blocks, not run
  float weights_scale = 1;    // expert_weights_scale: routed_scaling_factor (0 in a file = 1)
  bool weights_norm = false;  // expert_weights_norm: chosen weights divided by their sum
};

// deepseek2's multi-head latent attention (GLM-4.7-Flash; model/mla.cc), in the absorbed form
// llama.cpp runs: a token's K/V cache row is its compressed row (kv_lora) and
// the rotary part of its key (n_rot), one KV head of head_dim = kv_lora + n_rot that every query
// head reads; its value is the row's first kv_lora values.
struct MlaConfig {
  int q_lora = 0;   // attention.q_lora_rank: the query's low rank
  int kv_lora = 0;  // attention.kv_lora_rank: the compressed K/V row
  int k_head = 0;   // attention.key_length_mla: a head's key, nope + rope (the scale's width)
  int v_head = 0;   // attention.value_length_mla: a head's value after its expansion
};

struct Config {
  Arch arch = Arch::kChatGLM;
  std::string arch_name;  // general.architecture as in the file
  int n_vocab = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;     // attention.key_length, else n_embd / n_head
  int n_ctx_train = 0;  // context_length
  int n_rot = 0;        // rotary dimensions per head (chatglm, GLM-4-0414: head_dim / 2)
  float rope_base = 10000.0f;
  // 1 / rope.scaling.factor when rope.scaling.type is "linear" (position interpolation), else 1.
  float rope_freq_scale = 1.0f;
  float norm_eps = 1e-5f;
  bool qkv_bias = false;
  bool tied_output = false;  // LM head shares token_embd.weight
  // glm4moe: each query and key head RMS-normed before the rotary (attn_q_norm, attn_k_norm:
  // GLM-4.5 355B and GLM-4.6; GLM-4.5-Air has none).
  bool qk_norm = false;
  // Rotary pairs (x[i], x[i + n_rot / 2]) (llama.cpp's NEOX: glm4moe) instead of adjacent ones.
  bool rope_neox = false;
  MoeConfig moe;  // glm4moe and deepseek2; n_expert == 0 elsewhere
  MlaConfig mla;  // deepseek2; kv_lora == 0 elsewhere

  bool is_mla() const { return mla.kv_lora > 0; }
  int mla_nope() const { return mla.k_head - n_rot; }  // a head's key part without rotary

  // width of the query rows (deepseek2: the absorbed queries, n_head rows of kv_lora + n_rot)
  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }  // width of one K (or V) row
  // The attention's scale: 1 / sqrt of a head's key width (deepseek2: k_head, not head_dim).
  float attn_scale() const;
  // The sizes of the architecture's tensor table (arch::tensor_table).
  arch::Dims dims() const;
};

// Reads and validates the hyperparameters of `file` ("<arch>.embedding_length", ...), with the
// defaults llama.cpp uses for optional keys. n_vocab comes from token_embd.weight (or, in a
// vocab-only file, the tokenizer's token list); qkv_bias and tied_output from which tensors exist.
// Errors: unsupported (unknown architecture), bad_file (missing or inconsistent metadata such as
// embedding_length % head_count != 0); every message names the file and the key.
StatusOr<Config> read_config(const gguf::File& file);

// The shape of the MTP block's own K/V pool (Model::forward_mtp): c's K/V rows, one layer.
inline Config mtp_kv_config(Config c) {
  c.n_layer = 1;
  return c;
}

}  // namespace glm::model
