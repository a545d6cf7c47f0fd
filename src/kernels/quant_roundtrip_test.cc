// Reference quant formats, statistically: (b) round-trip error bounds derived from each format
// over random data (odd block counts, all-zero, constant, huge and tiny blocks); (c) dot_row_ref
// against a double-precision dot of the dequantized row; (d) RMS error per type on N(0, 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "kernels/quant.h"

namespace glm::kernels {
namespace {

constexpr DType kAllTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,
                               DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                               DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K};

// Data sets, each a whole number of 256-element super-blocks (so every format can take them),
// with an odd number of blocks for every block size.
std::vector<std::pair<std::string, std::vector<float>>> data_sets() {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto gen = [&](int n, auto f) {
    std::vector<float> v(n);
    for (int i = 0; i < n; ++i) v[i] = f(i);
    return v;
  };
  out.emplace_back("normal", gen(256 * 3, [&](int) { return normal(rng); }));
  out.emplace_back("uniform", gen(256 * 5, [&](int) { return uni(rng); }));
  out.emplace_back("zeros", std::vector<float>(256, 0.0f));
  out.emplace_back("constant+", std::vector<float>(256, 0.75f));
  out.emplace_back("constant-", std::vector<float>(256, -3.0f));
  out.emplace_back("huge", gen(256, [&](int) { return 1000.0f * normal(rng); }));
  out.emplace_back("tiny", gen(256, [&](int) { return 1e-3f * normal(rng); }));
  out.emplace_back("outlier", gen(256, [&](int i) { return i == 77 ? 40.0f : normal(rng); }));
  out.emplace_back("positive", gen(256, [&](int) { return 2.0f + uni(rng); }));
  out.emplace_back("mixed scales", gen(256 * 3, [&](int i) {
                     return normal(rng) * std::ldexp(1.0f, (i / 32) % 7 - 3);
                   }));
  return out;
}

std::vector<float> round_trip(DType t, const std::vector<float>& x, std::vector<uint8_t>* q) {
  const int64_t n = static_cast<int64_t>(x.size());
  q->assign(row_bytes(t, n), 0);
  quantize_row_ref(t, x.data(), q->data(), n);
  std::vector<float> y(x.size());
  dequantize_row_ref(t, q->data(), y.data(), n);
  return y;
}

uint16_t half_at(const std::vector<uint8_t>& q, size_t at) {
  return static_cast<uint16_t>(q[at] | (q[at + 1] << 8));
}

// |stored - exact| for a scale stored as fp16: half an ulp (2^-11 relative) or, below the
// normal range, half the subnormal step 2^-25.
float fp16_error(float v) { return std::max(std::fabs(v) * 0x1p-11f, 0x1p-25f); }

// (b) for the 32-element formats: the bound follows from the encoder's definition of d (and m)
// and from rounding each value to the nearest code, plus the fp16 rounding of the scales.
void check_legacy_block(DType t, const float* x, const std::vector<uint8_t>& q, size_t blk,
                        const float* y, const std::string& what) {
  const size_t size = dtype_info(t).type_size;
  const size_t at = blk * size;
  float amax = 0.0f, max = 0.0f, lo = x[0], hi = x[0];
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d_stored = fp16_to_fp32(half_at(q, at));
  for (int j = 0; j < 32; ++j) {
    float bound = 0.0f;
    switch (t) {
      case DType::kQ8_0: {
        const float d = amax / 127.0f;
        bound = d / 2 + 127 * fp16_error(d);
        break;
      }
      case DType::kQ4_0:
      case DType::kQ5_0: {
        const int half = t == DType::kQ4_0 ? 8 : 16;
        const float d = std::fabs(max) / static_cast<float>(half);
        // Codes run from -half to half - 1: a value of the opposite sign to max and the same
        // magnitude needs +half and is clamped, a full step off.
        const bool clamped = max != 0.0f && x[j] / (max / -half) > half - 0.5f;
        bound = (clamped ? d : d / 2) + half * fp16_error(d);
        break;
      }
      case DType::kQ4_1:
      case DType::kQ5_1: {
        const int qmax = t == DType::kQ4_1 ? 15 : 31;
        const float d = (hi - lo) / static_cast<float>(qmax);
        bound = d / 2 + qmax * fp16_error(d) + fp16_error(lo);
        break;
      }
      default:
        FAIL();
    }
    ASSERT_LE(std::fabs(y[j] - x[j]), bound * 1.0001f + 1e-30f)
        << what << " element " << j << " x=" << x[j] << " y=" << y[j] << " d=" << d_stored;
  }
}

// (b) for the k-quants: every value decodes to the grid point of its sub-block that is
// nearest to it (the grid is read from the block: scales, mins, d, dmin).
void check_k_block(DType t, const float* x, const std::vector<uint8_t>& q, size_t blk,
                   const float* y, const std::string& what) {
  const uint8_t* b = q.data() + blk * dtype_info(t).type_size;
  for (int i = 0; i < 256; ++i) {
    float best = INFINITY;
    auto consider = [&](float g) { best = std::min(best, std::fabs(g - x[i])); };
    if (t == DType::kQ4_K || t == DType::kQ5_K) {
      const float d = fp16_to_fp32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
      const float dmin = fp16_to_fp32(static_cast<uint16_t>(b[2] | (b[3] << 8)));
      int sc, m;
      unpack_scale_min_k4(i / 32, b + 4, &sc, &m);
      const int nmax = t == DType::kQ4_K ? 15 : 31;
      for (int c = 0; c <= nmax; ++c) consider(d * sc * c - dmin * m);
    } else if (t == DType::kQ6_K) {
      const float d = fp16_to_fp32(static_cast<uint16_t>(b[208] | (b[209] << 8)));
      const int sc = static_cast<int8_t>(b[192 + i / 16]);
      for (int c = -32; c <= 31; ++c) consider(d * sc * c);
    } else {  // Q8_K
      float d;
      std::memcpy(&d, b, 4);
      for (int c = -128; c <= 127; ++c) consider(d * c);
    }
    const float tol = 1e-6f * (std::fabs(x[i]) + std::fabs(y[i])) + 1e-30f;
    ASSERT_LE(std::fabs(y[i] - x[i]), best + tol) << what << " element " << i;
  }
  if (t == DType::kQ8_K) {
    BlockQ8_K blk8;
    std::memcpy(&blk8, b, sizeof(blk8));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blk8.qs[16 * g + i];
      ASSERT_EQ(blk8.bsums[g], sum);
    }
  }
}

