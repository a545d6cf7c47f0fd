// AVX2 (+FMA, F16C) kernel over the 16-row interleaved layouts of packed.h, the same layouts the
// AVX-512 kernel reads (one copy serves both). A 256-bit register holds one piece of 8 rows
// (half of a group), 4 bytes per row, so 32-bit lane r of a product is row r's partial dot
// product: no horizontal sums and no per-row scale broadcasts, as in packed_avx512.cc.
//
// Activations are quantized per 32 values as in internal.h (quantize_act_ref): int8 q, scale
// d_x and c = -offset * sum(q) per block.
//   Q4_0x16 (u = q_w + 8 in 0..15): per half and block, the 8 pieces (4 of low nibbles, 4 of
//     high) go through vpmaddubsw(u, broadcast x bytes 4j..4j+3) and are summed in int16
//     (|each| <= 2 * 15 * 127, eight of them <= 30480: no saturation), one vpmaddwd with ones
//     makes the row sums in int32, then y += float(sum + c) * d_w * d_x.
//   Q5_0x16 (u = q_w + 16 in 0..31): as Q4_0x16 with the 5th bit ORed in from the block's
//     high-bit line; pairs reach 2 * 31 * 127, so only 4 pieces are summed in int16.
//   Q8_0x16 (u = q_w + 128): vpmaddubsw cannot take u (255 * 127 * 2 saturates), so the pieces
//     are turned back into q_w and go through the sign trick vpmaddubsw(|q_w|, sign(x, q_w))
//     (<= 2 * 128 * 127: no saturation), each widened by vpmaddwd before adding.
// A tile is one group as two half-group tiles of 8 rows x up to 4 tokens in prefill (the unpacked
// block stays in registers across the tokens), both halves at once x 1 token in decode (each
// cache line read once).
//   F16x16 / BF16x16 ([n_cols][16] per group): column k of a group is two 8-row registers,
//     converted to f32 and multiplied by x[t][k] broadcast (f32 FMA, exact up to f32 rounding);
//     a tile is up to 3 groups x 1 token (decode) or 1 group x 6 tokens (prefill).
// The loops around the tiles, the activation quantization loop and the threading are
// packed_tiling.h's, shared with the AVX-512 kernels.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>

#include "kernels/internal.h"
#include "kernels/matmul_avx2.h"
#include "kernels/packed.h"
#include "kernels/packed_tiling.h"

namespace glm::kernels::internal {
namespace {

#define GLM_UNROLL_P _Pragma("GCC unroll 8")

// Built twice: as itself for AVX2, and by packed_avxvnni.cc with AVX-VNNI (__AVXVNNI__), where
// the blocks' dot products take one vpdpbusd per piece instead of vpmaddubsw + adds + vpmaddwd.
// The integer sums are the same, so both builds give the same results to the bit.
#ifndef GLM_PACKED_AVX2_ENTRY
#define GLM_PACKED_AVX2_ENTRY matmul_packed_avx2
#endif
#if defined(__AVXVNNI__)
// Two chains of dot products of unsigned u with the block's activation words x (+= into s).
template <int N>
inline __m256i vnni_dot(const __m256i (&u)[N], const int32_t* x) {
  __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
  GLM_UNROLL_P
  for (int j = 0; j < N; j += 2) {
    s0 = _mm256_dpbusd_avx_epi32(s0, u[j], _mm256_set1_epi32(x[j]));
    s1 = _mm256_dpbusd_avx_epi32(s1, u[j + 1], _mm256_set1_epi32(x[j + 1]));
  }
  return _mm256_add_epi32(s0, s1);
}
#endif

inline __m256i bcast32(const int32_t* p) { return _mm256_set1_epi32(*p); }

// Q4_0x16: piece p of half h = 8 rows x 4 bytes; low nibbles pair with activation word p,
// high nibbles with word 4 + p.
struct Q4 {
  static constexpr int kBlockStride = 4 * 64;
  static constexpr int kOffset = 8;
  struct Regs {
    __m256i u[8];
  };
  static inline void load(const uint8_t* q, int h, Regs* r) {
    const __m256i m = _mm256_set1_epi8(0x0F);
    GLM_UNROLL_P
    for (int p = 0; p < 4; ++p) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64 * p + 32 * h));
      r->u[p] = _mm256_and_si256(v, m);
      r->u[p + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    }
  }
  // Row sums (int32 lanes) of u * x for one block of one token; x = the block's 8 words.
  static inline __m256i dot(const Regs& r, const int32_t* x) {
#if defined(__AVXVNNI__)
    return vnni_dot(r.u, x);
#endif
    __m256i s0 = _mm256_maddubs_epi16(r.u[0], bcast32(x + 0));
    __m256i s1 = _mm256_maddubs_epi16(r.u[1], bcast32(x + 1));
    GLM_UNROLL_P
    for (int j = 2; j < 8; j += 2) {
      s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(r.u[j], bcast32(x + j)));
      s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(r.u[j + 1], bcast32(x + j + 1)));
    }
    return _mm256_madd_epi16(_mm256_add_epi16(s0, s1), _mm256_set1_epi16(1));
  }
};

