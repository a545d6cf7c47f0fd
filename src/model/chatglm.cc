// Weight table of the llama.cpp "chatglm" architecture (ChatGLM2-6B, ChatGLM3-6B, GLM-4-9B):
// fused QKV with bias (rows: all query heads, then key heads, then value heads), fused SwiGLU
// ffn_up (gate rows then up rows), LM head tied to the embeddings when output.weight is absent.
// The forward pass itself is the shared decoder in transformer.cc.
#include <string>

#include "model/config.h"
#include "model/weights.h"

namespace glm::model {

Status load_chatglm_weights(const gguf::File& file, const Config& c, Weights* w) {
  WeightLoader l(file, w);
  GLM_RETURN_IF_ERROR(l.matrix("token_embd.weight", c.n_vocab, c.n_embd, &w->token_embd));
  GLM_RETURN_IF_ERROR(l.vector("output_norm.weight", c.n_embd, &w->output_norm));
  if (c.tied_output) {
    w->output = w->token_embd;
  } else {
    GLM_RETURN_IF_ERROR(l.matrix("output.weight", c.n_vocab, c.n_embd, &w->output));
  }
  const int qkv_rows = c.q_dim() + 2 * c.kv_dim();
  w->layers.resize(c.n_layer);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& lw = w->layers[i];
    GLM_RETURN_IF_ERROR(l.vector(p + "attn_norm.weight", c.n_embd, &lw.attn_norm));
    GLM_RETURN_IF_ERROR(l.matrix(p + "attn_qkv.weight", qkv_rows, c.n_embd, &lw.qkv));
    GLM_RETURN_IF_ERROR(l.vector(p + "attn_qkv.bias", qkv_rows, &lw.qkv_b, !c.qkv_bias));
    GLM_RETURN_IF_ERROR(l.matrix(p + "attn_output.weight", c.n_embd, c.q_dim(), &lw.wo));
    GLM_RETURN_IF_ERROR(l.vector(p + "ffn_norm.weight", c.n_embd, &lw.ffn_norm));
    GLM_RETURN_IF_ERROR(l.matrix(p + "ffn_up.weight", 2 * int64_t{c.n_ff}, c.n_embd, &lw.ffn_up));
    GLM_RETURN_IF_ERROR(l.matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &lw.ffn_down));
  }
  return Status::Ok();
}

}  // namespace glm::model
