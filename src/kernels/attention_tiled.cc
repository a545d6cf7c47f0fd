// The tiled attention (attention.h): the driver (plan, work items, online softmax, the merge of
// position splits), written once; the tile products come from the ISA variant (internal.h,
// AttnTileOps; attention_tile.h) or the scalar ones below.
//
// One work item = a tile of query tokens [t0, t0 + nt) x the g query heads of one slice of a KV
// head, over positions [j_begin, j_end) (all the positions the tile sees, or one split of them).
// Its rows are r = tt * g + hh (token t0 + tt, head h0 + hh). Per step of kKeyTile positions:
//   kt  [hd, kKeyTile]  the keys converted to f32 and transposed (read once for all R rows);
//                       tiles under kTransposeMinRows rows take their scores from the K rows
//                       themselves instead (AttnTileOps::qk_keys, a few keys at a time)
//   v   [nk] -> [hd]    the values as f32 (pointers into the cache for F32)
//   s   [R, kKeyTile]   scores q . k (q pre-scaled), then probabilities exp(s - m)
//   acc [R, hd]         running sum of p v, rescaled by exp(m_old - m_new) when a row's max rises
// Keys are indexed j in [0, n_prefix + n_ctx): the P-Tuning prefix's f32 rows (KvView::n_prefix,
// visible to every row), then the cache's positions p = j - n_prefix. A row sees keys below
// lim(t) = n_prefix + max(n_past + t + 1, bidir_prefix): columns at or past it get probability 0
// (the diagonal steps of a causal tile).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "core/check.h"
#include "kernels/attention.h"
#include "kernels/internal.h"
#include "kernels/isa.h"
#include "kernels/quant.h"

namespace glm::kernels {
namespace {

using internal::AttnTileOps;
using internal::kKeyTile;

// Query rows (tokens x heads) per tile, about, and tokens per tile at most: each step's K/V
// conversion and key transpose serve more rows in taller tiles (on the 6B heads 64 -> 128 -> 256
// rows took 174 -> 145 -> 127 ms in BM_AttentionPrefill/4096/1/1), while a tile of many tokens
// computes more of the causal diagonal that its first rows do not see.
constexpr int kTileRows = 256;
constexpr int kTileTokensMax = 64;
constexpr int kSplitMinCtx = 1024;  // positions from which decode splits them across threads
constexpr int kSplitMinLen = 256;   // positions per split, at least
constexpr int kItemsPerThread = 4;  // items per thread a split aims at (dynamic balance)
// Below this many rows a tile takes its scores from the K rows themselves (AttnTileOps::qk_keys,
// no transpose): transposing 64 keys costs as much as the products of a few rows.
constexpr int kTransposeMinRows = 8;
// Keys ahead whose cache rows are prefetched (a deep decode waits on memory otherwise).
constexpr int kPrefetchKeys = 8;

void qk_scalar(const float* q, int n_rows, int hd, const float* kt, int nk, float* s) {
  for (int r = 0; r < n_rows; ++r) {
    for (int j = 0; j < nk; ++j) {
      float d = 0;
      for (int i = 0; i < hd; ++i) d += q[r * hd + i] * kt[i * kKeyTile + j];
      s[r * kKeyTile + j] = d;
    }
  }
}

void pv_scalar(const float* p, int n_rows, int nk, const float* const* v, int hd, float* acc) {
  for (int r = 0; r < n_rows; ++r) {
    for (int j = 0; j < nk; ++j) {
      const float pj = p[r * kKeyTile + j];
      for (int i = 0; i < hd; ++i) acc[r * hd + i] += pj * v[j][i];
    }
  }
}

float exp_sum_scalar(float* x, int n, float m) {
  float sum = 0;
  for (int j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - m);
    sum += x[j];
  }
  return sum;
}

void softmax_step_scalar(float* s, int n_rows, const int* n_vis, int nk, float* m, float* l,
                         float* acc, int hd) {
  for (int r = 0; r < n_rows; ++r) {
    float* sr = s + static_cast<size_t>(r) * kKeyTile;
    if (n_vis[r] > 0) {
      const float mb = *std::max_element(sr, sr + n_vis[r]);
      if (mb > m[r]) {
        const float c = std::exp(m[r] - mb);  // 0 on the row's first step (m = -inf)
        l[r] *= c;
        for (int i = 0; i < hd; ++i) acc[static_cast<size_t>(r) * hd + i] *= c;
        m[r] = mb;
      }
      l[r] += exp_sum_scalar(sr, n_vis[r], m[r]);
    }
    std::fill(sr + n_vis[r], sr + nk, 0.0f);
  }
}

const float* load_row_scalar(const void* row, int e0, DType type, int hd, float* dst) {
  if (type == DType::kF32) return static_cast<const float*>(row) + e0;
  kv_read(row, type, e0, hd, dst);
  return dst;
}

void qk_keys_scalar(const float* q, int n_rows, int hd, const void* const* k, int e0, DType type,
                    int nk, float* s) {
  thread_local std::vector<float> buf;  // a key's row as f32 (no allocation once grown)
  buf.resize(hd);
  for (int j = 0; j < nk; ++j) {
    const float* kf = load_row_scalar(k[j], e0, type, hd, buf.data());
    for (int r = 0; r < n_rows; ++r) {
      float d = 0;
      for (int i = 0; i < hd; ++i) d += q[r * hd + i] * kf[i];
      s[r * kKeyTile + j] = d;
    }
  }
}

const AttnTileOps& tile_ops_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return internal::attn_tile_ops_avx512();
    case Isa::kAvx2:
      return internal::attn_tile_ops_avx2();
    case Isa::kScalar:
      break;
  }
  return internal::attn_tile_ops_scalar();
}

