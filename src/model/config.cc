#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "gguf/gguf.h"
#include "model/moe.h"

namespace glm::model {
namespace {

struct Reader {
  const gguf::File& file;
  std::string prefix;  // "chatglm."

  std::string where(const std::string& key) const { return file.path() + ": " + prefix + key; }

  Status get_int(const std::string& key, int* out, bool required, int def) const {
    StatusOr<int64_t> v =
        required ? file.get_int(prefix + key) : file.get_int_or(prefix + key, def);
    if (!v.ok()) {
      if (v.status().code() == ErrorCode::kNotFound) {
        return bad_file(where(key) + " is missing from the metadata (not a complete " +
                        prefix.substr(0, prefix.size() - 1) + " model file?)");
      }
      return bad_file(v.status().message());
    }
    // Dimensions beyond 2^24 (16M) exist in no model; the bound keeps every product of two
    // of them inside int64 and every single one inside int.
    const int64_t max = key == "context_length" ? (int64_t{1} << 30) : (int64_t{1} << 24);
    if (*v < 1 || *v > max) {
      return bad_file(where(key) + " = " + std::to_string(*v) + " is out of range");
    }
    *out = static_cast<int>(*v);
    return Status::Ok();
  }

  Status get_float(const std::string& key, float* out, double def) const {
    StatusOr<double> v = file.get_float_or(prefix + key, def);
    if (!v.ok()) return bad_file(v.status().message());
    if (!std::isfinite(*v) || *v <= 0) {
      return bad_file(where(key) + " = " + std::to_string(*v) + " must be a positive number");
    }
    *out = static_cast<float>(*v);
    return Status::Ok();
  }
};

// deepseek2's latent attention (GLM-4.7-Flash's file: q_lora_rank 768, kv_lora_rank 512,
// key_length 576, value_length 512, key_length_mla 256, value_length_mla 256, rope 64, one KV
// head). Files of llama.cpp's older, non-absorbed layout (attn_kv_b, no key_length_mla) and the
// lite ones without a query rank are refused.
Status read_mla_config(const Reader& r, int key_len, int value_len, Config* c) {
  MlaConfig& m = c->mla;
  if (r.file.find(r.prefix + "attention.key_length_mla") == nullptr) {
    return unsupported(r.where("attention.key_length_mla") +
                       " is missing: a deepseek2 file of llama.cpp's older layout (attn_kv_b); "
                       "convert the model again with a current llama.cpp");
  }
  if (r.file.find(r.prefix + "attention.q_lora_rank") == nullptr) {
    return unsupported(r.where("attention.q_lora_rank") +
                       " is missing: deepseek2 without a query rank (DeepSeek-V2-Lite) is not "
                       "supported");
  }
  GLM_RETURN_IF_ERROR(r.get_int("attention.q_lora_rank", &m.q_lora, true, 0));
  GLM_RETURN_IF_ERROR(r.get_int("attention.kv_lora_rank", &m.kv_lora, true, 0));
  GLM_RETURN_IF_ERROR(r.get_int("attention.key_length_mla", &m.k_head, true, 0));
  GLM_RETURN_IF_ERROR(r.get_int("attention.value_length_mla", &m.v_head, true, 0));
  if (c->n_head_kv != 1) {
    return bad_file(r.where("attention.head_count_kv") + " = " + std::to_string(c->n_head_kv) +
                    " (the absorbed latent attention has one KV head)");
  }
  if (key_len != m.kv_lora + c->n_rot || value_len != m.kv_lora) {
    return bad_file(r.where("attention.key_length") + " = " + std::to_string(key_len) +
                    " and value_length = " + std::to_string(value_len) +
                    " must be kv_lora_rank + rope.dimension_count and kv_lora_rank (" +
                    std::to_string(m.kv_lora + c->n_rot) + ", " + std::to_string(m.kv_lora) + ")");
  }
  if (m.k_head <= c->n_rot || m.kv_lora % 4 != 0) {
    return bad_file(r.where("attention.key_length_mla") + " = " + std::to_string(m.k_head) +
                    " must exceed rope.dimension_count " + std::to_string(c->n_rot) +
                    ", and kv_lora_rank be a multiple of 4");
  }
  c->rope_neox = false;  // llama.cpp's deepseek2: adjacent rotary pairs
  return Status::Ok();
}

}  // namespace

float Config::attn_scale() const {
  return 1.0f / std::sqrt(static_cast<float>(is_mla() ? mla.k_head : head_dim));
}

arch::Dims Config::dims() const {
  arch::Dims d;
  d.n_vocab = n_vocab;
  d.n_embd = n_embd;
  d.n_ff = n_ff;
  d.n_layer = n_layer;
  d.n_head = n_head;
  d.n_head_kv = n_head_kv;
  d.head_width = head_dim;
  d.qkv_bias = qkv_bias;
  d.tied_output = tied_output;
  d.qk_norm = qk_norm;
  d.n_expert = moe.n_expert;
  d.n_ff_exp = moe.n_ff_exp;
  d.n_expert_shared = moe.n_expert_shared;
  d.n_dense_lead = moe.n_dense_lead;
  d.n_nextn = std::min(moe.n_layer_nextn, 1);  // the first MTP block only (GLM-4.5 has one)
  if (is_mla()) {
    d.q_lora = mla.q_lora;
    d.kv_lora = mla.kv_lora;
    d.mla_nope = mla_nope();
    d.mla_rope = n_rot;
    d.mla_v = mla.v_head;
  }
  return d;
}

StatusOr<Config> read_config(const gguf::File& file) {
  Config c;
  StatusOr<std::string> arch = file.get_string("general.architecture");
  if (!arch.ok()) {
    return bad_file(file.path() + ": general.architecture is missing (not a model file?)");
  }
  c.arch_name = *arch;
  StatusOr<Arch> known = arch::arch_from_name(c.arch_name);
  if (!known.ok()) return unsupported(file.path() + ": " + known.status().message());
  c.arch = *known;

  const Reader r{file, c.arch_name + "."};
  GLM_RETURN_IF_ERROR(r.get_int("embedding_length", &c.n_embd, true, 0));
  GLM_RETURN_IF_ERROR(r.get_int("feed_forward_length", &c.n_ff, true, 0));
  GLM_RETURN_IF_ERROR(r.get_int("block_count", &c.n_layer, true, 0));
  GLM_RETURN_IF_ERROR(r.get_int("attention.head_count", &c.n_head, true, 0));
  GLM_RETURN_IF_ERROR(r.get_int("attention.head_count_kv", &c.n_head_kv, false, c.n_head));
  GLM_RETURN_IF_ERROR(r.get_int("context_length", &c.n_ctx_train, false, 2048));
  // The head width: attention.key_length where the file states it (GLM-4.5 and GLM-4.5-Air: 96
  // heads of 128 over 5120 and 4096, wider than embedding_length / head_count; GLM-4-0414: the
  // same as that), else embedding_length / head_count. Keys and values are as wide.
  int key_len = 0, value_len = 0;  // 0: not stated
  for (auto [key, len] : {std::pair{"attention.key_length", &key_len},
                          std::pair{"attention.value_length", &value_len}}) {
    if (file.find(r.prefix + key) != nullptr) GLM_RETURN_IF_ERROR(r.get_int(key, len, true, 0));
  }
  // deepseek2 (absorbed latent attention): keys of kv_lora + rope, values of kv_lora (checked by
  // read_mla_config).
  if (key_len > 0 && value_len > 0 && key_len != value_len && c.arch != Arch::kDeepSeek2) {
    return unsupported(file.path() + ": keys of " + std::to_string(key_len) + " and values of " +
                       std::to_string(value_len) + " (" + r.prefix +
                       "attention.key_length, value_length): heads whose keys and values differ "
                       "in width are not supported");
  }
  const int stated = key_len > 0 ? key_len : value_len;
  if (stated > 0) {
    if (stated % 4 != 0) {
      return bad_file(r.where(key_len > 0 ? "attention.key_length" : "attention.value_length") +
                      " = " + std::to_string(stated) + " must be a multiple of 4");
    }
    c.head_dim = stated;
  } else {
    if (c.n_embd % c.n_head != 0) {
      return bad_file(file.path() + ": embedding_length " + std::to_string(c.n_embd) +
                      " is not a multiple of attention.head_count " + std::to_string(c.n_head));
    }
    c.head_dim = c.n_embd / c.n_head;
  }
  if (c.n_head % c.n_head_kv != 0) {
    return bad_file(file.path() + ": attention.head_count " + std::to_string(c.n_head) +
                    " is not a multiple of attention.head_count_kv " + std::to_string(c.n_head_kv));
  }
  // chatglm: rotary on the first half of each head; chatglm1: on each half (2D); llama and
  // glm4: all (llama.cpp's default; glm4 files always carry the key, head_dim / 2 for 0414).
  const int default_rot =
      c.arch == Arch::kLlama || c.arch == Arch::kGLM4 || c.arch == Arch::kGLM4MoE ? c.head_dim
                                                                                  : c.head_dim / 2;
  GLM_RETURN_IF_ERROR(
      r.get_int("rope.dimension_count", &c.n_rot, c.arch == Arch::kDeepSeek2, default_rot));
  if (c.n_rot % 2 != 0 || c.n_rot > c.head_dim) {
    return bad_file(r.where("rope.dimension_count") + " = " + std::to_string(c.n_rot) +
                    " must be even and at most the head size " + std::to_string(c.head_dim));
  }
  GLM_RETURN_IF_ERROR(r.get_float("rope.freq_base", &c.rope_base, 10000.0));
  // llama.cpp's keys: rope.scaling.type "none" | "linear" (positions / factor) | "yarn"...
  if (StatusOr<std::string> type = file.get_string(r.prefix + "rope.scaling.type"); type.ok()) {
    if (*type == "linear") {
      float factor = 1.0f;
      GLM_RETURN_IF_ERROR(r.get_float("rope.scaling.factor", &factor, 1.0));
      c.rope_freq_scale = 1.0f / factor;
    } else if (*type != "none") {
      return unsupported(r.where("rope.scaling.type") + " = '" + *type +
                         "' is not supported (linear or none)");
    }
  }
  const std::string eps_key = c.arch == Arch::kChatGLM1 ? "attention.layer_norm_epsilon"
                                                        : "attention.layer_norm_rms_epsilon";
  GLM_RETURN_IF_ERROR(r.get_float(eps_key, &c.norm_eps, 1e-5));

  if (const gguf::TensorInfo* emb = file.tensor("token_embd.weight")) {
    if (emb->shape.size() != 2 || emb->shape[0] != c.n_embd || emb->shape[1] < 1 ||
        emb->shape[1] > (int64_t{1} << 30)) {
      return bad_file(file.path() + ": token_embd.weight must have shape {" +
                      std::to_string(c.n_embd) + ", n_vocab}");
    }
    c.n_vocab = static_cast<int>(emb->shape[1]);
  } else if (const gguf::Value* tokens = file.find("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<int>(tokens->array_size());
  }
  if (c.arch == Arch::kChatGLM) {
    c.qkv_bias = file.tensor("blk.0.attn_qkv.bias") != nullptr;
  } else {
    c.qkv_bias = file.tensor("blk.0.attn_q.bias") != nullptr ||
                 file.tensor("blk.0.attn_qkv.bias") != nullptr;
  }
  c.tied_output = file.tensor("output.weight") == nullptr;
  if (c.arch == Arch::kGLM4MoE) {
    c.rope_neox = true;
    c.qk_norm = file.tensor("blk.0.attn_q_norm.weight") != nullptr;
    GLM_RETURN_IF_ERROR(read_moe_config(file, &c));
  }
  if (c.arch == Arch::kDeepSeek2) {
    GLM_RETURN_IF_ERROR(read_mla_config(r, key_len, value_len, &c));
    GLM_RETURN_IF_ERROR(read_moe_config(file, &c));
  }
  return c;
}

}  // namespace glm::model
