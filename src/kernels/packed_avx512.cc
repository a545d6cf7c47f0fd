// AVX-512 VNNI kernel over the 16-row interleaved layouts of packed.h with 32-value blocks and
// 16-bit floats (the k-quant layouts: packed_k_avx512.cc).
//
// Activations are quantized per 32 values as in internal.h (quantize_act_ref): int8 q, scale
// d_x, and c = -offset * sum(q) per block, where the weights are stored unsigned as u = q_w +
// offset (8 for Q4_0, 16 for Q5_0, 128 for Q8_0). For a group of 16 rows and one block, lane r of
//     s = c + sum_p vpdpbusd(u_w[piece p], broadcast(x bytes 4p..4p+3))
// is exactly sum_j q_w[r][j] * q_x[j]; then y[r] += float(s) * d_w[r] * d_x. No horizontal sums:
// the 16 lanes are the 16 rows' outputs. A tile is one group x T tokens (T <= 8), the unpacked
// weights of a block staying in registers across the tile's tokens; in prefill Q4_0 and Q8_0
// take two groups x 4 tokens (tile2: each activation broadcast feeds two vpdpbusd).
// GCC 12's own AVX-512 intrinsics (_mm512_undefined_*) trip these warnings when inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/internal.h"
#include "kernels/matmul_avx512.h"
#include "kernels/packed.h"
#include "kernels/simd_avx512.h"

