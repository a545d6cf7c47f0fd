// AVX2 attention (internal.h: AttnOps, AttnTileOps): the vector type of 8 f32 lanes over which
// attention_tile.h writes the row and tile operations once for every ISA, with its conversions
// of K/V rows (F16 by vcvtph2ps, Q8_0 by vpmovsxbd + vcvtdq2ps) and its exp.
#include <immintrin.h>

#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/attention_tile.h"
#include "kernels/internal.h"
#include "kernels/quant.h"

namespace glm::kernels::internal {
namespace {

struct V256 {
  using reg = __m256;
  static constexpr int W = 8;
  static constexpr int kQkRows = 2;  // 2 x 4 accumulators + 4 keys + 1 broadcast of 16 ymm
  static constexpr int kPvRows = 2;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, reg r) { _mm256_storeu_ps(p, r); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static float hmax(reg a) {
    __m128 r = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    r = _mm_max_ps(r, _mm_movehl_ps(r, r));
    r = _mm_max_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
  }
  // W int8 values as f32 (vpmovsxbd + vcvtdq2ps).
  static reg from_i8(const int8_t* p) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
  }
  // W fp16 values as f32 (vcvtph2ps).
  static reg from_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float sum(reg a) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
  }
  // exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln 2 / 2, exp(r) by a degree-7 polynomial
  // (Cephes' expf coefficients), 2^n built in the exponent bits (n in [-126, 127] after the clamp).
  static reg exp(reg x) {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.0f)), _mm256_set1_ps(-87.0f));
    const reg n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    reg r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    reg p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    const reg y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  }
};

}  // namespace

const AttnOps& attn_ops_avx2() {
  using K = RowKernels<V256>;
  static const AttnOps ops{K::scores, K::accumulate};
  return ops;
}

const AttnTileOps& attn_tile_ops_avx2() {
  using K = TileKernels<V256>;
  static const AttnTileOps ops{K::qk, K::pv, RowKernels<V256>::load_row, K::softmax_step,
                               RowKernels<V256>::qk_keys};
  return ops;
}

}  // namespace glm::kernels::internal
