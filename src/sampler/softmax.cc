#include "sampler/softmax.h"

#include <cstdint>
#include <cstring>

// The row loops are compiled twice, for AVX2 (a block of eight is one register) and for the
// baseline ISA (two SSE registers), and the first call picks one by the CPU's features (a
// plain branch, not an ifunc: those run before the sanitizers' runtimes start). Both compute
// every lane with the same IEEE operations in the same order (no fused multiply-adds: ISO C++
// mode contracts none), so their results are identical.
#if defined(__x86_64__)
#define GLM_AVX2 __attribute__((target("avx2")))
#else
#define GLM_AVX2
#endif

// Eight-lane vectors, only inside this file's always-inlined helpers (never an argument of a
// call between functions, so their ABI under either ISA does not matter; GCC warns at the end
// of the file, hence no pop).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace glm::sampler {
namespace {

// GCC's and Clang's vector extensions: each lane computes exactly what the scalar code would.
using F8 = float __attribute__((vector_size(32)));
using U8 = uint32_t __attribute__((vector_size(32)));
using F4 = float __attribute__((vector_size(16)));
using D4 = double __attribute__((vector_size(32)));

constexpr float kLog2e = 1.44269504f;
constexpr float kLn2Hi = 0.693359375f;        // ln 2 in 10 bits: n * kLn2Hi is exact for |n| < 2^14
constexpr float kLn2Lo = -2.12194440e-4f;     // ln 2 - kLn2Hi
constexpr float kRound = 12582912.0f;         // 1.5 * 2^23: adding it rounds to an integer
constexpr uint32_t kRoundBits = 0x4B400000u;  // the bits of kRound
constexpr float kZeroBelow = -87.0f;          // exp(-87) ~ 1.6e-38, near the smallest normal float

// exp(d), d <= 0, a lane at a time: d = n ln 2 + r with n an integer and |r| <= ln 2 / 2, then
// exp(r) by its Taylor series to r^7 (error < 6e-9 relative) times 2^n built in the exponent
// bits; 0 below kZeroBelow (-inf included); NaN stays NaN (it compares false). Written once for
// the vector and the scalar type, so they agree bit for bit.
template <typename F, typename U>
[[gnu::always_inline]] inline F exp_lanes(F d) {
  const F t = d * kLog2e + kRound;  // n + 1.5 * 2^23: n in the low mantissa bits
  const F n = t - kRound;
  const F r = (d - n * kLn2Hi) - n * kLn2Lo;
  F p = r * (1.0f / 5040) + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n: n + 127 in the exponent bits (n >= -126 above kZeroBelow; below it, and for -inf or
  // NaN, the bits wrap harmlessly in unsigned arithmetic and the select below drops them).
  U t_bits;
  std::memcpy(&t_bits, &t, sizeof(t_bits));
  const U scale_bits = (t_bits - kRoundBits + 127u) << 23;
  F scale;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  const F zero = {};
  return d < kZeroBelow ? zero : p * scale;
}

// One block of eight: exp(in * scale - max), added to the float accumulator's lanes, and
// stored to out when it is not null.
[[gnu::always_inline]] inline void exp_block(const float* in, float scale, float max, float* out,
                                             F8* acc) {
  F8 x;
  std::memcpy(&x, in, sizeof(x));
  const F8 r = exp_lanes<F8, U8>(x * scale - max);
  if (out != nullptr) std::memcpy(out, &r, sizeof(r));
  *acc += r;
}

// Blocks of eight summed in float lanes a chunk of kChunk blocks at a time (a register's add a
// block, not a conversion and a double add through memory), each chunk's lanes then added to
// the double lanes lo (0-3) and hi (4-7).
constexpr int kChunk = 32;
[[gnu::always_inline]] inline void exp_chunks(const float* x, int n_blocks, float scale, float max,
                                              float* e, D4* lo, D4* hi) {
  for (int b = 0; b < n_blocks; b += kChunk) {
    const int end = b + kChunk < n_blocks ? b + kChunk : n_blocks;
    F8 acc = {};
    for (int k = b; k < end; ++k) exp_block(x + 8 * k, scale, max, e ? e + 8 * k : nullptr, &acc);
    const F4 a_lo = __builtin_shufflevector(acc, acc, 0, 1, 2, 3);
    const F4 a_hi = __builtin_shufflevector(acc, acc, 4, 5, 6, 7);
    *lo += __builtin_convertvector(a_lo, D4);
    *hi += __builtin_convertvector(a_hi, D4);
  }
}

[[gnu::always_inline]] inline double exp_shifted_row(const float* x, int n, float scale, float max,
                                                     float* e) {
  D4 lo = {}, hi = {};
  const int n_blocks = n / 8;
  if (e != nullptr) {
    exp_chunks(x, n_blocks, scale, max, e, &lo, &hi);
  } else {
    exp_chunks(x, n_blocks, scale, max, nullptr, &lo, &hi);
  }
  const int i = 8 * n_blocks;
  if (i < n) {  // the tail, padded with -inf (exp 0, adding nothing)
    float in[8], out[8];
    for (int k = 0; k < 8; ++k) in[k] = i + k < n ? x[i + k] : -__builtin_inff();
    exp_chunks(in, 1, scale, max, out, &lo, &hi);
    for (int k = 0; e != nullptr && i + k < n; ++k) e[i + k] = out[k];
  }
  return ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
}

[[gnu::always_inline]] inline int gather_near_row(const float* x, int n, float scale, float max,
                                                  float min_d, int32_t* ids, int max_ids) {
  int count = 0;
  auto take = [&](int i) {  // false once there are too many
    if (!(x[i] * scale - max >= min_d)) return true;
    if (count == max_ids) return false;
    ids[count++] = i;
    return true;
  };
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    F8 v;
    std::memcpy(&v, x + i, sizeof(v));
    const U8 hit = (U8)(v * scale - max >= min_d);  // all ones where it passes
    uint64_t any[4];
    std::memcpy(any, &hit, sizeof(any));
    if ((any[0] | any[1] | any[2] | any[3]) == 0) continue;  // the common block: none passes
    for (int k = 0; k < 8; ++k) {
      if (!take(i + k)) return -1;
    }
  }
  for (; i < n; ++i) {
    if (!take(i)) return -1;
  }
  return count;
}

double exp_shifted_base(const float* x, int n, float scale, float max, float* e) {
  return exp_shifted_row(x, n, scale, max, e);
}
GLM_AVX2 double exp_shifted_avx2(const float* x, int n, float scale, float max, float* e) {
  return exp_shifted_row(x, n, scale, max, e);
}
int gather_near_base(const float* x, int n, float scale, float max, float min_d, int32_t* ids,
                     int max_ids) {
  return gather_near_row(x, n, scale, max, min_d, ids, max_ids);
}
GLM_AVX2 int gather_near_avx2(const float* x, int n, float scale, float max, float min_d,
                              int32_t* ids, int max_ids) {
  return gather_near_row(x, n, scale, max, min_d, ids, max_ids);
}

bool use_avx2() {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#else
  return false;
#endif
}

}  // namespace

float max_value(const float* values, int n) {
  float m[8];
  for (float& v : m) v = values[0];
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) m[k] = m[k] < values[i + k] ? values[i + k] : m[k];
  }
  for (; i < n; ++i) m[0] = m[0] < values[i] ? values[i] : m[0];
  float best = m[0];
  for (int k = 1; k < 8; ++k) best = best < m[k] ? m[k] : best;
  return best;
}

float exp_nonpositive(float d) { return exp_lanes<float, uint32_t>(d); }

double exp_shifted(const float* x, int n, float scale, float max, float* e) {
  return use_avx2() ? exp_shifted_avx2(x, n, scale, max, e) : exp_shifted_base(x, n, scale, max, e);
}

int gather_near(const float* x, int n, float scale, float max, float min_d, int32_t* ids,
                int max_ids) {
  return use_avx2() ? gather_near_avx2(x, n, scale, max, min_d, ids, max_ids)
                    : gather_near_base(x, n, scale, max, min_d, ids, max_ids);
}

}  // namespace glm::sampler
