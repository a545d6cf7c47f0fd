// AVX-512 VNNI integer path for the 32-element quants Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, row-major
// (packed copies of Q8_0 / Q4_0 / Q5_0 run packed_avx512.cc; this runs their tail rows).
//
// Activations are quantized per 32 values (internal.h: quantize_act_ref) into "chunks" of two
// blocks (64 int8 = one zmm), laid out to match how the weight format unpacks:
//   natural  (Q8_0):       [x0[0:32] | x1[0:32]]
//   permuted (Q4_0, Q5_0): [x0[0:16] | x1[0:16] | x0[16:32] | x1[16:32]]  (low nibbles, then high)
// Beside the int8 values each chunk keeps, per 32-bit lane, the block's scale d_x and
// c = -offset * (sum of the lane's four int8 values). The weights unpack to unsigned bytes
// u = q + offset (offset 128 for Q8_0, 8 for Q4_0, 16 for Q5_0), so one vpdpbusd seeded with c
// gives per lane sum((u - offset) * x) = sum(q * x) exactly; then y += cvt(that) * d_w * d_x.
// Q4_1 / Q5_1 (w = d_w * u + m_w, u unsigned): c is the lane's sum of x itself, and
//   y += cvt(vpdpbusd(0, u, x)) * d_w * d_x + cvt(c) * m_w * d_x.
// A chunk of an odd block count has a zero second half on both sides.
// GCC 12's own AVX-512 intrinsics (_mm512_undefined_*) trip these warnings when inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>

#include "core/fp16.h"
#include "kernels/internal.h"
#include "kernels/matmul_avx512.h"
#include "kernels/row_tiling.h"
#include "kernels/simd_avx512.h"

namespace glm::kernels::internal {
namespace {

struct alignas(64) ActChunk {
  int8_t q[64];
  int32_t c[16];
  float d[16];
};

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Scale vector of a chunk: lanes of block 0 get d0, lanes of block 1 get d1.
template <bool kPermuted>
inline __m512 chunk_scales(float d0, float d1) {
  return _mm512_mask_blend_ps(kPermuted ? 0xF0F0 : 0xFF00, _mm512_set1_ps(d0), _mm512_set1_ps(d1));
}

struct Q8_0 {
  static constexpr bool kMin = false;
  static constexpr int kBlockBytes = 34;
  static constexpr bool kPermuted = false;
  static constexpr int kOffset = 128;
  template <bool kHalf>
  static void load(const uint8_t* b0, __m512i* wq, __m512* wd, __m512* /*wm*/) {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2));
    const __m256i q1 = kHalf ? _mm256_set1_epi8(-128)
                             : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 36));
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    *wq = _mm512_xor_si512(v, _mm512_set1_epi8(-128));
    *wd = chunk_scales<false>(half_at(b0), kHalf ? 0.0f : half_at(b0 + kBlockBytes));
  }
};

template <int kQsOffset>
inline __m512i unpack_nibbles(const uint8_t* b0, const uint8_t* b1, bool half) {
  const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + kQsOffset));
  const __m128i q1 = half ? _mm_setzero_si128()
                          : _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + kQsOffset));
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
  const __m256i m = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(v, m);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// The fifth bits of two Q5 blocks (qh of each) in the permuted lane order: [x0 0..15 | x1 0..15 |
// x0 16..31 | x1 16..31], as a byte mask.
inline __mmask64 fifth_bits(uint32_t h0, uint32_t h1) {
  return _cvtu64_mask64((h0 & 0xFFFFull) | (uint64_t{h1 & 0xFFFFu} << 16) |
                        (uint64_t{h0 >> 16} << 32) | (uint64_t{h1 >> 16} << 48));
}

