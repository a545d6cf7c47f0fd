// AVX-512 VNNI kernels over the k-quant layouts of packed.h (Q4_Kx16, Q5_Kx16, Q6_Kx16), the
// same copies the AVX2 kernels read (packed_k_avx2.cc). One 512-bit register holds one piece of
// all 16 rows of a group (4 quant bytes per row), so 32-bit lane r of every vpdpbusd is row r's:
// no horizontal sums and no per-row scale unpacking in the inner loop (the row-major kernel,
// matmul_k_avx512.cc, does both for every row and super-block).
//
// Activations: ActK (act_k.h), quantized once per call per 256 values. Per super-block and
// token, exactly in integers (u = the unsigned stored value):
//   Q4_K / Q5_K: sub-block s (32 values = 8 pieces of 4), u = nibble (+ 16 x the 5th bit):
//     a_s = sum_p vpdpbusd(u_p, x word)                 (<= 32 * 31 * 127 = 125984),
//     isum += a_s * sc_s (vpmulld, sc_s per lane)       (<= 8 * 63 * 125984 < 2^31),
//     msum = sum_k vpdpwssd((m_2k, m_2k+1) per lane, (bsum32_2k, bsum32_2k+1) broadcast);
//     y += d_x * (d * float(isum) - dmin * float(msum)).
//   Q6_K: group g (16 values = 4 pieces), u = q + 32 (0..63):
//     a_g = sum vpdpbusd(u, x word)                     (<= 16 * 63 * 127 = 128016),
//     isum += a_g * sc_g (sc_g signed)                  (<= 16 * 128 * 128016 < 2^31),
//     osum = sum_k vpdpwssd((sc_2k, sc_2k+1), (bsum16_2k, bsum16_2k+1));
//     y += d_x * d * float(isum - 32 osum).
// So the result is the AVX2 kernels' to the float rounding of the last steps.
// Tiles: one group (16 rows) x up to 6 tokens, the unpacked weights of a piece reused by every
// token of the tile; in decode each group is streamed once with software prefetch ahead. The
// loops around the tiles (cache blocks in prefill) and the threading are packed_tiling.h's.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>

#include "kernels/act_k.h"
#include "kernels/internal.h"
#include "kernels/matmul_avx512.h"
#include "kernels/packed.h"
#include "kernels/packed_tiling.h"

namespace glm::kernels::internal {
namespace {

#define GLM_UNROLL_K _Pragma("GCC unroll 8")

inline __m512i bcast32(const int8_t* p) {
  return _mm512_set1_epi32(*reinterpret_cast<const int32_t*>(p));
}

// 16 rows' bytes from the two halves' 8-byte runs (lo: rows 0..7, hi: rows 8..15).
inline __m512i rows_u8_to_i32(const uint8_t* lo, const uint8_t* hi) {
  const __m128i v = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(lo)),
                                       _mm_loadl_epi64(reinterpret_cast<const __m128i*>(hi)));
  return _mm512_cvtepu8_epi32(v);
}

// 16 rows' int8 pairs from the two halves' 16-byte runs, as int16 pairs per 32-bit lane.
template <bool kSigned>
inline __m512i row_pairs(const uint8_t* lo, const uint8_t* hi) {
  const __m256i v = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1);
  return kSigned ? _mm512_cvtepi8_epi16(v) : _mm512_cvtepu8_epi16(v);
}

// Moves bit `from` of every byte of v to bit 4 (16-bit shifts: for shifts of at most 4 no bit
// of the neighbouring byte lands on bit 4), masked.
template <int kFrom>
inline __m512i bit_to_4(__m512i v) {
  const __m512i b4 = _mm512_set1_epi8(0x10);
  if constexpr (kFrom < 4) return _mm512_and_si512(_mm512_slli_epi16(v, 4 - kFrom), b4);
  if constexpr (kFrom == 4) return _mm512_and_si512(v, b4);
  if constexpr (kFrom > 4) return _mm512_and_si512(_mm512_srli_epi16(v, kFrom - 4), b4);
}

