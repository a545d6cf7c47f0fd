// The one- and few-token matmuls with an activation of their output (MatmulOut::act: GELU of
// each product, SwiGLU of gate and up row pairs) against kernels::matmul_ref, the bias, then the
// CPU's op (model::ops), then the residual; in the float shaders and the integer-dot ones, and
// where gpu::fuses_activation says they may run.
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

struct ActCase {
  DType type;
  int n_cols;
};

class GpuFusedOutput : public ::testing::TestWithParam<ActCase> {};

// The CPU's output of `act` over products p [n_tokens, n_rows] (biased already): gelu_tanh of
// each, or swiglu of each row pair (r, n_rows / 2 + r): [n_tokens, n_out].
std::vector<float> activated(MatmulAct act, std::vector<float> p, int n_tokens, int n_rows) {
  if (act == MatmulAct::kGelu) {
    model::ops::gelu_tanh(p.data(), static_cast<int64_t>(p.size()));
    return p;
  }
  const int h = n_rows / 2;
  std::vector<float> out(static_cast<size_t>(n_tokens) * h);
  for (int t = 0; t < n_tokens; ++t) {
    const float* row = p.data() + static_cast<size_t>(t) * n_rows;
    model::ops::swiglu(row, row + h, out.data() + static_cast<size_t>(t) * h, h);
  }
  return out;
}

// Matrices of 2 and 134 rows (one gate-and-up pair; 67 pairs, a partial workgroup), 1 token (the
// one-token shader with teams of 1, 2 and 4 rows: a pair takes 2 at least), 3 and 11 (the
// few-token shader: a partial tile of 8 tokens, and two); the float shaders and, where the device
// has integer dot products, the 8-bit ones (their reference: the activations as quantize_q8
// rounds them); a bias and a residual with 2 rows a team.
TEST_P(GpuFusedOutput, EqualsTheMatmulThenTheActivation) {
  NEED_DEVICE();
  const ActCase c = GetParam();
  for (int n_rows : {2, 134}) {
    const std::vector<float> w = random_floats(static_cast<size_t>(n_rows) * c.n_cols, 81, 0.5f);
    const std::vector<uint8_t> q = quantize_rows(c.type, w.data(), n_rows, c.n_cols);
    StatusOr<Matrix> m = upload_matrix(dev, c.type, q.data(), n_rows, c.n_cols);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const std::vector<float> bias = random_floats(n_rows, 82);
    Buffer bias_b = device_floats(dev, bias);
    for (int n_tokens : {1, 3, 11}) {
      std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * c.n_cols, 83);
      for (size_t i = 0; i < x.size(); ++i) x[i] *= static_cast<float>(i / c.n_cols + 1) * 0.5f;
      Buffer xb = device_floats(dev, x);
      std::vector<int> dots{0};
      if (m->shaders.one_dot != Shader::kCount && dev->info().int_dot) dots.push_back(1);
      for (int dot : dots) {
        const std::vector<float> xq = dot == 1 ? device_q8_values(dev, x, n_tokens, c.n_cols) : x;
        const std::vector<float> products =
            matmul_reference(c.type, q.data(), xq.data(), n_rows, c.n_cols, n_tokens);
        for (MatmulAct act : {MatmulAct::kGelu, MatmulAct::kSwigluPairs}) {
          const int n_out = act == MatmulAct::kSwigluPairs ? n_rows / 2 : n_rows;
          for (int tr : n_tokens == 1 ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2}) {
            const bool adds = tr == 2;
            SCOPED_TRACE(std::string(dtype_name(c.type)) + " rows " + std::to_string(n_rows) +
                         " tokens " + std::to_string(n_tokens) + " team_rows " +
                         std::to_string(tr) + (dot == 1 ? " int dot" : "") +
                         (act == MatmulAct::kGelu ? " gelu" : " swiglu pairs"));
            std::vector<float> biased = products;
            if (adds) {
              for (size_t i = 0; i < biased.size(); ++i) biased[i] += bias[i % n_rows];
            }
            const std::vector<float> want = activated(act, biased, n_tokens, n_rows);
            const int stride = n_out + 3;  // y [n_tokens, n_out + 3], outputs at column 2
            Buffer yb = device_floats(
                dev, std::vector<float>(static_cast<size_t>(n_tokens) * stride, -7.0f));
            MatmulTuning t;
            t.int_dot = dot;
            t.team_rows_one = t.team_rows_few = tr;
            if (tr == 4) t.team_rows_few = 2;
            ASSERT_TRUE(fuses_activation(n_tokens, t));
            ASSERT_EQ(uses_int_dot(*dev, *m, n_tokens, t), dot == 1);
            MatmulOut out;
            out.act = act;
            if (adds) {
              out.bias = bias_b.address();
              out.to_y = true;
            }
            Stream& s = dev->stream();
            s.begin();
            matmul(s, *m, xb.address(), yb.address(), n_tokens, stride, 2, out, t);
            ASSERT_TRUE(s.submit_and_wait().ok());
            const OutputError e = output_error(dev, yb, n_tokens, stride, want, n_out,
                                               std::vector<float>(adds ? n_out : 0, -7.0f));
            // The summation order apart, f32 rounding of n_cols terms (through an activation
            // whose slope is at most about 1.1, times the up value for SwiGLU).
            EXPECT_LE(e.max_err, 4e-5 * std::sqrt(static_cast<double>(c.n_cols)) * (1 + e.max_abs));
          }
        }
      }
    }
  }
}