// Per-thread scratch, grown to the largest tile seen.
struct Scratch {
  std::vector<float> q;         // [R, hd]
  std::vector<float> kt;        // [hd, kKeyTile]
  std::vector<float> vbuf;      // [kKeyTile, hd]
  std::vector<float> krow;      // [hd]
  std::vector<float> s;         // [R, kKeyTile]
  std::vector<const float*> v;  // [kKeyTile]
  std::vector<float> part;      // [R * (hd + 2)] the item's m, l, acc (without splits)
  std::vector<int> n_vis;       // [R] the keys of the step each row sees
};

// The tile's state: running max, running sum and accumulator per row.
struct Partial {
  float* m;    // [R]
  float* l;    // [R]
  float* acc;  // [R, hd]
};

struct Item {
  int kvh, h0, g;      // KV head, first query head, heads
  int t0, nt;          // query tokens
  int j_begin, j_end;  // positions
};

// The keys query token t sees: the prefix's, then positions [0, max(n_past + t + 1, bidir)).
int visible_end(const KvView& kv, const AttentionShape& s, int t) {
  return kv.n_prefix + std::max(s.n_past + t + 1, s.bidir_prefix);
}

// Runs one item, leaving its rows' (m, l, acc) in *pt (m = -inf, l = 0 where a row saw nothing).
void run_item(const AttnTileOps& ops, const float* q, const KvView& kv, const AttentionShape& s,
              const Item& it, Scratch* sc, Partial pt) {
  const int hd = s.head_dim;
  const int n_rows = it.nt * it.g;
  const size_t rb = row_bytes(kv.type, static_cast<int64_t>(s.n_head_kv) * hd);
  const int e0 = it.kvh * hd;
  sc->q.resize(static_cast<size_t>(n_rows) * hd);
  sc->s.resize(static_cast<size_t>(n_rows) * kKeyTile);
  if (sc->kt.size() < static_cast<size_t>(hd) * kKeyTile) {
    sc->kt.assign(static_cast<size_t>(hd) * kKeyTile, 0.0f);  // finite in unused columns
  }
  sc->vbuf.resize(static_cast<size_t>(kKeyTile) * hd);
  sc->krow.resize(hd);
  sc->v.resize(kKeyTile);
  sc->n_vis.resize(n_rows);
  float* qs = sc->q.data();
  for (int tt = 0; tt < it.nt; ++tt) {
    const float* src = q + (static_cast<size_t>(it.t0 + tt) * s.n_head + it.h0) * hd;
    float* dst = qs + static_cast<size_t>(tt) * it.g * hd;
    for (int i = 0; i < it.g * hd; ++i) dst[i] = src[i] * s.scale;
  }
  const bool tiled = n_rows >= kTransposeMinRows;  // else AttnTileOps::qk_keys
  std::fill(pt.m, pt.m + n_rows, -std::numeric_limits<float>::infinity());
  std::fill(pt.l, pt.l + n_rows, 0.0f);
  std::fill(pt.acc, pt.acc + static_cast<size_t>(n_rows) * hd, 0.0f);

  // The last token sees the most positions (lim is non-decreasing in t).
  const int end = std::min(it.j_end, visible_end(kv, s, it.t0 + it.nt - 1));
  const size_t prb = static_cast<size_t>(s.n_head_kv) * hd * sizeof(float);  // a prefix row
  float* kt = sc->kt.data();
  float* sb = sc->s.data();
  const void* krows[kKeyTile];  // the step's key rows (tiles of few rows)
  // Cache position p's K and V rows (whole rows: the head's part starts at element e0).
  auto cache_rows = [&](int p, const uint8_t** k, const uint8_t** v) {
    const size_t slot = static_cast<size_t>(p % kv.block_tokens) * rb;
    *k = static_cast<const uint8_t*>(kv.k_blocks[p / kv.block_tokens]) + slot;
    *v = static_cast<const uint8_t*>(kv.v_blocks[p / kv.block_tokens]) + slot;
  };
  // This KV head's part of a cache row: its offset and length in bytes (whole Q8_0 blocks).
  const size_t head_off = row_bytes(kv.type, e0), head_len = row_bytes(kv.type, hd);
  for (int j0 = it.j_begin; j0 < end; j0 += kKeyTile) {
    const int nk = std::min(kKeyTile, end - j0);
    for (int j = 0; j < nk; ++j) {
      const int key = j0 + j;
      // The cache rows kPrefetchKeys ahead are asked for now: a key's rows are a few lines in
      // another block each time, and waiting for them was the largest part of a deep decode.
      if (const int ahead = key + kPrefetchKeys - kv.n_prefix;
          ahead >= 0 && key + kPrefetchKeys < end) {
        const uint8_t *kp, *vp;
        cache_rows(ahead, &kp, &vp);
        for (size_t b = 0; b < head_len; b += 64) {
          __builtin_prefetch(kp + head_off + b);
          __builtin_prefetch(vp + head_off + b);
        }
      }
      const uint8_t* kr;
      const uint8_t* vr;
      DType type = kv.type;
      if (key < kv.n_prefix) {
        kr = reinterpret_cast<const uint8_t*>(kv.prefix_k) + key * prb;
        vr = reinterpret_cast<const uint8_t*>(kv.prefix_v) + key * prb;
        type = DType::kF32;
      } else {
        cache_rows(key - kv.n_prefix, &kr, &vr);
      }
      if (!tiled) {
        krows[j] = kr;  // scored after the step's rows are known (qk_keys)
      } else {
        const float* kf = ops.load_row(kr, e0, type, hd, sc->krow.data());
        for (int i = 0; i < hd; ++i) kt[i * kKeyTile + j] = kf[i];
      }
      sc->v[j] = ops.load_row(vr, e0, type, hd, sc->vbuf.data() + static_cast<size_t>(j) * hd);
    }
    if (tiled) {
      ops.qk(qs, n_rows, hd, kt, nk, sb);
    } else {
      // The P-Tuning prefix's f32 keys come first (keys below n_prefix), then the cache's.
      const int np = std::clamp(kv.n_prefix - j0, 0, nk);
      if (np > 0) ops.qk_keys(qs, n_rows, hd, krows, e0, DType::kF32, np, sb);
      if (np < nk) ops.qk_keys(qs, n_rows, hd, krows + np, e0, kv.type, nk - np, sb + np);
    }
    for (int r = 0; r < n_rows; ++r) {
      sc->n_vis[r] = std::clamp(visible_end(kv, s, it.t0 + r / it.g) - j0, 0, nk);
    }
    ops.softmax_step(sb, n_rows, sc->n_vis.data(), nk, pt.m, pt.l, pt.acc, hd);
    ops.pv(sb, n_rows, nk, sc->v.data(), hd, pt.acc);
  }
}

