// The matrix products (matmul.h) against their CPU references (kernels::matmul_ref on every
// weight type; fp16-rounded references for the tensor cores, quantize_q8's rounding for the
// integer-dot shaders), on whatever Vulkan device the machine has (lavapipe in CI; gpu_test.cc
// says why these fail rather than skip without one); the shader choice (MatmulTuning) and the
// dispatch geometry at the edges.
#include "gpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gpu/device.h"
#include "gpu/gpu_test_util.h"
#include "gpu/validation.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace glm::gpu {
namespace {

// Matmul of every weight type against matmul_ref, on shapes with odd row counts, token counts
// around the decode shader's 8-token tile and into the tiled one (a partial 128 x 64 tile; 200
// rows x 70 tokens: two tiles each way), and (for the float types) rows whose length is not a
// multiple of 32 (nor of 4: the activations read a value at a time). The decode shaders with
// each count of rows a team (a partial team at the end of 67 rows); activations that are not
// 16-byte aligned (read a value at a time) with 1 row a team and in the tiled shader, there not
// split over the row length (the aligned run splits rows of 8 chunks or more: Q4_0's 1056,
// F16's 264 with a short last chunk, the K types' 512). The 16-bit
// types' rows of 100 and 96 values: every other or every row at a 16-byte aligned address (read
// 16 bytes a part), the others a word at a time. The quantized types also through the
// integer-dot shaders where the device has them.
struct MatmulCase {
  DType type;
  int n_cols;
};

class GpuMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(GpuMatmul, EqualsReference) {
  NEED_DEVICE();
  const MatmulCase c = GetParam();
  int split_runs = 0;  // tiled runs split over the row length
  for (int n_rows : {1, 67, 200}) {
    const std::vector<float> w = random_floats(static_cast<size_t>(n_rows) * c.n_cols, 11, 0.5f);
    const std::vector<uint8_t> q = quantize_rows(c.type, w.data(), n_rows, c.n_cols);
    StatusOr<Matrix> m = upload_matrix(dev, c.type, q.data(), n_rows, c.n_cols);
    ASSERT_TRUE(m.ok()) << m.status().message();
    // 40, 70: the tiled shader, a partial token tile, two tiles.
    for (int n_tokens : n_rows == 200 ? std::vector<int>{70} : std::vector<int>{1, 8, 13, 40}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * c.n_cols, 5);
      // x after one float of padding: read from its second float with team_rows 1 and -1 (an
      // address that is not 16-byte aligned), else from the first.
      std::vector<float> padded(1, 0.0f);
      padded.insert(padded.end(), x.begin(), x.end());
      Buffer xb = device_floats(dev, x), xb_shifted = device_floats(dev, padded);
      const bool tiled = n_tokens >= MatmulTuning{}.tiled_min_tokens;
      const std::vector<int> team_rows =
          tiled ? std::vector<int>{0, -1}
                : (n_tokens == 1 ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2});
      // The shaders a run takes, each against its reference: the float ones; the integer-dot
      // ones (the quantized types' decode, where the device has them) against the reference on
      // the activations as quantize_q8 rounds them; the tiled one on tensor cores (the 16-bit
      // and quantized types; their scalar twin on a device without them) against the
      // reference on the weights and activations as fp16 rounds them.
      struct Variant {
        int dot, coop;
        std::vector<float> want;
      };
      std::vector<Variant> variants = {
          {0, 0, matmul_reference(c.type, q.data(), x.data(), n_rows, c.n_cols, n_tokens)}};
      if (m->shaders.one_dot != Shader::kCount && !tiled && dev->info().int_dot) {
        const std::vector<float> xq = device_q8_values(dev, x, n_tokens, c.n_cols);
        variants.push_back(
            {1, 0, matmul_reference(c.type, q.data(), xq.data(), n_rows, c.n_cols, n_tokens)});
      }
      if (tiled && m->shaders.coop != Shader::kCount) {
        variants.push_back(
            {0, 1, fp16_matmul_ref(c.type, q.data(), x.data(), n_rows, c.n_cols, n_tokens)});
      }
      // With 2 rows a team and in the aligned tiled run: a bias per row and y's old values
      // (-7) added as the products are written.
      const std::vector<float> bias = random_floats(n_rows, 17);
      Buffer bias_b = device_floats(dev, bias);
      std::vector<float> biased(bias), none;  // what the bias and the residual (-7) add a row
      for (float& b : biased) b -= 7.0f;
      for (int tr : team_rows) {
        for (const Variant& v : variants) {
          const bool adds = tr == 2 || tr == 0;
          SCOPED_TRACE(std::string(dtype_name(c.type)) + " rows " + std::to_string(n_rows) +
                       " tokens " + std::to_string(n_tokens) + " team_rows " + std::to_string(tr) +
                       (adds ? " with bias and residual" : "") + (v.dot ? " int dot" : "") +
                       (v.coop ? " coop" : ""));
          const Addr xa = tr == 1 || tr < 0 ? xb_shifted.address() + 4 : xb.address();
          // y with a wider stride and an offset column: [n_tokens, n_rows + 3], rows at col 2.
          const int stride = n_rows + 3;
          Buffer yb =
              device_floats(dev, std::vector<float>(static_cast<size_t>(n_tokens) * stride, -7.0f));
          Stream& s = dev->stream();
          s.begin();
          MatmulTuning tuning;
          if (tr > 0) tuning.team_rows_one = tuning.team_rows_few = tr;
          if (tr < 0) tuning.tiled_split = 0;  // the unaligned tiled run: whole rows a workgroup
          tuning.int_dot = v.dot;
          tuning.coop = v.coop;
          ASSERT_EQ(uses_int_dot(*dev, *m, n_tokens, tuning), v.dot == 1);
          if (tiled) {
            ASSERT_EQ(tiled_shader(*dev, *m, tuning),
                      v.coop == 0
                          ? m->shaders.tiled
                          : (dev->info().coop_matrix ? m->shaders.coop : m->shaders.coop_ref));
          }
          if (tiled && tiled_splits(*m, n_tokens, tuning) > 1) ++split_runs;
          MatmulOut add;
          if (adds) add = {bias_b.address(), true};
          matmul(s, *m, xa, yb.address(), n_tokens, stride, 2, add, tuning);
          ASSERT_TRUE(s.submit_and_wait().ok());
          const OutputError e =
              output_error(dev, yb, n_tokens, stride, v.want, n_rows, adds ? biased : none);
          // Only the summation order differs from the reference: f32 rounding of n_cols terms.
          EXPECT_LE(e.max_err, 2e-5 * std::sqrt(static_cast<double>(c.n_cols)) * (1 + e.max_abs));
        }
      }
    }
  }
  if (c.n_cols >= 8 * 32) {
    EXPECT_GT(split_runs, 0) << "the split tiled run was not exercised";
  }
}

