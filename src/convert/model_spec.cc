#include "convert/model_spec.h"

#include <cmath>
#include <cstdio>

#include "kernels/quant.h"

namespace glm::convert {

StatusOr<Family> parse_family(const std::string& name) {
  for (Family f : {Family::kChatGLM1, Family::kChatGLM2, Family::kChatGLM3, Family::kGLM4,
                   Family::kLlama, Family::kGLM4_0414, Family::kGLM4MoE, Family::kGLM47Flash}) {
    if (name == family_name(f)) return f;
  }
  return invalid_argument("unknown architecture '" + name +
                          "' (use one of: chatglm1, chatglm2, chatglm3, glm4, llama, glm4-0414, "
                          "glm4moe, glm47-flash)");
}

const char* family_name(Family family) {
  switch (family) {
    case Family::kChatGLM1:
      return "chatglm1";
    case Family::kChatGLM2:
      return "chatglm2";
    case Family::kChatGLM3:
      return "chatglm3";
    case Family::kGLM4:
      return "glm4";
    case Family::kLlama:
      return "llama";
    case Family::kGLM4_0414:
      return "glm4-0414";
    case Family::kGLM4MoE:
      return "glm4moe";
    case Family::kGLM47Flash:
      return "glm47-flash";
  }
  return "?";
}

arch::Arch layout_of(Family family) {
  switch (family) {
    case Family::kChatGLM1:
      return arch::Arch::kChatGLM1;
    case Family::kLlama:
      return arch::Arch::kLlama;
    case Family::kGLM4_0414:
      return arch::Arch::kGLM4;
    case Family::kGLM4MoE:
      return arch::Arch::kGLM4MoE;
    case Family::kGLM47Flash:
      return arch::Arch::kDeepSeek2;
    default:
      return arch::Arch::kChatGLM;
  }
}

const char* gguf_arch(Family family) { return arch::arch_name(layout_of(family)); }

arch::Dims Hparams::dims() const {
  arch::Dims d;
  d.n_vocab = n_vocab;
  d.n_embd = n_embd;
  d.n_ff = n_ff;
  d.n_layer = n_layer;
  d.n_head = n_head;
  d.n_head_kv = n_head_kv;
  d.head_width = head_width;
  d.qkv_bias = layout() != arch::Arch::kLlama && layout() != arch::Arch::kDeepSeek2;
  d.qk_norm = qk_norm;
  d.q_lora = q_lora;
  d.kv_lora = kv_lora;
  d.mla_nope = mla_nope;
  d.mla_rope = mla_rope;
  d.mla_v = mla_v;
  d.tied_output = tied_output;
  d.n_expert = n_expert;
  d.n_ff_exp = n_ff_exp;
  d.n_expert_shared = n_expert_shared;
  d.n_dense_lead = n_dense_lead;
  d.n_nextn = n_nextn;
  return d;
}

Status Hparams::validate() const {
  auto bad = [](const std::string& m) { return invalid_argument("model shape: " + m); };
  if (n_vocab <= 0 || n_embd <= 0 || n_ff <= 0 || n_layer <= 0 || n_head <= 0 || n_head_kv <= 0 ||
      n_ctx <= 0) {
    return bad("every size must be positive");
  }
  if (head_width < 0) return bad("the head width must be positive");
  if (head_width == 0 && layout() != arch::Arch::kDeepSeek2 && n_embd % n_head != 0) {
    return bad("n_embd must be a multiple of n_head");
  }
  if (n_head % n_head_kv != 0) return bad("n_head must be a multiple of n_head_kv");
  if (head_dim() % 4 != 0) return bad("head_dim must be a multiple of 4 (rotary pairs)");
  if (n_vocab > (int64_t{1} << 31) || n_embd > (int64_t{1} << 20) || n_ff > (int64_t{1} << 22) ||
      n_layer > 4096) {
    return bad("sizes are absurdly large");
  }
  if (layout() == arch::Arch::kDeepSeek2 &&
      (q_lora < 1 || kv_lora < 1 || mla_nope < 1 || mla_rope < 2 || mla_rope % 2 != 0 ||
       mla_v < 1 || n_head_kv != 1)) {
    return bad("deepseek2 needs its latent attention's sizes and one KV head");
  }
  if (layout() == arch::Arch::kGLM4MoE || layout() == arch::Arch::kDeepSeek2) {
    if (n_expert < 1 || n_expert_used < 1 || n_ff_exp < 1 || n_expert_shared < 0 ||
        n_dense_lead < 0 || n_dense_lead > n_layer) {
      return bad("glm4moe needs experts, top-k and an expert width");
    }
    if (n_expert_used > n_expert) return bad("top-k is more than the number of experts");
  }
  if (qk_norm && layout() != arch::Arch::kGLM4MoE) return bad("Q/K norms are glm4moe's only");
  if (n_nextn < 0 || n_nextn > 1 ||
      (n_nextn > 0 && layout() != arch::Arch::kGLM4MoE && layout() != arch::Arch::kDeepSeek2)) {
    return bad("an MTP block (nextn) is written for glm4moe only, one at most");
  }
  return Status::Ok();
}

namespace {

Hparams make(Family family, int64_t vocab, int64_t embd, int64_t ff, int64_t layers, int64_t heads,
             int64_t kv, int64_t ctx) {
  Hparams h;
  h.family = family;
  h.n_vocab = vocab;
  h.n_embd = embd;
  h.n_ff = ff;
  h.n_layer = layers;
  h.n_head = heads;
  h.n_head_kv = kv;
  h.n_ctx = ctx;
  if (family == Family::kGLM4) {
    h.norm_eps = 1.5625e-7f;
    h.rope_base = 5e6f;  // 10000 x rope_ratio 500
  }
  // GLM-4-0414 keeps the defaults: rms_norm_eps 1e-5, rope_theta 10000.
  return h;
}

}  // namespace

namespace {

// h with n_expert experts of width n_ff_exp, n_used chosen a token, their weights scaled by
// `scale`.
Hparams experts(Hparams h, int n_expert, int n_used, int n_ff_exp, float scale) {
  h.n_expert = n_expert;
  h.n_expert_used = n_used;
  h.n_ff_exp = n_ff_exp;
  h.expert_weights_scale = scale;
  return h;
}

// GLM-4.5-Air's routing at the given widths: 128 experts, top-8, 1 shared, 1 leading dense
// layer, routed scaling 1.0 and normalised weights (GLM-4.5: 160 experts, scaling 2.5).
StatusOr<Hparams> glm4moe_preset(const std::string& p) {
  Hparams h;
  if (p == "tiny") {
    // The real head geometry (head_dim 128, rotary on 64 dims) at a tiny width; 8 experts,
    // top-2, 1 shared, layer 0 dense: the llama.cpp reference logits (tests/data/glm4moe).
    h = experts(make(Family::kGLM4MoE, 512, 256, 512, 3, 2, 1, 256), 8, 2, 128, 2.5f);
  } else if (p == "small") {
    h = experts(make(Family::kGLM4MoE, 151552, 1024, 2816, 8, 8, 2, 131072), 32, 4, 256, 1.0f);
  } else if (p == "tiny-air") {
    // GLM-4.5-Air's head geometry at a tiny width: heads of 128 wider than n_embd / n_head (4 of
    // them over 256, 2 KV heads), rotary on 64 dims; the tiny preset's experts.
    h = experts(make(Family::kGLM4MoE, 512, 256, 512, 3, 4, 2, 256), 8, 2, 128, 2.5f);
    h.head_width = 128;
  } else if (p == "tiny-355b") {
    // GLM-4.5's (355B-A32B; GLM-4.6 the same) attention at a tiny width: tiny-air's heads of 128
    // wider than n_embd / n_head, each query and key head RMS-normed before the rotary.
    h = experts(make(Family::kGLM4MoE, 512, 256, 512, 3, 4, 2, 256), 8, 2, 128, 2.5f);
    h.head_width = 128;
    h.qk_norm = true;
  } else if (p == "air") {
    // GLM-4.5-Air at its widths (hidden 4096; 96 heads of 128 and 8 KV heads; 128 experts of
    // 1408, top-8; dense FFN 10944) in 3 layers (one dense) to fit a workstation test (about
    // 3.6 GB at q4_0): for speed against llama.cpp at the real expert count.
    h = experts(make(Family::kGLM4MoE, 151552, 4096, 10944, 3, 96, 8, 131072), 128, 8, 1408, 1.0f);
    h.head_width = 128;
  } else {
    return invalid_argument("unknown preset '" + p +
                            "' for glm4moe (use one of: tiny, tiny-air, tiny-355b, small, air)");
  }
  h.n_expert_shared = 1;
  h.n_dense_lead = 1;
  h.expert_weights_norm = true;
  h.n_nextn = 1;  // the MTP block GLM-4.5's files carry (gen-model --no-mtp leaves it out)
  h.name = std::string("glm4moe-") + p;
  return h;
}

// GLM-4.7-Flash (HF Glm4MoeLiteForCausalLM: hidden 2048, 20 heads, q rank 768, K/V rank 512,
// heads' keys of 192 + 64 rotary, values of 256; 64 experts of 1536, top-4, 1 shared, 1 dense
// layer of 10240, routed scaling 1.8; 47 layers) at a tiny width.
StatusOr<Hparams> glm47_flash_preset(const std::string& p) {
  // The tiny trunk (4 heads), or GLM-4.7-Flash's in 3 layers (one dense), for speed against
  // llama.cpp.
  const Hparams tiny =
      experts(make(Family::kGLM47Flash, 512, 256, 512, 3, 4, 1, 256), 8, 2, 128, 1.8f);
  const Hparams flash =
      experts(make(Family::kGLM47Flash, 154880, 2048, 10240, 3, 20, 1, 202752), 64, 4, 1536, 1.8f);
  // The latent attention's widths: ranks, keys' parts without and with rotary, values.
  struct Latent {
    int q_lora, kv_lora, nope, rope, v;
  };
  const Latent real{768, 512, 192, 64, 256};  // cache rows of 576
  Hparams h;
  Latent a;
  if (p == "tiny") {
    h = tiny;
    a = {128, 128, 64, 32, 64};  // every row a multiple of 32 (q8_0)
  } else if (p == "tiny-wide") {
    h = tiny;  // GLM-4.7-Flash's attention's real shapes in a small file
    a = real;
  } else if (p == "flash") {
    h = flash;
    a = real;
  } else {
    return invalid_argument("unknown preset '" + p +
                            "' for glm47-flash (use one of: tiny, tiny-wide, flash)");
  }
  h.q_lora = a.q_lora;
  h.kv_lora = a.kv_lora;
  h.mla_nope = a.nope;
  h.mla_rope = a.rope;
  h.mla_v = a.v;
  h.n_expert_shared = 1;
  h.n_dense_lead = 1;
  h.expert_weights_norm = true;
  h.n_nextn = 1;
  h.rope_base = 1e6f;
  h.name = "glm47-flash-" + p;
  return h;
}

}  // namespace

StatusOr<Hparams> preset(Family family, const std::string& p) {
  if (family == Family::kGLM4MoE) return glm4moe_preset(p);
  if (family == Family::kGLM47Flash) return glm47_flash_preset(p);
  const bool glm4 = family == Family::kGLM4 || family == Family::kGLM4_0414;
  const bool glm4_0414 = family == Family::kGLM4_0414;
  const bool llama = family == Family::kLlama;
  Hparams h;
  if (family == Family::kChatGLM1) {
    // ChatGLM-6B: plain multi-head attention, GELU MLP of 4 x n_embd, vocabulary 130528,
    // context 2048 (max_sequence_length), LM head tied in 6b. The tiny vocabulary holds the
    // 344 v1 pieces.
    if (p == "tiny") {
      h = make(family, 1024, 64, 256, 2, 4, 4, 256);
    } else if (p == "small") {
      h = make(family, 130528, 1024, 4096, 12, 16, 16, 2048);
    } else if (p == "6b") {
      h = make(family, 130528, 4096, 16384, 28, 32, 32, 2048);
    } else {
      return invalid_argument("unknown preset '" + p + "' (use one of: tiny, small, 6b)");
    }
    // HF ties ChatGLM-6B's lm_head to the embeddings (6,173,286,400 parameters). The smaller
    // presets keep an output.weight: with tied random weights the argmax is the input token
    // itself, so generation would only repeat <sop>.
    h.tied_output = p == "6b";
    h.name = std::string(family_name(family)) + "-" + p;
    return h;
  }
  // Real context lengths of the families (metadata only: nothing is allocated for them).
  const int64_t ctx = glm4_0414                     ? 32768
                      : glm4                        ? 131072
                      : family == Family::kChatGLM2 ? 32768
                      : llama                       ? 4096
                                                    : 8192;
  if (p == "tiny" && glm4_0414) {
    // The real head geometry (head_dim 128, rotary on its first 64 dims, 2 query heads per KV
    // head) at a tiny width: the llama.cpp reference logits (tests/data/glm4-0414) use it.
    h = make(family, 512, 256, 512, 2, 2, 1, 256);
  } else if (p == "tiny") {
    h = make(family, 512, 64, 160, 2, 4, 2, 256);
  } else if (p == "small") {
    const int64_t vocab = glm4 ? 151552 : llama ? 32000 : 65024;
    h = make(family, vocab, 1024, 2816, 12, 8, llama ? 4 : 2, ctx);
  } else if (p == "6b") {
    if (llama) {
      h = make(family, 32000, 4096, 11008, 32, 32, 32, ctx);  // LLaMA-2-7B
    } else {
      // ChatGLM3-6B, GLM-4-9B and GLM-4-9B-0414 (the same widths; head_dim 128).
      h = make(family, glm4 ? 151552 : 65024, 4096, 13696, glm4 ? 40 : 28, 32, 2, ctx);
    }
  } else {
    return invalid_argument("unknown preset '" + p + "' (use one of: tiny, small, 6b)");
  }
  h.name = std::string(family_name(family)) + "-" + p;
  return h;
}

Role role_from_name(const std::string& name, size_t n_dims) {
  auto ends = [&](const char* s) {
    const std::string t(s);
    return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
  };
  if (name == "token_embd.weight") return Role::kTokenEmbd;
  if (name == "output.weight") return Role::kOutput;
  if (ends(".bias")) return Role::kBias;
  if (ends("_norm.weight")) return Role::kNorm;
  if (n_dims < 2) return Role::kNorm;
  if (ends(".attn_qkv.weight")) return Role::kAttnQkv;
  if (ends(".attn_q.weight")) return Role::kAttnQ;
  if (ends(".attn_k.weight")) return Role::kAttnK;
  if (ends(".attn_v.weight")) return Role::kAttnV;
  if (ends(".attn_output.weight")) return Role::kAttnOut;
  if (ends(".ffn_up.weight")) return Role::kFfnUp;
  if (ends(".ffn_gate.weight")) return Role::kFfnGate;
  if (ends(".ffn_down.weight")) return Role::kFfnDown;
  if (ends(".ffn_gate_inp.weight")) return Role::kRouter;
  if (ends(".ffn_up_exps.weight") || ends(".ffn_up_shexp.weight")) return Role::kFfnUp;
  if (ends(".ffn_gate_exps.weight") || ends(".ffn_gate_shexp.weight")) return Role::kFfnGate;
  if (ends(".ffn_down_exps.weight") || ends(".ffn_down_shexp.weight")) return Role::kFfnDown;
  return Role::kOther;
}

int64_t TensorPlan::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t TensorPlan::n_bytes() const {
  return static_cast<uint64_t>(n_rows()) * row_bytes(type, row_len());
}

namespace {

struct TypeName {
  const char* name;
  DType type;
  uint32_t file_type;  // llama_ftype
};
constexpr TypeName kTypes[] = {
    {"f32", DType::kF32, 0},    {"f16", DType::kF16, 1},    {"bf16", DType::kBF16, 32},
    {"q8_0", DType::kQ8_0, 7},  {"q4_0", DType::kQ4_0, 2},  {"q4_1", DType::kQ4_1, 3},
    {"q5_0", DType::kQ5_0, 8},  {"q5_1", DType::kQ5_1, 9},  {"q4_k", DType::kQ4_K, 14},
    {"q5_k", DType::kQ5_K, 16}, {"q6_k", DType::kQ6_K, 18},
};

}  // namespace

StatusOr<DType> parse_weight_type(const std::string& name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (const TypeName& t : kTypes) {
    if (lower == t.name) return t.type;
  }
  std::string list;
  for (const TypeName& t : kTypes) list += std::string(list.empty() ? "" : " ") + t.name;
  return invalid_argument("unknown weight type '" + name + "' (use one of: " + list + ")");
}

uint32_t file_type_of(DType target) {
  for (const TypeName& t : kTypes) {
    if (t.type == target) return t.file_type;
  }
  return 0;
}

bool is_float_type(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

DType choose_type(DType target, Role role, int64_t row_len, std::string* note) {
  if (role == Role::kNorm || role == Role::kBias || role == Role::kRouter ||
      role == Role::kExpertBias) {
    return DType::kF32;
  }
  if (is_float_type(target)) return target;
  DType t = target;
  if (role == Role::kOutput && t != DType::kQ8_0) t = DType::kQ6_K;
  const int block = dtype_info(t).block_size;
  if (row_len % block == 0) return t;
  DType fb = DType::kF16;
  switch (t) {
    case DType::kQ4_K:
      fb = DType::kQ5_0;
      break;
    case DType::kQ5_K:
      fb = DType::kQ5_1;
      break;
    case DType::kQ6_K:
      fb = DType::kQ8_0;
      break;
    default:
      break;
  }
  if (row_len % dtype_info(fb).block_size != 0) fb = DType::kF16;
  if (note != nullptr) {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "row length %lld is not a multiple of %d (the %s block): %s used",
                  static_cast<long long>(row_len), block, dtype_name(t), dtype_name(fb));
    *note = buf;
  }
  return fb;
}

std::vector<TensorPlan> tensor_plan(const Hparams& hp, DType target,
                                    std::vector<std::string>* notes) {
  std::vector<TensorPlan> plan;
  for (arch::TensorSpec& s : arch::tensor_table(hp.layout(), hp.dims())) {
    TensorPlan t;
    t.name = std::move(s.name);
    t.role = s.role;
    std::string note;
    t.type = choose_type(target, s.role, s.shape[0], &note);
    if (!note.empty() && notes != nullptr) notes->push_back(t.name + ": " + note);
    t.shape = std::move(s.shape);
    plan.push_back(std::move(t));
  }
  return plan;
}

uint64_t plan_bytes(const std::vector<TensorPlan>& plan) {
  uint64_t n = 0;
  for (const TensorPlan& t : plan) n += t.n_bytes();
  return n;
}

uint64_t plan_parameters(const std::vector<TensorPlan>& plan) {
  uint64_t n = 0;
  for (const TensorPlan& t : plan) n += static_cast<uint64_t>(t.n_elements());
  return n;
}

void write_arch_metadata(const Hparams& hp, DType target, gguf::Writer* w) {
  using gguf::Value;
  const std::string a = gguf_arch(hp.family);
  auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  w->set("general.architecture", Value::string(a));
  w->set("general.name", Value::string(hp.name));
  w->set(a + ".context_length", u32(hp.n_ctx));
  w->set(a + ".embedding_length", u32(hp.n_embd));
  w->set(a + ".feed_forward_length", u32(hp.n_ff));
  w->set(a + ".block_count", u32(hp.n_layer + hp.n_nextn));  // MTP blocks included
  w->set(a + ".attention.head_count", u32(hp.n_head));
  w->set(a + ".attention.head_count_kv", u32(hp.n_head_kv));
  if (hp.layout() == arch::Arch::kChatGLM1) {
    w->set(a + ".attention.layer_norm_epsilon", Value::f32(hp.norm_eps));
  } else {
    w->set(a + ".attention.layer_norm_rms_epsilon", Value::f32(hp.norm_eps));
  }
  w->set("general.file_type", Value::u32(file_type_of(target)));
  if (!is_float_type(target)) w->set("general.quantization_version", Value::u32(2));
  w->set(a + ".rope.dimension_count", u32(hp.n_rot()));
  w->set(a + ".rope.freq_base", Value::f32(hp.rope_base));
  if (hp.rope_scale_linear != 1.0f) {
    w->set(a + ".rope.scaling.type", Value::string("linear"));
    w->set(a + ".rope.scaling.factor", Value::f32(hp.rope_scale_linear));
  }
  if (hp.layout() == arch::Arch::kDeepSeek2) {
    // llama.cpp's converter for GLM-4.7-Flash: the absorbed latent attention's widths (a cache
    // row kv_lora + rope for keys, kv_lora for values) and each head's own.
    w->set(a + ".attention.q_lora_rank", u32(hp.q_lora));
    w->set(a + ".attention.kv_lora_rank", u32(hp.kv_lora));
    w->set(a + ".attention.key_length", u32(hp.kv_lora + hp.mla_rope));
    w->set(a + ".attention.value_length", u32(hp.kv_lora));
    w->set(a + ".attention.key_length_mla", u32(hp.mla_nope + hp.mla_rope));
    w->set(a + ".attention.value_length_mla", u32(hp.mla_v));
  }
  if (hp.layout() == arch::Arch::kGLM4MoE || hp.layout() == arch::Arch::kDeepSeek2) {
    // llama.cpp's converter order for Glm4MoeModel's expert keys.
    w->set(a + ".expert_count", u32(hp.n_expert));
    w->set(a + ".expert_used_count", u32(hp.n_expert_used));
    w->set(a + ".expert_shared_count", u32(hp.n_expert_shared));
    w->set(a + ".leading_dense_block_count", u32(hp.n_dense_lead));
    w->set(a + ".expert_feed_forward_length", u32(hp.n_ff_exp));
    w->set(a + ".expert_weights_scale", Value::f32(hp.expert_weights_scale));
    w->set(a + ".expert_weights_norm", Value::boolean(hp.expert_weights_norm));
    w->set(a + ".expert_gating_func", u32(2));  // sigmoid
    w->set(a + ".nextn_predict_layers", u32(hp.n_nextn));
  }
  if (hp.layout() == arch::Arch::kGLM4 || hp.layout() == arch::Arch::kGLM4MoE ||
      hp.head_width > 0) {
    // llama.cpp's converter writes the head size when config.json states it (GLM-4-0414 and
    // GLM-4.5 do).
    w->set(a + ".attention.key_length", u32(hp.head_dim()));
    w->set(a + ".attention.value_length", u32(hp.head_dim()));
  }
  if (hp.layout() == arch::Arch::kChatGLM1) {
    // HF's GLMBlock scales the residual by sqrt(2 x num_layers) with its default 28 layers.
    w->set(a + ".residual_scale", Value::f32(std::sqrt(56.0f)));
  }
}

}  // namespace glm::convert
