// The row-at-a-time attention (attention_rows, the kernel before the tiled one), the KV row
// helpers and the reference. One work item = one query row t and one KV head with the
// g = n_head / n_head_kv query heads that share it (or a slice of them), so each K/V row is read
// and converted once per group. Per block of positions: scores for the whole block, one online
// softmax update (running max m, running sum l, rescaled accumulator), then the value sums.
// The per-row dot/axpy steps come from the ISA variant (internal.h); the driver is shared.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/internal.h"
#include "kernels/isa.h"
#include "kernels/quant.h"

namespace glm::kernels {
namespace {

using internal::AttnOps;

void scores_scalar(const float* q, int g, int hd, const void* row, int e0, DType type, float* s) {
  for (int h = 0; h < g; ++h) s[h] = 0.0f;
  for (int i = 0; i < hd; ++i) {
    const float kv = kv_elem(row, type, e0 + i);
    for (int h = 0; h < g; ++h) s[h] += q[h * hd + i] * kv;
  }
}

void accumulate_scalar(float* acc, int g, int hd, const float* p, const uint8_t* v,
                       size_t row_bytes, int n, int e0, DType type) {
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = v + j * row_bytes;
    for (int i = 0; i < hd; ++i) {
      const float vv = kv_elem(row, type, e0 + i);
      for (int h = 0; h < g; ++h) acc[h * hd + i] += p[j * g + h] * vv;
    }
  }
}

}  // namespace

namespace internal {
const AttnOps& attn_ops_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return internal::attn_ops_avx512();
    case Isa::kAvx2:
      return internal::attn_ops_avx2();
    case Isa::kScalar:
      break;
  }
  return internal::attn_ops_scalar();
}
}  // namespace internal

namespace {

// Per-thread scratch, grown once to the largest shape seen.
struct Scratch {
  std::vector<float> s;    // [block_tokens, g] scores, then probabilities
  std::vector<float> acc;  // [g, head_dim]
  std::vector<float> m;    // [g] running max
  std::vector<float> l;    // [g] running sum
};

}  // namespace

void internal::check_attention_shape(const KvView& kv, const AttentionShape& s) {
  GLM_CHECK(s.n_head > 0 && s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0);
  GLM_CHECK(s.head_dim > 0 && s.n_tokens >= 0 && s.n_past >= 0);
  GLM_CHECK(kv.type == DType::kF16 || kv.type == DType::kF32 || kv.type == DType::kQ8_0);
  GLM_CHECK(kv.type != DType::kQ8_0 || (s.n_head_kv * s.head_dim) % kQK == 0);
  GLM_CHECK(kv.block_tokens > 0);
  GLM_CHECK(s.bidir_prefix >= 0);
  GLM_CHECK(kv.n_prefix >= 0);
  GLM_CHECK(kv.n_prefix == 0 || (kv.prefix_k != nullptr && kv.prefix_v != nullptr));
  GLM_CHECK(static_cast<int64_t>(kv.n_blocks) * kv.block_tokens >=
            std::max<int64_t>(static_cast<int64_t>(s.n_past) + s.n_tokens, s.bidir_prefix));
}