TEST(QuantRoundTrip, ErrorBoundsPerFormat) {
  for (const auto& [name, x] : data_sets()) {
    for (DType t : kAllTypes) {
      std::vector<uint8_t> q;
      const std::vector<float> y = round_trip(t, x, &q);
      const std::string what = std::string(dtype_name(t)) + " on " + name;
      const int bs = dtype_info(t).block_size;
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << what;
        float bound = INFINITY;  // the quantized formats are checked per block below
        if (t == DType::kF32) bound = 0.0f;
        if (t == DType::kF16) bound = fp16_error(x[i]);
        if (t == DType::kBF16) bound = std::fabs(x[i]) * 0x1p-8f;
        ASSERT_LE(std::fabs(y[i] - x[i]), bound) << what << " element " << i;
      }
      for (size_t blk = 0; blk < x.size() / bs; ++blk) {
        const float* xb = x.data() + blk * bs;
        const float* yb = y.data() + blk * bs;
        if (bs == 32) check_legacy_block(t, xb, q, blk, yb, what);
        if (bs == 256) check_k_block(t, xb, q, blk, yb, what);
      }
      if (name == "zeros") {
        for (float v : y) ASSERT_EQ(v, 0.0f) << what;
      }
    }
  }
}

TEST(QuantRoundTrip, ConstantBlocksAreNearlyExact) {
  // One value repeated: every format can place a grid point on it up to its scale rounding.
  for (float c : {0.75f, -3.0f, 40.0f}) {
    const std::vector<float> x(256, c);
    for (DType t : kAllTypes) {
      std::vector<uint8_t> q;
      const std::vector<float> y = round_trip(t, x, &q);
      for (float v : y) {
        EXPECT_NEAR(v, c, std::fabs(c) * 0x1p-7f) << dtype_name(t) << " constant " << c;
      }
    }
  }
}