// check_coop_matmul's comparison passes the tensor cores' scalar twin and fails a shader that
// decodes the weights wrongly (Q8_0's twin on F16 rows); the check verifies the tensor cores
// where the device has them (an H200's run of this test), and the prefill takes them then only.
TEST(GpuCoop, TheCheckPassesTheScalarTwinAndNotAWrongShader) {
  NEED_DEVICE();
  StatusOr<bool> twin = coop_matmul_agrees(dev, Shader::kMatmulCoopRefF16);
  ASSERT_TRUE(twin.ok()) << twin.status().message();
  EXPECT_TRUE(*twin);
  StatusOr<bool> wrong = coop_matmul_agrees(dev, Shader::kMatmulCoopRefQ8_0);
  ASSERT_TRUE(wrong.ok()) << wrong.status().message();
  EXPECT_FALSE(*wrong);
  ASSERT_TRUE(check_coop_matmul(dev).ok());
  EXPECT_EQ(dev->coop_verified(), dev->info().coop_matrix) << dev->info().features();
  MatmulTuning auto_coop, no_coop;
  no_coop.coop = 0;
  EXPECT_EQ(prefill_in_fp16(*dev, auto_coop), dev->info().coop_matrix);
  EXPECT_FALSE(prefill_in_fp16(*dev, no_coop));
}

