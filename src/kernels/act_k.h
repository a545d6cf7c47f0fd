// Internal to kernels/: the activations of the k-quant kernels (matmul_k_avx2.cc,
// matmul_k_avx512.cc row-major; packed_k_avx2.cc, packed_k_avx512.cc packed), quantized per 256
// values as internal.h's quantize_act_ref: int8 q in natural order, the sums of each 16 and each
// 32 of them (for the Q6_K offset and the Q4_K/Q5_K mins), and d_x. 64-byte aligned (320 bytes),
// so the AVX-512 kernels load q with aligned 512-bit loads. Written with AVX2 instructions, which
// every AVX-512 CPU has; included by the *_avx2.cc / *_avx512.cc files only (internal linkage,
// like tiling.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "kernels/thread_pool.h"
#include "kernels/tiling.h"

namespace glm::kernels::internal {
namespace {

struct alignas(64) ActK {
  int8_t q[256];
  int16_t bsum16[16];
  int16_t bsum32[8];
  float d;
};

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline void quantize_token_k(const float* x, int64_t n_sb, ActK* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const float* xs = x + sb * 256;
    ActK& a = out[sb];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 256; i += 8)
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(xs + i)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float m = _mm_cvtss_f32(m4);
    a.d = m / 127.0f;
    const __m256 id = _mm256_set1_ps(m > 0.0f ? 127.0f / m : 0.0f);
    for (int i = 0; i < 256; i += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k)
        q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xs + i + 8 * k), id));
      const __m256i p =
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_store_si256(reinterpret_cast<__m256i*>(a.q + i),
                         _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
      a.bsum16[i / 16] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
      a.bsum16[i / 16 + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
    }
    for (int j = 0; j < 8; ++j)
      a.bsum32[j] = static_cast<int16_t>(a.bsum16[2 * j] + a.bsum16[2 * j + 1]);
  }
}

// Quantizes the n_tokens rows of x ([n_tokens, n_sb * 256]) into the calling thread's buffer,
// on the pool's threads from 4 tokens on; returns it: [n_tokens, n_sb]. Valid until the
// thread's next call.
inline const ActK* quantize_tokens_k(const float* x, int64_t n_sb, int64_t n_tokens,
                                     ThreadPool* pool) {
  thread_local std::vector<ActK> buf;
  if (buf.size() < static_cast<size_t>(n_sb * n_tokens)) buf.resize(n_sb * n_tokens);
  ActK* act = buf.data();  // here: inside the lambda, `buf` would name the worker's own buffer
  for_each_token(pool, n_tokens,
                 [&](int64_t t) { quantize_token_k(x + t * n_sb * 256, n_sb, act + t * n_sb); });
  return buf.data();
}

}  // namespace
}  // namespace glm::kernels::internal