namespace glm::kernels::internal {
namespace {

constexpr int kMaxT = 8;

// Fully unrolls a loop over pieces or tokens, so arrays of registers stay in registers.
#define GLM_UNROLL_P _Pragma("GCC unroll 8")

struct PCtx {
  const uint8_t* w;  // groups
  size_t group_bytes;
  size_t quants_offset;
  int64_t n_blocks;   // per row
  const int8_t* xq;   // [n_tokens, n_cols]
  const float* xd;    // [n_tokens, n_blocks]
  const int32_t* xc;  // [n_tokens, n_blocks]
  int64_t n_cols;
  float* y;  // [n_tokens, n_rows]
  int64_t n_rows;
};

// kTile2: prefill runs tile2 (measured, kernels_bench ffn up x 64 tokens, one thread: Q4_0
// 43-46 -> 37 ms, Q8_0 46-49 -> 37-38 ms; Q5_0, whose unpacking needs 8 more registers, gains
// nothing and keeps tile).
struct Q4 {
  static constexpr bool kTile2 = true;
  static constexpr int kBlockStride = 4 * 64;
  static constexpr int kOffset = 8;
  // 8 registers: u[j] pairs with activation bytes 4j..4j+3.
  static inline void load(const uint8_t* q, __m512i (&u)[8]) {
    const __m512i m = _mm512_set1_epi8(0x0F);
    GLM_UNROLL_P
    for (int p = 0; p < 4; ++p) {
      const __m512i v = _mm512_load_si512(q + 64 * p);
      u[p] = _mm512_and_si512(v, m);
      u[p + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
    }
  }
};

// Q5_0x16: the Q4_0x16 pieces, then one line of high bits (packed.cc: spread_qh): bit p of a
// lane byte is bit 4 of low-nibble piece p, bit 4 + p bit 4 of high-nibble piece p; u = q + 16.
struct Q5 {
  static constexpr bool kTile2 = false;
  static constexpr int kBlockStride = 5 * 64;
  static constexpr int kOffset = 16;
  static inline void load(const uint8_t* q, __m512i (&u)[8]) {
    const __m512i m = _mm512_set1_epi8(0x0F);
    const __m512i b4 = _mm512_set1_epi8(0x10);
    const __m512i hb = _mm512_load_si512(q + 256);
    // 16-bit shifts: a bit that crosses into the next byte never lands on bit 4 (shifts <= 4).
    const __m512i lo_bit[4] = {_mm512_slli_epi16(hb, 4), _mm512_slli_epi16(hb, 3),
                               _mm512_slli_epi16(hb, 2), _mm512_slli_epi16(hb, 1)};
    const __m512i hi_bit[4] = {hb, _mm512_srli_epi16(hb, 1), _mm512_srli_epi16(hb, 2),
                               _mm512_srli_epi16(hb, 3)};
    GLM_UNROLL_P
    for (int p = 0; p < 4; ++p) {
      const __m512i v = _mm512_load_si512(q + 64 * p);
      u[p] = _mm512_or_si512(_mm512_and_si512(v, m), _mm512_and_si512(lo_bit[p], b4));
      u[p + 4] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m),
                                 _mm512_and_si512(hi_bit[p], b4));
    }
  }
};

struct Q8 {
  static constexpr bool kTile2 = true;
  static constexpr int kBlockStride = 8 * 64;
  static constexpr int kOffset = 128;
  static inline void load(const uint8_t* q, __m512i (&u)[8]) {
    GLM_UNROLL_P
    for (int p = 0; p < 8; ++p) u[p] = _mm512_load_si512(q + 64 * p);
  }
};

template <class Fmt, int T>
void tile(const PCtx& c, int64_t g, int64_t t0) {
  const uint8_t* group = c.w + g * c.group_bytes;
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(group);  // [nb][16]
  const uint8_t* quants = group + c.quants_offset;                    // [nb][P][16][4]
  __m512 acc[T];
  GLM_UNROLL_P
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int32_t* xq[T];
  const float* xd[T];
  const int32_t* xc[T];
  GLM_UNROLL_P
  for (int t = 0; t < T; ++t) {
    xq[t] = reinterpret_cast<const int32_t*>(c.xq + (t0 + t) * c.n_cols);
    xd[t] = c.xd + (t0 + t) * c.n_blocks;
    xc[t] = c.xc + (t0 + t) * c.n_blocks;
  }
  for (int64_t b = 0; b < c.n_blocks; ++b) {
    if constexpr (T == 1) {
      // Decode streams the group once: fetch ahead (past its end, into the next group's
      // scales), so that new streams do not wait for the hardware prefetcher to ramp up.
      const char* ahead = reinterpret_cast<const char*>(quants + b * Fmt::kBlockStride) + 4096;
      GLM_UNROLL_P
      for (int l = 0; l < Fmt::kBlockStride / 64; ++l) _mm_prefetch(ahead + 64 * l, _MM_HINT_T0);
    }
    __m512i u[8];
    Fmt::load(quants + b * Fmt::kBlockStride, u);
    const __m512 dw = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(scales + b * kPackRows)));
    GLM_UNROLL_P
    for (int t = 0; t < T; ++t) {
      const int32_t* x = xq[t] + b * 8;
      // Two chains of four: vpdpbusd's latency is hidden behind the other chain.
      __m512i s0 = _mm512_set1_epi32(xc[t][b]);
      __m512i s1 = _mm512_setzero_si512();
      GLM_UNROLL_P
      for (int j = 0; j < 8; j += 2) {
        s0 = _mm512_dpbusd_epi32(s0, u[j], _mm512_set1_epi32(x[j]));
        s1 = _mm512_dpbusd_epi32(s1, u[j + 1], _mm512_set1_epi32(x[j + 1]));
      }
      const __m512 s = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
      acc[t] = _mm512_fmadd_ps(s, _mm512_mul_ps(dw, _mm512_set1_ps(xd[t][b])), acc[t]);
    }
  }
  GLM_UNROLL_P
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(c.y + (t0 + t) * c.n_rows + g * kPackRows, acc[t]);
}

template <class Fmt, int T>
void tile_dispatch(const PCtx& c, int64_t g, int64_t t0, int nt) {
  if constexpr (T > 1) {
    if (nt < T) return tile_dispatch<Fmt, T - 1>(c, g, t0, nt);
  }
  tile<Fmt, T>(c, g, t0);
}