// Rows shorter than a chunk (F32 20: teams of 4 threads whose sums meet in shared memory), a row
// longer than a team's 64 parts a round (Q4_0 1056), blocks with offsets (Q4_K) and without
// (Q6_K), 16-bit weights (F16 100).
INSTANTIATE_TEST_SUITE_P(Types, GpuFusedOutput,
                         ::testing::Values(ActCase{DType::kF32, 20}, ActCase{DType::kF16, 100},
                                           ActCase{DType::kQ4_0, 1056}, ActCase{DType::kQ4_K, 256},
                                           ActCase{DType::kQ6_K, 512}),
                         [](const ::testing::TestParamInfo<ActCase>& info) {
                           return std::string(dtype_name(info.param.type)) + "_" +
                                  std::to_string(info.param.n_cols);
                         });

// The experts' matmul with SwiGLU pairs: each slot's expert's gate rows then up rows, in the
// float and 8-bit shaders, against each slot's matmul_ref then swiglu.
TEST(GpuFusedOutput, TheExpertsTakeTheirSwigluPairs) {
  NEED_DEVICE();
  const int n_expert = 3, rows = 2 * 37, n_cols = 256, n_tokens = 2, k = 2;
  const int slots = n_tokens * k;
  const std::vector<float> w =
      random_floats(static_cast<size_t>(n_expert) * rows * n_cols, 84, 0.5f);
  const DType type = DType::kQ4_0;
  const std::vector<uint8_t> q = quantize_rows(type, w.data(), n_expert * rows, n_cols);
  StatusOr<Matrix> m = upload_matrix(dev, type, q.data(), n_expert * rows, n_cols, true);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * n_cols, 85);
  Buffer xb = device_floats(dev, x);
  const std::vector<int32_t> ids{2, 0, 1, 2};
  Buffer ids_b = device_ints(dev, ids);
  std::vector<int> dots{0};
  if (dev->info().int_dot) dots.push_back(1);
  for (int dot : dots) {
    SCOPED_TRACE(dot == 1 ? "int dot" : "float");
    const std::vector<float> xq = dot == 1 ? device_q8_values(dev, x, n_tokens, n_cols) : x;
    const int h = rows / 2;
    Buffer yb = device_floats(dev, std::vector<float>(static_cast<size_t>(slots) * h, -7.0f));
    MatmulTuning t;
    t.int_dot = dot;
    Stream& s = dev->stream();
    s.begin();
    matmul_experts(s, *m, rows, ids_b.address(), xb.address(), k, yb.address(), slots, h, 0,
                   MatmulAct::kSwigluPairs, t);
    ASSERT_TRUE(s.submit_and_wait().ok());
    const std::vector<float> got = read_floats(dev, yb, static_cast<size_t>(slots) * h);
    for (int sl = 0; sl < slots; ++sl) {
      const uint8_t* expert = q.data() + static_cast<size_t>(ids[sl]) * rows * m->row_bytes;
      const std::vector<float> p = matmul_reference(
          type, expert, xq.data() + static_cast<size_t>(sl / k) * n_cols, rows, n_cols, 1);
      const std::vector<float> want = activated(MatmulAct::kSwigluPairs, p, 1, rows);
      for (int r = 0; r < h; ++r) {
        ASSERT_NEAR(got[static_cast<size_t>(sl) * h + r], want[r], 1e-3 * (1 + std::fabs(want[r])))
            << "slot " << sl << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace glm::gpu
