// AVX2 kernels over the Q4_Kx16, Q5_Kx16 and Q6_Kx16 layouts of packed.h (Q6_K: see tile6 below):
// 16 rows of Q4_K (Q5_K) interleaved per super-block, the 6-bit scales and mins decoded at load
// time (Q5_K: the high bits after the quants, ORed in as bit 4 of each value). A 256-bit
// register holds one piece of 8 rows (half a group), 4 quant bytes per row, so 32-bit lane r of
// every product is row r's: no horizontal sums, no per-row scale unpacking or broadcasts in the
// inner loop (the row-major kernel, matmul_k_avx2.cc, does both for every row and super-block).
//
// Activations: ActK (act_k.h), quantized once per call per 256 values.
// Per super-block, half h and token t, exactly in integers:
//   sub-block s (32 values = 8 pieces of 4): u = nibble (0..15) of the pieces,
//     a_s = sum_p vpmaddubsw(u_p, x word) in int16 (8 * 2 * 15 * 127 = 30480: no saturation;
//           Q5_K, u up to 31: summed over 4 pieces at a time, 4 * 2 * 31 * 127 = 31496),
//     isum += vpmaddwd(a_s, (sc_s, sc_s) per lane)              (<= 8 * 2 * 63 * 30480 < 2^31);
//   msum = sum_k vpmaddwd((m_2k, m_2k+1) per lane, (bsum32_2k, bsum32_2k+1) broadcast);
// then y_row += d_x * (d * float(isum) - dmin * float(msum)), one FMA per lane.
// Tiles: both halves x 1 token in decode (each cache line read once, prefetched ahead), one half
// after the other x up to 3 tokens in prefill (the unpacked nibbles reused by every token of the
// tile); the loops around them and the threading are packed_tiling.h's.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>

#include "kernels/act_k.h"
#include "kernels/internal.h"
#include "kernels/matmul_avx2.h"
#include "kernels/packed.h"
#include "kernels/packed_tiling.h"

namespace glm::kernels::internal {
namespace {

#define GLM_UNROLL_K _Pragma("GCC unroll 8")

// Moves bit `from` of every byte of v to bit 4, masked (16-bit shifts of at most 4: no bit of
// the neighbouring byte lands on bit 4).
inline __m256i bit_to_4(__m256i v, int from) {
  const __m256i b4 = _mm256_set1_epi8(0x10);
  if (from < 4) return _mm256_and_si256(_mm256_sll_epi16(v, _mm_cvtsi32_si128(4 - from)), b4);
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(from - 4)), b4);
}

inline __m256i bcast32(const int8_t* p) {
  return _mm256_set1_epi32(*reinterpret_cast<const int32_t*>(p));
}