Item item_of(const KvView& kv, const AttentionShape& s, const AttentionPlan& plan, int64_t i,
             int n_tiles) {
  // Items of the last tile first (they see the most positions): better balance at the end.
  const int per_tile = s.n_head_kv * plan.n_slices * plan.n_splits;
  const int tile = n_tiles - 1 - static_cast<int>(i / per_tile);
  const int rest = static_cast<int>(i % per_tile);
  const int split = rest % plan.n_splits;
  const int head_slice = rest / plan.n_splits;
  const int g = s.n_head / s.n_head_kv / plan.n_slices;
  Item it;
  it.kvh = head_slice / plan.n_slices;
  it.h0 = it.kvh * (s.n_head / s.n_head_kv) + (head_slice % plan.n_slices) * g;
  it.g = g;
  it.t0 = tile * plan.tile_tokens;
  it.nt = std::min(plan.tile_tokens, s.n_tokens - it.t0);
  // Splits: equal ranges of whole key steps over all the positions the tile sees.
  const int end = visible_end(kv, s, it.t0 + it.nt - 1);
  const int steps = (end + kKeyTile - 1) / kKeyTile;
  it.j_begin = std::min(
      end, static_cast<int>(static_cast<int64_t>(steps) * split / plan.n_splits) * kKeyTile);
  it.j_end = std::min(
      end, static_cast<int>(static_cast<int64_t>(steps) * (split + 1) / plan.n_splits) * kKeyTile);
  return it;
}

}  // namespace

