// AVX2 matmul variant (internal.h), for CPUs without AVX-512:
//   - F32 / F16 (vcvtph2ps) / BF16 weights: f32 FMA in R x T register tiles (16 ymm registers:
//     2 x 4 for prefill, 4 x 1 for decode).
//   - Q8_0 / Q4_0 / Q5_0 weights: activations quantized per 32 values (internal.h:
//   quantize_act_ref),
//     int8 products by the sign trick: vpmaddubsw(|w|, sign(x, w)) -> int16 pairs (|w| <= 128,
//     |x| <= 127: no saturation), vpmaddwd with ones -> int32, summed per row and block, then
//     y = fma(float(sum), d_w * d_x, y) block by block, bit-identical to the packed kernel.
//   - Q4_1 / Q5_1 (w = d u + m): the same with u >= 0, plus m_w * d_x * sum(q_x) per block.
//   - Q4_K / Q5_K / Q6_K: matmul_k_avx2.cc.
// Other types return false (the generic path runs them).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/matmul_avx2.h"

#include <immintrin.h>

#include <cstring>
#include <vector>

#include "kernels/internal.h"
#include "kernels/row_tiling.h"

namespace glm::kernels::internal {
namespace {

inline float hsum8(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

// ---- float weights ----------------------------------------------------------------------------

template <DType kType>
inline __m256 load_w8(const uint8_t* row, int64_t k) {
  if constexpr (kType == DType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k));
    if constexpr (kType == DType::kF16) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

template <DType kType>
inline float w_scalar(const uint8_t* row, int64_t k) {
  if constexpr (kType == DType::kF32) {
    return reinterpret_cast<const float*>(row)[k];
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    if constexpr (kType == DType::kF16) {
      return _cvtsh_ss(h);
    } else {
      const uint32_t u = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
  }
}

// row_tiling.h's float Kern: 4 rows x 1 token (decode), 2 rows x 4 tokens (prefill).
template <DType kType>
struct FloatKern {
  using Ctx = FloatCtx;
  static constexpr int kDecodeRows = 4;
  static constexpr int kRows = 2;
  static constexpr int kTokens = 4;
  template <int R, int T>
  static void tile(const Ctx& c, int64_t r0, int64_t t0) {
    __m256 acc[R][T];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      GLM_UNROLL
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    const uint8_t* rows[R];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) rows[r] = c.w + (r0 + r) * c.row_bytes;
    const float* xs = c.x + t0 * c.n_cols;
    const int64_t n8 = c.n_cols / 8 * 8;
    for (int64_t k = 0; k < n8; k += 8) {
      __m256 w[R];
      GLM_UNROLL
      for (int r = 0; r < R; ++r) w[r] = load_w8<kType>(rows[r], k);
      GLM_UNROLL
      for (int t = 0; t < T; ++t) {
        const __m256 xv = _mm256_loadu_ps(xs + t * c.n_cols + k);
        GLM_UNROLL
        for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(w[r], xv, acc[r][t]);
      }
    }
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        float s = hsum8(acc[r][t]);
        for (int64_t k = n8; k < c.n_cols; ++k)
          s += w_scalar<kType>(rows[r], k) * xs[t * c.n_cols + k];
        c.y[(t0 + t) * c.n_rows + r0 + r] = s;
      }
    }
  }
};

// ---- Q8_0 / Q4_0 ------------------------------------------------------------------------------

struct ActBlock {
  int8_t q[32];
  float d;
  int32_t sum;  // of q: the minimum term of Q4_1 / Q5_1
};

using QCtx = QuantCtx<ActBlock>;  // n_act = n_blocks

// Quantizes one token's activations (n_cols values) into n_cols / 32 blocks.
void quantize_blocks(const float* x, int64_t n_cols, ActBlock* out);

struct Q8_0 {
  static constexpr bool kMin = false;
  static constexpr int kBlockBytes = 34;
  static __m256i load(const uint8_t* b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
  }
};

struct Q4_0 {
  static constexpr bool kMin = false;
  static constexpr int kBlockBytes = 18;
  static __m256i load(const uint8_t* b) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    const __m128i m = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(v, m);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  }
};

// Value j of a block is nibble j (low nibbles 0..15, high nibbles 16..31) with bit j of qh as
// its bit 4, minus 16: nib | 0xF0 (nib - 16 as int8) where the bit is clear, nib where it is set.
template <int kQh, int kQs>
__m256i load_q5(const uint8_t* b, bool offset);

struct Q5_0 {
  static constexpr bool kMin = false;
  static constexpr int kBlockBytes = 22;
  static __m256i load(const uint8_t* b) { return load_q5<2, 6>(b, true); }
};

// Q4_1 / Q5_1: w = d * u + m with u unsigned (the nibble, plus 16 x the fifth bit): the sign
// trick multiplies u (<= 31) as it is; m_w * d_x * sum(q_x) is added per block and row.
struct Q4_1 {
  static constexpr bool kMin = true;
  static constexpr int kBlockBytes = 20;
  static __m256i load(const uint8_t* b) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4));
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
  }
};

struct Q5_1 {
  static constexpr bool kMin = true;
  static constexpr int kBlockBytes = 24;
  static __m256i load(const uint8_t* b) { return load_q5<4, 8>(b, false); }
};