// Q5_0x16: the Q4_0x16 pieces (nibbles) and after them the high bits, one 32-byte line per
// half (packed.cc: spread_qh): bit p of a lane byte becomes bit 4 of low-nibble piece p, bit
// 4 + p bit 4 of high-nibble piece p. u = q_w + 16 in 0..31: vpmaddubsw pairs reach
// 2 * 31 * 127 = 7874, so only 4 of them are summed in int16 (31496) before vpmaddwd.
struct Q5 {
  static constexpr int kBlockStride = 5 * 64;
  static constexpr int kOffset = 16;
  struct Regs {
    __m256i u[8];
  };
  static inline void load(const uint8_t* q, int h, Regs* r) {
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i b4 = _mm256_set1_epi8(0x10);
    const __m256i hb = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 256 + 32 * h));
    // 16-bit shifts: a bit that crosses into the next byte never lands on bit 4 (shifts <= 4).
    const __m256i lo_bit[4] = {_mm256_slli_epi16(hb, 4), _mm256_slli_epi16(hb, 3),
                               _mm256_slli_epi16(hb, 2), _mm256_slli_epi16(hb, 1)};
    const __m256i hi_bit[4] = {hb, _mm256_srli_epi16(hb, 1), _mm256_srli_epi16(hb, 2),
                               _mm256_srli_epi16(hb, 3)};
    GLM_UNROLL_P
    for (int p = 0; p < 4; ++p) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64 * p + 32 * h));
      r->u[p] = _mm256_or_si256(_mm256_and_si256(v, m), _mm256_and_si256(lo_bit[p], b4));
      r->u[p + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m),
                                    _mm256_and_si256(hi_bit[p], b4));
    }
  }
  static inline __m256i dot(const Regs& r, const int32_t* x) {
#if defined(__AVXVNNI__)
    return vnni_dot(r.u, x);
#endif
    __m256i s[2];  // low nibbles (words 0..3), high nibbles (words 4..7)
    GLM_UNROLL_P
    for (int k = 0; k < 2; ++k) {
      const int j = 4 * k;
      s[k] =
          _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(r.u[j], bcast32(x + j)),
                                            _mm256_maddubs_epi16(r.u[j + 1], bcast32(x + j + 1))),
                           _mm256_add_epi16(_mm256_maddubs_epi16(r.u[j + 2], bcast32(x + j + 2)),
                                            _mm256_maddubs_epi16(r.u[j + 3], bcast32(x + j + 3))));
    }
    const __m256i ones = _mm256_set1_epi16(1);
    return _mm256_add_epi32(_mm256_madd_epi16(s[0], ones), _mm256_madd_epi16(s[1], ones));
  }
};

