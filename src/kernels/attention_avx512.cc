// AVX-512 row operations of attention (internal.h): K/V rows converted from F16 (or Q8_0) with
// vcvtph2ps, 16 lanes at a time, shared by the g query heads of a group.
// GCC 12's own AVX-512 intrinsics (_mm512_undefined_*) trip these warnings when inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/attention_tile.h"
#include "kernels/internal.h"
#include "kernels/quant.h"
#include "kernels/simd_avx512.h"

namespace glm::kernels::internal {
namespace {

constexpr int kMaxHeadDim = 1024;

// Head elements [e0, e0 + hd) of a K/V row as f32: in `dst`, or the row itself when it is F32.
// Q8_0: whole aligned blocks of 32 with two vpmovsxbd + vcvtdq2ps + one multiply by the block's
// scale; a head that starts or ends inside a block (head_dim < 32) element by element.
const float* to_f32(const void* row, int e0, DType type, int hd, float* dst) {
  if (type == DType::kF32) return static_cast<const float*>(row) + e0;
  if (type == DType::kQ8_0) {
    const BlockQ8_0* blocks = static_cast<const BlockQ8_0*>(row);
    int i = 0;
    if (e0 % kQK == 0) {
      for (; i + kQK <= hd; i += kQK) {
        const BlockQ8_0& b = blocks[(e0 + i) / kQK];
        const __m512 d = _mm512_set1_ps(fp16_to_fp32(b.d));
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16));
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo))));
        _mm512_storeu_ps(dst + i + 16,
                         _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi))));
      }
    }
    for (; i < hd; ++i) dst[i] = kv_elem(row, type, e0 + i);
    return dst;
  }
  const uint16_t* h = static_cast<const uint16_t*>(row) + e0;
  int i = 0;
  for (; i + 16 <= hd; i += 16) {
    _mm512_storeu_ps(dst + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  }
  for (; i < hd; ++i) dst[i] = fp16_to_fp32(h[i]);
  return dst;
}

void scores(const float* q, int g, int hd, const void* k, int e0, DType type, float* s) {
  GLM_CHECK(hd <= kMaxHeadDim);
  alignas(64) float buf[kMaxHeadDim];
  const float* kf = to_f32(k, e0, type, hd, buf);
  for (int h = 0; h < g; ++h) {
    const float* qh = q + h * hd;
    __m512 a0 = _mm512_setzero_ps();
    __m512 a1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= hd; i += 32) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + i), _mm512_loadu_ps(kf + i), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + i + 16), _mm512_loadu_ps(kf + i + 16), a1);
    }
    for (; i + 16 <= hd; i += 16) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qh + i), _mm512_loadu_ps(kf + i), a0);
    }
    float sum = hsum(_mm512_add_ps(a0, a1));
    for (; i < hd; ++i) sum += qh[i] * kf[i];
    s[h] = sum;
  }
}

// acc[h] += sum over the n rows j of p[j, h] * v_j: up to kRows V rows converted at a time,
// then each 16-lane piece of acc[h] loaded once, updated by every row, stored once.
void accumulate(float* acc, int g, int hd, const float* p, const uint8_t* v, size_t row_bytes,
                int n, int e0, DType type) {
  GLM_CHECK(hd <= kMaxHeadDim);
  constexpr int kRows = 8;
  alignas(64) float buf[kRows][kMaxHeadDim];
  const float* vf[kRows];
  for (int j0 = 0; j0 < n; j0 += kRows) {
    const int m = std::min(kRows, n - j0);
    for (int r = 0; r < m; ++r) vf[r] = to_f32(v + (j0 + r) * row_bytes, e0, type, hd, buf[r]);
    const float* pj = p + static_cast<size_t>(j0) * g;
    for (int h = 0; h < g; ++h) {
      float* ah = acc + h * hd;
      int i = 0;
      for (; i + 16 <= hd; i += 16) {
        __m512 a = _mm512_loadu_ps(ah + i);
        for (int r = 0; r < m; ++r) {
          a = _mm512_fmadd_ps(_mm512_set1_ps(pj[r * g + h]), _mm512_loadu_ps(vf[r] + i), a);
        }
        _mm512_storeu_ps(ah + i, a);
      }
      for (; i < hd; ++i) {
        float a = ah[i];
        for (int r = 0; r < m; ++r) a += pj[r * g + h] * vf[r][i];
        ah[i] = a;
      }
    }
  }
}

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
  static const AttnOps ops{scores, accumulate};
  return ops;
}

const AttnTileOps& attn_tile_ops_avx512() {
  using K = TileKernels<V512>;
  static const AttnTileOps ops{K::qk, K::pv, K::exp_sum, to_f32};
  return ops;
}

}  // namespace glm::kernels::internal
