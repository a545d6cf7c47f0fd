#include "arch/arch.h"

namespace glm::arch {

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::kChatGLM:
      return "chatglm";
    case Arch::kChatGLM1:
      return "chatglm1";
    case Arch::kLlama:
      return "llama";
    case Arch::kGLM4:
      return "glm4";
    case Arch::kGLM4MoE:
      return "glm4moe";
    case Arch::kDeepSeek2:
      return "deepseek2";
  }
  return "?";
}

StatusOr<Arch> arch_from_name(std::string_view name) {
  for (Arch a : {Arch::kChatGLM, Arch::kChatGLM1, Arch::kLlama, Arch::kGLM4, Arch::kGLM4MoE,
                 Arch::kDeepSeek2}) {
    if (name == arch_name(a)) return a;
  }
  return unsupported(
      "architecture '" + std::string(name) +
      "' is not supported (supported: chatglm, llama, chatglm1, glm4, glm4moe, deepseek2)");
}

std::vector<TensorSpec> tensor_table(Arch arch, const Dims& d) {
  std::vector<TensorSpec> t;
  int layer = -1;
  std::string prefix;
  auto add = [&](const char* name, Slot slot, Role role, std::vector<int64_t> shape) {
    t.push_back({prefix + name, layer, slot, role, std::move(shape)});
  };
  const int64_t e = d.n_embd, q = d.q_dim(), kv = d.kv_dim(), ff = d.n_ff;
  // Separate Q/K/V projections (llama, glm4), their biases when the model has them, and the
  // attention's output projection.
  auto add_separate_qkv = [&] {
    add("attn_q.weight", Slot::kAttnQ, Role::kAttnQ, {e, q});
    add("attn_k.weight", Slot::kAttnK, Role::kAttnK, {e, kv});
    add("attn_v.weight", Slot::kAttnV, Role::kAttnV, {e, kv});
    if (d.qkv_bias) {
      add("attn_q.bias", Slot::kAttnQBias, Role::kBias, {q});
      add("attn_k.bias", Slot::kAttnKBias, Role::kBias, {kv});
      add("attn_v.bias", Slot::kAttnVBias, Role::kBias, {kv});
    }
    if (d.qk_norm) {
      add("attn_q_norm.weight", Slot::kAttnQNorm, Role::kNorm, {d.head_dim()});
      add("attn_k_norm.weight", Slot::kAttnKNorm, Role::kNorm, {d.head_dim()});
    }
    add("attn_output.weight", Slot::kAttnOut, Role::kAttnOut, {q, e});
  };
  // glm4moe's and deepseek2's FFN: a dense SwiGLU (separate gate and up) in the leading layers;
  // then the router, its selection bias, the experts' 3-D gate/up/down and the shared expert.
  auto add_moe_ffn = [&] {
    if (layer < d.n_dense_lead) {
      add("ffn_gate.weight", Slot::kFfnGate, Role::kFfnGate, {e, ff});
      add("ffn_up.weight", Slot::kFfnUp, Role::kFfnUp, {e, ff});
      add("ffn_down.weight", Slot::kFfnDown, Role::kFfnDown, {ff, e});
      return;
    }
    const int64_t n_exp = d.n_expert, fe = d.n_ff_exp, fs = d.n_ff_exp * d.n_expert_shared;
    add("ffn_gate_inp.weight", Slot::kFfnGateInp, Role::kRouter, {e, n_exp});
    add("exp_probs_b.bias", Slot::kFfnExpProbsB, Role::kExpertBias, {n_exp});
    add("ffn_gate_exps.weight", Slot::kFfnGateExps, Role::kFfnGate, {e, fe, n_exp});
    add("ffn_down_exps.weight", Slot::kFfnDownExps, Role::kFfnDown, {fe, e, n_exp});
    add("ffn_up_exps.weight", Slot::kFfnUpExps, Role::kFfnUp, {e, fe, n_exp});
    if (d.n_expert_shared > 0) {
      add("ffn_gate_shexp.weight", Slot::kFfnGateShexp, Role::kFfnGate, {e, fs});
      add("ffn_down_shexp.weight", Slot::kFfnDownShexp, Role::kFfnDown, {fs, e});
      add("ffn_up_shexp.weight", Slot::kFfnUpShexp, Role::kFfnUp, {e, fs});
    }
  };
  add("token_embd.weight", Slot::kTokenEmbd, Role::kTokenEmbd, {e, d.n_vocab});
  for (layer = 0; layer < d.n_layer + d.n_nextn; ++layer) {
    prefix = "blk." + std::to_string(layer) + ".";
    if (layer >= d.n_layer) {
      // An MTP block (llama.cpp's converter order): its projection and norms, its embeddings,
      // head norm and head; then a MoE layer like the trunk's (below).
      add("nextn.eh_proj.weight", Slot::kNextnEhProj, Role::kOther, {2 * e, e});
      add("nextn.embed_tokens.weight", Slot::kNextnEmbedTokens, Role::kTokenEmbd, {e, d.n_vocab});
      add("nextn.enorm.weight", Slot::kNextnEnorm, Role::kNorm, {e});
      add("nextn.hnorm.weight", Slot::kNextnHnorm, Role::kNorm, {e});
      add("nextn.shared_head_head.weight", Slot::kNextnHead, Role::kOutput, {e, d.n_vocab});
      add("nextn.shared_head_norm.weight", Slot::kNextnHeadNorm, Role::kNorm, {e});
    }
    add("attn_norm.weight", Slot::kAttnNorm, Role::kNorm, {e});
    switch (arch) {
      case Arch::kChatGLM:
        // Fused QKV, rows: all query heads, then the key heads, then the value heads; fused
        // SwiGLU ffn_up, rows: gate, then up.
        add("attn_qkv.weight", Slot::kAttnQkv, Role::kAttnQkv, {e, q + 2 * kv});
        if (d.qkv_bias) add("attn_qkv.bias", Slot::kAttnQkvBias, Role::kBias, {q + 2 * kv});
        add("attn_output.weight", Slot::kAttnOut, Role::kAttnOut, {q, e});
        add("ffn_norm.weight", Slot::kFfnNorm, Role::kNorm, {e});
        add("ffn_up.weight", Slot::kFfnUp, Role::kFfnUp, {e, 2 * ff});
        add("ffn_down.weight", Slot::kFfnDown, Role::kFfnDown, {ff, e});
        break;
      case Arch::kChatGLM1:
        // LayerNorm with bias; fused QKV (rows q heads, k heads, v heads: the converter
        // un-interleaves HF's per-head [q k v]); GELU MLP; biases everywhere.
        add("attn_norm.bias", Slot::kAttnNormBias, Role::kBias, {e});
        add("attn_qkv.weight", Slot::kAttnQkv, Role::kAttnQkv, {e, 3 * e});
        add("attn_qkv.bias", Slot::kAttnQkvBias, Role::kBias, {3 * e});
        add("attn_output.weight", Slot::kAttnOut, Role::kAttnOut, {e, e});
        add("attn_output.bias", Slot::kAttnOutBias, Role::kBias, {e});
        add("ffn_norm.weight", Slot::kFfnNorm, Role::kNorm, {e});
        add("ffn_norm.bias", Slot::kFfnNormBias, Role::kBias, {e});
        add("ffn_up.weight", Slot::kFfnUp, Role::kFfnUp, {e, ff});
        add("ffn_up.bias", Slot::kFfnUpBias, Role::kBias, {ff});
        add("ffn_down.weight", Slot::kFfnDown, Role::kFfnDown, {ff, e});
        add("ffn_down.bias", Slot::kFfnDownBias, Role::kBias, {e});
        break;
      case Arch::kLlama:
        // Separate Q/K/V (llama.cpp's converter permutes Q/K rows so that rotary pairs are
        // adjacent), separate SwiGLU gate and up.
        add_separate_qkv();
        add("ffn_norm.weight", Slot::kFfnNorm, Role::kNorm, {e});
        add("ffn_gate.weight", Slot::kFfnGate, Role::kFfnGate, {e, ff});
        add("ffn_up.weight", Slot::kFfnUp, Role::kFfnUp, {e, ff});
        add("ffn_down.weight", Slot::kFfnDown, Role::kFfnDown, {ff, e});
        break;
      case Arch::kGLM4:
        // Separate Q/K/V with biases (no row permutation: rotary pairs are adjacent, as in
        // chatglm); each sub-block's output RMS-normed before its residual add ("sandwich");
        // fused SwiGLU ffn_up, rows: gate, then up.
        add_separate_qkv();
        add("post_attention_norm.weight", Slot::kAttnPostNorm, Role::kNorm, {e});
        add("ffn_norm.weight", Slot::kFfnNorm, Role::kNorm, {e});
        add("ffn_up.weight", Slot::kFfnUp, Role::kFfnUp, {e, 2 * ff});
        add("ffn_down.weight", Slot::kFfnDown, Role::kFfnDown, {ff, e});
        add("post_ffw_norm.weight", Slot::kFfnPostNorm, Role::kNorm, {e});
        break;
      case Arch::kGLM4MoE:
        // Separate Q/K/V with biases (NEOX rotary: pairs half a rotary span apart); the norm
        // before the FFN is named post_attention_norm (no sandwich).
        add_separate_qkv();
        add("post_attention_norm.weight", Slot::kFfnNorm, Role::kNorm, {e});
        add_moe_ffn();
        break;
      case Arch::kDeepSeek2: {
        // Multi-head latent attention (llama.cpp's order): the two norms, the query's pair
        // (n_head heads of mla_nope + mla_rope), the joint compression [kv_lora + mla_rope],
        // per head the key's expansion [kv_lora, mla_nope] and the value's [mla_v, kv_lora]
        // (the absorbed form: GGUF {mla_nope, kv_lora, n_head} and {kv_lora, mla_v, n_head}),
        // the output over the heads' values. Then ffn_norm and glm4moe's FFN.
        const int64_t qk = d.mla_nope + d.mla_rope;
        add("attn_q_a_norm.weight", Slot::kAttnQANorm, Role::kNorm, {d.q_lora});
        add("attn_kv_a_norm.weight", Slot::kAttnKvANorm, Role::kNorm, {d.kv_lora});
        add("attn_q_a.weight", Slot::kAttnQA, Role::kAttnQ, {e, d.q_lora});
        add("attn_q_b.weight", Slot::kAttnQB, Role::kAttnQ, {d.q_lora, d.n_head * qk});
        add("attn_kv_a_mqa.weight", Slot::kAttnKvAMqa, Role::kAttnK, {e, d.kv_lora + d.mla_rope});
        add("attn_k_b.weight", Slot::kAttnKB, Role::kAttnK, {d.mla_nope, d.kv_lora, d.n_head});
        add("attn_v_b.weight", Slot::kAttnVB, Role::kAttnV, {d.kv_lora, d.mla_v, d.n_head});
        add("attn_output.weight", Slot::kAttnOut, Role::kAttnOut, {d.n_head * d.mla_v, e});
        add("ffn_norm.weight", Slot::kFfnNorm, Role::kNorm, {e});
        add_moe_ffn();
        break;
      }
    }
  }
  layer = -1;
  prefix.clear();
  add("output_norm.weight", Slot::kOutputNorm, Role::kNorm, {e});
  if (arch == Arch::kChatGLM1) add("output_norm.bias", Slot::kOutputNormBias, Role::kBias, {e});
  if (!d.tied_output) add("output.weight", Slot::kOutput, Role::kOutput, {e, d.n_vocab});
  return t;
}

}  // namespace glm::arch