// Q4_K (kFive = false) or Q5_K: one group x T tokens from t0.
template <bool kFive, int T>
void tile45(const KPCtx& c, int64_t g, int64_t t0) {
  constexpr int kSuper = kFive ? kSuper5 : kSuper4;
  const uint8_t* group = c.w + g * c.group_bytes;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[T];
  GLM_UNROLL_K
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < c.n_sb; ++sb) {
    const uint8_t* s = group + sb * kSuper;
    const ActK* a[T];
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) a[t] = c.act + (t0 + t) * c.n_sb + sb;
    __m512i isum[T];
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    GLM_UNROLL_K
    for (int j = 0; j < 4; ++j) {  // 64 values: sub-blocks 2j (low nibbles), 2j + 1 (high)
      const uint8_t* q = s + kQuants + j * 8 * 64;
      if constexpr (T == 1) {
        // Decode streams the group once: fetch the next super-blocks' lines ahead.
        GLM_UNROLL_K
        for (int p = 0; p < 8; ++p) {
          _mm_prefetch(reinterpret_cast<const char*>(q) + 2 * kSuper + 64 * p, _MM_HINT_T0);
        }
        if constexpr (kFive) {
          _mm_prefetch(reinterpret_cast<const char*>(s) + 2 * kSuper + kSuper4 + 128 * j,
                       _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(s) + 2 * kSuper + kSuper4 + 128 * j + 64,
                       _MM_HINT_T0);
        }
      }
      __m512i lo_sum[T], hi_sum[T];
      GLM_UNROLL_K
      for (int t = 0; t < T; ++t) lo_sum[t] = hi_sum[t] = _mm512_setzero_si512();
      GLM_UNROLL_K
      for (int p = 0; p < 8; ++p) {
        const __m512i v = _mm512_load_si512(q + 64 * p);
        __m512i lo = _mm512_and_si512(v, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (kFive) {
          // Bits 2j (low nibbles' values) and 2j + 1 (high) of qh[4p ..] are their 5th bits.
          const __m512i qh = _mm512_load_si512(s + kSuper4 + 64 * p);
          if (j == 0) {
            lo = _mm512_or_si512(lo, bit_to_4<0>(qh));
            hi = _mm512_or_si512(hi, bit_to_4<1>(qh));
          } else if (j == 1) {
            lo = _mm512_or_si512(lo, bit_to_4<2>(qh));
            hi = _mm512_or_si512(hi, bit_to_4<3>(qh));
          } else if (j == 2) {
            lo = _mm512_or_si512(lo, bit_to_4<4>(qh));
            hi = _mm512_or_si512(hi, bit_to_4<5>(qh));
          } else {
            lo = _mm512_or_si512(lo, bit_to_4<6>(qh));
            hi = _mm512_or_si512(hi, bit_to_4<7>(qh));
          }
        }
        GLM_UNROLL_K
        for (int t = 0; t < T; ++t) {
          const int8_t* xq = a[t]->q + 64 * j + 4 * p;
          lo_sum[t] = _mm512_dpbusd_epi32(lo_sum[t], lo, bcast32(xq));
          hi_sum[t] = _mm512_dpbusd_epi32(hi_sum[t], hi, bcast32(xq + 32));
        }
      }
      // The scales of sub-blocks 2j, 2j + 1: [2 halves][8 sub-blocks][8 rows] bytes.
      const __m512i sl = rows_u8_to_i32(s + kScales + 8 * (2 * j), s + kScales + 64 + 8 * (2 * j));
      const __m512i sh =
          rows_u8_to_i32(s + kScales + 8 * (2 * j + 1), s + kScales + 64 + 8 * (2 * j + 1));
      GLM_UNROLL_K
      for (int t = 0; t < T; ++t) {
        isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(lo_sum[t], sl),
                                                             _mm512_mullo_epi32(hi_sum[t], sh)));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s + kD)));
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s + kDmin)));
    __m512i mins[4];  // (m_2k, m_2k+1) int16 pairs per lane: [2 halves][4 pairs][8 rows][2]
    GLM_UNROLL_K
    for (int k = 0; k < 4; ++k)
      mins[k] = row_pairs<false>(s + kMins + 16 * k, s + kMins + 64 + 16 * k);
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) {
      const int32_t* bs = reinterpret_cast<const int32_t*>(a[t]->bsum32);
      __m512i ms = _mm512_setzero_si512();
      GLM_UNROLL_K
      for (int k = 0; k < 4; ++k) ms = _mm512_dpwssd_epi32(ms, mins[k], _mm512_set1_epi32(bs[k]));
      const __m512 f = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), dmin,
                                        _mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), dw));
      acc[t] = _mm512_fmadd_ps(f, _mm512_set1_ps(a[t]->d), acc[t]);
    }
  }
  GLM_UNROLL_K
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(c.y + (t0 + t) * c.n_rows + g * kPackRows, acc[t]);
}

// Values 32 K + 4 p .. + 3 of a Q6_K part (128 values) for 16 rows as u = q + 32 (0..63), from
// the piece's ql half (K even: ql low half, odd: high half; K < 2: low nibble) and qh (bits
// 2K, 2K + 1), as packed_k_avx2.cc's q6_unpack.
template <int K>
inline __m512i q6_value(const uint8_t* piece) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m2 = _mm512_set1_epi8(0x30);
  const __m512i ql = _mm512_load_si512(piece + (K % 2) * 64);
  const __m512i qh = _mm512_load_si512(piece + 128);
  const __m512i low =
      K < 2 ? _mm512_and_si512(ql, m4) : _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4);
  __m512i high;  // bits 2K, 2K + 1 moved to bits 4, 5
  if constexpr (K == 0) high = _mm512_slli_epi16(qh, 4);
  if constexpr (K == 1) high = _mm512_slli_epi16(qh, 2);
  if constexpr (K == 2) high = qh;
  if constexpr (K == 3) high = _mm512_srli_epi16(qh, 2);
  return _mm512_or_si512(low, _mm512_and_si512(high, m2));
}

