// Internal to kernels/: small AVX-512 helpers for the *_avx512.cc files only (internal linkage).
// Horizontal reductions written with shuffles: GCC 12's _mm512_reduce_* trip -Werror=uninitialized.
#pragma once

#include <immintrin.h>

namespace glm::kernels::internal {
namespace {

inline float hsum(__m512 v) {
  __m512 t = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
  t = _mm512_add_ps(t, _mm512_shuffle_f32x4(t, t, 0xB1));
  __m128 x = _mm512_castps512_ps128(t);
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

inline float hmax(__m512 v) {
  __m512 t = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
  t = _mm512_max_ps(t, _mm512_shuffle_f32x4(t, t, 0xB1));
  __m128 x = _mm512_castps512_ps128(t);
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

}  // namespace
}  // namespace glm::kernels::internal