namespace {

// Attends query row t, heads [h0, h0 + g) (all sharing KV head kvh).
void attend_group(const AttnOps& ops, const float* q, const KvView& kv, const AttentionShape& s,
                  int t, int kvh, int h0, int g, float* out, Scratch* sc) {
  const int hd = s.head_dim;
  const int bt = kv.block_tokens;
  const size_t rb = row_bytes(kv.type, static_cast<int64_t>(s.n_head_kv) * hd);
  const int e0 = kvh * hd;  // the head's first element in a KV row
  const int n_ctx = s.n_past + t + 1;
  const float* qg = q + (static_cast<size_t>(t) * s.n_head + h0) * hd;

  sc->s.resize(std::max(sc->s.size(), static_cast<size_t>(bt) * g));
  sc->acc.assign(static_cast<size_t>(g) * hd, 0.0f);
  sc->m.assign(g, -std::numeric_limits<float>::infinity());
  sc->l.assign(g, 0.0f);
  float* sb = sc->s.data();
  float* acc = sc->acc.data();
  float* m = sc->m.data();
  float* l = sc->l.data();

  // One online-softmax step over n K/V rows of `type` at kb / vb, rb bytes apart.
  auto step = [&](const uint8_t* kb, const uint8_t* vb, int n, size_t rb_step, DType type) {
    for (int j = 0; j < n; ++j) ops.scores(qg, g, hd, kb + j * rb_step, e0, type, sb + j * g);
    for (int h = 0; h < g; ++h) {
      float mb = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < n; ++j) mb = std::max(mb, sb[j * g + h] * s.scale);
      if (mb > m[h]) {
        const float c = std::exp(m[h] - mb);  // 0 on the first block (m = -inf)
        l[h] *= c;
        for (int i = 0; i < hd; ++i) acc[h * hd + i] *= c;
        m[h] = mb;
      }
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) {
        const float p = std::exp(sb[j * g + h] * s.scale - m[h]);
        sb[j * g + h] = p;
        sum += p;
      }
      l[h] += sum;
    }
    ops.accumulate(acc, g, hd, sb, vb, rb_step, n, e0, type);
  };
  // The P-Tuning prefix first (f32 rows, all visible), in steps of at most block_tokens rows.
  const size_t prb = static_cast<size_t>(s.n_head_kv) * hd * sizeof(float);
  for (int j0 = 0; j0 < kv.n_prefix; j0 += bt) {
    const int n = std::min(bt, kv.n_prefix - j0);
    step(reinterpret_cast<const uint8_t*>(kv.prefix_k) + j0 * prb,
         reinterpret_cast<const uint8_t*>(kv.prefix_v) + j0 * prb, n, prb, DType::kF32);
  }
  for (int b0 = 0, blk = 0; b0 < n_ctx; b0 += bt, ++blk) {
    const int n = std::min(bt, n_ctx - b0);
    step(static_cast<const uint8_t*>(kv.k_blocks[blk]),
         static_cast<const uint8_t*>(kv.v_blocks[blk]), n, rb, kv.type);
  }
  float* og = out + (static_cast<size_t>(t) * s.n_head + h0) * hd;
  for (int h = 0; h < g; ++h) {
    const float inv = 1.0f / l[h];
    for (int i = 0; i < hd; ++i) og[h * hd + i] = acc[h * hd + i] * inv;
  }
}

}  // namespace

float kv_elem(const void* row, DType type, int i) {
  switch (type) {
    case DType::kF16:
      return fp16_to_fp32(static_cast<const uint16_t*>(row)[i]);
    case DType::kF32:
      return static_cast<const float*>(row)[i];
    case DType::kQ8_0: {
      const BlockQ8_0& b = static_cast<const BlockQ8_0*>(row)[i / kQK];
      return fp16_to_fp32(b.d) * static_cast<float>(b.qs[i % kQK]);
    }
    default:
      break;
  }
  GLM_CHECK(false && "KV rows are F16, F32 or Q8_0");
  return 0.0f;
}

void kv_read(const void* row, DType type, int e0, int n, float* dst) {
  if (type == DType::kF32) {
    std::memcpy(dst, static_cast<const float*>(row) + e0, n * sizeof(float));
    return;
  }
  if (type == DType::kF16) {
    const uint16_t* h = static_cast<const uint16_t*>(row) + e0;
    for (int i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
    return;
  }
  for (int i = 0; i < n; ++i) dst[i] = kv_elem(row, type, e0 + i);
}

void kv_store_row(const float* src, DType type, void* dst, int n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
    case DType::kQ8_0:
      GLM_CHECK(n % kQK == 0);
      quantize_row_ref(DType::kQ8_0, src, dst, n);
      return;
    default:
      break;
  }
  GLM_CHECK(false && "KV rows are F16, F32 or Q8_0");
}

namespace internal {
const AttnOps& attn_ops_scalar() {
  static const AttnOps ops{scores_scalar, accumulate_scalar};
  return ops;
}
}  // namespace internal