template <int K, int T>
inline void q6_groups(const uint8_t* q, const uint8_t* s, int part, const ActK* const (&a)[T],
                      __m512i (&isum)[T]) {
  // Scale pair k = 4 part + K: (sc of group 8 part + 2K, of 8 part + 2K + 1) per lane.
  const __m512i sp =
      row_pairs<true>(s + k6Scales + 16 * (4 * part + K), s + k6Scales + 128 + 16 * (4 * part + K));
  const __m512i sc[2] = {_mm512_srai_epi32(_mm512_slli_epi32(sp, 16), 16),
                         _mm512_srai_epi32(sp, 16)};
  GLM_UNROLL_K
  for (int e = 0; e < 2; ++e) {  // values 32 K + 16 e .. + 15: pieces 4e .. 4e + 3
    __m512i gsum[T];
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) gsum[t] = _mm512_setzero_si512();
    GLM_UNROLL_K
    for (int i = 0; i < 4; ++i) {
      const int p = 4 * e + i;
      const __m512i u = q6_value<K>(q + p * 192);
      GLM_UNROLL_K
      for (int t = 0; t < T; ++t) {
        gsum[t] = _mm512_dpbusd_epi32(gsum[t], u, bcast32(a[t]->q + 128 * part + 32 * K + 4 * p));
      }
    }
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t)
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(gsum[t], sc[e]));
  }
}

template <int T>
void tile6(const KPCtx& c, int64_t g, int64_t t0) {
  const uint8_t* group = c.w + g * c.group_bytes;
  __m512 acc[T];
  GLM_UNROLL_K
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < c.n_sb; ++sb) {
    const uint8_t* s = group + sb * kSuper6;
    const ActK* a[T];
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) a[t] = c.act + (t0 + t) * c.n_sb + sb;
    __m512i isum[T], osum[T];
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) isum[t] = osum[t] = _mm512_setzero_si512();
    for (int part = 0; part < 2; ++part) {
      const uint8_t* q = s + k6Quants + part * 8 * 192;
      if constexpr (T == 1) {
#pragma GCC unroll 24
        for (int l = 0; l < 24; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(q) + 2 * kSuper6 + 64 * l, _MM_HINT_T0);
        }
      }
      q6_groups<0, T>(q, s, part, a, isum);
      q6_groups<1, T>(q, s, part, a, isum);
      q6_groups<2, T>(q, s, part, a, isum);
      q6_groups<3, T>(q, s, part, a, isum);
    }
    GLM_UNROLL_K
    for (int k = 0; k < 8; ++k) {
      const __m512i sp = row_pairs<true>(s + k6Scales + 16 * k, s + k6Scales + 128 + 16 * k);
      GLM_UNROLL_K
      for (int t = 0; t < T; ++t) {
        const int32_t* bs = reinterpret_cast<const int32_t*>(a[t]->bsum16);
        osum[t] = _mm512_dpwssd_epi32(osum[t], sp, _mm512_set1_epi32(bs[k]));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s)));
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) {
      const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(isum[t], _mm512_slli_epi32(osum[t], 5)));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(v, dw), _mm512_set1_ps(a[t]->d), acc[t]);
    }
  }
  GLM_UNROLL_K
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(c.y + (t0 + t) * c.n_rows + g * kPackRows, acc[t]);
}

template <PackedLayout L, int T>
inline void tile_of(const KPCtx& c, int64_t g, int64_t t0) {
  if constexpr (L == PackedLayout::kQ6_Kx16) {
    tile6<T>(c, g, t0);
  } else {
    tile45<L == PackedLayout::kQ5_Kx16, T>(c, g, t0);
  }
}

// packed_tiling.h's Kern of layout L: one group x 1 token (decode) or x up to 6 tokens
// (prefill; kernels_bench, Q4_K x 64 tokens: 3 -> 50.6 ms, 4 -> 48.0, 6 -> 43.7-45.1, 8 ->
// 42.9).
template <PackedLayout L>
struct KKern {
  using Ctx = KPCtx;
  static constexpr int kDecodeRows = 1;
  static constexpr int kRows = 1;
  static constexpr int kTokens = 6;
  template <int G, int T>
  static void tile(const KPCtx& c, int64_t g, int64_t t0) {
    static_assert(G == 1);
    tile_of<L, T>(c, g, t0);
  }
};

}  // namespace

void matmul_packed_k_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                            ThreadPool* pool) {
  packed_k_matmul<KKern>(w, x, y, n_tokens, pool);
}

}  // namespace glm::kernels::internal
