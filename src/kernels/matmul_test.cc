#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/internal.h"
#include "kernels/isa.h"
#include "kernels/packed.h"
#include "kernels/quant.h"
#include "kernels/test_util.h"

namespace glm::kernels {
namespace {

using testing::random_floats;
using testing::runnable_isas;
using testing::ScopedAvxVnni;
using testing::ScopedIsa;

struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // [n_rows, n_cols] the stored values as f32
  WeightView view;
};

Weights make_weights(DType t, int64_t n_rows, int64_t n_cols, uint32_t seed) {
  Weights w;
  const auto src = random_floats(static_cast<size_t>(n_rows * n_cols), seed);
  const size_t rb = row_bytes(t, n_cols);
  w.bytes.resize(rb * n_rows);
  w.deq.resize(src.size());
  for (int64_t r = 0; r < n_rows; ++r) {
    quantize_row_ref(t, src.data() + r * n_cols, w.bytes.data() + r * rb, n_cols);
    dequantize_row_ref(t, w.bytes.data() + r * rb, w.deq.data() + r * n_cols, n_cols);
  }
  w.view = {t, w.bytes.data(), n_rows, n_cols};
  return w;
}

// Activations as the variant sees them: quantized per act_block (internal.h) or unchanged.
std::vector<float> effective_x(const std::vector<float>& x, int64_t n_cols, int block) {
  if (block == 0) return x;
  std::vector<float> out(x.size());
  std::vector<int8_t> q(n_cols);
  std::vector<float> d(n_cols / block);
  for (size_t t = 0; t < x.size() / n_cols; ++t) {
    internal::quantize_act_ref(x.data() + t * n_cols, n_cols, block, q.data(), d.data());
    for (int64_t i = 0; i < n_cols; ++i) out[t * n_cols + i] = q[i] * d[i / block];
  }
  return out;
}

// Worst-case f32 rounding of an n-term dot product computed in any order (gamma_n), for both
// the kernel and the reference: 2 * n * 2^-24 * sum |w_i x_i|, plus a few ulps of the result.
float rounding_bound(const float* w, const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(w[i]) * x[i]);
  return static_cast<float>(2.0 * (n + 8) * std::ldexp(1.0, -24) * s) + 1e-30f;
}

const DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                        DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                        DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

void check(DType t, int64_t n_rows, int64_t n_cols, int64_t n_tokens, ThreadPool* pool) {
  SCOPED_TRACE(::testing::Message() << dtype_name(t) << " rows=" << n_rows << " cols=" << n_cols
                                    << " tokens=" << n_tokens);
  const Weights w = make_weights(t, n_rows, n_cols, static_cast<uint32_t>(n_rows * 31 + n_cols));
  // Activations with a spread of magnitudes, like hidden states.
  auto x = random_floats(static_cast<size_t>(n_tokens * n_cols), 7 + n_tokens, -1, 1);
  for (size_t i = 0; i < x.size(); i += 37) x[i] *= 6.0f;
  for (Isa isa : runnable_isas()) {
    ScopedIsa scoped(isa);
    const std::vector<float> xe = effective_x(x, n_cols, internal::act_block(isa, t));
    std::vector<float> want(n_tokens * n_rows);
    matmul_ref(w.view, xe.data(), want.data(), n_tokens);
    // The row-major kernel, then the packed one (packed.h) where this ISA has it for t.
    const PackedWeight packed = PackedWeight::pack(w.view, pool);
    for (bool use_packed : {false, true}) {
      if (use_packed && packed.empty()) continue;
      WeightView view = w.view;
      if (use_packed) packed.attach(&view);
      std::vector<float> got(n_tokens * n_rows, NAN);
      matmul(view, x.data(), got.data(), n_tokens, pool);
      for (int64_t tk = 0; tk < n_tokens; ++tk) {
        for (int64_t r = 0; r < n_rows; ++r) {
          const float tol =
              rounding_bound(w.deq.data() + r * n_cols, xe.data() + tk * n_cols, n_cols);
          ASSERT_NEAR(got[tk * n_rows + r], want[tk * n_rows + r], tol)
              << "isa=" << isa_name(isa) << " packed=" << use_packed << " token=" << tk
              << " row=" << r;
        }
      }
    }
  }
}