// The 8 rows' scale of one sub-block as (sc, sc) int16 pairs, one per 32-bit lane.
inline __m256i scale_pairs(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

// Q4_K (kFive = false) or Q5_K: H halves (rows 8 h0 .. 8 (h0 + H)) of group g x T tokens from t0.
template <bool kFive, int H, int T>
void tile(const KPCtx& c, int64_t g, int h0, int64_t t0) {
  constexpr int kSuper = kFive ? kSuper5 : kSuper4;
  const uint8_t* group = c.w + g * c.group_bytes;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[H][T];
  GLM_UNROLL_K
  for (int h = 0; h < H; ++h) {
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < c.n_sb; ++sb) {
    const uint8_t* s = group + sb * kSuper;
    const ActK* a[T];
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) a[t] = c.act + (t0 + t) * c.n_sb + sb;
    __m256i isum[H][T];
    GLM_UNROLL_K
    for (int h = 0; h < H; ++h) {
      GLM_UNROLL_K
      for (int t = 0; t < T; ++t) isum[h][t] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 4; ++j) {  // 64 values: sub-blocks 2j (low nibbles), 2j + 1 (high)
      const uint8_t* q = s + kQuants + j * 8 * 64;
      if constexpr (T == 1) {
        // Decode streams the group once: fetch the next super-block's lines ahead.
        GLM_UNROLL_K
        for (int p = 0; p < 8; ++p) {
          _mm_prefetch(reinterpret_cast<const char*>(q) + 2 * kSuper + 64 * p, _MM_HINT_T0);
        }
        if constexpr (kFive) {
          const char* qh = reinterpret_cast<const char*>(s) + 2 * kSuper + kSuper4 + 128 * j;
          _mm_prefetch(qh, _MM_HINT_T0);
          _mm_prefetch(qh + 64, _MM_HINT_T0);
        }
      }
      __m256i lo16[H][T], hi16[H][T];
      GLM_UNROLL_K
      for (int h = 0; h < H; ++h) {
        GLM_UNROLL_K
        for (int t = 0; t < T; ++t) lo16[h][t] = hi16[h][t] = _mm256_setzero_si256();
      }
      // The int16 sums times the sub-block scales, into isum.
      auto flush = [&]() {
        GLM_UNROLL_K
        for (int h = 0; h < H; ++h) {
          const uint8_t* sc = s + kScales + 64 * (h0 + h) + 8 * (2 * j);
          const __m256i sl = scale_pairs(sc);
          const __m256i sh = scale_pairs(sc + 8);
          GLM_UNROLL_K
          for (int t = 0; t < T; ++t) {
            isum[h][t] =
                _mm256_add_epi32(isum[h][t], _mm256_add_epi32(_mm256_madd_epi16(lo16[h][t], sl),
                                                              _mm256_madd_epi16(hi16[h][t], sh)));
            lo16[h][t] = hi16[h][t] = _mm256_setzero_si256();
          }
        }
      };
      // Not unrolled further: GCC then keeps every product live at once and spills them.
#pragma GCC unroll 2
      for (int p = 0; p < 8; ++p) {
        GLM_UNROLL_K
        for (int h = 0; h < H; ++h) {
          const __m256i v =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64 * p + 32 * (h0 + h)));
          __m256i lo = _mm256_and_si256(v, m4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          if constexpr (kFive) {
            // Bits 2j (low nibbles' values) and 2j + 1 (high) of qh[4p ..] are their 5th bits.
            const __m256i qh = _mm256_load_si256(
                reinterpret_cast<const __m256i*>(s + kSuper4 + 64 * p + 32 * (h0 + h)));
            lo = _mm256_or_si256(lo, bit_to_4(qh, 2 * j));
            hi = _mm256_or_si256(hi, bit_to_4(qh, 2 * j + 1));
          }
          GLM_UNROLL_K
          for (int t = 0; t < T; ++t) {
            const int8_t* xq = a[t]->q + 64 * j + 4 * p;
            const __m256i pl = _mm256_maddubs_epi16(lo, bcast32(xq));
            const __m256i ph = _mm256_maddubs_epi16(hi, bcast32(xq + 32));
            lo16[h][t] = _mm256_add_epi16(lo16[h][t], pl);
            hi16[h][t] = _mm256_add_epi16(hi16[h][t], ph);
          }
        }
        if (kFive && p == 3) flush();
      }
      flush();
    }
    GLM_UNROLL_K
    for (int h = 0; h < H; ++h) {
      const int hh = h0 + h;
      const __m256 dw =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(s + kD + 16 * hh)));
      const __m256 dmin =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(s + kDmin + 16 * hh)));
      __m256i mins[4];  // (m_2k, m_2k+1) int16 pairs per lane
      GLM_UNROLL_K
      for (int k = 0; k < 4; ++k) {
        mins[k] = _mm256_cvtepu8_epi16(
            _mm_load_si128(reinterpret_cast<const __m128i*>(s + kMins + 64 * hh + 16 * k)));
      }
      GLM_UNROLL_K
      for (int t = 0; t < T; ++t) {
        const int32_t* bs = reinterpret_cast<const int32_t*>(a[t]->bsum32);
        __m256i ms = _mm256_madd_epi16(mins[0], _mm256_set1_epi32(bs[0]));
        GLM_UNROLL_K
        for (int k = 1; k < 4; ++k) {
          ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mins[k], _mm256_set1_epi32(bs[k])));
        }
        const __m256 f = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), dmin,
                                          _mm256_mul_ps(_mm256_cvtepi32_ps(isum[h][t]), dw));
        acc[h][t] = _mm256_fmadd_ps(f, _mm256_set1_ps(a[t]->d), acc[h][t]);
      }
    }
  }
  GLM_UNROLL_K
  for (int t = 0; t < T; ++t) {
    GLM_UNROLL_K
    for (int h = 0; h < H; ++h) {
      _mm256_storeu_ps(c.y + (t0 + t) * c.n_rows + g * kPackRows + 8 * (h0 + h), acc[h][t]);
    }
  }
}

