// deepseek2's multi-head latent attention on the CPU (GLM-4.7-Flash; docs/models.md#deepseek2),
// in the absorbed form llama.cpp runs: the cache holds each token's compressed K/V row and the
// rotary part of its key (one KV head), every query head is moved into that space by its key
// expansion wk_b, and the attention's output, a weighted sum of compressed rows, is expanded by
// each head's wv_b. The reference: llama.cpp's deepseek2 graph (tests/data/glm47-flash).
#include <cstring>

#include "kernels/matmul.h"
#include "model/moe.h"
#include "model/ops.h"
#include "model/transformer.h"

namespace glm::model {

namespace {

// dst[r * dst_stride + c] = src[r * src_stride + c] for c < n, r < n_rows.
void copy_cols(const float* src, size_t src_stride, float* dst, size_t dst_stride, int n,
               int n_rows) {
  for (int r = 0; r < n_rows; ++r) {
    std::memcpy(dst + r * dst_stride, src + r * src_stride, static_cast<size_t>(n) * sizeof(float));
  }
}

}  // namespace

void Transformer::project_mla(const LayerWeights& lw, int n) {
  const Config& c = config_;
  const MlaConfig& m = c.mla;
  const int kl = m.kv_lora, rope = c.n_rot, nope = c.mla_nope(), kh = m.k_head;
  const size_t hd = c.head_dim;  // kv_lora + rope: a cache row, and an absorbed query head
  const int half = rope / 2;
  // The query: mla_qa_ [T, q_lora] normed, then mla_q_ [T, n_head, nope + rope].
  kernels::matmul(lw.wq_a, cur_.data(), mla_qa_.data(), n, pool_.get());
  for (int t = 0; t < n; ++t) {
    float* row = mla_qa_.data() + static_cast<size_t>(t) * m.q_lora;
    ops::rms_norm(row, lw.q_a_norm, c.norm_eps, row, m.q_lora);
  }
  kernels::matmul(lw.wq_b, mla_qa_.data(), mla_q_.data(), n, pool_.get());
  // The cache rows: k_ [T, kv_lora + rope] = [norm(compressed); rotary(key's rope part)].
  kernels::matmul(lw.wkv_a, cur_.data(), k_.data(), n, pool_.get());
  for (int t = 0; t < n; ++t) {
    float* row = k_.data() + t * hd;
    const float* cs = rope_cos_.data() + static_cast<size_t>(t) * half;
    const float* sn = rope_sin_.data() + static_cast<size_t>(t) * half;
    ops::rms_norm(row, lw.kv_a_norm, c.norm_eps, row, kl);
    ops::rope_interleaved(row + kl, 1, rope, rope, cs, sn);
    // Each head's rope part (its first `rope` values after nope, heads kh apart) rotated.
    ops::rope_interleaved(mla_q_.data() + static_cast<size_t>(t) * c.n_head * kh + nope, c.n_head,
                          kh, rope, cs, sn);
  }
  // The rope parts after the absorbed ones: q_ [T, n_head, kv_lora + rope].
  copy_cols(mla_q_.data() + nope, kh, q_.data() + kl, hd, rope, n * c.n_head);
  // Each head's nope part moved into the compressed space: q_[t, h, :kv_lora] = wk_b[h] q_nope.
  per_head_matmul(lw.wk_b, kl, nope, mla_q_.data(), static_cast<size_t>(c.n_head) * kh, kh,
                  q_.data(), c.n_head * hd, hd, n);
}

void Transformer::expand_mla_values(const LayerWeights& lw, int n) {
  const Config& c = config_;
  const MlaConfig& m = c.mla;
  const size_t hd = c.head_dim;
  // Each head's weighted sum of compressed rows [T, kv_lora], expanded to [T, v_head].
  per_head_matmul(lw.wv_b, m.v_head, m.kv_lora, attn_.data(), c.n_head * hd, hd, mla_v_.data(),
                  static_cast<size_t>(c.n_head) * m.v_head, m.v_head, n);
}

void Transformer::per_head_matmul(const kernels::WeightView& w, int rows, int cols,
                                  const float* src, size_t src_stride, size_t src_head, float* dst,
                                  size_t dst_stride, size_t dst_head, int n) {
  const int n_head = config_.n_head;
  // Head h's gather [n, cols] into `in`, its product [n, rows] into `out`, scattered to dst.
  auto head = [&](int h, float* in, float* out, kernels::ThreadPool* pool) {
    copy_cols(src + h * src_head, src_stride, in, cols, cols, n);
    kernels::matmul(expert_slice(w, h, rows), in, out, n, pool);
    copy_cols(out, rows, dst + h * dst_head, dst_stride, rows, n);
  };
  if (n > kMlaHeadTasksMaxTokens || pool_->n_threads() == 1) {
    for (int h = 0; h < n_head; ++h) head(h, mla_in_.data(), mla_out_.data(), pool_.get());
    return;
  }
  // A task a head, each with its own rows of mla_in_ and mla_out_.
  auto heads = [&](int64_t begin, int64_t end, int) {
    for (int64_t h = begin; h < end; ++h) {
      head(static_cast<int>(h), mla_in_.data() + static_cast<size_t>(h) * n * cols,
           mla_out_.data() + static_cast<size_t>(h) * n * rows, nullptr);
    }
  };
  pool_->parallel_for(n_head, heads);
}

}  // namespace glm::model