// quantize_q8: each value is the nearest multiple of its block's d = max |x| / 127 (so the
// largest is +-127 d), an all-zero block 0 with d = 0; 3 rows of 96 values with one zero block.
TEST(GpuQuantize, EachValueIsTheNearestStepOfItsBlock) {
  NEED_DEVICE();
  const int n_rows = 3, n_cols = 96;
  std::vector<float> x = random_floats(static_cast<size_t>(n_rows) * n_cols, 23, 3.0f);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  // The last block's values fall half-way between two steps (its largest is 127, so its step
  // is 1): each goes to the even one, as quantize_q8's rule says (q8.glsl's q8_code).
  const std::vector<float> ties = {127, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f};
  const std::vector<int> tie_codes = {127, 0, 2, 2, 0, -2, -2, 126, -126};
  const size_t last = x.size() - 32;
  std::copy(ties.begin(), ties.end(), x.begin() + static_cast<std::ptrdiff_t>(last));
  const std::vector<uint32_t> words = device_q8_blocks(dev, x, n_rows, n_cols);
  ASSERT_EQ(words.size(), static_cast<size_t>(n_rows) * (n_cols / 32) * 9);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float d, amax = 0;
    std::memcpy(&d, &words[9 * b + 8], sizeof(d));
    for (size_t e = 0; e < 32; ++e) amax = std::max(amax, std::fabs(x[32 * b + e]));
    EXPECT_NEAR(d, amax / 127.0f, 1e-6f * amax) << "block " << b;
    int max_q = 0;
    for (size_t e = 0; e < 32; ++e) {
      const int q = static_cast<int8_t>(words[9 * b + e / 4] >> (8 * (e % 4)));
      max_q = std::max(max_q, std::abs(q));
      if (amax == 0) {
        EXPECT_EQ(q, 0);
      } else {
        EXPECT_LE(std::fabs(q * d - x[32 * b + e]), 0.5f * d * (1 + 1e-4f)) << b << " " << e;
      }
    }
    EXPECT_EQ(max_q, amax == 0 ? 0 : 127) << "block " << b;
  }
  for (size_t e = 0; e < tie_codes.size(); ++e) {
    const size_t i = last + e;
    EXPECT_EQ(static_cast<int8_t>(words[9 * (i / 32) + (i % 32) / 4] >> (8 * (i % 4))),
              tie_codes[e])
        << ties[e];
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, GpuMatmul,
    ::testing::Values(MatmulCase{DType::kF32, 77}, MatmulCase{DType::kF16, 77},
                      MatmulCase{DType::kF16, 100}, MatmulCase{DType::kF16, 264},
                      MatmulCase{DType::kQ4_0, 1056}, MatmulCase{DType::kBF16, 45},
                      MatmulCase{DType::kBF16, 96}, MatmulCase{DType::kQ4_0, 96},
                      MatmulCase{DType::kQ4_1, 96}, MatmulCase{DType::kQ5_0, 96},
                      MatmulCase{DType::kQ5_1, 96}, MatmulCase{DType::kQ8_0, 160},
                      MatmulCase{DType::kQ4_K, 512}, MatmulCase{DType::kQ5_K, 512},
                      MatmulCase{DType::kQ6_K, 512}),
    [](const ::testing::TestParamInfo<MatmulCase>& i) {
      return std::string(dtype_name(i.param.type)) + "_" + std::to_string(i.param.n_cols);
    });

