// The one- and few-token matmuls with their input's RMS norm inside them
// (MatmulInput::rms_normed) against the CPU's norm (model::ops::rms_norm) followed by
// kernels::matmul_ref, and where gpu::fuses_input says they may run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "gpu/gpu_test_util.h"
#include "gpu/ops.h"
#include "kernels/quant.h"
#include "model/ops.h"

namespace glm::gpu {
namespace {

struct FusedCase {
  DType type;
  int n_cols;
};

class GpuFusedInput : public ::testing::TestWithParam<FusedCase> {};

// The CPU's input rows: rms_norm(x, w) of each token's row. x, out: [n_tokens, n_cols].
std::vector<float> normed_rows(const std::vector<float>& x, const std::vector<float>& norm_w,
                               int n_tokens, int n_cols) {
  std::vector<float> out(static_cast<size_t>(n_tokens) * n_cols);
  for (int t = 0; t < n_tokens; ++t) {
    model::ops::rms_norm(x.data() + static_cast<size_t>(t) * n_cols, norm_w.data(), 1e-5f,
                         out.data() + static_cast<size_t>(t) * n_cols, n_cols);
  }
  return out;
}

// Rows of 1 and 67 (a partial workgroup), 1 token (the one-token shader with teams of 1, 2 and 4
// rows), 3 and 11 (the few-token shader: one partial tile of 8 tokens, and two); x read 16 bytes
// at a time and (one float past an aligned address) a value at a time; the norm's rows of very
// different sizes; a bias and a residual added with 2 rows a team. The float shaders, and
// (the quantized types, where the device has them) the 8-bit ones, whose teams quantize the
// values times the norm's weights as quantize_q8 would (their reference: those values so
// quantized, the matmul, then the norm's factor).
TEST_P(GpuFusedInput, EqualsTheOpThenTheMatmul) {
  NEED_DEVICE();
  const FusedCase c = GetParam();
  for (int n_rows : {1, 67}) {
    const std::vector<float> w = random_floats(static_cast<size_t>(n_rows) * c.n_cols, 71, 0.5f);
    const std::vector<uint8_t> q = quantize_rows(c.type, w.data(), n_rows, c.n_cols);
    StatusOr<Matrix> m = upload_matrix(dev, c.type, q.data(), n_rows, c.n_cols);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const std::vector<float> norm_w = random_floats(c.n_cols, 72);
    Buffer norm_b = device_floats(dev, norm_w);
    const std::vector<float> bias = random_floats(n_rows, 73);
    Buffer bias_b = device_floats(dev, bias);
    std::vector<float> biased(bias), none;  // what the bias and the residual (-7) add a row
    for (float& b : biased) b -= 7.0f;
    std::vector<int> dots{0};
    if (m->shaders.one_dot != Shader::kCount && dev->info().int_dot) dots.push_back(1);
    for (int n_tokens : {1, 3, 11}) {
      std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * c.n_cols, 74);
      for (size_t i = 0; i < x.size(); ++i) x[i] *= static_cast<float>(i / c.n_cols + 1) * 0.5f;
      std::vector<float> padded(1, 0.0f);
      padded.insert(padded.end(), x.begin(), x.end());
      Buffer xb = device_floats(dev, x), xb_shifted = device_floats(dev, padded);
      for (int dot : dots) {
        std::vector<float> want;
        if (dot == 0) {
          const std::vector<float> in = normed_rows(x, norm_w, n_tokens, c.n_cols);
          want = matmul_reference(c.type, q.data(), in.data(), n_rows, c.n_cols, n_tokens);
        } else {
          // x * norm_w quantized, the products, then each token's 1 / rms(x).
          std::vector<float> xw(x);
          for (size_t i = 0; i < xw.size(); ++i) xw[i] *= norm_w[i % c.n_cols];
          const std::vector<float> xq = device_q8_values(dev, xw, n_tokens, c.n_cols);
          want = matmul_reference(c.type, q.data(), xq.data(), n_rows, c.n_cols, n_tokens);
          for (int t = 0; t < n_tokens; ++t) {
            double ss = 0;
            for (int e = 0; e < c.n_cols; ++e) {
              const double v = x[static_cast<size_t>(t) * c.n_cols + e];
              ss += v * v;
            }
            const double inv_rms = 1.0 / std::sqrt(ss / c.n_cols + 1e-5);
            for (int r = 0; r < n_rows; ++r) {
              want[static_cast<size_t>(t) * n_rows + r] *= static_cast<float>(inv_rms);
            }
          }
        }
        for (int tr : n_tokens == 1 ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2}) {
          const bool adds = tr == 2;
          SCOPED_TRACE(std::string(dtype_name(c.type)) + " rows " + std::to_string(n_rows) +
                       " tokens " + std::to_string(n_tokens) + " team_rows " + std::to_string(tr) +
                       (tr == 1 ? " unaligned" : "") + (dot == 1 ? " int dot" : ""));
          const Addr xa = tr == 1 ? xb_shifted.address() + 4 : xb.address();
          const int stride = n_rows + 3;  // y [n_tokens, n_rows + 3], rows at column 2
          Buffer yb =
              device_floats(dev, std::vector<float>(static_cast<size_t>(n_tokens) * stride, -7.0f));
          MatmulTuning t;
          t.int_dot = dot;
          t.team_rows_one = t.team_rows_few = tr;
          if (tr == 4) t.team_rows_few = 2;
          ASSERT_TRUE(fuses_input(n_tokens, t));
          ASSERT_EQ(uses_int_dot(*dev, *m, n_tokens, t), dot == 1);
          const MatmulInput input = MatmulInput::rms_normed(xa, norm_b.address(), 1e-5f);
          Stream& s = dev->stream();
          s.begin();
          MatmulOut add;
          if (adds) add = {bias_b.address(), true};
          matmul(s, *m, input, yb.address(), n_tokens, stride, 2, add, t);
          ASSERT_TRUE(s.submit_and_wait().ok());
          const OutputError e =
              output_error(dev, yb, n_tokens, stride, want, n_rows, adds ? biased : none);
          // The summation order apart (and the norm's scale applied to the sums, not to each
          // value), f32 rounding of n_cols terms.
          EXPECT_LE(e.max_err, 2e-5 * std::sqrt(static_cast<double>(c.n_cols)) * (1 + e.max_abs));
        }
      }
    }
  }
}

