// Weight table of the llama.cpp "llama" architecture (LLaMA 1/2, TinyStories models): separate
// Q/K/V projections (optional biases), separate ffn_gate / ffn_up for SwiGLU, output.weight or
// tied embeddings. llama.cpp's converter permutes the Q/K rows so that rotary pairs are adjacent
// (x[2i], x[2i+1]); the shared decoder (transformer.cc) rotates them that way.
#include <string>

#include "model/config.h"
#include "model/weights.h"

namespace glm::model {

Status load_llama_weights(const gguf::File& file, const Config& c, Weights* w) {
  WeightLoader l(file, w);
  GLM_RETURN_IF_ERROR(l.matrix("token_embd.weight", c.n_vocab, c.n_embd, &w->token_embd));
  GLM_RETURN_IF_ERROR(l.vector("output_norm.weight", c.n_embd, &w->output_norm));
  if (c.tied_output) {
    w->output = w->token_embd;
  } else {
    GLM_RETURN_IF_ERROR(l.matrix("output.weight", c.n_vocab, c.n_embd, &w->output));
  }
  w->layers.resize(c.n_layer);
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& lw = w->layers[i];
    GLM_RETURN_IF_ERROR(l.vector(p + "attn_norm.weight", c.n_embd, &lw.attn_norm));
    GLM_RETURN_IF_ERROR(l.matrix(p + "attn_q.weight", c.q_dim(), c.n_embd, &lw.wq));
    GLM_RETURN_IF_ERROR(l.matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd, &lw.wk));
    GLM_RETURN_IF_ERROR(l.matrix(p + "attn_v.weight", c.kv_dim(), c.n_embd, &lw.wv));
    GLM_RETURN_IF_ERROR(l.vector(p + "attn_q.bias", c.q_dim(), &lw.bq, true));
    GLM_RETURN_IF_ERROR(l.vector(p + "attn_k.bias", c.kv_dim(), &lw.bk, true));
    GLM_RETURN_IF_ERROR(l.vector(p + "attn_v.bias", c.kv_dim(), &lw.bv, true));
    GLM_RETURN_IF_ERROR(l.matrix(p + "attn_output.weight", c.n_embd, c.q_dim(), &lw.wo));
    GLM_RETURN_IF_ERROR(l.vector(p + "ffn_norm.weight", c.n_embd, &lw.ffn_norm));
    GLM_RETURN_IF_ERROR(l.matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd, &lw.ffn_gate));
    GLM_RETURN_IF_ERROR(l.matrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &lw.ffn_up));
    GLM_RETURN_IF_ERROR(l.matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &lw.ffn_down));
  }
  return Status::Ok();
}

}  // namespace glm::model