struct Q4_0 {
  static constexpr bool kMin = false;
  static constexpr int kBlockBytes = 18;
  static constexpr bool kPermuted = true;
  static constexpr int kOffset = 8;
  template <bool kHalf>
  static void load(const uint8_t* b0, __m512i* wq, __m512* wd, __m512* /*wm*/) {
    const uint8_t* b1 = b0 + kBlockBytes;
    *wq = unpack_nibbles<2>(b0, b1, kHalf);
    *wd = chunk_scales<true>(half_at(b0), kHalf ? 0.0f : half_at(b1));
  }
};

struct Q5_0 {
  static constexpr bool kMin = false;
  static constexpr int kBlockBytes = 22;
  static constexpr bool kPermuted = true;
  static constexpr int kOffset = 16;
  template <bool kHalf>
  static void load(const uint8_t* b0, __m512i* wq, __m512* wd, __m512* /*wm*/) {
    const uint8_t* b1 = b0 + kBlockBytes;
    uint32_t h0;
    uint32_t h1 = 0;
    std::memcpy(&h0, b0 + 2, 4);
    if (!kHalf) std::memcpy(&h1, b1 + 2, 4);
    const __m512i lo4 = unpack_nibbles<6>(b0, b1, kHalf);
    *wq = _mm512_mask_add_epi8(lo4, fifth_bits(h0, h1), lo4, _mm512_set1_epi8(16));
    *wd = chunk_scales<true>(half_at(b0), kHalf ? 0.0f : half_at(b1));
  }
};

// Q4_1: d, m (fp16), qs[16]; w = d * u + m, u = nibble.
struct Q4_1 {
  static constexpr bool kMin = true;
  static constexpr int kBlockBytes = 20;
  static constexpr bool kPermuted = true;
  static constexpr int kOffset = 0;
  template <bool kHalf>
  static void load(const uint8_t* b0, __m512i* wq, __m512* wd, __m512* wm) {
    const uint8_t* b1 = b0 + kBlockBytes;
    *wq = unpack_nibbles<4>(b0, b1, kHalf);
    *wd = chunk_scales<true>(half_at(b0), kHalf ? 0.0f : half_at(b1));
    *wm = chunk_scales<true>(half_at(b0 + 2), kHalf ? 0.0f : half_at(b1 + 2));
  }
};

// Q5_1: d, m (fp16), qh[4], qs[16]; w = d * u + m, u = nibble + 16 * fifth bit.
struct Q5_1 {
  static constexpr bool kMin = true;
  static constexpr int kBlockBytes = 24;
  static constexpr bool kPermuted = true;
  static constexpr int kOffset = 0;
  template <bool kHalf>
  static void load(const uint8_t* b0, __m512i* wq, __m512* wd, __m512* wm) {
    const uint8_t* b1 = b0 + kBlockBytes;
    uint32_t h0;
    uint32_t h1 = 0;
    std::memcpy(&h0, b0 + 4, 4);
    if (!kHalf) std::memcpy(&h1, b1 + 4, 4);
    const __m512i lo4 = unpack_nibbles<8>(b0, b1, kHalf);
    *wq = _mm512_mask_add_epi8(lo4, fifth_bits(h0, h1), lo4, _mm512_set1_epi8(16));
    *wd = chunk_scales<true>(half_at(b0), kHalf ? 0.0f : half_at(b1));
    *wm = chunk_scales<true>(half_at(b0 + 2), kHalf ? 0.0f : half_at(b1 + 2));
  }
};

// n_act: chunks per token, the last holding one block when n_blocks is odd.
using QCtx = QuantCtx<ActChunk>;

template <class Fmt>
void quantize_token(const float* x, int64_t n_cols, ActChunk* out);

// row_tiling.h's Kern of format Fmt: 4 rows x 1 token (decode), 4 rows x 4 tokens (prefill).
template <class Fmt>
struct QKern {
  using Ctx = QCtx;
  using Act = ActChunk;
  static constexpr int kActValues = 64;
  static constexpr int kDecodeRows = 4;
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;
  static void quantize_token(const float* x, int64_t n_cols, ActChunk* out) {
    internal::quantize_token<Fmt>(x, n_cols, out);
  }

