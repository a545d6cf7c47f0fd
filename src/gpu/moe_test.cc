// The mixture-of-experts shaders against their CPU references: the experts' matmul
// (matmul.comp's IDS) against kernels::matmul_ref of each slot's expert, the routing
// (moe_route.comp) against model::route_token, the weighted sum (moe_combine.comp) against the
// sum written out here. On lavapipe in CI, like every GPU test.
#include "model/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/gpu_test_util.h"
#include "gpu/ops.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "model/config.h"
#include "model/ops.h"

namespace glm::gpu {
namespace {

struct ExpertsCase {
  DType type;
  int n_cols;
};

class GpuMoeExperts : public ::testing::TestWithParam<ExpertsCase> {};

// n_expert random experts of `rows` rows stacked, quantized to `type`: the bytes (the
// reference's) and the matrix on the device.
struct Stacked {
  std::vector<uint8_t> bytes;
  size_t row_bytes = 0;
  StatusOr<Matrix> matrix = Status(ErrorCode::kInternal, "not made");
};
Stacked stacked_experts(Device* dev, const ExpertsCase& c, int n_expert, int rows, uint32_t seed) {
  Stacked st;
  st.row_bytes = row_bytes(c.type, c.n_cols);
  const std::vector<float> w = random_floats(static_cast<size_t>(n_expert) * rows * c.n_cols, seed);
  st.bytes = quantize_rows(c.type, w.data(), n_expert * rows, c.n_cols);
  st.matrix = upload_matrix(dev, c.type, st.bytes.data(), n_expert * rows, c.n_cols);
  return st;
}

// The products of slot s of x (row s / x_div) with its expert ids[s]: want [n_slots, rows]; with
// fp16, of the weights and activations as fp16 rounds them (matmul_coop.comp).
std::vector<float> expected_products(const Stacked& st, const ExpertsCase& c, int rows,
                                     const std::vector<int32_t>& ids, const std::vector<float>& x,
                                     int x_div, bool fp16 = false) {
  std::vector<float> want;
  for (size_t s = 0; s < ids.size(); ++s) {
    const uint8_t* w = st.bytes.data() + st.row_bytes * rows * ids[s];
    const float* xs = x.data() + s / x_div * c.n_cols;
    const std::vector<float> y = fp16 ? fp16_matmul_ref(c.type, w, xs, rows, c.n_cols, 1)
                                      : matmul_reference(c.type, w, xs, rows, c.n_cols, 1);
    want.insert(want.end(), y.begin(), y.end());
  }
  return want;
}

// 5 experts of 13 rows stacked; 4 tokens of k = 3 slots (ids with repeats, every expert but
// one), read as the gate/up projections read them (x_div 3: a token's row for its 3 slots) and
// as the down projection does (x_div 1: a row a slot), with each count of rows a team.
TEST_P(GpuMoeExperts, EachSlotGetsItsExpertsProducts) {
  NEED_DEVICE();
  const ExpertsCase c = GetParam();
  const int n_expert = 5, rows = 13, k = 3, n_tokens = 4, n_slots = n_tokens * k;
  Stacked experts = stacked_experts(dev, c, n_expert, rows, 3);
  StatusOr<Matrix>& m = experts.matrix;
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<int32_t> ids = {4, 0, 2, 2, 0, 1, 4, 2, 0, 1, 1, 2};
  Buffer ids_b = device_ints(dev, ids);
  for (int x_div : {k, 1}) {
    const int x_rows = n_slots / x_div;
    const std::vector<float> x = random_floats(static_cast<size_t>(x_rows) * c.n_cols, 7 + x_div);
    Buffer xb = device_floats(dev, x);
    // y [n_slots, 2 rows + 1], the products at column rows + 1 (an up half after a gate half).
    const int stride = 2 * rows + 1, col = rows + 1;
    // The integer-dot shader too (where the device has it), against the reference on the
    // activations as quantize_q8 rounds them.
    const bool has_dot = m->shaders.experts_dot != Shader::kCount;  // the quantized types
    const int n_dots = has_dot && dev->info().int_dot ? 2 : 1;
    const std::vector<float> want_float = expected_products(experts, c, rows, ids, x, x_div);
    const std::vector<float> want_dot =
        n_dots > 1 ? expected_products(experts, c, rows, ids,
                                       device_q8_values(dev, x, x_rows, c.n_cols), x_div)
                   : want_float;
    for (int i = 0; i < 3 * n_dots; ++i) {
      const int tr = 1 << (i % 3), dot = i / 3;
      const std::vector<float>& want = dot ? want_dot : want_float;
      SCOPED_TRACE(std::string(dtype_name(c.type)) + " x_div " + std::to_string(x_div) +
                   " team_rows " + std::to_string(tr) + (dot ? " int dot" : ""));
      Buffer yb =
          device_floats(dev, std::vector<float>(static_cast<size_t>(n_slots) * stride, -7.0f));
      MatmulTuning tuning;
      tuning.team_rows_one = tr;
      tuning.int_dot = dot;
      ASSERT_EQ(uses_int_dot(*dev, *m, 1, tuning), dot == 1);
      Stream& st = dev->stream();
      st.begin();
      matmul_experts(st, *m, rows, ids_b.address(), xb.address(), x_div, yb.address(), n_slots,
                     stride, col, MatmulAct::kNone, tuning);
      ASSERT_TRUE(st.submit_and_wait().ok());
      const std::vector<float> got = read_floats(dev, yb, static_cast<size_t>(n_slots) * stride);
      double max_err = 0, max_abs = 0;
      for (int s = 0; s < n_slots; ++s) {
        for (int r = 0; r < rows; ++r) {
          const float e = want[static_cast<size_t>(s) * rows + r];
          max_err = std::max(
              max_err,
              static_cast<double>(std::fabs(got[static_cast<size_t>(s) * stride + col + r] - e)));
          max_abs = std::max(max_abs, static_cast<double>(std::fabs(e)));
        }
        for (int cc = 0; cc < col; ++cc) {
          ASSERT_EQ(got[static_cast<size_t>(s) * stride + cc], -7.0f) << "wrote outside";
        }
      }
      EXPECT_LE(max_err, 2e-5 * std::sqrt(static_cast<double>(c.n_cols)) * (1 + max_abs));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, GpuMoeExperts,
    ::testing::Values(ExpertsCase{DType::kF32, 77}, ExpertsCase{DType::kF16, 100},
                      ExpertsCase{DType::kQ4_0, 96}, ExpertsCase{DType::kQ8_0, 160},
                      ExpertsCase{DType::kQ4_K, 512}, ExpertsCase{DType::kQ6_K, 256}),
    [](const ::testing::TestParamInfo<ExpertsCase>& i) {
      return std::string(dtype_name(i.param.type));
    });

// The prefill's path: the slots grouped by expert (moe_group), then each expert's rows read once
// per 64 of its slots (matmul_tiled.comp's IDS; matmul_coop.comp's too, on tensor cores or in
// its scalar twin, against the products of fp16-rounded weights and activations). 100 tokens of
// k = 2: every token chooses expert 0 (100 slots: two token tiles), its other slot one of
// experts 1-3, expert 4 none; 131 rows an expert (two row tiles, the second partial).
TEST_P(GpuMoeExperts, GroupedSlotsGetTheirExpertsProducts) {
  NEED_DEVICE();
  const ExpertsCase c = GetParam();
  const int n_expert = 5, rows = 131, k = 2, n_tokens = 100, n_slots = n_tokens * k;
  Stacked experts = stacked_experts(dev, c, n_expert, rows, 4);
  StatusOr<Matrix>& m = experts.matrix;
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<int32_t> ids(n_slots);
  for (int t = 0; t < n_tokens; ++t) {
    ids[t * k + (t % 2)] = 0;
    ids[t * k + 1 - (t % 2)] = 1 + t % 3;
  }
  Buffer ids_b = device_ints(dev, ids);
  Buffer counts_b = device_ints(dev, std::vector<int32_t>(n_expert, -1));
  Buffer slots_b =
      device_ints(dev, std::vector<int32_t>(static_cast<size_t>(n_expert) * n_tokens, -1));
  ExpertGroups g;
  g.slots = slots_b.address();
  g.counts = counts_b.address();
  g.n_expert = n_expert;
  g.cap = n_tokens;
  const std::vector<int> coops =
      m->shaders.coop != Shader::kCount ? std::vector<int>{0, 1} : std::vector<int>{0};
  for (int i = 0; i < 2 * static_cast<int>(coops.size()); ++i) {
    const int x_div = i % 2 == 0 ? k : 1, coop = coops[i / 2];
    SCOPED_TRACE(std::string(dtype_name(c.type)) + " x_div " + std::to_string(x_div) +
                 (coop ? " coop" : ""));
    MatmulTuning tuning;
    tuning.coop = coop;
    ASSERT_EQ(tiled_shader(*dev, *m, tuning, true),
              coop == 0 ? m->shaders.experts_tiled
                        : (dev->info().coop_matrix ? m->shaders.experts_coop
                                                   : m->shaders.experts_coop_ref));
    const std::vector<float> x =
        random_floats(static_cast<size_t>(n_slots / x_div) * c.n_cols, 9 + x_div);
    Buffer xb = device_floats(dev, x);
    const int stride = rows + 3, col = 2;
    Buffer yb =
        device_floats(dev, std::vector<float>(static_cast<size_t>(n_slots) * stride, -7.0f));
    Stream& st = dev->stream();
    st.begin();
    moe_group(st, ids_b.address(), n_slots, g);
    matmul_experts_grouped(st, *m, rows, g, xb.address(), x_div, yb.address(), stride, col, tuning);
    ASSERT_TRUE(st.submit_and_wait().ok());
    // The groups: each expert's count, and its list a permutation of its slots.
    std::vector<int32_t> counts(n_expert), slots(static_cast<size_t>(n_expert) * n_tokens);
    ASSERT_TRUE(dev->download(counts_b, 0, counts.size() * 4, counts.data()).ok());
    ASSERT_TRUE(dev->download(slots_b, 0, slots.size() * 4, slots.data()).ok());
    EXPECT_EQ(counts, std::vector<int32_t>({100, 34, 33, 33, 0}));
    for (int e = 0; e < n_expert; ++e) {
      std::vector<int32_t> got(slots.begin() + e * n_tokens,
                               slots.begin() + e * n_tokens + std::max(counts[e], 0));
      std::sort(got.begin(), got.end());
      std::vector<int32_t> want;
      for (int s = 0; s < n_slots; ++s) {
        if (ids[s] == e) want.push_back(s);
      }
      EXPECT_EQ(got, want) << "expert " << e;
    }
    const std::vector<float> got = read_floats(dev, yb, static_cast<size_t>(n_slots) * stride);
    double max_err = 0, max_abs = 0;
    const std::vector<float> products =
        expected_products(experts, c, rows, ids, x, x_div, coop == 1);
    for (int s = 0; s < n_slots; ++s) {
      const float* want = products.data() + static_cast<size_t>(s) * rows;
      for (int r = 0; r < rows; ++r) {
        max_err = std::max(max_err, static_cast<double>(std::fabs(
                                        got[static_cast<size_t>(s) * stride + col + r] - want[r])));
        max_abs = std::max(max_abs, static_cast<double>(std::fabs(want[r])));
      }
      for (int cc : {0, 1, stride - 1}) {
        ASSERT_EQ(got[static_cast<size_t>(s) * stride + cc], -7.0f) << "wrote outside";
      }
    }
    EXPECT_LE(max_err, 2e-5 * std::sqrt(static_cast<double>(c.n_cols)) * (1 + max_abs));
  }
}

// More slots than one dispatch axis takes (65535): the host splits them at whole tokens. Each
// of 2 one-row experts holds the value e + 1 in every column, x row t holds t + 1: slot s of
// token t = s / 3 gets 32 (e + 1)(t + 1), exact in f32.
TEST(GpuMoe, MoreSlotsThanOneDispatchAxisTakes) {
  NEED_DEVICE();
  const int n_cols = 32, k = 3, n_tokens = 21846, n_slots = n_tokens * k;  // 65538 slots
  std::vector<float> w(2 * n_cols);
  for (int i = 0; i < n_cols; ++i) w[i] = 1, w[n_cols + i] = 2;
  StatusOr<Matrix> m = upload_matrix(dev, DType::kF32, w.data(), 2, n_cols);
  ASSERT_TRUE(m.ok());
  std::vector<int32_t> ids(n_slots);
  for (int s = 0; s < n_slots; ++s) ids[s] = (s * 7 / 3) % 2;
  std::vector<float> x(static_cast<size_t>(n_tokens) * n_cols);
  for (int t = 0; t < n_tokens; ++t) {
    for (int i = 0; i < n_cols; ++i) x[static_cast<size_t>(t) * n_cols + i] = (t % 1000) + 1;
  }
  Buffer ids_b = device_ints(dev, ids), xb = device_floats(dev, x);
  Buffer yb = device_floats(dev, std::vector<float>(n_slots, 0.0f));
  Stream& st = dev->stream();
  st.begin();
  matmul_experts(st, *m, 1, ids_b.address(), xb.address(), k, yb.address(), n_slots, 1, 0);
  ASSERT_TRUE(st.submit_and_wait().ok());
  const std::vector<float> got = read_floats(dev, yb, n_slots);
  int wrong = 0;
  for (int s = 0; s < n_slots; ++s) {
    const float want =
        32.0f * static_cast<float>(ids[s] + 1) * static_cast<float>(s / k % 1000 + 1);
    if (got[s] != want && ++wrong <= 3)
      ADD_FAILURE() << "slot " << s << ": " << got[s] << " != " << want;
  }
  EXPECT_EQ(wrong, 0);
}

model::Config moe_config(int n_expert, int k, bool norm, float scale) {
  model::Config c;
  c.moe.n_expert = n_expert;
  c.moe.n_expert_used = k;
  c.moe.weights_norm = norm;
  c.moe.weights_scale = scale;
  return c;
}

// Every token's experts and weights as route_token chooses them: the biased top-k in order, the
// unbiased weights normalized and scaled; a tie between two experts goes to the lower id; the
// largest k the shader takes; no bias and no normalization.
TEST(GpuMoe, RoutingEqualsRouteToken) {
  NEED_DEVICE();
  struct Case {
    int n_expert, k;
    bool bias, norm;
    float scale;
  };
  for (const Case& cs : {Case{37, 5, true, true, 2.5f}, Case{128, kMaxMoeExperts, true, true, 1.0f},
                         Case{8, 2, false, false, 1.0f}, Case{200, 8, true, false, 0.5f}}) {
    SCOPED_TRACE("experts " + std::to_string(cs.n_expert) + " k " + std::to_string(cs.k));
    const int n_tokens = 7;
    const model::Config config = moe_config(cs.n_expert, cs.k, cs.norm, cs.scale);
    std::vector<float> logits =
        random_floats(static_cast<size_t>(n_tokens) * cs.n_expert, 21, 2.0f);
    std::vector<float> bias = random_floats(cs.n_expert, 22, 0.1f);
    // Token 0: experts 3 and 6 tie for the top (the same logit, and a bias above any other's
    // score + bias).
    logits[6] = logits[3] = 9.0f;
    bias[6] = bias[3] = 1.0f;
    Buffer lb = device_floats(dev, logits), bb = device_floats(dev, bias);
    Buffer ids_b = device_floats(dev, std::vector<float>(static_cast<size_t>(n_tokens) * cs.k, 0));
    Buffer wb = device_floats(dev, std::vector<float>(static_cast<size_t>(n_tokens) * cs.k, 0));
    MoeRouteArgs a;
    a.logits = lb.address();
    a.bias = cs.bias ? bb.address() : 0;
    a.ids = ids_b.address();
    a.weights = wb.address();
    a.n_tokens = n_tokens;
    a.n_expert = cs.n_expert;
    a.k = cs.k;
    a.norm = cs.norm;
    a.scale = cs.scale;
    Stream& st = dev->stream();
    st.begin();
    moe_route(st, a);
    ASSERT_TRUE(st.submit_and_wait().ok());
    std::vector<int32_t> ids(static_cast<size_t>(n_tokens) * cs.k);
    ASSERT_TRUE(dev->download(ids_b, 0, ids.size() * sizeof(int32_t), ids.data()).ok());
    const std::vector<float> weights = read_floats(dev, wb, ids.size());
    for (int t = 0; t < n_tokens; ++t) {
      const model::Route r =
          model::route_token(logits.data() + static_cast<size_t>(t) * cs.n_expert,
                             cs.bias ? bias.data() : nullptr, config);
      for (int j = 0; j < cs.k; ++j) {
        EXPECT_EQ(ids[static_cast<size_t>(t) * cs.k + j], r.experts[j]) << "token " << t;
        EXPECT_NEAR(weights[static_cast<size_t>(t) * cs.k + j], r.weights[j],
                    1e-5f * (1 + std::fabs(r.weights[j])));
      }
      if (t == 0) {
        EXPECT_EQ(ids[0], 3);
        EXPECT_EQ(ids[1], 6);
      }
    }
  }
}

// x[t] += sum_j weights[t, j] y[t k + j], the rest of x untouched.
TEST(GpuMoe, CombineAddsEachTokensWeightedSlots) {
  NEED_DEVICE();
  const int n_tokens = 5, k = 3, d = 70;
  const std::vector<float> y = random_floats(static_cast<size_t>(n_tokens) * k * d, 31);
  const std::vector<float> w = random_floats(static_cast<size_t>(n_tokens) * k, 32);
  const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * d + 1, 33);
  Buffer yb = device_floats(dev, y), wb = device_floats(dev, w), xb = device_floats(dev, x);
  Stream& st = dev->stream();
  st.begin();
  moe_combine(st, yb.address(), wb.address(), xb.address(), n_tokens, k, d);
  ASSERT_TRUE(st.submit_and_wait().ok());
  std::vector<float> want = x;
  for (int t = 0; t < n_tokens; ++t) {
    for (int c = 0; c < d; ++c) {
      float s = 0;
      for (int j = 0; j < k; ++j) {
        s += w[static_cast<size_t>(t) * k + j] * y[(static_cast<size_t>(t) * k + j) * d + c];
      }
      want[static_cast<size_t>(t) * d + c] += s;
    }
  }
  EXPECT_LT(max_rel_err(read_floats(dev, xb, x.size()), want), 1e-6);
}

}  // namespace
}  // namespace glm::gpu