// More row groups than one dispatch axis takes (65535; rows of 2048 values get a workgroup
// each): the groups spill into y. And a narrow matrix (one chunk a row: 64 rows a workgroup).
// Each row holds one value v_r = r % 7 + 1, exact in Q4_0 (it maps to code -8 of d = -v_r / 8).
void check_one_value_rows(Device* dev, int n_rows, int n_cols) {
  // Q4_0 blocks written directly (a float matrix of this size would take 600 MB): every code 8
  // (value 0) and d = 0, except the block holding column r % n_cols.
  const size_t rb = row_bytes(DType::kQ4_0, n_cols);
  std::vector<uint8_t> q(rb * n_rows);
  for (int r = 0; r < n_rows; ++r) {
    uint8_t* row = q.data() + rb * r;
    for (int b = 0; b < n_cols / 32; ++b) {
      kernels::BlockQ4_0 blk{};
      std::memset(blk.qs, 0x88, sizeof(blk.qs));
      const int c = r % n_cols;
      if (c / 32 == b) {
        blk.d = fp32_to_fp16(-static_cast<float>(r % 7 + 1) / 8.0f);
        const int j = c % 32;
        blk.qs[j % 16] = j < 16 ? 0x80 : 0x08;  // code 0: (0 - 8) * d = v_r
      }
      std::memcpy(row + b * sizeof(blk), &blk, sizeof(blk));
    }
  }
  StatusOr<Matrix> m = upload_matrix(dev, DType::kQ4_0, q.data(), n_rows, n_cols);
  ASSERT_TRUE(m.ok());
  Buffer xb = device_floats(dev, std::vector<float>(n_cols, 1.0f));
  Buffer yb = device_floats(dev, std::vector<float>(n_rows, 0.0f));
  Stream& s = dev->stream();
  s.begin();
  matmul(s, *m, xb.address(), yb.address(), 1);
  ASSERT_TRUE(s.submit_and_wait().ok());
  const std::vector<float> y = read_floats(dev, yb, n_rows);
  for (int r = 0; r < n_rows; ++r) ASSERT_EQ(y[r], static_cast<float>(r % 7 + 1)) << r;
}

TEST(GpuMatmulTuning, ParsesTheSettingsAndRefusesOthers) {
  MatmulTuning t;
  ASSERT_TRUE(parse_matmul_tuning("4,1,32", &t));
  EXPECT_EQ(t.team_rows_one, 4);
  EXPECT_EQ(t.team_rows_few, 1);
  EXPECT_EQ(t.tiled_min_tokens, 32);
  EXPECT_EQ(t.int_dot, -1);
  ASSERT_TRUE(parse_matmul_tuning("2,2,16,0", &t));
  EXPECT_EQ(t.int_dot, 0);
  ASSERT_TRUE(parse_matmul_tuning("2,2,16,1", &t));
  EXPECT_EQ(t.int_dot, 1);
  EXPECT_EQ(t.tiled_split, 1);
  ASSERT_TRUE(parse_matmul_tuning("2,2,16,-1,0", &t));
  EXPECT_EQ(t.int_dot, -1);
  EXPECT_EQ(t.tiled_split, 0);
  EXPECT_EQ(t.coop, -1);
  ASSERT_TRUE(parse_matmul_tuning("2,2,16,-1,1,0", &t));
  EXPECT_EQ(t.tiled_split, 1);
  EXPECT_EQ(t.coop, 0);
  ASSERT_TRUE(parse_matmul_tuning("2,2,16,-1,1,1", &t));
  EXPECT_EQ(t.coop, 1);
  EXPECT_EQ(t.fuse, 1);
  ASSERT_TRUE(parse_matmul_tuning("2,2,16,-1,1,-1,0", &t));
  EXPECT_EQ(t.coop, -1);
  EXPECT_EQ(t.fuse, 0);
  ASSERT_TRUE(parse_matmul_tuning("2,2,16,-1,1,-1,2", &t));
  EXPECT_EQ(t.fuse, 2);
  for (const char* bad : {"",
                          "4,1",
                          "4,4,32",
                          "3,1,32",
                          "4,1,1",
                          "4,1,32,",
                          "4,1,32x",
                          "a,b,c",
                          "2,2,16,2",
                          "2,2,16,1x",
                          "2,2,16,1,",
                          "2,2,16,1,2",
                          "2,2,16,1,1,",
                          "2,2,16,1,1x",
                          "2,2,16,1,1,2",
                          "2,2,16,1,1,-2",
                          "2,2,16,1,1,1,",
                          "2,2,16,1,1,1,3",
                          "2,2,16,1,1,1,-1",
                          "2,2,16,1,1,1,1,",
                          "2,2,16,1,1,1,1,1",
                          ",2,2,16",
                          "2,,2,16",
                          "99999999999,2,16"}) {
    MatmulTuning u;
    EXPECT_FALSE(parse_matmul_tuning(bad, &u)) << bad;
    EXPECT_EQ(u.team_rows_one, MatmulTuning{}.team_rows_one) << "changed by " << bad;
  }
  EXPECT_FALSE(parse_matmul_tuning(nullptr, &t));
}