TEST(MatmulTest, PackedLayoutsExistWhereExpected) {
  // Guards the test above against silently skipping the packed kernels: AVX2 and AVX-512 pack
  // the same eight types (one copy serves both), scalar packs nothing.
  if (cpu_isa() == Isa::kScalar) GTEST_SKIP() << "packed kernels need AVX2";
  for (Isa isa : runnable_isas()) {
    ScopedIsa scoped(isa);
    for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kF16, DType::kBF16, DType::kQ5_0,
                    DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
      const Weights w = make_weights(t, 37, 256, 1);
      const PackedWeight p = PackedWeight::pack(w.view, nullptr);
      if (isa == Isa::kScalar) {
        EXPECT_TRUE(p.empty()) << dtype_name(t);
        continue;
      }
      ASSERT_FALSE(p.empty()) << dtype_name(t) << " " << isa_name(isa);
      EXPECT_EQ(p.n_rows(), 32);
    }
    // The legacy types with a minimum (Q4_1, Q5_1) have no packed layout.
    for (DType t : {DType::kQ4_1, DType::kQ5_1}) {
      const Weights w = make_weights(t, 37, 256, 1);
      EXPECT_TRUE(PackedWeight::pack(w.view, nullptr).empty()) << dtype_name(t);
    }
  }
}

TEST(MatmulTest, VectorVariantsHaveIntegerKernelsForTheirTypes) {
  // Guards the reference test against a variant silently handing a type to the generic path
  // (act_block 0): both run Q8_0 / Q4_0 / Q5_0 / Q4_1 / Q5_1 (the fallback type of Q5_K_M
  // files' ffn_down) per 32 values and every k-quant per 256.
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ4_1, DType::kQ5_1}) {
    EXPECT_EQ(internal::act_block(Isa::kAvx2, t), 32) << dtype_name(t);
  }
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    EXPECT_EQ(internal::act_block(Isa::kAvx2, t), 256) << dtype_name(t);
  }
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ4_1, DType::kQ5_1}) {
    EXPECT_EQ(internal::act_block(Isa::kAvx512, t), 32) << dtype_name(t);
  }
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    EXPECT_EQ(internal::act_block(Isa::kAvx512, t), 256) << dtype_name(t);
  }
}

TEST(MatmulTest, Avx2PackedAndRowMajorQuantsAreBitIdentical) {
  // The AVX2 row-major Q4_0 / Q5_0 / Q8_0 kernel (tails after the last group of 16, --repack 0)
  // sums like the packed one, so repacking changes no result at all: a rounding difference would
  // flip an activation's int8 rounding now and then in the next layer (seen in a model test).
  if (cpu_isa() == Isa::kScalar) GTEST_SKIP() << "needs AVX2";
  ScopedIsa scoped(Isa::kAvx2);
  ThreadPool pool(2);
  for (DType t : {DType::kQ4_0, DType::kQ5_0, DType::kQ8_0}) {
    for (int64_t n_tokens : {1, 3, 7, 12}) {
      const Weights w = make_weights(t, 53, 320, 9);
      const auto x = random_floats(static_cast<size_t>(n_tokens * 320), 4, -2, 2);
      const PackedWeight p = PackedWeight::pack(w.view, &pool);
      ASSERT_FALSE(p.empty());
      WeightView packed = w.view;
      p.attach(&packed);
      std::vector<float> a(n_tokens * 53), b(n_tokens * 53);
      matmul(packed, x.data(), a.data(), n_tokens, &pool);
      matmul(w.view, x.data(), b.data(), n_tokens, &pool);
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i], b[i]) << dtype_name(t) << " tokens=" << n_tokens << " i=" << i;
      }
    }
  }
}

TEST(MatmulTest, PackedCopyUnpacksToTheOriginalRows) {
  if (cpu_isa() == Isa::kScalar) GTEST_SKIP() << "packed kernels need AVX2";
  ScopedIsa scoped(Isa::kAvx2);  // packs the same layouts as AVX-512
  ThreadPool pool(2);
  for (DType t : {DType::kQ4_0, DType::kQ5_0, DType::kQ8_0, DType::kF16, DType::kBF16, DType::kQ4_K,
                  DType::kQ5_K, DType::kQ6_K}) {
    for (int64_t n_cols : {32, 96, 768, 4096}) {
      if (n_cols % dtype_info(t).block_size != 0) continue;
      const Weights w = make_weights(t, 53, n_cols, 5);
      const PackedWeight p = PackedWeight::pack(w.view, &pool);
      ASSERT_EQ(p.n_rows(), 48);
      const size_t rb = row_bytes(t, n_cols);
      std::vector<uint8_t> row(rb);
      for (int64_t r = 0; r < p.n_rows(); ++r) {
        unpack_row(p, t, n_cols, r, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), w.bytes.data() + r * rb, rb))
            << dtype_name(t) << " cols=" << n_cols << " row=" << r;
      }
    }
  }
}

