// AVX2 integer path for the k-quants Q4_K, Q5_K and Q6_K (256-value super-blocks), row-major:
// all of Q5_K, and for Q4_K / Q6_K (packed under AVX2: packed_k_avx2.cc) the rows after the last
// group of 16 and --repack 0.
//
// Activations are quantized per 256 values (internal.h: quantize_act_ref with block 256) into
// ActK (act_k.h): int8 values in natural order, the sums of each 16 and each 32 of them, and
// d_x. Weights unpack to unsigned bytes, 32 values (one sub-block of Q4_K/Q5_K, two of Q6_K) per
// ymm:
//   Q4_K: 32 bytes of qs -> low nibbles (sub-block 2j), high nibbles (sub-block 2j + 1);
//   Q5_K: the same, bit s of qh[l] as bit 4 of sub-block s's value l;
//   Q6_K: 4 low bits from ql, 2 high bits from qh (quant.h, quant_k.cc).
// vpmaddubsw(u, x) makes int16 pairs (<= 2 * 63 * 127: no saturation) and vpmaddwd with the
// sub-block scale broadcast over the int16 lanes (vpshufb) sums them in int32, so a whole
// super-block accumulates exactly in int32 before one conversion:
//   Q4_K/Q5_K: y += d_x * (d * sum_j sc_j q_j.x_j  -  dmin * sum_j m_j bsum32_j)
//   Q6_K:      y += d_x * d * (sum_g sc_g q_g.x_g  -  32 * sum_g sc_g bsum16_g)
// Tiles (tiling.h): 4 rows x 1 token in decode, 1 row x 4 tokens in prefill (measured best of
// 2x2, 1x4, 2x3, 4x2, 1x6, 1x8 on ffn up: the unpacked super-block is reused by 4 tokens).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/act_k.h"
#include "kernels/internal.h"
#include "kernels/matmul_avx2.h"
#include "kernels/quant.h"
#include "kernels/row_tiling.h"