// ---- Q6_K ---------------------------------------------------------------------------------

// Values 32 K + 4 p .. + 3 of a part (128 values) for 8 rows as unsigned q (0..63), from the
// part's pieces a = ql low half, b = ql high half, qh (the row-major kernel's unpack<K>).
template <int K>
inline __m256i q6_unpack(__m256i a, __m256i b, __m256i qh) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m2 = _mm256_set1_epi8(0x30);
  const __m256i ql = K % 2 == 0 ? a : b;
  const __m256i low =
      K < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
  __m256i high;  // bits 2K, 2K + 1 of qh moved to bits 4, 5 (16-bit shifts: no bit crosses)
  if constexpr (K == 0) high = _mm256_slli_epi16(qh, 4);
  if constexpr (K == 1) high = _mm256_slli_epi16(qh, 2);
  if constexpr (K == 2) high = qh;
  if constexpr (K == 3) high = _mm256_srli_epi16(qh, 2);
  return _mm256_or_si256(low, _mm256_and_si256(high, m2));
}

// Q6_Kx16: per part (128 values) of a super-block, scale pairs P_k = (sc_2k, sc_2k+1) int16 per
// lane (k = 4 part .. 4 part + 3); the scale of group 2k / 2k + 1 as (sc, sc) pairs is one
// vpshufb of P_k. Pieces p, p + 1 share a group: their vpmaddubsw pairs (<= 2 * 63 * 127 =
// 16002 each) are summed in int16 (32004) before vpmaddwd with the scale:
//   isum = sum_g sc_g q_g.x_g, osum = sum_k vpmaddwd(P_k, (bsum16_2k, bsum16_2k+1)),
//   y += d_x * d * float(isum - 32 osum)            (|isum| <= 256 * 127 * 63 * 127 < 2^31).
template <int H, int T>
void tile6(const KPCtx& c, int64_t g, int h0, int64_t t0) {
  const uint8_t* group = c.w + g * c.group_bytes;
  // vpshufb indices: int16 0 (dup_lo) or 1 (dup_hi) of each 32-bit lane, twice.
  const __m256i dup_lo = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1,
                                          0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  const __m256i dup_hi = _mm256_add_epi8(dup_lo, _mm256_set1_epi8(2));
  __m256 acc[H][T];
  GLM_UNROLL_K
  for (int h = 0; h < H; ++h) {
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < c.n_sb; ++sb) {
    const uint8_t* s = group + sb * kSuper6;
    const ActK* a[T];
    GLM_UNROLL_K
    for (int t = 0; t < T; ++t) a[t] = c.act + (t0 + t) * c.n_sb + sb;
    __m256i isum[H][T], osum[H][T];
    GLM_UNROLL_K
    for (int h = 0; h < H; ++h) {
      GLM_UNROLL_K
      for (int t = 0; t < T; ++t) isum[h][t] = osum[h][t] = _mm256_setzero_si256();
    }
    for (int part = 0; part < 2; ++part) {
      const uint8_t* q = s + k6Quants + part * 8 * 192;
      if constexpr (T == 1) {
        // Decode streams the group once: fetch the next super-block's lines ahead.
#pragma GCC unroll 24
        for (int l = 0; l < 24; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(q) + 2 * kSuper6 + 64 * l, _MM_HINT_T0);
        }
      }
      GLM_UNROLL_K
      for (int K = 0; K < 4; ++K) {
        __m256i sp[H];  // P_k, k = 4 part + K: the scales of groups 8 part + 2K, + 1
        GLM_UNROLL_K
        for (int h = 0; h < H; ++h) {
          sp[h] = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(
              s + k6Scales + 128 * (h0 + h) + 16 * (4 * part + K))));
          GLM_UNROLL_K
          for (int t = 0; t < T; ++t) {
            const int32_t* bs = reinterpret_cast<const int32_t*>(a[t]->bsum16);
            osum[h][t] = _mm256_add_epi32(
                osum[h][t], _mm256_madd_epi16(sp[h], _mm256_set1_epi32(bs[4 * part + K])));
          }
        }
      }
      // Not unrolled: GCC then keeps every product live at once and spills them.