TEST(MatmulTest, EveryTypeAndVariantMatchesReferenceOverOddShapes) {
  ThreadPool pool(2);
  for (DType t : kTypes) {
    const int64_t bs = dtype_info(t).block_size;
    const int64_t unit = bs == 1 ? 32 : bs;
    for (int64_t n_cols : {unit, 3 * unit, 5 * unit}) {
      for (int64_t n_rows : {1, 7, 16, 37}) {
        for (int64_t n_tokens : {1, 2, 3, 5, 7, 8, 9, 11, 17})
          check(t, n_rows, n_cols, n_tokens, &pool);
      }
    }
  }
}

TEST(MatmulTest, LargeShapesWithThreads) {
  ThreadPool pool(2);
  for (DType t : kTypes) {
    check(t, 67, 1024, 1, &pool);
    check(t, 67, 1024, 6, nullptr);
    // An odd number of groups of 16 on one thread: the packed prefill's two-group tiles
    // (packed_avx512.cc: tile2) and the one-group tile after them.
    check(t, 53, 256, 5, nullptr);
    // Rows longer than a column panel of the packed float kernels (1024), with more tokens than
    // one tile (8): partial sums carried over panels.
    if (dtype_info(t).block_size == 1) check(t, 50, 2048 + 96, 11, &pool);
  }
}

TEST(MatmulTest, AvxVnniPackedKernelsAreBitIdenticalToAvx2AndRun) {
  // packed_avxvnni.cc is packed_avx2.cc with vpdpbusd for the blocks' integer dot products: the
  // same sums, so the same outputs to the bit (the odd-shapes test checks it against the
  // reference, running with AVX-VNNI on where the CPU has it).
  if (!cpu_has_avxvnni()) GTEST_SKIP() << "this CPU has no AVX-VNNI: " << cpu_isa_description();
  ScopedIsa scoped(Isa::kAvx2);
  ThreadPool pool(2);
  for (DType t : {DType::kQ4_0, DType::kQ5_0, DType::kQ8_0}) {
    for (int64_t n_cols : {32, 96, 1024}) {
      for (int64_t n_tokens : {1, 3, 6, 17}) {
        SCOPED_TRACE(::testing::Message()
                     << dtype_name(t) << " cols=" << n_cols << " tokens=" << n_tokens);
        const Weights w = make_weights(t, 53, n_cols, static_cast<uint32_t>(n_cols + 5));
        auto x = random_floats(static_cast<size_t>(n_tokens * n_cols), 13, -1, 1);
        for (size_t i = 0; i < x.size(); i += 23) x[i] *= 5.0f;
        const PackedWeight p = PackedWeight::pack(w.view, &pool);
        WeightView view = w.view;
        p.attach(&view);
        std::vector<float> on(n_tokens * 53), off(n_tokens * 53);
        const int64_t calls = internal::avxvnni_calls();
        {
          ScopedAvxVnni vnni(true);
          matmul(view, x.data(), on.data(), n_tokens, &pool);
        }
        EXPECT_EQ(internal::avxvnni_calls(), calls + 1);
        {
          ScopedAvxVnni vnni(false);
          matmul(view, x.data(), off.data(), n_tokens, &pool);
        }
        EXPECT_EQ(internal::avxvnni_calls(), calls + 1);
        ASSERT_EQ(0, std::memcmp(on.data(), off.data(), on.size() * sizeof(float)));
      }
    }
  }
}

TEST(MatmulTest, ActivationQuantizationIsBoundedByHalfAStep) {
  // The contract the integer kernels rely on: |x - q d| <= d / 2, q in [-127, 127].
  const auto x = random_floats(512, 3, -5, 5);
  for (int block : {32, 256}) {
    std::vector<int8_t> q(512);
    std::vector<float> d(512 / block);
    internal::quantize_act_ref(x.data(), 512, block, q.data(), d.data());
    for (int i = 0; i < 512; ++i) {
      EXPECT_LE(std::abs(static_cast<int>(q[i])), 127);
      EXPECT_LE(std::fabs(x[i] - q[i] * d[i / block]), d[i / block] * 0.5f * (1 + 1e-6f));
    }
  }
  std::vector<float> zeros(32, 0.0f);
  std::vector<int8_t> q(32, 1);
  float d = 1;
  internal::quantize_act_ref(zeros.data(), 32, 32, q.data(), &d);
  EXPECT_EQ(d, 0.0f);
  for (int8_t v : q) EXPECT_EQ(v, 0);
}

}  // namespace
}  // namespace glm::kernels
