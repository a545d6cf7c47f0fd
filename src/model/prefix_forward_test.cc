// Transformer::forward with a P-Tuning v2 prefix against a float64 forward written here from
// ChatGLM2/3's modeling_chatglm.py (docs/adapters.md#p-tuning-v2): the prefix K/V enter every
// layer's attention as given (no rotary), every query sees all of them, the sequence's own
// tokens keep positions from 0 and their causal mask. Also: batches mixing prefixed and plain
// sequences, and that the prefix costs no prefill and no KV blocks of the sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "model/adapter.h"
#include "model/gpu_test_util.h"
#include "model/kv_pool.h"
#include "model/prefix_test_util.h"
#include "model/ptuning.h"
#include "model/ptuning_test_util.h"
#include "model/test_util.h"

namespace glm::model {
namespace {

using testing::linear;
using testing::max_diff;
using testing::run;
using testing::temp_path;

// A tiny chatglm model (f32 weights) and a P-Tuning adapter for it, loaded.
struct Fixture : testing::PrefixFixture {
  explicit Fixture(bool projection)
      : PrefixFixture(model_spec(), prefix_spec(projection),
                      projection ? "pf_model_proj" : "pf_model") {}
  static testing::RandomSpec model_spec() {
    testing::RandomSpec spec;
    spec.n_vocab = 50;
    spec.n_embd = 64;
    spec.n_ff = 40;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;  // head_dim 16, kv_dim 32 (Q8_0 rows need a multiple of 32), n_rot 8
    spec.std = 0.3f;
    spec.seed = 11;
    return spec;
  }
  static testing::PtuningSpec prefix_spec(bool projection) {
    testing::PtuningSpec ps;
    ps.n_layer = 2;
    ps.kv_dim = 32;
    ps.pre_seq_len = 5;
    ps.projection = projection;
    ps.std = 0.8f;  // prefix keys large enough to move the attention visibly
    return ps;
  }
};

std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + 1e-5);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// ChatGLM2's rotary on one head: the first n_rot dims in interleaved pairs, angle
// pos * base^(-2i / n_rot) (position ids from 0, as get_position_ids gives them).
void rope(double* head, int n_rot, int pos) {
  for (int i = 0; i < n_rot / 2; ++i) {
    const double a = pos * std::pow(10000.0, -2.0 * i / n_rot);
    const double x0 = head[2 * i], x1 = head[2 * i + 1];
    head[2 * i] = x0 * std::cos(a) - x1 * std::sin(a);
    head[2 * i + 1] = x1 * std::cos(a) + x0 * std::sin(a);
  }
}

// Logits of every position of `tokens`, float64; prefix: null = the base model.
std::vector<std::vector<double>> reference_forward(const Fixture& fx,
                                                   const std::vector<int32_t>& tokens,
                                                   const PrefixKv* prefix) {
  const testing::RandomSpec& s = fx.spec;
  const int d = s.n_embd, hd = d / s.n_head, kd = s.n_head_kv * hd, qd = s.n_head * hd;
  const int n_rot = hd / 2, T = static_cast<int>(tokens.size()), group = s.n_head / s.n_head_kv;
  const int P = prefix != nullptr ? prefix->n_tokens : 0;
  const std::vector<double> emb = fx.tensor("token_embd.weight");
  std::vector<std::vector<double>> x(T);
  for (int t = 0; t < T; ++t) {
    x[t].assign(emb.begin() + static_cast<size_t>(tokens[t]) * d,
                emb.begin() + static_cast<size_t>(tokens[t] + 1) * d);
  }
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const auto qkv_w = fx.tensor(b + "attn_qkv.weight"), qkv_b = fx.tensor(b + "attn_qkv.bias");
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (int t = 0; t < T; ++t) {
      const auto y = linear(qkv_w, rms_norm(x[t], fx.tensor(b + "attn_norm.weight")), &qkv_b);
      q[t].assign(y.begin(), y.begin() + qd);
      k[t].assign(y.begin() + qd, y.begin() + qd + kd);
      v[t].assign(y.begin() + qd + kd, y.end());
      for (int h = 0; h < s.n_head; ++h) rope(q[t].data() + h * hd, n_rot, t);
      for (int h = 0; h < s.n_head_kv; ++h) rope(k[t].data() + h * hd, n_rot, t);
    }
    // Keys of query t: the prefix's P rows of this layer (mask all ones), then its own [0, t].
    auto key = [&](int j, int i) {
      return j < P ? double{prefix->k[(static_cast<size_t>(l) * P + j) * kd + i]} : k[j - P][i];
    };
    auto val = [&](int j, int i) {
      return j < P ? double{prefix->v[(static_cast<size_t>(l) * P + j) * kd + i]} : v[j - P][i];
    };
    const auto wo = fx.tensor(b + "attn_output.weight");
    for (int t = 0; t < T; ++t) {
      std::vector<double> att(qd);
      for (int h = 0; h < s.n_head; ++h) {
        const int e0 = (h / group) * hd;
        const int n_keys = P + t + 1;
        std::vector<double> sc(n_keys);
        double mx = -1e300;
        for (int j = 0; j < n_keys; ++j) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * key(j, e0 + i);
          sc[j] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (double& e : sc) sum += (e = std::exp(e - mx));
        for (int i = 0; i < hd; ++i) {
          double acc = 0;
          for (int j = 0; j < n_keys; ++j) acc += sc[j] * val(j, e0 + i);
          att[h * hd + i] = acc / sum;
        }
      }
      const auto o = linear(wo, att);
      for (int i = 0; i < d; ++i) x[t][i] += o[i];
    }
    const auto up_w = fx.tensor(b + "ffn_up.weight"), down_w = fx.tensor(b + "ffn_down.weight");
    for (int t = 0; t < T; ++t) {
      const auto up = linear(up_w, rms_norm(x[t], fx.tensor(b + "ffn_norm.weight")));
      std::vector<double> act(s.n_ff);
      for (int i = 0; i < s.n_ff; ++i) {
        const double g = up[i];
        act[i] = g / (1 + std::exp(-g)) * up[s.n_ff + i];
      }
      const auto down = linear(down_w, act);
      for (int i = 0; i < d; ++i) x[t][i] += down[i];
    }
  }
  std::vector<std::vector<double>> logits(T);
  const auto out_w = fx.tensor("output.weight"), norm = fx.tensor("output_norm.weight");
  for (int t = 0; t < T; ++t) logits[t] = linear(out_w, rms_norm(x[t], norm));
  return logits;
}
TEST(PrefixForwardTest, PrefillAndDecodeMatchTheFloat64Reference) {
  for (bool projection : {false, true}) {
    SCOPED_TRACE(projection ? "with projection" : "embedding only");
    Fixture fx(projection);
    ASSERT_FALSE(fx.adapter.prefix.empty());
    const std::vector<int32_t> prompt = {3, 17, 5, 42, 9, 1, 30};
    const std::vector<int32_t> decode = {8, 49, 0};
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), decode.begin(), decode.end());
    const auto want = reference_forward(fx, all, &fx.adapter.prefix);
    const auto got = run(*fx.model, prompt, decode, &fx.adapter);
    // f32 products over 40-64 terms and attention over <= 15 keys: ~1e-5 of logits ~1.
    EXPECT_LT(max_diff(got, want), 2e-4);
    // The prefix matters: the base model's logits are far from these.
    const auto base = reference_forward(fx, all, nullptr);
    EXPECT_GT(max_diff(got, base), 1e-2);
    EXPECT_LT(max_diff(run(*fx.model, prompt, decode, nullptr), base), 2e-4);
    // Quantized KV rows (the prefix stays f32 beside them): within Q8_0's error, the same
    // error as the base model's run with Q8_0 rows, and far closer to the prefixed reference
    // than the base model is.
    const double q8_err = max_diff(run(*fx.model, prompt, decode, &fx.adapter, DType::kQ8_0), want);
    const double base_q8_err =
        max_diff(run(*fx.model, prompt, decode, nullptr, DType::kQ8_0), base);
    EXPECT_LT(q8_err, 2 * base_q8_err + 0.05);
    EXPECT_LT(q8_err, 0.1 * max_diff(got, base));
  }
}

