// AVX-512 VNNI kernel over the 16-row interleaved layouts of packed.h with 32-value blocks and
// 16-bit floats (the k-quant layouts: packed_k_avx512.cc).
//
// Activations are quantized per 32 values as in internal.h (quantize_act_ref): int8 q, scale
// d_x, and c = -offset * sum(q) per block, where the weights are stored unsigned as u = q_w +
// offset (8 for Q4_0, 16 for Q5_0, 128 for Q8_0). For a group of 16 rows and one block, lane r of
//     s = c + sum_p vpdpbusd(u_w[piece p], broadcast(x bytes 4p..4p+3))
// is exactly sum_j q_w[r][j] * q_x[j]; then y[r] += float(s) * d_w[r] * d_x. No horizontal sums:
// the 16 lanes are the 16 rows' outputs. A tile is G groups x T tokens, the unpacked weights of a
// block staying in registers across the tile's tokens: one group x 1 token in decode; in prefill
// two groups x 4 tokens for Q4_0 and Q8_0 (each activation broadcast feeds two vpdpbusd), one
// group x 8 tokens for Q5_0. The loops around the tiles, the activation quantization loop and
// the threading are packed_tiling.h's, shared with the AVX2 kernels.
// GCC 12's own AVX-512 intrinsics (_mm512_undefined_*) trip these warnings when inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>

#include "kernels/internal.h"
#include "kernels/matmul_avx512.h"
#include "kernels/packed.h"
#include "kernels/packed_tiling.h"
#include "kernels/simd_avx512.h"