// Q8_0x16: piece p of half h pairs with activation word p; stored as q + 128.
struct Q8 {
  static constexpr int kBlockStride = 8 * 64;
  static constexpr int kOffset = 0;  // the sign trick multiplies q itself: no correction
  struct Regs {
    __m256i q[8];  // signed weights
    __m256i a[8];  // |q|
  };
  static inline void load(const uint8_t* q, int h, Regs* r) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    GLM_UNROLL_P
    for (int p = 0; p < 8; ++p) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 64 * p + 32 * h));
      r->q[p] = _mm256_xor_si256(v, flip);
      r->a[p] = _mm256_sign_epi8(r->q[p], r->q[p]);
    }
  }
  static inline __m256i dot(const Regs& r, const int32_t* x) {
#if defined(__AVXVNNI__)
    // |q| (<= 128, unsigned) times x with q's sign: vpdpbusd sums q x exactly.
    __m256i v0 = _mm256_setzero_si256(), v1 = _mm256_setzero_si256();
    GLM_UNROLL_P
    for (int j = 0; j < 8; j += 2) {
      v0 = _mm256_dpbusd_avx_epi32(v0, r.a[j], _mm256_sign_epi8(bcast32(x + j), r.q[j]));
      v1 =
          _mm256_dpbusd_avx_epi32(v1, r.a[j + 1], _mm256_sign_epi8(bcast32(x + j + 1), r.q[j + 1]));
    }
    return _mm256_add_epi32(v0, v1);
#endif
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    GLM_UNROLL_P
    for (int j = 0; j < 8; j += 2) {
      const __m256i p0 = _mm256_maddubs_epi16(r.a[j], _mm256_sign_epi8(bcast32(x + j), r.q[j]));
      const __m256i p1 =
          _mm256_maddubs_epi16(r.a[j + 1], _mm256_sign_epi8(bcast32(x + j + 1), r.q[j + 1]));
      s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, ones));
      s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, ones));
    }
    return _mm256_add_epi32(s0, s1);
  }
};

// H halves (rows 8 h0 .. 8 (h0 + H)) of group g x T tokens from t0.
template <class Fmt, int H, int T>
void half_tile(const PCtx& c, int64_t g, int h0, int64_t t0) {
  const uint8_t* group = c.w + g * c.group_bytes;
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(group);  // [nb][16]
  const uint8_t* quants = group + c.quants_offset;                    // [nb][P][16][4]
  __m256 acc[H][T];
  GLM_UNROLL_P
  for (int h = 0; h < H; ++h) {
    GLM_UNROLL_P
    for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < c.n_blocks; ++b) {
    const uint8_t* qb = quants + b * Fmt::kBlockStride;
    if constexpr (T == 1) {
      // Decode streams the group once: fetch ahead so that new streams do not wait for the
      // hardware prefetcher to ramp up.
      GLM_UNROLL_P
      for (int p = 0; p < Fmt::kBlockStride / 64; ++p) {
        _mm_prefetch(reinterpret_cast<const char*>(qb) + 2048 + 64 * p, _MM_HINT_T0);
      }
    }
    GLM_UNROLL_P
    for (int h = 0; h < H; ++h) {
      typename Fmt::Regs r;
      Fmt::load(qb, h0 + h, &r);
      const __m256 dw = _mm256_cvtph_ps(
          _mm_load_si128(reinterpret_cast<const __m128i*>(scales + b * kPackRows + 8 * (h0 + h))));
      GLM_UNROLL_P
      for (int t = 0; t < T; ++t) {
        const int64_t tb = (t0 + t) * c.n_blocks + b;
        __m256i s =
            Fmt::dot(r, reinterpret_cast<const int32_t*>(c.xq + (t0 + t) * c.n_cols) + b * 8);
        if constexpr (Fmt::kOffset != 0) s = _mm256_add_epi32(s, _mm256_set1_epi32(c.xc[tb]));
        acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),
                                    _mm256_mul_ps(dw, _mm256_set1_ps(c.xd[tb])), acc[h][t]);
      }
    }
  }
  GLM_UNROLL_P
  for (int t = 0; t < T; ++t) {
    GLM_UNROLL_P
    for (int h = 0; h < H; ++h) {
      _mm256_storeu_ps(c.y + (t0 + t) * c.n_rows + g * kPackRows + 8 * (h0 + h), acc[h][t]);
    }
  }
}

// Quantizes one token: q [n_cols], d and c [n_cols / 32] (internal.h's contract).
void quantize_token(const float* x, int64_t n_cols, int offset, int8_t* q, float* d, int32_t* c) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n_cols / 32; ++b) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * 32 + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float mx = _mm_cvtss_f32(m);
    d[b] = mx / 127.0f;
    const __m256 id = _mm256_set1_ps(mx > 0.0f ? 127.0f / mx : 0.0f);
    __m256i qi[4];
    for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
    // Pack 32 int32 -> 32 int8 in order (packs work per 128-bit lane: fix the order after).
    const __m256i p =
        _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * 32),
                        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    const __m256i s =
        _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    c[b] = -offset * _mm_cvtsi128_si32(s4);
  }
}