namespace internal {
const AttnTileOps& attn_tile_ops_scalar() {
  static const AttnTileOps ops{qk_scalar, pv_scalar, load_row_scalar, softmax_step_scalar,
                               qk_keys_scalar};
  return ops;
}
}  // namespace internal

AttentionPlan plan_attention(const AttentionShape& s, int n_threads) {
  AttentionPlan plan;
  const int g_all = s.n_head / s.n_head_kv;
  plan.tile_tokens =
      std::clamp(kTileRows / g_all, 1, std::max(1, std::min(kTileTokensMax, s.n_tokens)));
  const int n_tiles = (s.n_tokens + plan.tile_tokens - 1) / plan.tile_tokens;
  const int64_t items = static_cast<int64_t>(n_tiles) * s.n_head_kv;
  const int n_ctx = std::max(s.n_past + s.n_tokens, s.bidir_prefix);
  if (n_threads > 1 && items < static_cast<int64_t>(kItemsPerThread) * n_threads &&
      n_ctx >= kSplitMinCtx) {
    const int64_t want = (static_cast<int64_t>(kItemsPerThread) * n_threads + items - 1) / items;
    plan.n_splits = static_cast<int>(std::min<int64_t>(want, n_ctx / kSplitMinLen));
  }
  // Still fewer items than threads (short cache, few KV heads): slice the heads.
  while (items * plan.n_slices * plan.n_splits < n_threads && plan.n_slices < g_all) {
    ++plan.n_slices;
    while (g_all % plan.n_slices != 0) ++plan.n_slices;
  }
  return plan;
}

void attention(const float* q, const KvView& kv, const AttentionShape& s, float* out,
               ThreadPool* pool) {
  // GLMSERVE_ATTENTION=rows: the row-at-a-time kernel, for A/B benchmarks of whole runs (read
  // once; the bidirectional prefix always takes the tiled kernel, the only one that has it).
  static const bool rows = [] {
    const char* e = std::getenv("GLMSERVE_ATTENTION");
    return e != nullptr && std::strcmp(e, "rows") == 0;
  }();
  if (rows && s.bidir_prefix == 0) return attention_rows(q, kv, s, out, pool);
  const int n_threads = pool != nullptr ? pool->n_threads() : 1;
  attention_planned(q, kv, s, plan_attention(s, n_threads), out, pool);
}