TEST(QuantRoundTrip, DotRowMatchesDequantizedDot) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (DType t : kAllTypes) {
    for (int64_t n : {256, 256 * 3, 256 * 11}) {
      std::vector<float> w(n), x(n);
      for (auto& v : w) v = normal(rng);
      for (auto& v : x) v = normal(rng);
      std::vector<uint8_t> q;
      const std::vector<float> y = round_trip(t, w, &q);
      double ref = 0.0, mag = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        ref += static_cast<double>(y[i]) * x[i];
        mag += std::fabs(static_cast<double>(y[i]) * x[i]);
      }
      const float got = dot_row_ref(t, q.data(), x.data(), n);
      // f32 accumulation of n products: error <= n * 2^-24 * sum |terms| (loose), 1e-5 rel.
      EXPECT_NEAR(got, ref, 1e-5 * mag + 1e-6) << dtype_name(t) << " n=" << n;
    }
  }
  // Float formats also take lengths that are not a multiple of 32.
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<float> w(45), x(45);
    for (int i = 0; i < 45; ++i) {
      w[i] = static_cast<float>(i % 7) - 3.0f;
      x[i] = 0.5f * static_cast<float>(i % 5);
    }
    std::vector<uint8_t> q;
    round_trip(t, w, &q);
    double ref = 0.0;
    for (int i = 0; i < 45; ++i) ref += static_cast<double>(w[i]) * x[i];  // exact in all 3
    EXPECT_EQ(dot_row_ref(t, q.data(), x.data(), 45), static_cast<float>(ref)) << dtype_name(t);
  }
}

TEST(QuantRoundTrip, RmsErrorOnNormalData) {
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256 * 256);
  for (auto& v : x) v = normal(rng);
  auto rms = [&](DType t) {
    std::vector<uint8_t> q;
    const std::vector<float> y = round_trip(t, x, &q);
    double e = 0.0;
    for (size_t i = 0; i < x.size(); ++i) e += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
    return std::sqrt(e / static_cast<double>(x.size()));
  };
  // Upper bounds: the rounding error of a uniform grid is step / sqrt(12); with the step set
  // by a 32-value block's range (~4.3 sigma for N(0,1)), Q8_0 ~ 4.3/254/sqrt(12) = 0.0049,
  // Q4_0 ~ 4.3/16/sqrt(12) = 0.078 (more: the largest value sits on the grid's edge). The
  // k-quants must beat the legacy format of the same width.
  struct Row {
    DType t;
    double bound;
  };
  const Row rows[] = {{DType::kBF16, 0.0025}, {DType::kF16, 0.0003},  {DType::kQ8_0, 0.0060},
                      {DType::kQ8_K, 0.0080}, {DType::kQ6_K, 0.0190}, {DType::kQ5_K, 0.0380},
                      {DType::kQ5_1, 0.0400}, {DType::kQ5_0, 0.0460}, {DType::kQ4_K, 0.0750},
                      {DType::kQ4_1, 0.0830}, {DType::kQ4_0, 0.0920}};
  std::map<DType, double> got;
  for (const Row& r : rows) {
    got[r.t] = rms(r.t);
    std::printf("rms %-5s %.5f (bound %.4f)\n", dtype_name(r.t), got[r.t], r.bound);
    EXPECT_LT(got[r.t], r.bound) << dtype_name(r.t);
  }
  EXPECT_LT(got[DType::kQ8_0], got[DType::kQ6_K]);
  EXPECT_LT(got[DType::kQ6_K], got[DType::kQ5_K]);
  EXPECT_LT(got[DType::kQ5_K], got[DType::kQ4_K]);
  EXPECT_LT(got[DType::kQ5_K], got[DType::kQ5_1]);
  EXPECT_LT(got[DType::kQ5_1], got[DType::kQ5_0]);
  EXPECT_LT(got[DType::kQ4_K], got[DType::kQ4_1]);
  EXPECT_LT(got[DType::kQ4_1], got[DType::kQ4_0]);
}

TEST(QuantRoundTrip, NonFiniteInputDoesNotCrash) {
  // Garbage in, garbage out, but no undefined behaviour (UBSan) and no crash.
  std::vector<float> x(256, 1.0f);
  x[3] = NAN;
  x[9] = INFINITY;
  x[10] = -INFINITY;
  for (DType t : kAllTypes) {
    std::vector<uint8_t> q;
    round_trip(t, x, &q);
  }
}

}  // namespace
}  // namespace glm::kernels