// What the one- and few-token shaders take over from the ops around them (float or 8-bit; not
// the tiled shader): the norm of their input with fuse 1, the activation of their output with
// fuse 1 or 2, neither with 0.
TEST(GpuMatmulTuning, TheDecodeShadersTakeTheNormsAndActivationsByFuse) {
  MatmulTuning t;
  for (int n : {1, t.tiled_min_tokens - 1}) {
    EXPECT_TRUE(fuses_input(n, t)) << n;
    EXPECT_TRUE(fuses_activation(n, t)) << n;
  }
  EXPECT_FALSE(fuses_input(t.tiled_min_tokens, t)) << "the tiled shader";
  EXPECT_FALSE(fuses_activation(t.tiled_min_tokens, t)) << "the tiled shader";
  t.fuse = 2;
  EXPECT_FALSE(fuses_input(1, t)) << "fuse 2: the activations alone";
  EXPECT_TRUE(fuses_activation(1, t)) << "fuse 2: the activations alone";
  t.fuse = 0;
  EXPECT_FALSE(fuses_input(1, t)) << "fuse 0";
  EXPECT_FALSE(fuses_activation(1, t)) << "fuse 0";
}

TEST(GpuMatmulShape, MoreRowGroupsThanOneDispatchAxis) {
  NEED_DEVICE();
  check_one_value_rows(dev, 70000, 1056);  // 33 chunks: 64 threads, one row a workgroup
}

TEST(GpuMatmulShape, NarrowRowsShareAWorkgroup) {
  NEED_DEVICE();
  check_one_value_rows(dev, 1000, 32);
}

