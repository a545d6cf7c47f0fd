// AVX-512 VNNI integer path for the k-quants Q4_K and Q6_K (256-value super-blocks), row-major: the
// rows after the last group of 16 of a packed copy (packed_k_avx512.cc), and --repack 0. Q5_K
// rows run the AVX2 kernel (matmul_k_avx2.cc), which quantizes activations the same way.
//
// Activations are quantized per 256 values (internal.h: quantize_act_ref with block 256) into
// ActK: int8 values in natural order, the sums of each 16 and each 32 of them, and d_x.
// Weights unpack to unsigned bytes in natural order, 64 per zmm (Q4_K: low nibbles of 32 bytes
// then their high nibbles; Q6_K: 4 low bits from ql, 2 high bits from qh). Products go through
// vpmaddubsw (u8 x s8 -> pairs in int16, no saturation for these ranges) and vpdpwssd with the
// sub-block scales spread over the int16 lanes, so a whole super-block accumulates in int32:
//   Q4_K: y += d_x * (d * sum_j sc_j q_j.x_j  -  dmin * sum_j m_j bsum32_j)
//   Q6_K: y += d_x * d * (sum_g sc_g q_g.x_g  -  32 * sum_g sc_g bsum16_g)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels/act_k.h"
#include "kernels/internal.h"
#include "kernels/matmul_avx2.h"
#include "kernels/matmul_avx512.h"
#include "kernels/quant.h"
#include "kernels/row_tiling.h"
#include "kernels/simd_avx512.h"

namespace glm::kernels::internal {
namespace {

// The tile shapes of every Kern here (row_tiling.h): 4 rows x 1 token (decode), 4 rows x 2 tokens
// (prefill).
struct KShape {
  static constexpr int kDecodeRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kTokens = 2;
};

inline __m512 zext_ps(__m128 v) { return _mm512_zextps128_ps512(v); }

// Decode streams each row once: fetch the lines `bytes` long, 1 KiB ahead of p, so that a new
// row's first lines are on their way before the hardware prefetcher has ramped up.
inline void prefetch_ahead(const void* p, size_t bytes) {
  const char* a = static_cast<const char*>(p) + 1024;
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(a + o, _MM_HINT_T0);
}

// The 6-bit scales and mins of a Q4_K block (quant.h: unpack_scale_min_k4), all eight at once:
// byte j of *sc / *m is sub-block j's.
inline void unpack_scales_q4k(const uint8_t* scales, uint64_t* sc, uint64_t* m) {
  uint32_t u[3];
  std::memcpy(u, scales, 12);
  constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
  const uint32_t sc_lo = u[0] & k6;
  const uint32_t sc_hi = (u[2] & k4) | (((u[0] >> 6) & k2) << 4);
  const uint32_t m_lo = u[1] & k6;
  const uint32_t m_hi = ((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4);
  *sc = sc_lo | (uint64_t{sc_hi} << 32);
  *m = m_lo | (uint64_t{m_hi} << 32);
}

// vpermw indices spreading scales over the int16 lanes of one 64-value chunk (a lane holds
// the pair of products of values 2l, 2l + 1). Q4_K chunk j: lanes 0..15 -> scale 2j, 16..31 ->
// 2j + 1. Q6_K chunk k: 8 lanes (16 values) per scale, scales 4k .. 4k + 3.
inline __m512i q4k_index(int j) {
  return _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<int16_t>(2 * j)),
                                 _mm512_set1_epi16(static_cast<int16_t>(2 * j + 1)));
}
inline __m512i q6k_index(int k) {
  const __m512i lane = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                        16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  return _mm512_add_epi16(_mm512_srli_epi16(lane, 3),
                          _mm512_set1_epi16(static_cast<int16_t>(4 * k)));
}

struct Q4KKern : KShape {
  using Ctx = KCtx;
  template <int R, int T>
  static void tile(const Ctx& c, int64_t r0, int64_t t0) {
    __m512 acc[R][T];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      GLM_UNROLL
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    for (int64_t sb = 0; sb < c.n_sb; ++sb) {
      const BlockQ4_K* blk[R];
      __m128i mins[R];
      __m512i sc16[R];  // the 8 sub-block scales in int16 lanes 0..7
      __m512 dw[R], dmin[R];
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const BlockQ4_K*>(c.w + (r0 + r) * c.row_bytes) + sb;
        if constexpr (T == 1) prefetch_ahead(blk[r], sizeof(BlockQ4_K));
        uint64_t sc8, m8;
        unpack_scales_q4k(blk[r]->scales, &sc8, &m8);
        sc16[r] =
            _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
        mins[r] = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m8)));
        dw[r] = _mm512_set1_ps(_cvtsh_ss(blk[r]->d));
        dmin[r] = _mm512_set1_ps(_cvtsh_ss(blk[r]->dmin));
      }
      __m512i isum[R][T];
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        GLM_UNROLL
        for (int t = 0; t < T; ++t) isum[r][t] = _mm512_setzero_si512();
      }
      const __m256i mask = _mm256_set1_epi8(0x0F);
      GLM_UNROLL
      for (int j = 0; j < 4; ++j) {
        __m512i w[R], scv[R];
        GLM_UNROLL
        for (int r = 0; r < R; ++r) {
          scv[r] = _mm512_permutexvar_epi16(q4k_index(j), sc16[r]);
          const __m256i v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->qs + 32 * j));
          const __m256i lo = _mm256_and_si256(v, mask);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
          w[r] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
        GLM_UNROLL
        for (int t = 0; t < T; ++t) {
          const __m512i x = _mm512_load_si512(c.act[(t0 + t) * c.n_sb + sb].q + 64 * j);
          GLM_UNROLL
          for (int r = 0; r < R; ++r) {
            isum[r][t] = _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(w[r], x), scv[r]);
          }
        }
      }
      GLM_UNROLL
      for (int t = 0; t < T; ++t) {
        const ActK& a = c.act[(t0 + t) * c.n_sb + sb];
        const __m128i bs = _mm_load_si128(reinterpret_cast<const __m128i*>(a.bsum32));
        const __m512 dx = _mm512_set1_ps(a.d);
        GLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m128 ms = _mm_cvtepi32_ps(_mm_madd_epi16(mins[r], bs));
          const __m512 f = _mm512_fnmadd_ps(zext_ps(ms), dmin[r],
                                            _mm512_mul_ps(_mm512_cvtepi32_ps(isum[r][t]), dw[r]));
          acc[r][t] = _mm512_fmadd_ps(f, dx, acc[r][t]);
        }
      }
    }
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      GLM_UNROLL
      for (int r = 0; r < R; ++r) c.y[(t0 + t) * c.n_rows + r0 + r] = hsum(acc[r][t]);
    }
  }
};