#pragma GCC unroll 1
      for (int p = 0; p < 8; p += 2) {
        GLM_UNROLL_K
        for (int h = 0; h < H; ++h) {
          __m256i w[2][4];  // [piece p, p + 1][K]
          GLM_UNROLL_K
          for (int i = 0; i < 2; ++i) {
            const uint8_t* pc = q + (p + i) * 192 + 32 * (h0 + h);
            const __m256i va = _mm256_load_si256(reinterpret_cast<const __m256i*>(pc));
            const __m256i vb = _mm256_load_si256(reinterpret_cast<const __m256i*>(pc + 64));
            const __m256i vh = _mm256_load_si256(reinterpret_cast<const __m256i*>(pc + 128));
            w[i][0] = q6_unpack<0>(va, vb, vh);
            w[i][1] = q6_unpack<1>(va, vb, vh);
            w[i][2] = q6_unpack<2>(va, vb, vh);
            w[i][3] = q6_unpack<3>(va, vb, vh);
          }
          GLM_UNROLL_K
          for (int K = 0; K < 4; ++K) {
            const __m256i sp = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(
                s + k6Scales + 128 * (h0 + h) + 16 * (4 * part + K))));
            const __m256i sc = _mm256_shuffle_epi8(sp, p < 4 ? dup_lo : dup_hi);
            GLM_UNROLL_K
            for (int t = 0; t < T; ++t) {
              const int8_t* xq = a[t]->q + 128 * part + 32 * K + 4 * p;
              const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(w[0][K], bcast32(xq)),
                                                   _mm256_maddubs_epi16(w[1][K], bcast32(xq + 4)));
              isum[h][t] = _mm256_add_epi32(isum[h][t], _mm256_madd_epi16(s16, sc));
            }
          }
        }
      }
    }
    GLM_UNROLL_K
    for (int h = 0; h < H; ++h) {
      const __m256 dw =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(s + 16 * (h0 + h))));
      GLM_UNROLL_K
      for (int t = 0; t < T; ++t) {
        const __m256 v =
            _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[h][t], _mm256_slli_epi32(osum[h][t], 5)));
        acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(v, dw), _mm256_set1_ps(a[t]->d), acc[h][t]);
      }
    }
  }
  GLM_UNROLL_K
  for (int t = 0; t < T; ++t) {
    GLM_UNROLL_K
    for (int h = 0; h < H; ++h) {
      _mm256_storeu_ps(c.y + (t0 + t) * c.n_rows + g * kPackRows + 8 * (h0 + h), acc[h][t]);
    }
  }
}

template <PackedLayout L, int H, int T>
inline void tile_of(const KPCtx& c, int64_t g, int h0, int64_t t0) {
  if constexpr (L == PackedLayout::kQ6_Kx16) {
    tile6<H, T>(c, g, h0, t0);
  } else {
    tile<L == PackedLayout::kQ5_Kx16, H, T>(c, g, h0, t0);
  }
}

// packed_tiling.h's Kern of layout L: one group x 1 token (decode, both halves at once) or x up
// to 3 tokens (prefill, half after half). Tokens per prefill tile: Q4_K keeps 3 x (2 int16 + 1
// int32) accumulators, Q6_K 3 int32 ones beside 8 unpacked weight registers (Q6_K with 2 tokens
// measured 1.35x as slow).
template <PackedLayout L>
struct KKern {
  using Ctx = KPCtx;
  static constexpr int kDecodeRows = 1;
  static constexpr int kRows = 1;
  static constexpr int kTokens = 3;
  template <int G, int T>
  static void tile(const KPCtx& c, int64_t g, int64_t t0) {
    static_assert(G == 1);
    if constexpr (T == 1) {
      tile_of<L, 2, 1>(c, g, 0, t0);
    } else {
      tile_of<L, 1, T>(c, g, 0, t0);
      tile_of<L, 1, T>(c, g, 1, t0);
    }
  }
};

}  // namespace

void matmul_packed_k_avx2(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                          ThreadPool* pool) {
  packed_k_matmul<KKern>(w, x, y, n_tokens, pool);
}

}  // namespace glm::kernels::internal