// GLMSERVE_VULKAN_ROLLED=1 opens a device on the rolled build of the shaders (shaders.h), "0"
// on the unrolled one (rolled all the same under the validation layer: the validated.* run),
// and both give the reference's products: the decode matmul, whose unrolled loops hold a
// thread's sums across its rows, and the tiled one.
TEST(GpuShaderBuild, RolledAndUnrolledGiveTheReferencesProducts) {
  const int n_rows = 67, n_cols = 512;
  const std::vector<float> w = random_floats(static_cast<size_t>(n_rows) * n_cols, 3, 0.5f);
  const std::vector<uint8_t> q = quantize_rows(DType::kQ4_K, w.data(), n_rows, n_cols);
  for (const char* rolled : {"0", "1"}) {
    const ScopedEnv env("GLMSERVE_VULKAN_ROLLED", rolled);
    StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
    ASSERT_TRUE(d.ok()) << d.status().message();
    Device* dev = d->get();
    EXPECT_EQ(dev->shader_build(), *rolled == '1' || validation_requested()
                                       ? ShaderBuild::kRolled
                                       : ShaderBuild::kUnrolled);
    StatusOr<Matrix> m = upload_matrix(dev, DType::kQ4_K, q.data(), n_rows, n_cols);
    ASSERT_TRUE(m.ok()) << m.status().message();
    for (int n_tokens : {1, 40}) {
      SCOPED_TRACE(std::string("GLMSERVE_VULKAN_ROLLED=") + rolled + ", tokens " +
                   std::to_string(n_tokens));
      const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * n_cols, 5);
      Buffer xb = device_floats(dev, x);
      const int stride = n_rows + 3;  // y's rows at column 2, the rest -7 (output_error)
      Buffer yb =
          device_floats(dev, std::vector<float>(static_cast<size_t>(n_tokens) * stride, -7.0f));
      Stream& s = dev->stream();
      s.begin();
      MatmulTuning tuning;
      tuning.int_dot = 0;
      tuning.coop = 0;
      matmul(s, *m, xb.address(), yb.address(), n_tokens, stride, 2, {}, tuning);
      ASSERT_TRUE(s.submit_and_wait().ok());
      const std::vector<float> want =
          matmul_reference(DType::kQ4_K, q.data(), x.data(), n_rows, n_cols, n_tokens);
      const OutputError e = output_error(dev, yb, n_tokens, stride, want, n_rows);
      EXPECT_LE(e.max_err, 2e-5 * std::sqrt(static_cast<double>(n_cols)) * (1 + e.max_abs));
    }
  }
}

// A shader the driver rejects is an error naming it, not an abort (try_pipeline): lavapipe
// rejects the tensor cores' SPIR-V. Should a driver that passed check_coop_matmul reject a
// weight type's variant, uploading such weights turns the tensor cores off (the verdict
// forced here on a device without them) and the prefill's matmul stays right.
TEST(GpuCoop, ARejectedShaderTurnsTheTensorCoresOffAtUpload) {
  NEED_DEVICE();
  if (dev->info().coop_matrix) GTEST_SKIP() << "this device runs the tensor cores' shaders";
  if (validation_requested()) {
    GTEST_SKIP() << "the validation layer reports the rejected SPIR-V, this test's point, as an "
                    "error";
  }
  EXPECT_TRUE(dev->try_pipeline(Shader::kMatmulCoopRefQ4_0).ok());
  const Status rejected = dev->try_pipeline(Shader::kMatmulCoopQ4_0);
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.message().find("matmul_coop_q4_0"), std::string::npos) << rejected.message();
  dev->set_coop_verified(true);
  const int n_rows = 70, n_cols = 96, n_tokens = 20;
  const std::vector<float> w = random_floats(static_cast<size_t>(n_rows) * n_cols, 3, 0.5f);
  const std::vector<uint8_t> q = quantize_rows(DType::kQ4_0, w.data(), n_rows, n_cols);
  StatusOr<Matrix> m = upload_matrix(dev, DType::kQ4_0, q.data(), n_rows, n_cols);
  EXPECT_FALSE(dev->coop_verified());
  dev->set_coop_verified(false);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const MatmulTuning where_verified;  // coop -1 (the coop.* variant's environment says 1)
  EXPECT_EQ(tiled_shader(*dev, *m, where_verified), m->shaders.tiled);
  const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * n_cols, 4);
  const std::vector<float> want =
      matmul_reference(DType::kQ4_0, q.data(), x.data(), n_rows, n_cols, n_tokens);
  Buffer xb = device_floats(dev, x);
  Buffer yb = device_floats(dev, std::vector<float>(want.size(), 0.0f));
  Stream& s = dev->stream();
  s.begin();
  matmul(s, *m, xb.address(), yb.address(), n_tokens, n_rows, 0, {}, where_verified);
  ASSERT_TRUE(s.submit_and_wait().ok());
  EXPECT_LT(max_rel_err(read_floats(dev, yb, want.size()), want), 1e-4);
}

}  // namespace
}  // namespace glm::gpu