TEST(PrefixForwardTest, BatchMixingPrefixedAndPlainEqualsEachAlone) {
  testing::expect_batch_equals_each_alone(Fixture(true), /*prompt_prefix=*/false);
}

TEST(PrefixForwardTest, PrefixCostsNoPrefillAndNoKvBlocks) {
  testing::expect_prefix_costs_no_prefill(Fixture(false), /*prompt_prefix=*/false);
}

// On the GPU (the prefix's rows on the device in the cache's type, attended first by
// attention.comp): the logits of a prefixed prompt and its decode equal the CPU's, whole and
// with layer 0 on the CPU (--gpu-layers 1); with an f16 cache within f16's rounding of the
// prefix (the CPU keeps it f32); a batch mixing prefixed and plain equals each alone.
TEST(PrefixForwardTest, OnTheGpuEqualsTheCpu) {
  Fixture fx(true);
  const std::vector<int32_t> prompt = {3, 17, 5, 42, 9, 1, 30};
  const std::vector<int32_t> decode = {8, 49, 0};
  auto load_gpu = [&](int gpu_layers) {
    auto m = testing::load_on_gpu(temp_path("pf_model_proj.gguf"), gpu_layers);
    if (m.ok()) {
      EXPECT_EQ(testing::gpu_layers_of(**m), gpu_layers < 0 ? 2 : gpu_layers);
    }
    return m;
  };
  auto diff = [](const std::vector<std::vector<float>>& a,
                 const std::vector<std::vector<float>>& b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t r = 0; r < std::min(a.size(), b.size()); ++r) {
      for (size_t i = 0; i < a[r].size(); ++i)
        m = std::max(m, double(std::fabs(a[r][i] - b[r][i])));
    }
    return m;
  };
  const auto want = run(*fx.model, prompt, decode, &fx.adapter);
  const auto base = run(*fx.model, prompt, decode, nullptr);
  for (int gpu_layers : {-1, 1}) {
    SCOPED_TRACE(gpu_layers < 0 ? "whole" : "split");
    auto gpu = load_gpu(gpu_layers);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    EXPECT_LT(diff(run(**gpu, prompt, decode, &fx.adapter), want), 1e-4);
    EXPECT_LT(diff(run(**gpu, prompt, decode, nullptr), base), 1e-4);
  }
  auto gpu = load_gpu(-1);
  ASSERT_TRUE(gpu.ok());
  const double f16_err = diff(run(**gpu, prompt, decode, &fx.adapter, DType::kF16),
                              run(*fx.model, prompt, decode, &fx.adapter, DType::kF16));
  std::printf("prefix on the GPU, f16 cache: max |diff| from the CPU %.3g (prefix moves %.3g)\n",
              f16_err, diff(want, base));
  EXPECT_LT(f16_err, 0.02 * diff(want, base));
  std::swap(fx.model, *gpu);  // the same batch property on the GPU model
  testing::expect_batch_equals_each_alone(fx, /*prompt_prefix=*/false);
}

TEST(PrefixForwardTest, PrefixOfAnotherShapeIsRefused) {
  Fixture fx(false);
  Adapter bad = fx.adapter;
  bad.prefix.k.pop_back();
  const std::vector<int32_t> toks = {1};
  const int32_t block = 0;
  KvPool kv(fx.model->config(), 1, 4, DType::kF32);
  SeqInput in;
  in.tokens = toks.data();
  in.n_tokens = 1;
  in.blocks = &block;
  in.n_blocks = 1;
  in.adapter = &bad;
  std::vector<float> out;
  const Status st = fx.model->forward({in}, &kv, &out);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace glm::model