namespace glm::kernels::internal {
namespace {

// Fully unrolls a loop over pieces or tokens, so arrays of registers stay in registers.
#define GLM_UNROLL_P _Pragma("GCC unroll 8")

// kPrefillGroups: groups per prefill tile. Two for Q4_0 and Q8_0 (measured, kernels_bench ffn up
// x 64 tokens, one thread: Q4_0 43-46 -> 37 ms, Q8_0 46-49 -> 37-38 ms); Q5_0, whose unpacking
// needs 8 more registers, gains nothing and keeps one group x 8 tokens.
struct Q4 {
  static constexpr int kPrefillGroups = 2;
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
  static constexpr int kPrefillGroups = 1;
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
  static constexpr int kPrefillGroups = 2;
  static constexpr int kBlockStride = 8 * 64;
  static constexpr int kOffset = 128;
  static inline void load(const uint8_t* q, __m512i (&u)[8]) {
    GLM_UNROLL_P
    for (int p = 0; p < 8; ++p) u[p] = _mm512_load_si512(q + 64 * p);
  }
};

// G groups (g .. g + G - 1) x T tokens from t0.
template <class Fmt, int G, int T>
void tile(const PCtx& c, int64_t g, int64_t t0) {
  // Dependency chains of vpdpbusd per group and token: with one group, two chains of four hide
  // the instruction's latency; with two groups the other group's chain does.
  constexpr int kChains = G == 1 ? 2 : 1;
  const uint8_t* group[G];
  GLM_UNROLL_P
  for (int k = 0; k < G; ++k) group[k] = c.w + (g + k) * c.group_bytes;
  __m512 acc[G][T];
  GLM_UNROLL_P
  for (int k = 0; k < G; ++k) {
    GLM_UNROLL_P
    for (int t = 0; t < T; ++t) acc[k][t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < c.n_blocks; ++b) {
    __m512i u[G][8];
    __m512 dw[G];
    GLM_UNROLL_P
    for (int k = 0; k < G; ++k) {
      const uint8_t* qb = group[k] + c.quants_offset + b * Fmt::kBlockStride;
      if constexpr (T == 1) {
        // Decode streams the group once: fetch ahead (past its end, into the next group's
        // scales), so that new streams do not wait for the hardware prefetcher to ramp up.
        const char* ahead = reinterpret_cast<const char*>(qb) + 4096;
        GLM_UNROLL_P
        for (int l = 0; l < Fmt::kBlockStride / 64; ++l) _mm_prefetch(ahead + 64 * l, _MM_HINT_T0);
      }
      Fmt::load(qb, u[k]);
      dw[k] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(
          reinterpret_cast<const uint16_t*>(group[k]) + b * kPackRows)));
    }
    GLM_UNROLL_P
    for (int t = 0; t < T; ++t) {
      const int32_t* x = reinterpret_cast<const int32_t*>(c.xq + (t0 + t) * c.n_cols) + b * 8;
      const int64_t tb = (t0 + t) * c.n_blocks + b;
      __m512i s[G][kChains];
      GLM_UNROLL_P
      for (int k = 0; k < G; ++k) {
        s[k][0] = _mm512_set1_epi32(c.xc[tb]);
        if constexpr (kChains == 2) s[k][1] = _mm512_setzero_si512();
      }
      GLM_UNROLL_P
      for (int j = 0; j < 8; ++j) {
        const __m512i xb = _mm512_set1_epi32(x[j]);
        GLM_UNROLL_P
        for (int k = 0; k < G; ++k) {
          s[k][j % kChains] = _mm512_dpbusd_epi32(s[k][j % kChains], u[k][j], xb);
        }
      }
      const __m512 xd = _mm512_set1_ps(c.xd[tb]);
      GLM_UNROLL_P
      for (int k = 0; k < G; ++k) {
        __m512i sum = s[k][0];
        if constexpr (kChains == 2) sum = _mm512_add_epi32(sum, s[k][1]);
        acc[k][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw[k], xd), acc[k][t]);
      }
    }
  }
  GLM_UNROLL_P
  for (int t = 0; t < T; ++t) {
    GLM_UNROLL_P
    for (int k = 0; k < G; ++k) {
      _mm512_storeu_ps(c.y + (t0 + t) * c.n_rows + (g + k) * kPackRows, acc[k][t]);
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

// packed_tiling.h's Kern for format Fmt: tiles of groups (decode 1 x 1 token, prefill
// Fmt::kPrefillGroups x 8 / kPrefillGroups tokens).
template <class Fmt>
struct QKern {
  using Ctx = PCtx;
  static constexpr int kOffset = Fmt::kOffset;
  static constexpr int kDecodeRows = 1;
  static constexpr int kRows = Fmt::kPrefillGroups;
  static constexpr int kTokens = 8 / Fmt::kPrefillGroups;
  static void quantize_token(const float* x, int64_t n_cols, int offset, int8_t* q, float* d,
                             int32_t* c) {
    internal::quantize_token(x, n_cols, offset, q, d, c);
  }
  template <int G, int T>
  static void tile(const PCtx& c, int64_t g, int64_t t0) {
    internal::tile<Fmt, G, T>(c, g, t0);
  }
};

// 16-bit float layouts (F16x16, BF16x16): lanes = 16 rows, one f32 FMA per column and token
// with x[t][k] broadcast; a tile is G groups (48 rows at most) x T tokens of accumulators.
template <bool kBf16>
inline __m512 load_col(const uint8_t* p) {
  const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (kBf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  return _mm512_cvtph_ps(h);
}

// packed_tiling.h's Kern of the float layouts: 3 groups x 1 token (decode) or 3 groups x 8
// tokens (prefill) = 24 accumulators.
template <bool kBf16>
struct FKern {
  static constexpr int kDecodeRows = 3;
  static constexpr int kRows = 3;
  static constexpr int kTokens = 8;
  // Columns [k0, k1) of the tile; adds to y unless k0 == 0.
  template <int G, int T>
  static void tile(const FCtx& c, int64_t g0, int64_t t0, int64_t k0, int64_t k1) {
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
};

}  // namespace

void matmul_packed_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                          ThreadPool* pool) {
  packed_matmul<QKern, Q4, Q5, Q8, FKern>(w, x, y, n_tokens, pool, matmul_packed_k_avx512);
}

}  // namespace glm::kernels::internal