// Prefill: two groups (32 rows) x T tokens, so that each activation broadcast feeds two
// vpdpbusd (16 unpacked weight registers, 2 T accumulators).
template <class Fmt, int T>
void tile2(const PCtx& c, int64_t g, int64_t t0) {
  const uint8_t* group[2] = {c.w + g * c.group_bytes, c.w + (g + 1) * c.group_bytes};
  __m512 acc[2][T];
  GLM_UNROLL_P
  for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < c.n_blocks; ++b) {
    __m512i u[2][8];
    __m512 dw[2];
    GLM_UNROLL_P
    for (int k = 0; k < 2; ++k) {
      Fmt::load(group[k] + c.quants_offset + b * Fmt::kBlockStride, u[k]);
      dw[k] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(
          reinterpret_cast<const uint16_t*>(group[k]) + b * kPackRows)));
    }
    GLM_UNROLL_P
    for (int t = 0; t < T; ++t) {
      const int32_t* x = reinterpret_cast<const int32_t*>(c.xq + (t0 + t) * c.n_cols) + b * 8;
      const __m512i xc = _mm512_set1_epi32(c.xc[(t0 + t) * c.n_blocks + b]);
      __m512i s0 = xc, s1 = xc;
      GLM_UNROLL_P
      for (int j = 0; j < 8; ++j) {
        const __m512i xb = _mm512_set1_epi32(x[j]);
        s0 = _mm512_dpbusd_epi32(s0, u[0][j], xb);
        s1 = _mm512_dpbusd_epi32(s1, u[1][j], xb);
      }
      const __m512 xd = _mm512_set1_ps(c.xd[(t0 + t) * c.n_blocks + b]);
      acc[0][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_mul_ps(dw[0], xd), acc[0][t]);
      acc[1][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_mul_ps(dw[1], xd), acc[1][t]);
    }
  }
  GLM_UNROLL_P
  for (int t = 0; t < T; ++t) {
    _mm512_storeu_ps(c.y + (t0 + t) * c.n_rows + g * kPackRows, acc[0][t]);
    _mm512_storeu_ps(c.y + (t0 + t) * c.n_rows + (g + 1) * kPackRows, acc[1][t]);
  }
}

template <class Fmt, int T>
void tile2_dispatch(const PCtx& c, int64_t g, int64_t t0, int nt) {
  if constexpr (T > 1) {
    if (nt < T) return tile2_dispatch<Fmt, T - 1>(c, g, t0, nt);
  }
  tile2<Fmt, T>(c, g, t0);
}

constexpr int kMaxT2 = 4;

template <class Fmt>
void run_groups(const PCtx& c, int64_t g0, int64_t g1, int64_t n_tokens) {
  int64_t g = g0;
  if (n_tokens > 1 && Fmt::kTile2) {
    for (; g + 2 <= g1; g += 2) {
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxT2) {
        const int nt = static_cast<int>(std::min<int64_t>(kMaxT2, n_tokens - t0));
        tile2_dispatch<Fmt, kMaxT2>(c, g, t0, nt);
      }
    }
  }
  for (; g < g1; ++g) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxT) {
      const int nt = static_cast<int>(std::min<int64_t>(kMaxT, n_tokens - t0));
      tile_dispatch<Fmt, kMaxT>(c, g, t0, nt);
    }
  }
}

// Quantizes one token: q [n_cols], d and c [n_cols / 32] (internal.h's contract).
void quantize_token(const float* x, int64_t n_cols, int offset, int8_t* q, float* d, int32_t* c) {
  for (int64_t b = 0; b < n_cols / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * 32);
    const __m512 v1 = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax = hmax(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    d[b] = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
    const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32), _mm512_cvtepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32 + 16), _mm512_cvtepi32_epi8(i1));
    // |sum| <= 32 * 127: exact in f32.
    const int32_t sum = static_cast<int32_t>(hsum(_mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1))));
    c[b] = -offset * sum;
  }
}

struct ActBuf {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> c;
};