// Rows whose length is no multiple of a 32-value chunk (F32 20: teams of 4 threads, narrower
// than lavapipe's subgroups, whose sums meet in shared memory; F32 77; F16 100, every other row
// 16-byte aligned), a row longer than a team's 64 parts a round (Q4_0 1056), the quantized
// types' blocks with an offset (Q4_K: HAS_MIN, whose offsets multiply the inputs' sums) and
// without (Q6_K).
INSTANTIATE_TEST_SUITE_P(
    Types, GpuFusedInput,
    ::testing::Values(FusedCase{DType::kF32, 20}, FusedCase{DType::kF32, 77},
                      FusedCase{DType::kF16, 100}, FusedCase{DType::kQ4_0, 1056},
                      FusedCase{DType::kQ4_K, 256}, FusedCase{DType::kQ6_K, 512}),
    [](const ::testing::TestParamInfo<FusedCase>& info) {
      return std::string(dtype_name(info.param.type)) + "_" + std::to_string(info.param.n_cols);
    });

// The 8-bit shaders' teams quantize f32 rows exactly as quantize_q8 does (fuse 1: in the teams;
// 2: by its dispatch, then read): the same products to the bit, for a token and for a few, the
// plain matmul and the experts'. (Every quantized type's teams against device_q8_values:
// GpuFusedOutput.*, whose f32 rows they quantize.)
TEST(GpuFusedInput, TheTeamsQuantizeAsQuantizeQ8Does) {
  NEED_DEVICE();
  if (!dev->info().int_dot) GTEST_SKIP() << "no integer dot products on " << dev->info().name;
  const int n_rows = 70, n_cols = 512, n_expert = 3;
  const std::vector<float> w = random_floats(static_cast<size_t>(n_expert) * n_rows * n_cols, 76);
  const std::vector<int32_t> ids{2, 0, 1};
  Buffer ids_b = device_ints(dev, ids);
  const DType type = DType::kQ4_0;
  const std::vector<uint8_t> q = quantize_rows(type, w.data(), n_expert * n_rows, n_cols);
  StatusOr<Matrix> m = upload_matrix(dev, type, q.data(), n_expert * n_rows, n_cols, true);
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (int n_tokens : {1, 3}) {
    SCOPED_TRACE(std::string(dtype_name(type)) + " tokens " + std::to_string(n_tokens));
    Buffer xb = device_floats(dev, random_floats(static_cast<size_t>(n_tokens) * n_cols, 77));
    std::vector<float> got[2][2];  // [fuse 1, 2][matmul, experts]
    for (int f = 0; f < 2; ++f) {
      MatmulTuning t;
      t.int_dot = 1;
      t.fuse = f == 0 ? 1 : 2;
      const size_t n_out = static_cast<size_t>(n_tokens) * n_expert * n_rows;
      Buffer y = device_floats(dev, std::vector<float>(n_out, 0.0f));
      Buffer ye =
          device_floats(dev, std::vector<float>(static_cast<size_t>(n_tokens) * n_rows, 0.0f));
      Stream& s = dev->stream();
      s.begin();
      matmul(s, *m, xb.address(), y.address(), n_tokens, n_expert * n_rows, 0, {}, t);
      matmul_experts(s, *m, n_rows, ids_b.address(), xb.address(), 1, ye.address(), n_tokens,
                     n_rows, 0, MatmulAct::kNone, t);
      ASSERT_TRUE(s.submit_and_wait().ok());
      got[f][0] = read_floats(dev, y, n_out);
      got[f][1] = read_floats(dev, ye, static_cast<size_t>(n_tokens) * n_rows);
    }
    EXPECT_TRUE(got[0][0] == got[1][0]) << "the matmul's products differ";
    EXPECT_TRUE(got[0][1] == got[1][1]) << "the experts' products differ";
  }
}

}  // namespace
}  // namespace glm::gpu