  template <int R, int T, bool kHalf>
  static inline void step(const Ctx& c, const uint8_t* const* rows, const ActChunk* a, int64_t k,
                          __m512 (&acc)[R][T]) {
    __m512i wq[R];
    __m512 wd[R], wm[R];
    GLM_UNROLL
    for (int r = 0; r < R; ++r) {
      Fmt::template load<kHalf>(rows[r] + 2 * k * Fmt::kBlockBytes, &wq[r], &wd[r], &wm[r]);
    }
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      const ActChunk& ch = a[t * c.n_act + k];
      const __m512i xq = _mm512_load_si512(ch.q);
      const __m512i cv = _mm512_load_si512(ch.c);
      const __m512 dx = _mm512_load_ps(ch.d);
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        if constexpr (Fmt::kMin) {
          const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[r], xq);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wd[r], dx), acc[r][t]);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(cv), _mm512_mul_ps(wm[r], dx), acc[r][t]);
        } else {
          const __m512i p = _mm512_dpbusd_epi32(cv, wq[r], xq);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wd[r], dx), acc[r][t]);
        }
      }
    }
  }

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
    const ActChunk* a = c.act + t0 * c.n_act;
    const bool odd = c.n_blocks % 2 == 1;
    const int64_t n_full = odd ? c.n_act - 1 : c.n_act;
    for (int64_t k = 0; k < n_full; ++k) step<R, T, false>(c, rows, a, k, acc);
    if (odd) step<R, T, true>(c, rows, a, n_full, acc);
    GLM_UNROLL
    for (int t = 0; t < T; ++t) {
      GLM_UNROLL
      for (int r = 0; r < R; ++r) {
        c.y[(t0 + t) * c.n_rows + r0 + r] = hsum(acc[r][t]);
      }
    }
  }
};

// Quantizes one token's activations (n_cols values) into n_chunks chunks.
template <class Fmt>
void quantize_token(const float* x, int64_t n_cols, ActChunk* out) {
  const int64_t n_blocks = n_cols / 32;
  const int64_t n_chunks = (n_blocks + 1) / 2;
  std::memset(static_cast<void*>(out + n_chunks - 1), 0, sizeof(ActChunk));
  for (int64_t b = 0; b < n_blocks; ++b) {
    ActChunk& ch = out[b / 2];
    const int h = static_cast<int>(b % 2);
    const __m512 v0 = _mm512_loadu_ps(x + b * 32);
    const __m512 v1 = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax = hmax(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m128i q0 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id)));
    const __m128i q1 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id)));
    if (Fmt::kPermuted) {
      _mm_store_si128(reinterpret_cast<__m128i*>(ch.q + h * 16), q0);
      _mm_store_si128(reinterpret_cast<__m128i*>(ch.q + 32 + h * 16), q1);
      for (int s = h; s < 4; s += 2) {
        for (int l = 0; l < 4; ++l) ch.d[s * 4 + l] = d;
      }
    } else {
      _mm_store_si128(reinterpret_cast<__m128i*>(ch.q + h * 32), q0);
      _mm_store_si128(reinterpret_cast<__m128i*>(ch.q + h * 32 + 16), q1);
      for (int l = 0; l < 8; ++l) ch.d[h * 8 + l] = d;
    }
    if (h == 1 || b == n_blocks - 1) {
      const __m512i sums =
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), _mm512_load_si512(ch.q));
      // c = -offset * sum; the formats with a minimum keep the sum itself.
      _mm512_store_si512(
          ch.c, Fmt::kMin ? sums : _mm512_mullo_epi32(sums, _mm512_set1_epi32(-Fmt::kOffset)));
    }
  }
}

}  // namespace

bool matmul_q_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool) {
  return quant_types_matmul<QKern, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1>(w, x, y, n_tokens, pool) ||
         matmul_k_avx512(w, x, y, n_tokens, pool);
}

}  // namespace glm::kernels::internal
