// AVX-512 attention (internal.h: AttnOps, AttnTileOps): the vector type of 16 f32 lanes over which
// attention_tile.h writes the row and tile operations once for every ISA, with its conversions
// of K/V rows (F16 by vcvtph2ps, Q8_0 by vpmovsxbd + vcvtdq2ps) and its exp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/attention_tile.h"
#include "kernels/internal.h"
#include "kernels/quant.h"
#include "kernels/simd_avx512.h"

namespace glm::kernels::internal {
namespace {

struct V512 {
  using reg = __m512;
  static constexpr int W = 16;
  static constexpr int kQkRows = 4;  // 4 x 4 accumulators + 4 keys + 1 broadcast of 32 zmm
  static constexpr int kPvRows = 4;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, reg r) { _mm512_storeu_ps(p, r); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static float hmax(reg a) { return _mm512_reduce_max_ps(a); }
  // W int8 values as f32 (vpmovsxbd + vcvtdq2ps).
  static reg from_i8(const int8_t* p) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
  }
  // W fp16 values as f32 (vcvtph2ps).
  static reg from_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static float sum(reg r) { return hsum(r); }
  // exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln 2 / 2, exp(r) by a degree-7 polynomial
  // (Cephes' expf coefficients), 2^n applied by vscalefps.
  static reg exp(reg x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-87.0f));
    const reg n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    reg r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    reg p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    const reg y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(y, n);
  }
};

}  // namespace

const AttnOps& attn_ops_avx512() {
  using K = RowKernels<V512>;
  static const AttnOps ops{K::scores, K::accumulate};
  return ops;
}

const AttnTileOps& attn_tile_ops_avx512() {
  using K = TileKernels<V512>;
  static const AttnTileOps ops{K::qk, K::pv, RowKernels<V512>::load_row, K::softmax_step,
                               RowKernels<V512>::qk_keys};
  return ops;
}

}  // namespace glm::kernels::internal
