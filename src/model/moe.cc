#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/dtype.h"
#include "gguf/gguf.h"
#include "kernels/packed.h"
#include "model/config.h"
#include "model/ops.h"

namespace glm::model {

kernels::WeightView expert_slice(const kernels::WeightView& stacked, int64_t e, int64_t n) {
  kernels::WeightView v;
  v.type = stacked.type;
  v.data = static_cast<const uint8_t*>(stacked.data) +
           static_cast<size_t>(e * n) * row_bytes(stacked.type, stacked.n_cols);
  v.n_rows = n;
  v.n_cols = stacked.n_cols;
  // A repacked stack (weights.cc repack): expert e's rows are groups [e n / 16, (e + 1) n / 16)
  // of the packed copy when n is a multiple of 16 (else the slice reads the row-major data).
  if (stacked.packed != nullptr && n % kernels::kPackRows == 0 &&
      (e + 1) * n <= stacked.packed_rows) {
    v.packed =
        stacked.packed + static_cast<size_t>(e * n / kernels::kPackRows) *
                             kernels::packed_group_bytes(stacked.packed_layout, stacked.n_cols);
    v.packed_layout = stacked.packed_layout;
    v.packed_rows = n;
  }
  return v;
}

Status read_moe_config(const gguf::File& file, Config* c) {
  const std::string p = c->arch_name + ".";
  auto where = [&](const std::string& key) { return file.path() + ": " + p + key; };
  auto get = [&](const std::string& key, bool required, int64_t def, int64_t lo, int64_t hi,
                 int* out) -> Status {
    StatusOr<int64_t> v = required ? file.get_int(p + key) : file.get_int_or(p + key, def);
    if (!v.ok()) {
      if (v.status().code() == ErrorCode::kNotFound) {
        return bad_file(where(key) + " is missing from the metadata (a glm4moe file needs it)");
      }
      return bad_file(v.status().message());
    }
    if (*v < lo || *v > hi) {
      return bad_file(where(key) + " = " + std::to_string(*v) + " is out of range [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *out = static_cast<int>(*v);
    return Status::Ok();
  };
  MoeConfig& m = c->moe;
  GLM_RETURN_IF_ERROR(get("expert_count", true, 0, 1, 4096, &m.n_expert));
  GLM_RETURN_IF_ERROR(get("expert_used_count", true, 0, 1, 4096, &m.n_expert_used));
  if (m.n_expert_used > m.n_expert) {
    return bad_file(where("expert_used_count") + " = " + std::to_string(m.n_expert_used) +
                    " is more than expert_count = " + std::to_string(m.n_expert));
  }
  GLM_RETURN_IF_ERROR(get("expert_shared_count", false, 0, 0, 64, &m.n_expert_shared));
  GLM_RETURN_IF_ERROR(get("expert_feed_forward_length", true, 0, 1, 1 << 20, &m.n_ff_exp));
  GLM_RETURN_IF_ERROR(get("nextn_predict_layers", false, 0, 0, c->n_layer - 1, &m.n_layer_nextn));
  // block_count counts the trailing MTP blocks, which inference skips (as llama.cpp does).
  c->n_layer -= m.n_layer_nextn;
  GLM_RETURN_IF_ERROR(get("leading_dense_block_count", false, 0, 0, c->n_layer, &m.n_dense_lead));
  int gating = 0;
  GLM_RETURN_IF_ERROR(get("expert_gating_func", false, 0, 0, 1 << 20, &gating));
  if (gating == 0 && c->arch == arch::Arch::kDeepSeek2) {
    // llama.cpp reads an unstated deepseek2 gating as DeepSeek-V2's softmax, except GLM-4.7-Flash
    // (47 or 48 blocks over a vocabulary of 154880), which routes with sigmoid.
    const int blocks = c->n_layer + m.n_layer_nextn;
    gating = (blocks == 47 || blocks == 48) && c->n_vocab == 154880 ? 2 : 1;
  }
  if (gating != 0 && gating != 2) {  // llama_expert_gating_func_type: 1 softmax, 2 sigmoid
    return unsupported(where("expert_gating_func") + " = " + std::to_string(gating) +
                       " is not supported (only sigmoid routing, 2: GLM-4.5's and "
                       "GLM-4.7-Flash's; DeepSeek-V2's softmax is not)");
  }
  StatusOr<double> scale = file.get_float_or(p + "expert_weights_scale", 0.0);
  if (!scale.ok()) return bad_file(scale.status().message());
  if (!std::isfinite(*scale) || *scale < 0) {
    return bad_file(where("expert_weights_scale") + " must be a non-negative number");
  }
  m.weights_scale = *scale == 0 ? 1.0f : static_cast<float>(*scale);
  if (file.find(p + "expert_weights_norm") != nullptr) {
    StatusOr<bool> norm = file.get_bool(p + "expert_weights_norm");
    if (!norm.ok()) return bad_file(where("expert_weights_norm") + " must be a bool");
    m.weights_norm = *norm;
  }
  // The first MoE layer's router must agree with expert_count (the loader checks the rest).
  if (m.n_dense_lead < c->n_layer) {
    const std::string name = "blk." + std::to_string(m.n_dense_lead) + ".ffn_gate_inp.weight";
    const gguf::TensorInfo* t = file.tensor(name);
    if (t != nullptr && (t->shape.size() != 2 || t->shape[1] != m.n_expert)) {
      return bad_file(file.path() + ": tensor " + name +
                      " does not have expert_count = " + std::to_string(m.n_expert) + " rows");
    }
  }
  return Status::Ok();
}

namespace {

// The routing of one token into experts[k] and weights[k] (route_token's definition), with
// caller-owned scratch: score, sel [n_expert] floats, order [n_expert] ints. No allocation.
void route_into(const float* logits, const float* bias, const MoeConfig& m, float* score,
                float* sel, int* order, int* experts, float* weights) {
  const int n = m.n_expert, k = m.n_expert_used;
  for (int e = 0; e < n; ++e) {
    score[e] = 1.0f / (1.0f + std::exp(-logits[e]));         // sigmoid
    sel[e] = score[e] + (bias != nullptr ? bias[e] : 0.0f);  // + bias: selection only
    order[e] = e;
  }
  std::partial_sort(order, order + k, order + n,
                    [&](int a, int b) { return sel[a] > sel[b] || (sel[a] == sel[b] && a < b); });
  float sum = 0;
  for (int j = 0; j < k; ++j) {
    experts[j] = order[j];
    weights[j] = score[order[j]];
    sum += weights[j];
  }
  // The sum clamped at F16's smallest normal, as the reference does against a zero sum.
  for (int j = 0; j < k; ++j) {
    if (m.weights_norm) weights[j] /= std::max(sum, 6.103515625e-5f);
    weights[j] *= m.weights_scale;
  }
}

}  // namespace

Route route_token(const float* logits, const float* bias, const Config& c) {
  const MoeConfig& m = c.moe;
  std::vector<float> score(m.n_expert), sel(m.n_expert);
  std::vector<int> order(m.n_expert);
  Route r;
  r.experts.resize(m.n_expert_used);
  r.weights.resize(m.n_expert_used);
  route_into(logits, bias, m, score.data(), sel.data(), order.data(), r.experts.data(),
             r.weights.data());
  return r;
}

namespace {

// out [T, n_embd] (overwritten) = down(silu(gate x) * up x) for x [T, n_embd]; gate/up [n, n_embd].
void swiglu_ffn(const kernels::WeightView& gate, const kernels::WeightView& up,
                const kernels::WeightView& down, const float* x, int n_tokens, float* g, float* u,
                float* out, kernels::ThreadPool* pool) {
  const int64_t ff = gate.n_rows;
  kernels::matmul(gate, x, g, n_tokens, pool);  // [T, ff]
  kernels::matmul(up, x, u, n_tokens, pool);    // [T, ff]
  ops::swiglu(g, u, g, static_cast<int>(n_tokens * ff));
  kernels::matmul(down, g, out, n_tokens, pool);  // [T, n_embd]
}

}  // namespace

void MoeFfn::forward(const MoeWeights& w, const Config& c, const float* x, int n, float* out,
                     kernels::ThreadPool* pool) {
  const MoeConfig& m = c.moe;
  const int d = c.n_embd;
  const size_t t = n;
  const int64_t ff_shared = w.gate_shexp.n_rows;
  const size_t ff = std::max<int64_t>(m.n_ff_exp, ff_shared);
  if (logits_.size() < t * m.n_expert) logits_.resize(t * m.n_expert);
  if (gate_.size() < t * ff) gate_.resize(t * ff);
  if (up_.size() < t * ff) up_.resize(t * ff);
  if (xe_.size() < t * d) xe_.resize(t * d);
  if (ye_.size() < t * d) ye_.resize(t * d);
  tok_.resize(m.n_expert);
  wt_.resize(m.n_expert);
  for (int e = 0; e < m.n_expert; ++e) {
    tok_[e].clear();
    wt_[e].clear();
  }

  // Route every token; group the tokens by chosen expert.
  kernels::matmul(w.gate_inp, x, logits_.data(), n, pool);  // [T, n_expert]
  for (int i = 0; i < n; ++i) {
    const Route r =
        route_token(logits_.data() + static_cast<size_t>(i) * m.n_expert, w.exp_probs_b, c);
    for (int j = 0; j < m.n_expert_used; ++j) {
      tok_[r.experts[j]].push_back(i);
      wt_[r.experts[j]].push_back(r.weights[j]);
    }
  }

  // The shared expert over all tokens starts the sum; then each chosen expert once over its
  // gathered tokens, scattered back with the token's weight.
  if (w.gate_shexp.data != nullptr) {
    swiglu_ffn(w.gate_shexp, w.up_shexp, w.down_shexp, x, n, gate_.data(), up_.data(), out, pool);
  } else {
    std::memset(out, 0, t * d * sizeof(float));
  }
  for (int e = 0; e < m.n_expert; ++e) {
    const int ne = static_cast<int>(tok_[e].size());
    if (ne == 0) continue;
    for (int i = 0; i < ne; ++i) {
      std::memcpy(xe_.data() + static_cast<size_t>(i) * d, x + static_cast<size_t>(tok_[e][i]) * d,
                  d * sizeof(float));
    }
    swiglu_ffn(expert_slice(w.gate_exps, e, m.n_ff_exp), expert_slice(w.up_exps, e, m.n_ff_exp),
               expert_slice(w.down_exps, e, d), xe_.data(), ne, gate_.data(), up_.data(),
               ye_.data(), pool);
    for (int i = 0; i < ne; ++i) {
      const float* y = ye_.data() + static_cast<size_t>(i) * d;
      float* o = out + static_cast<size_t>(tok_[e][i]) * d;
      const float wi = wt_[e][i];
      for (int j = 0; j < d; ++j) o[j] += wi * y[j];
    }
  }
}

}  // namespace glm::model