namespace glm::kernels::internal {
namespace {

// The tile shapes of every Kern here (row_tiling.h): 4 rows x 1 token (decode), 1 row x 4 tokens
// (prefill).
struct KShape {
  static constexpr int kDecodeRows = 4;
  static constexpr int kRows = 1;
  static constexpr int kTokens = 4;
};

inline float hsum8(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Decode streams each row once: fetch the lines `bytes` long, 1 KiB ahead of p, so that a new
// row's first lines are on their way before the hardware prefetcher has ramped up.
inline void prefetch_ahead(const void* p, size_t bytes) {
  const char* a = static_cast<const char*>(p) + 1024;
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(a + o, _MM_HINT_T0);
}

// vpshufb index that spreads int16 word `lo_word` over the low 128-bit lane and `hi_word` over
// the high one.
inline __m256i word_spread(int lo_word, int hi_word) {
  const auto pair = [](int w) { return static_cast<int16_t>((2 * w) | ((2 * w + 1) << 8)); };
  return _mm256_set_m128i(_mm_set1_epi16(pair(hi_word)), _mm_set1_epi16(pair(lo_word)));
}

// The 6-bit scales and mins of a Q4_K/Q5_K block (quant.h: unpack_scale_min_k4), all eight at
// once: byte j of *sc / *m is sub-block j's.
inline void unpack_scales_k4(const uint8_t* scales, uint64_t* sc, uint64_t* m) {
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

// Bit s of every byte of qh, moved to bit 4 (the 5th bit of a Q5_K value).
template <int S>
inline __m256i bit_to_4(__m256i qh) {
  const __m256i m = _mm256_set1_epi8(0x10);
  if constexpr (S <= 4) return _mm256_and_si256(_mm256_slli_epi16(qh, 4 - S), m);
  return _mm256_and_si256(_mm256_srli_epi16(qh, S - 4), m);
}

// Q4_K (kFive = false) and Q5_K (kFive = true).
template <bool kFive>
struct Q45KKern : KShape {
  using Ctx = KCtx;
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;

  // Sub-blocks 2j (lo) and 2j + 1 (hi) of a block as unsigned bytes.
  template <int J>
  static inline void unpack(const Block* b, __m256i qh, __m256i* lo, __m256i* hi) {
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i v = load256(b->qs + 32 * J);
    *lo = _mm256_and_si256(v, m);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    if constexpr (kFive) {
      *lo = _mm256_or_si256(*lo, bit_to_4<2 * J>(qh));
      *hi = _mm256_or_si256(*hi, bit_to_4<2 * J + 1>(qh));
    }
  }

  template <int J, int R, int T>
  static inline void chunk(const Ctx& c, int64_t sb, int64_t t0, const Block* const (&blk)[R],
                           const __m256i (&qh)[R], const __m256i (&sc)[R], __m256i (&isum)[R][T]) {
    __m256i lo[R], hi[R], s_lo[R], s_hi[R];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      unpack<J>(blk[r], qh[r], &lo[r], &hi[r]);
      s_lo[r] = _mm256_shuffle_epi8(sc[r], word_spread(2 * J, 2 * J));
      s_hi[r] = _mm256_shuffle_epi8(sc[r], word_spread(2 * J + 1, 2 * J + 1));
    }
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      const int8_t* xq = c.act[(t0 + t) * c.n_sb + sb].q + 64 * J;
      const __m256i x0 = load256(xq);
      const __m256i x1 = load256(xq + 32);
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[r], x0), s_lo[r]);
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[r], x1), s_hi[r]);
        isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_add_epi32(p0, p1));
      }
    }
  }

  template <int R, int T>
  static void tile(const Ctx& c, int64_t r0, int64_t t0) {
    __m256 acc[R][T];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      GLM_UNROLL
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    for (int64_t sb = 0; sb < c.n_sb; ++sb) {
      const Block* blk[R];
      __m256i sc[R];    // the 8 scales as int16, in both 128-bit lanes
      __m128i mins[R];  // the 8 mins as int16
      __m256i qh[R];
      __m256 dw[R], dmin[R];
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const Block*>(c.w + (r0 + r) * c.row_bytes) + sb;
        if constexpr (T == 1) prefetch_ahead(blk[r], sizeof(Block));
        uint64_t sc8, m8;
        unpack_scales_k4(blk[r]->scales, &sc8, &m8);
        sc[r] = _mm256_broadcastsi128_si256(
            _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
        mins[r] = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m8)));
        if constexpr (kFive) {
          qh[r] = load256(blk[r]->qh);
        } else {
          qh[r] = _mm256_setzero_si256();
        }
        dw[r] = _mm256_set1_ps(_cvtsh_ss(blk[r]->d));
        dmin[r] = _mm256_set1_ps(_cvtsh_ss(blk[r]->dmin));
      }
      __m256i isum[R][T];
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        GLM_UNROLL
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      }
      chunk<0, R, T>(c, sb, t0, blk, qh, sc, isum);
      chunk<1, R, T>(c, sb, t0, blk, qh, sc, isum);
      chunk<2, R, T>(c, sb, t0, blk, qh, sc, isum);
      chunk<3, R, T>(c, sb, t0, blk, qh, sc, isum);
      GLM_UNROLL
      for (int t = 0; t < T; ++t) {
        const ActK& a = c.act[(t0 + t) * c.n_sb + sb];
        const __m128i bs = _mm_load_si128(reinterpret_cast<const __m128i*>(a.bsum32));
        const __m256 dx = _mm256_set1_ps(a.d);
        GLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m256 ms = _mm256_zextps128_ps256(_mm_cvtepi32_ps(_mm_madd_epi16(mins[r], bs)));
          const __m256 f =
              _mm256_fnmadd_ps(ms, dmin[r], _mm256_mul_ps(_mm256_cvtepi32_ps(isum[r][t]), dw[r]));
          acc[r][t] = _mm256_fmadd_ps(f, dx, acc[r][t]);
        }
      }
    }
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      GLM_UNROLL
      for (int r = 0; r < R; ++r) c.y[(t0 + t) * c.n_rows + r0 + r] = hsum8(acc[r][t]);
    }
  }
};

struct Q6KKern : KShape {
  using Ctx = KCtx;