// A Q5 block's 32 values (qh at byte kQh, nibbles at kQs): nibble j with bit j of qh as bit 4,
// minus 16 when `offset` (Q5_0).
template <int kQh, int kQs>
__m256i load_q5(const uint8_t* b, bool offset) {
  {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kQs));
    const __m128i m = _mm_set1_epi8(0x0F);
    const __m256i nib =
        _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
    uint32_t qh;
    std::memcpy(&qh, b + kQh, 4);
    // Byte j of `bits` = byte j / 8 of qh, tested against bit j % 8.
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int32_t>(qh)),
        _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    if (!offset) return _mm256_or_si256(nib, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
    // nib - 16 as int8: nib | 0xF0 where the bit is clear, nib where it is set.
    return _mm256_or_si256(nib,
                           _mm256_andnot_si256(set, _mm256_set1_epi8(static_cast<char>(0xF0))));
  }
}

// Sums of the 8 int32 lanes of each of p[0..R) (R <= 4) as lanes 0..R-1 of the result.
template <int R>
inline __m128i row_sums(const __m256i (&p)[R]) {
  const __m256i z = _mm256_setzero_si256();
  const __m256i h01 = _mm256_hadd_epi32(p[0], R > 1 ? p[R > 1 ? 1 : 0] : z);
  const __m256i h23 = R > 2 ? _mm256_hadd_epi32(p[R > 2 ? 2 : 0], R > 3 ? p[R > 3 ? 3 : 0] : z) : z;
  const __m256i h = _mm256_hadd_epi32(h01, h23);
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// R (<= 4) rows x T tokens. Each row's block product is summed exactly in int32, then
// acc[row] = fma(float(sum), d_w * d_x, acc[row]) block after block: the same operations, in the
// same order, as the packed kernel (packed_avx2.cc), so a repacked matrix and its row-major data
// (the tail rows after the last group of 16, or --repack 0) give bit-identical results.
// row_tiling.h's Kern of format Fmt: 4 rows x 1 token (decode), 4 rows x 2 tokens (prefill).
template <class Fmt>
struct QKern {
  using Ctx = QCtx;
  using Act = ActBlock;
  static constexpr int kActValues = 32;
  static constexpr int kDecodeRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kTokens = 2;
  static void quantize_token(const float* x, int64_t n_cols, ActBlock* out) {
    quantize_blocks(x, n_cols, out);
  }
  template <int R, int T>
  static void tile(const Ctx& c, int64_t r0, int64_t t0) {
    static_assert(R <= 4);
    __m128 acc[T];
    GLM_UNROLL
    for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
    const uint8_t* rows[R];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) rows[r] = c.w + (r0 + r) * c.row_bytes;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < c.n_blocks; ++b) {
      __m256i wa[R];
      __m256i ws[R];
      // The rows' fp16 scales in lanes 0..R-1 (through memory: _mm_insert_epi16 needs a
      // constant lane, which only an optimizing build's unrolling provides).
      alignas(16) uint16_t scales[8] = {};
      alignas(16) uint16_t mins[8] = {};
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = rows[r] + b * Fmt::kBlockBytes;
        if constexpr (T == 1) _mm_prefetch(reinterpret_cast<const char*>(blk) + 1024, _MM_HINT_T0);
        ws[r] = Fmt::load(blk);
        wa[r] = _mm256_sign_epi8(ws[r], ws[r]);
        std::memcpy(&scales[r], blk, 2);
        if constexpr (Fmt::kMin) std::memcpy(&mins[r], blk + 2, 2);
      }
      const __m128 wd = _mm_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales)));
      const __m128 wm = _mm_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(mins)));
      GLM_UNROLL
      for (int t = 0; t < T; ++t) {
        const ActBlock& a = c.act[(t0 + t) * c.n_act + b];
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q));
        __m256i p32[R];
        GLM_UNROLL
        for (int r = 0; r < R; ++r) {
          p32[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(wa[r], _mm256_sign_epi8(x, ws[r])), ones);
        }
        acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(row_sums<R>(p32)), _mm_mul_ps(wd, _mm_set1_ps(a.d)),
                              acc[t]);
        if constexpr (Fmt::kMin) {
          acc[t] = _mm_fmadd_ps(_mm_set1_ps(static_cast<float>(a.sum)),
                                _mm_mul_ps(wm, _mm_set1_ps(a.d)), acc[t]);
        }
      }
    }
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      alignas(16) float out[4];
      _mm_store_ps(out, acc[t]);
      GLM_UNROLL
      for (int r = 0; r < R; ++r) c.y[(t0 + t) * c.n_rows + r0 + r] = out[r];
    }
  }
};

void quantize_blocks(const float* x, int64_t n_cols, ActBlock* out) {
  const int64_t n_blocks = n_cols / 32;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
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
    out[b].d = mx / 127.0f;
    const __m256 id = _mm256_set1_ps(mx > 0.0f ? 127.0f / mx : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
    // Pack 32 int32 -> 32 int8 in order (packs work per 128-bit lane: fix the order after).
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p = _mm256_packs_epi16(p01, p23);
    const __m256i fixed = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].q), fixed);
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    out[b].sum = _mm_cvtsi128_si32(s4);
  }
}

}  // namespace

int act_block_avx2(DType t) { return act_block_rows(t); }

bool matmul_avx2(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                 ThreadPool* pool) {
  return float_types_matmul<FloatKern>(w, x, y, n_tokens, pool) ||
         quant_types_matmul<QKern, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1>(w, x, y, n_tokens, pool) ||
         matmul_k_avx2(w, x, y, n_tokens, pool);
}

}  // namespace glm::kernels::internal