struct Q6KKern : KShape {
  using Ctx = KCtx;
  template <int R, int T>
  static void tile(const Ctx& c, int64_t r0, int64_t t0) {
    __m512 acc[R][T];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      GLM_UNROLL
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    for (int64_t sb = 0; sb < c.n_sb; ++sb) {
      const BlockQ6_K* blk[R];
      __m256i sc16[R];  // the 16 scales as int16
      __m512 dw[R];
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const BlockQ6_K*>(c.w + (r0 + r) * c.row_bytes) + sb;
        if constexpr (T == 1) prefetch_ahead(blk[r], sizeof(BlockQ6_K));
        sc16[r] =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r]->scales)));
        dw[r] = _mm512_set1_ps(_cvtsh_ss(blk[r]->d));
      }
      __m512i isum[R][T];
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        GLM_UNROLL
        for (int t = 0; t < T; ++t) isum[r][t] = _mm512_setzero_si512();
      }
      const __m512i m4 = _mm512_set1_epi8(0x0F);
      const __m512i m2 = _mm512_set1_epi8(0x03);
      GLM_UNROLL
      for (int h = 0; h < 2; ++h) {
        __m512i w0[R], w1[R], s0[R], s1[R];
        GLM_UNROLL
        for (int r = 0; r < R; ++r) {
          s0[r] = _mm512_permutexvar_epi16(q6k_index(2 * h), _mm512_zextsi256_si512(sc16[r]));
          s1[r] = _mm512_permutexvar_epi16(q6k_index(2 * h + 1), _mm512_zextsi256_si512(sc16[r]));
          const __m512i ql = _mm512_loadu_si512(blk[r]->ql + 64 * h);
          const __m256i qh =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[r]->qh + 32 * h));
          const __m512i qh01 =
              _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
          const __m512i qh23 = _mm512_srli_epi16(qh01, 4);
          w0[r] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                  _mm512_slli_epi16(_mm512_and_si512(qh01, m2), 4));
          w1[r] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                  _mm512_slli_epi16(_mm512_and_si512(qh23, m2), 4));
        }
        GLM_UNROLL
        for (int t = 0; t < T; ++t) {
          const int8_t* xq = c.act[(t0 + t) * c.n_sb + sb].q + 128 * h;
          const __m512i x0 = _mm512_load_si512(xq);
          const __m512i x1 = _mm512_load_si512(xq + 64);
          GLM_UNROLL
          for (int r = 0; r < R; ++r) {
            isum[r][t] = _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(w0[r], x0), s0[r]);
            isum[r][t] = _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(w1[r], x1), s1[r]);
          }
        }
      }
      GLM_UNROLL
      for (int t = 0; t < T; ++t) {
        const ActK& a = c.act[(t0 + t) * c.n_sb + sb];
        const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.bsum16));
        const __m512 dx = _mm512_set1_ps(a.d);
        GLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16[r], bs), 5);
          const __m512i s2 = _mm512_sub_epi32(isum[r][t], _mm512_zextsi256_si512(off));
          acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s2), dw[r]), dx, acc[r][t]);
        }
      }
    }
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      GLM_UNROLL
      for (int r = 0; r < R; ++r) c.y[(t0 + t) * c.n_rows + r0 + r] = hsum(acc[r][t]);
    }
  }
};

}  // namespace

bool matmul_k_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool) {
  switch (w.type) {
    case DType::kQ4_K:
      k_matmul<Q4KKern>(w, x, y, n_tokens, pool);
      return true;
    case DType::kQ6_K:
      k_matmul<Q6KKern>(w, x, y, n_tokens, pool);
      return true;
    case DType::kQ5_K:
      // Row-major Q5_K (packed copies use packed_k_avx512.cc; this runs the rows after the
      // last group of 16 and --repack 0): the AVX2 kernel, which quantizes activations the same
      // way (act_k.h).
      return matmul_k_avx2(w, x, y, n_tokens, pool);
    default:
      return false;
  }
}

}  // namespace glm::kernels::internal
