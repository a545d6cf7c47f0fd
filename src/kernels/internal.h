// Internal to kernels/: the per-ISA entry points that matmul.cc and attention.cc dispatch to.
// Each *_avx2.cc / *_avx512.cc file defines its own; only call one after cpu_isa() says the CPU
// has that instruction set. Not part of the module's public interface.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/attention.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"

namespace glm::kernels::internal {

// Row operations of attention over one KV row for a group of `g` query heads that share it.
// `row` is the start of the whole KV row (all KV heads: F16, F32 or Q8_0 blocks of 32); the head's
// hd elements start at element e0 of it. Shapes: q, acc: [g, hd] f32; s, p: [g].
struct AttnOps {
  // s[h] = dot(q[h], k[e0 .. e0 + hd))
  void (*scores)(const float* q, int g, int hd, const void* row, int e0, DType type, float* s);
  // acc[h] += sum_j p[j, h] * v_j[e0 .. e0 + hd) over n rows v_j = v + j * row_bytes
  // (p: [n, g]), row after row in order.
  void (*accumulate)(float* acc, int g, int hd, const float* p, const uint8_t* v, size_t row_bytes,
                     int n, int e0, DType type);
};
const AttnOps& attn_ops_scalar();
const AttnOps& attn_ops_avx2();
const AttnOps& attn_ops_avx512();
// The row operations of an instruction set (attention.cc; the row kernel and the tiled one's
// small tiles use the same).
const AttnOps& attn_ops_for(Isa isa);

// GLM_CHECKs of attention()'s arguments (shapes, KV type, enough cached positions).
void check_attention_shape(const KvView& kv, const AttentionShape& s);

// Key positions per step of the tiled attention (attention_tiled.cc): the leading dimension of
// the transposed key tile and of the score tile. A multiple of every vector width.
constexpr int kKeyTile = 64;

// Tile operations of the tiled attention, R query rows (tokens x heads of one KV head) against
// nk <= kKeyTile key positions. Shapes: q: [R, hd] (already scaled); kt: [hd, kKeyTile] keys
// transposed (columns >= nk: any finite values); s, p: [R, kKeyTile]; acc: [R, hd].
struct AttnTileOps {
  // s[r, j] = dot(q[r], kt[:, j]) for j < nk (columns up to the vector width past nk written).
  void (*qk)(const float* q, int n_rows, int hd, const float* kt, int nk, float* s);
  // acc[r] += sum_{j < nk} p[r, j] * v[j][0 .. hd) (v: nk row pointers, f32).
  void (*pv)(const float* p, int n_rows, int nk, const float* const* v, int hd, float* acc);
  // Head elements [e0, e0 + hd) of a K/V row as f32: in dst, or the row itself when F32.
  const float* (*load_row)(const void* row, int e0, DType type, int hd, float* dst);
  // One key step of the online softmax over rows [0, n_rows) of s ([R, kKeyTile]): row r's
  // scores s[r, 0 .. n_vis[r]) become exp(s - m[r]) after m[r] rises to their max (l[r] and
  // acc[r, 0 .. hd) then scaled by exp(m_old - m_new)), l[r] += their sum, and s[r, n_vis[r] ..
  // nk) = 0. A row with n_vis[r] = 0 is only zeroed.
  void (*softmax_step)(float* s, int n_rows, const int* n_vis, int nk, float* m, float* l,
                       float* acc, int hd);
  // s[r, j] = dot(q[r], head elements [e0, e0 + hd) of key row k[j]) for r < n_rows, j < nk,
  // read from the rows themselves (all of `type`): a tile of few rows, no transpose.
  void (*qk_keys)(const float* q, int n_rows, int hd, const void* const* k, int e0, DType type,
                  int nk, float* s);
};
const AttnTileOps& attn_tile_ops_scalar();
const AttnTileOps& attn_tile_ops_avx2();
const AttnTileOps& attn_tile_ops_avx512();

// A matmul variant: computes y = x W^T like matmul() for the weight types it supports and
// returns true, or returns false without touching y (the caller then uses the generic path).
using MatmulFn = bool (*)(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                          ThreadPool* pool);
bool matmul_avx2(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool);
bool matmul_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                   ThreadPool* pool);
// The packed-layout kernels (packed.h): rows [0, w.packed_rows) of y from w.packed.
using MatmulPackedFn = void (*)(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                                ThreadPool* pool);
void matmul_packed_avx2(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                        ThreadPool* pool);
void matmul_packed_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                          ThreadPool* pool);
// packed_avx2.cc built with AVX-VNNI (packed_avxvnni.cc), run where avxvnni_active(); and how
// many times it ran (tests: proof that it did).
void matmul_packed_avxvnni(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                           ThreadPool* pool);
int64_t avxvnni_calls();
// act_block() of each variant; -1 when the variant does not handle type t.
int act_block_avx2(DType t);
int act_block_avx512(DType t);

// Activation quantization of the integer kernels (the contract their tests check against): per
// block of `block` values, amax = max |x|, d = amax / 127, q = nearbyint(x * (127 / amax))
// (round half to even, as vcvtps2dq), all zero when amax = 0. The kernels store the values in
// their own layouts; this is the math.
//   x: [n] -> q: [n], d: [n / block]
void quantize_act_ref(const float* x, int64_t n, int block, int8_t* q, float* d);
// Block size of the activation quantization that variant `isa` applies for weights of type t;
// 0 when it multiplies in f32 (F32/F16/BF16, the generic path).
int act_block(Isa isa, DType t);

// Runs fn(begin, end) over [0, n) split in chunks that are multiples of `align` (except the
// last), on the pool if any, else on the caller.
template <typename Fn>
void split_rows(ThreadPool* pool, int64_t n, int64_t align, const Fn& fn) {
  const int64_t n_units = (n + align - 1) / align;
  if (pool == nullptr || pool->n_threads() == 1 || n_units == 1) {
    fn(int64_t{0}, n);
    return;
  }
  // One captured pointer keeps the std::function in its small buffer: no allocation.
  struct Ctx {
    const Fn* fn;
    int64_t n, align;
  } ctx{&fn, n, align};
  pool->parallel_for(n_units, [c = &ctx](int64_t b, int64_t e, int) {
    const int64_t end = e * c->align < c->n ? e * c->align : c->n;
    (*c->fn)(b * c->align, end);
  });
}

// Runs fn(begin, end) over [0, n) in chunks of `chunk` (the last may be shorter) that the
// pool's threads, the caller included, claim from a shared counter: dynamic, so all finish
// together even when one core is busy elsewhere. On the caller alone without a pool, with one
// thread, or when n fits in one chunk.
template <typename Fn>
void claim_chunks(ThreadPool* pool, int64_t n, int64_t chunk, const Fn& fn) {
  if (pool == nullptr || pool->n_threads() == 1 || n <= chunk) {
    fn(int64_t{0}, n);
    return;
  }
  struct Shared {
    const Fn* fn;
    int64_t n, chunk;
    alignas(64) std::atomic<int64_t> next{0};
  } sh{&fn, n, chunk};
  pool->parallel_for(pool->n_threads(), [s = &sh](int64_t, int64_t, int) {
    for (;;) {
      const int64_t b = s->next.fetch_add(s->chunk, std::memory_order_relaxed);
      if (b >= s->n) return;
      (*s->fn)(b, std::min(b + s->chunk, s->n));
    }
  });
}

}  // namespace glm::kernels::internal