template <class Fmt>
void packed_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                   ThreadPool* pool) {
  const int64_t nb = w.n_cols / 32;
  thread_local ActBuf buf;
  if (buf.q.size() < static_cast<size_t>(n_tokens * w.n_cols)) buf.q.resize(n_tokens * w.n_cols);
  if (buf.d.size() < static_cast<size_t>(n_tokens * nb)) {
    buf.d.resize(n_tokens * nb);
    buf.c.resize(n_tokens * nb);
  }
  struct QuantCtx {
    const float* x;
    int64_t n_cols, nb;
    ActBuf* buf;
  } qc{x, w.n_cols, nb, &buf};
  auto quantize = [q = &qc](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      quantize_token(q->x + t * q->n_cols, q->n_cols, Fmt::kOffset,
                     q->buf->q.data() + t * q->n_cols, q->buf->d.data() + t * q->nb,
                     q->buf->c.data() + t * q->nb);
    }
  };
  if (pool != nullptr && n_tokens >= 4) {
    pool->parallel_for(n_tokens, quantize);
  } else {
    quantize(0, n_tokens, 0);
  }
  const PCtx c{w.packed,
               packed_group_bytes(w.packed_layout, w.n_cols),
               packed_quants_offset(w.packed_layout, w.n_cols),
               nb,
               buf.q.data(),
               buf.d.data(),
               buf.c.data(),
               w.n_cols,
               y,
               w.n_rows};
  const int64_t n_groups = w.packed_rows / kPackRows;
  const int n_threads = pool != nullptr ? pool->n_threads() : 1;
  // About 8 chunks of groups per thread.
  const int64_t chunk = std::max<int64_t>(1, (n_groups + 8 * n_threads - 1) / (8 * n_threads));
  claim_chunks(pool, n_groups, chunk,
               [&](int64_t g0, int64_t g1) { run_groups<Fmt>(c, g0, g1, n_tokens); });
}

// 16-bit float layouts (F16x16, BF16x16): lanes = 16 rows, one f32 FMA per column and token
// with x[t][k] broadcast; a tile is G groups (48 rows at most) x T tokens of accumulators.
struct FCtx {
  const uint8_t* w;
  size_t group_bytes;
  const float* x;  // [n_tokens, n_cols]
  int64_t n_cols;
  float* y;  // [n_tokens, n_rows]
  int64_t n_rows;
};

