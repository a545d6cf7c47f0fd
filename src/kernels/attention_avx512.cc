// AVX-512 row operations of attention (internal.h): K/V rows converted from F16 with
// vcvtph2ps, 16 lanes at a time, shared by the g query heads of a group.
// GCC 12's own AVX-512 intrinsics (_mm512_undefined_*) trip these warnings when inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/internal.h"
#include "kernels/simd_avx512.h"

namespace glm::kernels::internal {
namespace {

constexpr int kMaxHeadDim = 1024;

// Converts a K/V row to f32 in `dst` (or returns it as is when already f32).
const float* to_f32(const void* row, DType type, int hd, float* dst) {
  if (type == DType::kF32) return static_cast<const float*>(row);
  const uint16_t* h = static_cast<const uint16_t*>(row);
  int i = 0;
  for (; i + 16 <= hd; i += 16) {
    _mm512_storeu_ps(dst + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  }
  for (; i < hd; ++i) dst[i] = fp16_to_fp32(h[i]);
  return dst;
}

void scores(const float* q, int g, int hd, const void* k, DType type, float* s) {
  GLM_CHECK(hd <= kMaxHeadDim);
  alignas(64) float buf[kMaxHeadDim];
  const float* kf = to_f32(k, type, hd, buf);
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

void accumulate(float* acc, int g, int hd, const float* p, const void* v, DType type) {
  GLM_CHECK(hd <= kMaxHeadDim);
  alignas(64) float buf[kMaxHeadDim];
  const float* vf = to_f32(v, type, hd, buf);
  for (int h = 0; h < g; ++h) {
    float* ah = acc + h * hd;
    const __m512 ph = _mm512_set1_ps(p[h]);
    int i = 0;
    for (; i + 16 <= hd; i += 16) {
      _mm512_storeu_ps(ah + i,
                       _mm512_fmadd_ps(ph, _mm512_loadu_ps(vf + i), _mm512_loadu_ps(ah + i)));
    }
    for (; i < hd; ++i) ah[i] += p[h] * vf[i];
  }
}

}  // namespace

const AttnOps& attn_ops_avx512() {
  static const AttnOps ops{scores, accumulate};
  return ops;
}

}  // namespace glm::kernels::internal