void attention_rows(const float* q, const KvView& kv, const AttentionShape& s, float* out,
                    ThreadPool* pool) {
  internal::check_attention_shape(kv, s);
  GLM_CHECK(s.bidir_prefix == 0);
  if (s.n_tokens == 0) return;
  const AttnOps& ops = internal::attn_ops_for(active_isa());
  const int g_all = s.n_head / s.n_head_kv;
  const int n_threads = pool != nullptr ? pool->n_threads() : 1;
  // Slice the head groups when there are fewer (token, kv head) items than threads.
  int n_slices = 1;
  while (static_cast<int64_t>(s.n_tokens) * s.n_head_kv * n_slices < n_threads &&
         n_slices < g_all) {
    ++n_slices;
    while (g_all % n_slices != 0) ++n_slices;
  }
  const int g = g_all / n_slices;
  const int64_t n_items = static_cast<int64_t>(s.n_tokens) * s.n_head_kv * n_slices;
  struct Ctx {
    const AttnOps* ops;
    const float* q;
    const KvView* kv;
    const AttentionShape* s;
    float* out;
    int g, n_slices, n_threads;
    int64_t n_items;
  } ctx{&ops, q, &kv, &s, out, g, n_slices, n_threads, n_items};
  // Item i: token t = i / (n_head_kv * n_slices). Items are dealt round-robin to threads so the
  // causal triangle (later rows see more positions) is shared evenly.
  auto run = [c = &ctx](int64_t tb, int64_t te, int) {
    thread_local Scratch scratch;
    for (int64_t th = tb; th < te; ++th) {
      for (int64_t i = th; i < c->n_items; i += c->n_threads) {
        const int per_t = c->s->n_head_kv * c->n_slices;
        const int t = static_cast<int>(i / per_t);
        const int kvh = static_cast<int>(i % per_t) / c->n_slices;
        const int slice = static_cast<int>(i % per_t) % c->n_slices;
        const int h0 = kvh * (c->s->n_head / c->s->n_head_kv) + slice * c->g;
        attend_group(*c->ops, c->q, *c->kv, *c->s, t, kvh, h0, c->g, c->out, &scratch);
      }
    }
  };
  if (pool == nullptr || n_threads == 1) {
    run(0, 1, 0);
  } else {
    pool->parallel_for(n_threads, run);
  }
}

void attention_ref(const float* q, const KvView& kv, const AttentionShape& s, float* out) {
  internal::check_attention_shape(kv, s);
  const int hd = s.head_dim;
  const int group = s.n_head / s.n_head_kv;
  const int kv_dim = s.n_head_kv * hd;
  const size_t rb = row_bytes(kv.type, static_cast<int64_t>(kv_dim));
  // Key j: prefix row j (f32) below n_prefix, else cache position j - n_prefix.
  auto elem = [&](const void* const* blocks, const float* prefix, int j, int i) -> double {
    if (j < kv.n_prefix) return prefix[static_cast<size_t>(j) * kv_dim + i];
    const int pos = j - kv.n_prefix;
    const uint8_t* b = static_cast<const uint8_t*>(blocks[pos / kv.block_tokens]);
    return kv_elem(b + (pos % kv.block_tokens) * rb, kv.type, i);
  };
  std::vector<double> sc;
  std::vector<double> acc(hd);
  for (int t = 0; t < s.n_tokens; ++t) {
    const int n_keys = kv.n_prefix + std::max(s.n_past + t + 1, s.bidir_prefix);
    for (int h = 0; h < s.n_head; ++h) {
      const int kvh = h / group;
      const float* qh = q + (static_cast<size_t>(t) * s.n_head + h) * hd;
      sc.assign(n_keys, 0.0);
      double mx = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < n_keys; ++j) {
        double d = 0;
        for (int i = 0; i < hd; ++i) {
          d += static_cast<double>(qh[i]) * elem(kv.k_blocks, kv.prefix_k, j, kvh * hd + i);
        }
        sc[j] = d * s.scale;
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (int j = 0; j < n_keys; ++j) {
        sc[j] = std::exp(sc[j] - mx);
        sum += sc[j];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = 0; j < n_keys; ++j) {
        for (int i = 0; i < hd; ++i) {
          acc[i] += sc[j] * elem(kv.v_blocks, kv.prefix_v, j, kvh * hd + i);
        }
      }
      float* o = out + (static_cast<size_t>(t) * s.n_head + h) * hd;
      for (int i = 0; i < hd; ++i) o[i] = static_cast<float>(acc[i] / sum);
    }
  }
}

}  // namespace glm::kernels