void attention_planned(const float* q, const KvView& kv, const AttentionShape& s,
                       const AttentionPlan& plan, float* out, ThreadPool* pool) {
  internal::check_attention_shape(kv, s);
  const int g_all = s.n_head / s.n_head_kv;
  GLM_CHECK(plan.tile_tokens >= 1 && plan.n_splits >= 1 && plan.n_slices >= 1 &&
            g_all % plan.n_slices == 0);
  if (s.n_tokens == 0) return;
  const AttnTileOps& ops = tile_ops_for(active_isa());
  const int hd = s.head_dim;
  const int g = g_all / plan.n_slices;
  const int n_tiles = (s.n_tokens + plan.tile_tokens - 1) / plan.tile_tokens;
  const int64_t n_items =
      static_cast<int64_t>(n_tiles) * s.n_head_kv * plan.n_slices * plan.n_splits;
  const int max_rows = plan.tile_tokens * g;
  // An item's (m, l, acc): [max_rows * (hd + 2)] in the thread's scratch, or with splits in
  // [n_items][...] on the caller's thread (the pool's caller is one thread at a time), merged
  // after all ran.
  const size_t part_floats = static_cast<size_t>(max_rows) * (hd + 2);
  thread_local std::vector<float> parts_buf;
  if (plan.n_splits > 1) parts_buf.resize(part_floats * static_cast<size_t>(n_items));
  float* parts = parts_buf.data();  // (a lambda does not capture a thread_local: pass a pointer)

  auto body = [&](int64_t b, int64_t e) {
    thread_local Scratch scratch;
    for (int64_t i = b; i < e; ++i) {
      const Item it = item_of(kv, s, plan, i, n_tiles);
      float* base = parts + part_floats * static_cast<size_t>(i);
      if (plan.n_splits == 1) {
        scratch.part.resize(part_floats);
        base = scratch.part.data();
      }
      const Partial pt{base, base + max_rows, base + 2 * max_rows};
      run_item(ops, q, kv, s, it, &scratch, pt);
      if (plan.n_splits > 1) continue;  // merged below
      for (int r = 0; r < it.nt * it.g; ++r) {
        const int t = it.t0 + r / it.g;
        const int h = it.h0 + r % it.g;
        float* o = out + (static_cast<size_t>(t) * s.n_head + h) * hd;
        const float inv = 1.0f / pt.l[r];
        for (int x = 0; x < hd; ++x) o[x] = pt.acc[static_cast<size_t>(r) * hd + x] * inv;
      }
    }
  };
  internal::claim_chunks(pool, n_items, 1, body);
  if (plan.n_splits == 1) return;

  // Merge the splits of each item: M = max m_k, out = sum_k acc_k e^(m_k - M) / sum_k l_k
  // e^(m_k - M) (a split that saw nothing of a row has m = -inf and weighs 0).
  for (int64_t i0 = 0; i0 < n_items; i0 += plan.n_splits) {
    const Item it = item_of(kv, s, plan, i0, n_tiles);
    for (int r = 0; r < it.nt * it.g; ++r) {
      float mx = -std::numeric_limits<float>::infinity();
      for (int k = 0; k < plan.n_splits; ++k) {
        mx = std::max(mx, parts[part_floats * static_cast<size_t>(i0 + k) + r]);
      }
      const int t = it.t0 + r / it.g;
      const int h = it.h0 + r % it.g;
      float* o = out + (static_cast<size_t>(t) * s.n_head + h) * hd;
      std::fill(o, o + hd, 0.0f);
      float l = 0;
      for (int k = 0; k < plan.n_splits; ++k) {
        const float* base = parts + part_floats * static_cast<size_t>(i0 + k);
        const float mk = base[r];
        if (mk == -std::numeric_limits<float>::infinity()) continue;
        const float w = std::exp(mk - mx);
        l += base[max_rows + r] * w;
        const float* acc = base + 2 * max_rows + static_cast<size_t>(r) * hd;
        for (int x = 0; x < hd; ++x) o[x] += acc[x] * w;
      }
      const float inv = 1.0f / l;
      for (int x = 0; x < hd; ++x) o[x] *= inv;
    }
  }
}

}  // namespace glm::kernels
