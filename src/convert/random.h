// Deterministic random numbers for generated models: the same seed gives the same bytes on every
// machine, compiler and standard library (std::normal_distribution does not promise that).
//
// The generator is counter-based: value i of a stream is a pure function of (key, i), so any
// range of a tensor can be filled independently and in any order.
//  - uniform bits: SplitMix64 (Steele, Lea, Flood 2014) of key + i * 0x9E3779B97F4A7C15;
//  - normals: Box-Muller on pair p = i / 2, using bits 2p and 2p + 1: u1 = (b >> 11 + 1) / 2^53
//    in (0, 1], u2 = (b >> 11) / 2^53 in [0, 1), r = sqrt(-2 ln u1), element 2p = r cos(2 pi u2),
//    element 2p + 1 = r sin(2 pi u2), computed in double and rounded once to float.
// Stream keys: stream_key(seed, name) = SplitMix64(seed ^ FNV-1a-64(name)), one stream per tensor.
// Header-only, pure functions; thread-safe. Cost: ~10 ns per normal.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace glm::convert {

constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;

// The SplitMix64 output function (finalizer) applied to z.
inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Bits number i of the stream `key` (SplitMix64 with state key after i + 1 steps).
inline uint64_t stream_bits(uint64_t key, uint64_t i) {
  return splitmix64_mix(key + (i + 1) * kGoldenGamma);
}

inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// The stream of one named tensor under a model seed.
inline uint64_t stream_key(uint64_t seed, std::string_view name) {
  return splitmix64_mix(seed ^ fnv1a64(name));
}

// out[k] = mean + std * N_{first + k}(key) for k in [0, n): standard normals of the stream
// (Box-Muller, see above) scaled and shifted, rounded to float.
inline void fill_normal(uint64_t key, uint64_t first, size_t n, float mean, float std_dev,
                        float* out) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  constexpr double kInv2p53 = 1.0 / 9007199254740992.0;
  size_t k = 0;
  while (k < n) {
    const uint64_t i = first + k;
    const uint64_t p = i / 2;
    const double u1 = static_cast<double>((stream_bits(key, 2 * p) >> 11) + 1) * kInv2p53;
    const double u2 = static_cast<double>(stream_bits(key, 2 * p + 1) >> 11) * kInv2p53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double a = kTwoPi * u2;
    if (i % 2 == 0) {
      out[k++] = static_cast<float>(mean + std_dev * (r * std::cos(a)));
      if (k < n) out[k++] = static_cast<float>(mean + std_dev * (r * std::sin(a)));
    } else {
      out[k++] = static_cast<float>(mean + std_dev * (r * std::sin(a)));
    }
  }
}

}  // namespace glm::convert