// packed_tiling.h's Kern for format Fmt: tiles of one group x 1 token (decode, both halves at
// once) or x up to 4 tokens (prefill, half after half: 8 unpacked pieces + 4 accumulators).
template <class Fmt>
struct QKern {
  using Ctx = PCtx;
  static constexpr int kOffset = Fmt::kOffset;
  static constexpr int kDecodeRows = 1;
  static constexpr int kRows = 1;
  static constexpr int kTokens = 4;
  static void quantize_token(const float* x, int64_t n_cols, int offset, int8_t* q, float* d,
                             int32_t* c) {
    internal::quantize_token(x, n_cols, offset, q, d, c);
  }
  template <int G, int T>
  static void tile(const PCtx& c, int64_t g, int64_t t0) {
    static_assert(G == 1);
    if constexpr (T == 1) {
      half_tile<Fmt, 2, 1>(c, g, 0, t0);
    } else {
      half_tile<Fmt, 1, T>(c, g, 0, t0);
      half_tile<Fmt, 1, T>(c, g, 1, t0);
    }
  }
};

// ---- 16-bit float layouts -----------------------------------------------------------------

// Rows 8 h .. 8 h + 7 of column k of a group, as f32.
template <bool kBf16>
inline __m256 load_col(const uint8_t* p) {
  const __m128i h = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return _mm256_cvtph_ps(h);
}

// packed_tiling.h's Kern of the float layouts: 3 groups x 2 halves = 6 accumulators and 6
// weight registers (decode), 1 group x 2 halves x 6 tokens = 12 accumulators (prefill).
template <bool kBf16>
struct FKern {
  static constexpr int kDecodeRows = 3;
  static constexpr int kRows = 1;
  static constexpr int kTokens = 6;
  // Columns [k0, k1) of G groups x T tokens; adds to y unless k0 == 0.
  template <int G, int T>
  static void tile(const FCtx& c, int64_t g0, int64_t t0, int64_t k0, int64_t k1) {
    __m256 acc[G][2][T];
    GLM_UNROLL_P
    for (int g = 0; g < G; ++g) {
      GLM_UNROLL_P
      for (int h = 0; h < 2; ++h) {
        GLM_UNROLL_P
        for (int t = 0; t < T; ++t) {
          float* yp = c.y + (t0 + t) * c.n_rows + (g0 + g) * kPackRows + 8 * h;
          acc[g][h][t] = k0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(yp);
        }
      }
    }
    const uint8_t* base = c.w + g0 * c.group_bytes;
    const float* x = c.x + t0 * c.n_cols;
    for (int64_t k = k0; k < k1; ++k) {
      if constexpr (T == 1) {
        if ((k & 1) == 0) {
          GLM_UNROLL_P
          for (int g = 0; g < G; ++g) {
            _mm_prefetch(reinterpret_cast<const char*>(base + g * c.group_bytes + k * 32) + 2048,
                         _MM_HINT_T0);
          }
        }
      }
      __m256 w[G][2];
      GLM_UNROLL_P
      for (int g = 0; g < G; ++g) {
        w[g][0] = load_col<kBf16>(base + g * c.group_bytes + k * 32);
        w[g][1] = load_col<kBf16>(base + g * c.group_bytes + k * 32 + 16);
      }
      GLM_UNROLL_P
      for (int t = 0; t < T; ++t) {
        const __m256 xb = _mm256_broadcast_ss(x + t * c.n_cols + k);
        GLM_UNROLL_P
        for (int g = 0; g < G; ++g) {
          acc[g][0][t] = _mm256_fmadd_ps(w[g][0], xb, acc[g][0][t]);
          acc[g][1][t] = _mm256_fmadd_ps(w[g][1], xb, acc[g][1][t]);
        }
      }
    }
    GLM_UNROLL_P
    for (int t = 0; t < T; ++t) {
      GLM_UNROLL_P
      for (int g = 0; g < G; ++g) {
        GLM_UNROLL_P
        for (int h = 0; h < 2; ++h) {
          _mm256_storeu_ps(c.y + (t0 + t) * c.n_rows + (g0 + g) * kPackRows + 8 * h, acc[g][h][t]);
        }
      }
    }
  }
};

}  // namespace

void GLM_PACKED_AVX2_ENTRY(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                           ThreadPool* pool) {
#if defined(__AVXVNNI__)
  avxvnni_calls_add();
#endif
  packed_matmul<QKern, Q4, Q5, Q8, FKern>(w, x, y, n_tokens, pool, matmul_packed_k_avx2);
}

}  // namespace glm::kernels::internal