template <bool kBf16>
inline __m512 load_col(const uint8_t* p) {
  const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (kBf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  return _mm512_cvtph_ps(h);
}

// Columns [k0, k1) of the tile; adds to y unless k0 == 0.
template <bool kBf16, int G, int T>
void ftile(const FCtx& c, int64_t g0, int64_t t0, int64_t k0, int64_t k1) {
  __m512 acc[G][T];
  GLM_UNROLL_P
  for (int g = 0; g < G; ++g) {
    GLM_UNROLL_P
    for (int t = 0; t < T; ++t) {
      acc[g][t] = k0 == 0 ? _mm512_setzero_ps()
                          : _mm512_loadu_ps(c.y + (t0 + t) * c.n_rows + (g0 + g) * kPackRows);
    }
  }
  const uint8_t* base = c.w + g0 * c.group_bytes;
  const float* x = c.x + t0 * c.n_cols;
  for (int64_t k = k0; k < k1; ++k) {
    if constexpr (T == 1) {
      GLM_UNROLL_P
      for (int g = 0; g < G; ++g) {
        _mm_prefetch(reinterpret_cast<const char*>(base + g * c.group_bytes + k * 32) + 2048,
                     _MM_HINT_T0);
      }
    }
    __m512 w[G];
    GLM_UNROLL_P
    for (int g = 0; g < G; ++g) w[g] = load_col<kBf16>(base + g * c.group_bytes + k * 32);
    GLM_UNROLL_P
    for (int t = 0; t < T; ++t) {
      const __m512 xb = _mm512_set1_ps(x[t * c.n_cols + k]);
      GLM_UNROLL_P
      for (int g = 0; g < G; ++g) acc[g][t] = _mm512_fmadd_ps(w[g], xb, acc[g][t]);
    }
  }
  GLM_UNROLL_P
  for (int t = 0; t < T; ++t) {
    GLM_UNROLL_P
    for (int g = 0; g < G; ++g) {
      _mm512_storeu_ps(c.y + (t0 + t) * c.n_rows + (g0 + g) * kPackRows, acc[g][t]);
    }
  }
}

template <bool kBf16, int G, int T>
void ftile_dispatch(const FCtx& c, int64_t g0, int ng, int64_t t0, int nt, int64_t k0, int64_t k1) {
  if constexpr (T > 1) {
    if (nt < T) return ftile_dispatch<kBf16, G, T - 1>(c, g0, ng, t0, nt, k0, k1);
  }
  if constexpr (G > 1) {
    if (ng < G) return ftile_dispatch<kBf16, G - 1, T>(c, g0, ng, t0, nt, k0, k1);
  }
  ftile<kBf16, G, T>(c, g0, t0, k0, k1);
}

constexpr int kFloatG = 3;  // 3 groups x 8 tokens = 24 accumulators
// Prefill sweeps columns in panels: 3 groups x 1024 columns of weights (96 KB) stay in L2 while
// every token tile passes over them (a whole row of ffn_down, 13696 columns, would not).
constexpr int64_t kPanelCols = 1024;

template <bool kBf16>
void run_float_groups(const FCtx& c, int64_t g0, int64_t g1, int64_t n_tokens) {
  const int64_t panel = n_tokens <= kMaxT ? c.n_cols : kPanelCols;
  for (int64_t g = g0; g < g1; g += kFloatG) {
    const int ng = static_cast<int>(std::min<int64_t>(kFloatG, g1 - g));
    for (int64_t k0 = 0; k0 < c.n_cols; k0 += panel) {
      const int64_t k1 = std::min(k0 + panel, c.n_cols);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxT) {
        const int nt = static_cast<int>(std::min<int64_t>(kMaxT, n_tokens - t0));
        ftile_dispatch<kBf16, kFloatG, kMaxT>(c, g, ng, t0, nt, k0, k1);
      }
    }
  }
}

template <bool kBf16>
void float_packed_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                         ThreadPool* pool) {
  const FCtx c{w.packed, packed_group_bytes(w.packed_layout, w.n_cols), x, w.n_cols, y, w.n_rows};
  const int64_t n_groups = w.packed_rows / kPackRows;
  const int n_threads = pool != nullptr ? pool->n_threads() : 1;
  // About 8 chunks per thread, each whole tiles of kFloatG groups.
  int64_t chunk = (n_groups + 8 * n_threads - 1) / (8 * n_threads);
  chunk = std::max<int64_t>(kFloatG, (chunk + kFloatG - 1) / kFloatG * kFloatG);
  claim_chunks(pool, n_groups, chunk,
               [&](int64_t g0, int64_t g1) { run_float_groups<kBf16>(c, g0, g1, n_tokens); });
}

}  // namespace

void matmul_packed_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                          ThreadPool* pool) {
  switch (w.packed_layout) {
    case PackedLayout::kQ4_0x16:
      packed_matmul<Q4>(w, x, y, n_tokens, pool);
      return;
    case PackedLayout::kQ8_0x16:
      packed_matmul<Q8>(w, x, y, n_tokens, pool);
      return;
    case PackedLayout::kF16x16:
      float_packed_matmul<false>(w, x, y, n_tokens, pool);
      return;
    case PackedLayout::kBF16x16:
      float_packed_matmul<true>(w, x, y, n_tokens, pool);
      return;
    case PackedLayout::kQ5_0x16:
      packed_matmul<Q5>(w, x, y, n_tokens, pool);
      return;
    case PackedLayout::kQ4_Kx16:
    case PackedLayout::kQ5_Kx16:
    case PackedLayout::kQ6_Kx16:
      matmul_packed_k_avx512(w, x, y, n_tokens, pool);
      return;
    case PackedLayout::kNone:
      break;
  }
}

}  // namespace glm::kernels::internal
