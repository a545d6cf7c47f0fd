// glm4moe's mixture-of-experts FFN (GLM-4.5, GLM-4.5-Air; llama.cpp's `glm4moe` layout).
// Per token: router logits (f32 matmul with ffn_gate_inp), sigmoid scores, the score-correction
// bias exp_probs_b added for choosing the top-k experts only; the chosen experts' weights are
// their unbiased scores, divided by their sum when the file says so (expert_weights_norm), times
// the routed scaling factor. Each chosen expert is a SwiGLU (gate, up, down) read from its slice
// of the 3-D ffn_*_exps tensors; the shared expert (ffn_*_shexp) runs on every token and is added.
// Cost: the batch's tokens are grouped by expert, so each chosen expert's three matrices run ONCE
// over its tokens: a decode step reads n_expert_used experts' rows (the active parameters), a
// prefill reads each expert at most once. Shapes in comments are [rows, cols].
// Thread-safety: MoeFfn is not reentrant (scratch buffers); one per Transformer. Its routing
// scratch is per thread and grows once: no allocation per decode step once warmed up.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

namespace glm::gguf {
class File;
}

namespace glm::model {

struct Config;

// One MoE layer's weights, views into the file. The expert views hold all experts stacked:
// n_rows = n_expert x rows of one expert (GGUF shape {cols, rows, n_expert}).
struct MoeWeights {
  kernels::WeightView gate_inp;        // router [n_expert, n_embd]
  const float* exp_probs_b = nullptr;  // [n_expert] selection bias
  kernels::WeightView gate_exps;       // [n_expert * n_ff_exp, n_embd]
  kernels::WeightView up_exps;         // [n_expert * n_ff_exp, n_embd]
  kernels::WeightView down_exps;       // [n_expert * n_embd, n_ff_exp]
  kernels::WeightView gate_shexp;      // [n_shared * n_ff_exp, n_embd]; null without
  kernels::WeightView up_shexp;        // [n_shared * n_ff_exp, n_embd]
  kernels::WeightView down_shexp;      // [n_embd, n_shared * n_ff_exp]

  bool present() const { return gate_inp.data != nullptr; }
};

// Rows [e * n, (e + 1) * n) of a stacked view: expert e's matrix of n rows.
kernels::WeightView expert_slice(const kernels::WeightView& stacked, int64_t e, int64_t n);

// Reads the <arch>.expert_* keys into config->moe and checks them against each other and
// against the first MoE layer's tensors. bad_file naming the key or tensor (top-k above the
// expert count, expert_count disagreeing with ffn_gate_inp, ...); unsupported for a gating
// function other than sigmoid or for Q/K norms (GLM-4.5 355B).
Status read_moe_config(const gguf::File& file, Config* config);

// The routing of one token: its chosen experts and their weights (k of each).
struct Route {
  std::vector<int> experts;
  std::vector<float> weights;
};
// Scalar reference of the router for one token: logits [n_expert] -> route (highest biased
// score first; ties go to the lower expert id).
Route route_token(const float* logits, const float* bias, const Config& config);

class MoeFfn {
 public:
  // out [T, n_embd] = routed experts + shared expert of x [T, n_embd] (overwritten).
  void forward(const MoeWeights& w, const Config& config, const float* x, int n_tokens, float* out,
               kernels::ThreadPool* pool);

 private:
  std::vector<float> logits_;           // [T, n_expert]
  std::vector<std::vector<int>> tok_;   // per expert: its tokens in this batch
  std::vector<std::vector<float>> wt_;  // per expert: the weight of each of those tokens
  std::vector<float> xe_;               // [T_e, n_embd] an expert's gathered tokens
  std::vector<float> gate_;             // [T, n_ff] (n_ff: n_ff_exp or the shared width)
  std::vector<float> up_;               // [T, n_ff]
  std::vector<float> ye_;               // [T, n_embd] an expert's (or the shared) output
};

}  // namespace glm::model
