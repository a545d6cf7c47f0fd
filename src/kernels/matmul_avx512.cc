// AVX-512 matmul variant (internal.h): float-weight paths (F32, F16 via vcvtph2ps, BF16 via a
// 16-bit shift) with f32 FMA in R x T register tiles, and dispatch to the integer paths for the
// quantized types (matmul_q_avx512.cc, matmul_k_avx512.cc). Activations stay f32 here, so the
// result matches the reference up to f32 rounding.
// GCC 12's own AVX-512 intrinsics (_mm512_undefined_*) trip these warnings when inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "kernels/matmul_avx512.h"

#include <immintrin.h>

#include "kernels/internal.h"
#include "kernels/row_tiling.h"
#include "kernels/simd_avx512.h"

namespace glm::kernels::internal {
namespace {

// Loads 16 weights (or the first `n` under a mask) of a row as f32.
template <DType kType>
inline __m512 load_w(const uint8_t* row, int64_t k, __mmask16 m) {
  if constexpr (kType == DType::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  } else if constexpr (kType == DType::kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// row_tiling.h's float Kern: 4 rows x 1 token (decode), 4 rows x 6 tokens (prefill).
template <DType kType>
struct FloatKern {
  using Ctx = FloatCtx;
  static constexpr int kDecodeRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kTokens = 6;
  static constexpr int64_t kElemBytes = kType == DType::kF32 ? 4 : 2;
  static constexpr int64_t kPrefetchBytes = 1024;
  template <int R, int T>
  static void tile(const Ctx& c, int64_t r0, int64_t t0) {
    __m512 acc[R][T];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      GLM_UNROLL
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    const uint8_t* rows[R];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) rows[r] = c.w + (r0 + r) * c.row_bytes;
    const float* xs = c.x + t0 * c.n_cols;
    const int64_t n_full = c.n_cols / 16 * 16;
    for (int64_t k = 0; k < c.n_cols; k += 16) {
      const __mmask16 m = k < n_full ? __mmask16(0xFFFF) : __mmask16((1u << (c.n_cols - k)) - 1);
      __m512 w[R];
      if constexpr (T == 1) {
        // Decode streams each row once: fetch ahead so that a new row's first lines are on
        // their way before the hardware prefetcher has seen enough misses to start.
        GLM_UNROLL
        for (int r = 0; r < R; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(rows[r]) + k * kElemBytes + kPrefetchBytes,
                       _MM_HINT_T0);
        }
      }
      GLM_UNROLL
      for (int r = 0; r < R; ++r) w[r] = load_w<kType>(rows[r], k, m);
      GLM_UNROLL
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, xs + t * c.n_cols + k);
        GLM_UNROLL
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(w[r], xv, acc[r][t]);
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

int act_block_avx512(DType t) { return act_block_rows(t); }

bool matmul_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                   ThreadPool* pool) {
  return float_types_matmul<FloatKern>(w, x, y, n_tokens, pool) ||
         matmul_q_avx512(w, x, y, n_tokens, pool);
}

}  // namespace glm::kernels::internal