  // Values 128 h + 32 K .. + 31 of a block as unsigned bytes (q + 32, 0..63).
  template <int K>
  static inline __m256i unpack(__m256i ql0, __m256i ql1, __m256i qh) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m2 = _mm256_set1_epi8(0x30);
    const __m256i ql = K % 2 == 0 ? ql0 : ql1;
    const __m256i low =
        K < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
    __m256i high;  // bits 2K, 2K + 1 of qh moved to bits 4, 5
    if constexpr (K == 0) high = _mm256_slli_epi16(qh, 4);
    if constexpr (K == 1) high = _mm256_slli_epi16(qh, 2);
    if constexpr (K == 2) high = qh;
    if constexpr (K == 3) high = _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(low, _mm256_and_si256(high, m2));
  }

  template <int H, int K, int R, int T>
  static inline void chunk(const Ctx& c, int64_t sb, int64_t t0, const __m256i (&ql0)[R],
                           const __m256i (&ql1)[R], const __m256i (&qh)[R], const __m256i (&sch)[R],
                           __m256i (&isum)[R][T]) {
    __m256i w[R], s[R];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      w[r] = unpack<K>(ql0[r], ql1[r], qh[r]);
      s[r] = _mm256_shuffle_epi8(sch[r], word_spread(2 * K, 2 * K + 1));
    }
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m256i x = load256(c.act[(t0 + t) * c.n_sb + sb].q + 128 * H + 32 * K);
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        isum[r][t] =
            _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(w[r], x), s[r]));
      }
    }
  }

  template <int H, int R, int T>
  static inline void half(const Ctx& c, int64_t sb, int64_t t0, const BlockQ6_K* const (&blk)[R],
                          const __m256i (&sc16)[R], __m256i (&isum)[R][T]) {
    __m256i ql0[R], ql1[R], qh[R], sch[R];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      ql0[r] = load256(blk[r]->ql + 64 * H);
      ql1[r] = load256(blk[r]->ql + 64 * H + 32);
      qh[r] = load256(blk[r]->qh + 32 * H);
      // Scales 8 H .. 8 H + 7 (int16) in both 128-bit lanes.
      sch[r] = _mm256_permute2x128_si256(sc16[r], sc16[r], H == 0 ? 0x00 : 0x11);
    }
    chunk<H, 0, R, T>(c, sb, t0, ql0, ql1, qh, sch, isum);
    chunk<H, 1, R, T>(c, sb, t0, ql0, ql1, qh, sch, isum);
    chunk<H, 2, R, T>(c, sb, t0, ql0, ql1, qh, sch, isum);
    chunk<H, 3, R, T>(c, sb, t0, ql0, ql1, qh, sch, isum);
  }

  template <int R, int T>
  static void tile(const Ctx& c, int64_t r0, int64_t t0) {
    __m256 acc[R][T];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      GLM_UNROLL
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    for (int64_t sb = 0; sb < c.n_sb; ++sb) {
      const BlockQ6_K* blk[R];
      __m256i sc16[R];  // the 16 scales as int16
      __m256 dw[R];
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        blk[r] = reinterpret_cast<const BlockQ6_K*>(c.w + (r0 + r) * c.row_bytes) + sb;
        if constexpr (T == 1) prefetch_ahead(blk[r], sizeof(BlockQ6_K));
        sc16[r] =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r]->scales)));
        dw[r] = _mm256_set1_ps(_cvtsh_ss(blk[r]->d));
      }
      __m256i isum[R][T];
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        GLM_UNROLL
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      }
      half<0, R, T>(c, sb, t0, blk, sc16, isum);
      half<1, R, T>(c, sb, t0, blk, sc16, isum);
      GLM_UNROLL
      for (int t = 0; t < T; ++t) {
        const ActK& a = c.act[(t0 + t) * c.n_sb + sb];
        const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.bsum16));
        const __m256 dx = _mm256_set1_ps(a.d);
        GLM_UNROLL
        for (int r = 0; r < R; ++r) {
          const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16[r], bs), 5);
          const __m256 s = _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[r][t], off));
          acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(s, dw[r]), dx, acc[r][t]);
        }
      }
    }
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      GLM_UNROLL
      for (int r = 0; r < R; ++r) c.y[(t0 + t) * c.n_rows + r0 + r] = hsum8(acc[r][t]);
    }
  }
};

}  // namespace

bool matmul_k_avx2(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                   ThreadPool* pool) {
  switch (w.type) {
    case DType::kQ4_K:
      k_matmul<Q45KKern<false>>(w, x, y, n_tokens, pool);
      return true;
    case DType::kQ5_K:
      k_matmul<Q45KKern<true>>(w, x, y, n_tokens, pool);
      return true;
    case DType::kQ6_K:
      k_matmul<Q6KKern>(w, x, y, n_tokens, pool);
      return true;
    default:
      return false;
  }
}

}  // namespace glm::kernels::internal
