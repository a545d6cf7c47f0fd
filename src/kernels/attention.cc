// Attention over the paged KV cache. One work item = one query row t and one KV head with the
// g = n_head / n_head_kv query heads that share it (or a slice of them), so each K/V row is read
// and converted once per group. Per block of positions: scores for the whole block, one online
// softmax update (running max m, running sum l, rescaled accumulator), then the value sums.
// The per-row dot/axpy steps come from the ISA variant (internal.h); the driver is shared.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/internal.h"
#include "kernels/isa.h"

namespace glm::kernels {
namespace {

using internal::AttnOps;

size_t elem_bytes(DType t) { return t == DType::kF16 ? 2 : 4; }

float load_elem(const void* row, DType type, int i) {
  if (type == DType::kF16) return fp16_to_fp32(static_cast<const uint16_t*>(row)[i]);
  return static_cast<const float*>(row)[i];
}

void scores_scalar(const float* q, int g, int hd, const void* k, DType type, float* s) {
  for (int h = 0; h < g; ++h) s[h] = 0.0f;
  for (int i = 0; i < hd; ++i) {
    const float kv = load_elem(k, type, i);
    for (int h = 0; h < g; ++h) s[h] += q[h * hd + i] * kv;
  }
}

void accumulate_scalar(float* acc, int g, int hd, const float* p, const void* v, DType type) {
  for (int i = 0; i < hd; ++i) {
    const float vv = load_elem(v, type, i);
    for (int h = 0; h < g; ++h) acc[h * hd + i] += p[h] * vv;
  }
}

const AttnOps& ops_for(Isa isa) {
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

// Per-thread scratch, grown once to the largest shape seen.
struct Scratch {
  std::vector<float> s;    // [block_tokens, g] scores, then probabilities
  std::vector<float> acc;  // [g, head_dim]
  std::vector<float> m;    // [g] running max
  std::vector<float> l;    // [g] running sum
};

void check_shape(const KvView& kv, const AttentionShape& s) {
  GLM_CHECK(s.n_head > 0 && s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0);
  GLM_CHECK(s.head_dim > 0 && s.n_tokens >= 0 && s.n_past >= 0);
  GLM_CHECK(kv.type == DType::kF16 || kv.type == DType::kF32);
  GLM_CHECK(kv.block_tokens > 0);
  GLM_CHECK(static_cast<int64_t>(kv.n_blocks) * kv.block_tokens >=
            static_cast<int64_t>(s.n_past) + s.n_tokens);
}

// Attends query row t, heads [h0, h0 + g) (all sharing KV head kvh).
void attend_group(const AttnOps& ops, const float* q, const KvView& kv, const AttentionShape& s,
                  int t, int kvh, int h0, int g, float* out, Scratch* sc) {
  const int hd = s.head_dim;
  const int bt = kv.block_tokens;
  const size_t eb = elem_bytes(kv.type);
  const size_t row_bytes = static_cast<size_t>(s.n_head_kv) * hd * eb;
  const size_t head_off = static_cast<size_t>(kvh) * hd * eb;
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

  for (int b0 = 0, blk = 0; b0 < n_ctx; b0 += bt, ++blk) {
    const int n = std::min(bt, n_ctx - b0);
    const uint8_t* kb = static_cast<const uint8_t*>(kv.k_blocks[blk]) + head_off;
    const uint8_t* vb = static_cast<const uint8_t*>(kv.v_blocks[blk]) + head_off;
    for (int j = 0; j < n; ++j) ops.scores(qg, g, hd, kb + j * row_bytes, kv.type, sb + j * g);
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
    for (int j = 0; j < n; ++j) ops.accumulate(acc, g, hd, sb + j * g, vb + j * row_bytes, kv.type);
  }
  float* og = out + (static_cast<size_t>(t) * s.n_head + h0) * hd;
  for (int h = 0; h < g; ++h) {
    const float inv = 1.0f / l[h];
    for (int i = 0; i < hd; ++i) og[h * hd + i] = acc[h * hd + i] * inv;
  }
}

}  // namespace

namespace internal {
const AttnOps& attn_ops_scalar() {
  static const AttnOps ops{scores_scalar, accumulate_scalar};
  return ops;
}
}  // namespace internal

void attention(const float* q, const KvView& kv, const AttentionShape& s, float* out,
               ThreadPool* pool) {
  check_shape(kv, s);
  if (s.n_tokens == 0) return;
  const AttnOps& ops = ops_for(active_isa());
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
  check_shape(kv, s);
  const int hd = s.head_dim;
  const int group = s.n_head / s.n_head_kv;
  const size_t eb = elem_bytes(kv.type);
  const size_t row_elems = static_cast<size_t>(s.n_head_kv) * hd;
  auto row = [&](const void* const* blocks, int pos, int kvh) {
    const uint8_t* b = static_cast<const uint8_t*>(blocks[pos / kv.block_tokens]);
    return b + ((pos % kv.block_tokens) * row_elems + static_cast<size_t>(kvh) * hd) * eb;
  };
  std::vector<double> sc;
  std::vector<double> acc(hd);
  for (int t = 0; t < s.n_tokens; ++t) {
    const int n_ctx = s.n_past + t + 1;
    for (int h = 0; h < s.n_head; ++h) {
      const int kvh = h / group;
      const float* qh = q + (static_cast<size_t>(t) * s.n_head + h) * hd;
      sc.assign(n_ctx, 0.0);
      double mx = -std::numeric_limits<double>::infinity();
      for (int p = 0; p < n_ctx; ++p) {
        const void* k = row(kv.k_blocks, p, kvh);
        double d = 0;
        for (int i = 0; i < hd; ++i) d += static_cast<double>(qh[i]) * load_elem(k, kv.type, i);
        sc[p] = d * s.scale;
        mx = std::max(mx, sc[p]);
      }
      double sum = 0;
      for (int p = 0; p < n_ctx; ++p) {
        sc[p] = std::exp(sc[p] - mx);
        sum += sc[p];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int p = 0; p < n_ctx; ++p) {
        const void* v = row(kv.v_blocks, p, kvh);
        for (int i = 0; i < hd; ++i) acc[i] += sc[p] * load_elem(v, kv.type, i);
      }
      float* o = out + (static_cast<size_t>(t) * s.n_head + h) * hd;
      for (int i = 0; i < hd; ++i) o[i] = static_cast<float>(acc[i] / sum);
    }
  }
}

}  // namespace glm::kernels
