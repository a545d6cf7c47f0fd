// ChatGLM-6B (v1) with a P-Tuning v2 prefix against a float64 forward written here from THUDM's
// chatglm-6b modeling_chatglm.py (docs/adapters.md#p-tuning-v2): LayerNorm with bias, QKV with
// bias, 2D rotary (position and block position, rotate-half within each half of a head, inv_freq
// kept in fp16), attention over [prefix K/V ; own K/V] where every query sees the whole prefix
// (get_prompt's past_key_values, unrotated, and ChatGLMModel.forward's prefix_attention_mask of
// ones) and the own keys under get_masks (the prompt but <sop> bidirectional, causal after),
// residuals LN(x) * sqrt(2 * 28) + f(LN(x)), GELU MLP with biases, final LayerNorm, LM head.
// Also: a batch mixing a prefixed and a plain sequence, and that the prefix costs no prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "model/adapter.h"
#include "model/eval.h"
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

// A tiny ChatGLM-6B (f32 weights, the "chatglm1" layout) and a P-Tuning adapter for it, loaded.
struct Chatglm1Fixture : testing::PrefixFixture {
  explicit Chatglm1Fixture(bool projection)
      : PrefixFixture(model_spec(), prefix_spec(projection),
                      projection ? "v1pf_model_proj" : "v1pf_model") {}
  static testing::RandomSpec model_spec() {
    testing::RandomSpec spec;
    spec.arch = "chatglm1";
    spec.n_vocab = 50;
    spec.n_embd = 64;
    spec.n_ff = 96;
    spec.n_layer = 2;
    spec.n_head = 4;  // head_dim 16: each half of 8 dims rotates 4 pairs; kv_dim 64
    spec.std = 0.3f;
    spec.seed = 5;
    return spec;
  }
  static testing::PtuningSpec prefix_spec(bool projection) {
    testing::PtuningSpec ps;
    ps.arch = "chatglm1";
    ps.n_layer = 2;
    ps.kv_dim = 64;
    ps.pre_seq_len = 5;
    ps.projection = projection;
    if (projection) ps.emb_dim = ps.hidden = 64;  // v1: Embedding(P, hidden) -> hidden
    ps.std = 0.8f;  // prefix keys large enough to move the attention visibly
    return ps;
  }
};

// torch.nn.LayerNorm(eps 1e-5): (x - mean) / sqrt(var + eps) * w + b, var without Bessel.
std::vector<double> layer_norm(const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>& b) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= x.size();
  for (double v : x) var += (v - mean) * (v - mean);
  var /= x.size();
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
  return y;
}

// HF's RotaryEmbedding(hidden / heads / 2) applied by apply_rotary_pos_emb_index to one half of a
// head (`dim` values): inv_freq = 1 / 10000^(2i / dim) stored as fp16 (inv_freq.half()), angle
// pos * inv_freq, x * cos + rotate_half(x) * sin (rotate_half pairs i with i + dim / 2).
void rotate(double* x, int dim, int pos) {
  for (int i = 0; i < dim / 2; ++i) {
    const double inv =
        fp16_to_fp32(fp32_to_fp16(static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / dim))));
    const double a = pos * inv;
    const double x1 = x[i], x2 = x[i + dim / 2];
    x[i] = x1 * std::cos(a) - x2 * std::sin(a);
    x[i + dim / 2] = x2 * std::cos(a) + x1 * std::sin(a);
  }
}

double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
}

// Logits of every position of `tokens`, whose first n_prompt are the prompt (ending in [gMASK]
// <sop>) and the rest generated, float64; prefix: null = the base model.
std::vector<std::vector<double>> reference_forward(const Chatglm1Fixture& fx,
                                                   const std::vector<int32_t>& tokens, int n_prompt,
                                                   const PrefixKv* prefix) {
  const testing::RandomSpec& s = fx.spec;
  const int d = s.n_embd, hd = d / s.n_head, T = static_cast<int>(tokens.size());
  const int P = prefix != nullptr ? prefix->n_tokens : 0;
  // get_position_ids: context_length = index of <sop> (bos), mask_position = index of [gMASK];
  // positions from context_length on are mask_position; block positions 0 before it, then 1, 2..
  // (prepare_inputs_for_generation continues both for generated tokens). The prefix shifts none.
  const int ctx = n_prompt - 1, mask_pos = n_prompt - 2;
  auto pos = [&](int t) { return t < ctx ? t : mask_pos; };
  auto block_pos = [&](int t) { return t < ctx ? 0 : t - ctx + 1; };
  // get_masks: key j is visible to row t when j <= t or j < context_length.
  auto visible = [&](int t, int j) { return j <= t || j < ctx; };
  const double alpha = std::sqrt(2.0 * 28);  // GLMBlock(num_layers=28): the default, always
  const std::vector<double> emb = fx.tensor("token_embd.weight");
  std::vector<std::vector<double>> x(T);
  for (int t = 0; t < T; ++t) {
    x[t].assign(emb.begin() + static_cast<size_t>(tokens[t]) * d,
                emb.begin() + static_cast<size_t>(tokens[t] + 1) * d);
  }
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const auto qkv_w = fx.tensor(b + "attn_qkv.weight"), qkv_b = fx.tensor(b + "attn_qkv.bias");
    std::vector<std::vector<double>> in(T), q(T), k(T), v(T);
    for (int t = 0; t < T; ++t) {
      in[t] = layer_norm(x[t], fx.tensor(b + "attn_norm.weight"), fx.tensor(b + "attn_norm.bias"));
      const auto y = linear(qkv_w, in[t], &qkv_b);  // rows: q heads, k heads, v heads
      q[t].assign(y.begin(), y.begin() + d);
      k[t].assign(y.begin() + d, y.begin() + 2 * d);
      v[t].assign(y.begin() + 2 * d, y.end());
      for (int h = 0; h < s.n_head; ++h) {
        for (auto* r : {&q[t], &k[t]}) {
          rotate(r->data() + h * hd, hd / 2, pos(t));
          rotate(r->data() + h * hd + hd / 2, hd / 2, block_pos(t));
        }
      }
    }
    // attention_fn: key = cat(past_key, rotated key): the prefix's P rows of this layer first.
    auto key = [&](int j, int i) {
      return j < P ? double{prefix->k[(static_cast<size_t>(l) * P + j) * d + i]} : k[j - P][i];
    };
    auto val = [&](int j, int i) {
      return j < P ? double{prefix->v[(static_cast<size_t>(l) * P + j) * d + i]} : v[j - P][i];
    };
    const auto wo = fx.tensor(b + "attn_output.weight"), wo_b = fx.tensor(b + "attn_output.bias");
    const auto up_w = fx.tensor(b + "ffn_up.weight"), up_b = fx.tensor(b + "ffn_up.bias");
    const auto down_w = fx.tensor(b + "ffn_down.weight"), down_b = fx.tensor(b + "ffn_down.bias");
    for (int t = 0; t < T; ++t) {
      std::vector<double> att(d);
      for (int h = 0; h < s.n_head; ++h) {
        std::vector<double> sc;
        std::vector<int> keys;
        double mx = -1e300;
        for (int j = 0; j < P + T; ++j) {
          if (j >= P && !visible(t, j - P)) continue;
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * key(j, h * hd + i);
          // query / (sqrt(hd) * (layer + 1)), scores * (layer + 1): 1 / sqrt(hd) in all.
          sc.push_back(dot / std::sqrt(static_cast<double>(hd)));
          keys.push_back(j);
          mx = std::max(mx, sc.back());
        }
        double sum = 0;
        for (double& e : sc) sum += (e = std::exp(e - mx));
        for (int i = 0; i < hd; ++i) {
          double acc = 0;
          for (size_t n = 0; n < keys.size(); ++n) acc += sc[n] * val(keys[n], h * hd + i);
          att[h * hd + i] = acc / sum;
        }
      }
      const auto o = linear(wo, att, &wo_b);
      for (int i = 0; i < d; ++i) x[t][i] = in[t][i] * alpha + o[i];
      const auto mlp_in =
          layer_norm(x[t], fx.tensor(b + "ffn_norm.weight"), fx.tensor(b + "ffn_norm.bias"));
      auto up = linear(up_w, mlp_in, &up_b);
      for (double& u : up) u = gelu(u);
      const auto down = linear(down_w, up, &down_b);
      for (int i = 0; i < d; ++i) x[t][i] = mlp_in[i] * alpha + down[i];
    }
  }
  std::vector<std::vector<double>> logits(T);
  const auto out_w = fx.tensor("output.weight");
  const auto nw = fx.tensor("output_norm.weight"), nb = fx.tensor("output_norm.bias");
  for (int t = 0; t < T; ++t) logits[t] = linear(out_w, layer_norm(x[t], nw, nb));
  return logits;
}
TEST(ChatGLM1PrefixTest, PrefillAndDecodeMatchTheFloat64Reference) {
  for (bool projection : {false, true}) {
    SCOPED_TRACE(projection ? "with projection" : "embedding only");
    Chatglm1Fixture fx(projection);
    ASSERT_FALSE(fx.adapter.prefix.empty());
    const std::vector<int32_t> prompt = {3, 17, 5, 42, 9, 1, 30};  // "... [gMASK] <sop>"
    const std::vector<int32_t> decode = {8, 49, 0};
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), decode.begin(), decode.end());
    const int n = static_cast<int>(prompt.size());
    const auto want = reference_forward(fx, all, n, &fx.adapter.prefix);
    const auto got = run(*fx.model, prompt, decode, &fx.adapter);
    const auto base = reference_forward(fx, all, n, nullptr);
    const double err = max_diff(got, want), moved = max_diff(got, base);
    const double base_err = max_diff(run(*fx.model, prompt, decode, nullptr), base);
    // Quantized KV rows (the prefix stays f32 beside them).
    const double q8_err = max_diff(run(*fx.model, prompt, decode, &fx.adapter, DType::kQ8_0), want);
    const double base_q8_err =
        max_diff(run(*fx.model, prompt, decode, nullptr, DType::kQ8_0), base);
    std::printf(
        "chatglm1 P-Tuning%s: max |logit diff| %.3g (f32 KV), %.3g (q8_0 KV); base model %.3g "
        "(f32), %.3g (q8_0); prefix moves the logits by %.3g\n",
        projection ? " (projection)" : "", err, q8_err, base_err, base_q8_err, moved);
    // f32 products over 64-96 terms, logits of a few units.
    EXPECT_LT(err, 2e-4);
    EXPECT_LT(base_err, 2e-4);
    // The prefix matters: the base model's logits are far from these.
    EXPECT_GT(moved, 1e-2);
    // Q8_0 rows: within the base model's own Q8_0 error, far below what the prefix moves.
    EXPECT_LT(q8_err, 2 * base_q8_err + 0.05);
    EXPECT_LT(q8_err, 0.1 * moved);
  }
}

// On the GPU (GpuChatGLM1: the prefix's rows on the device, ahead of the cache's keys, with the
// prompt's bidirectional rule): the CPU's logits, and a batch mixing prefixed and plain equals
// each alone.
TEST(ChatGLM1PrefixTest, OnTheGpuEqualsTheCpu) {
  Chatglm1Fixture fx(true);
  const std::vector<int32_t> prompt = {3, 17, 5, 42, 9, 1, 30};
  const std::vector<int32_t> decode = {8, 49, 0};
  auto gpu = testing::load(testing::temp_path("v1pf_model_proj.gguf"), 2, true, "vulkan");
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  ASSERT_EQ((*gpu)->device_name().substr(0, 7), "vulkan:");
  const auto want = run(*fx.model, prompt, decode, &fx.adapter);
  const auto got = run(**gpu, prompt, decode, &fx.adapter);
  ASSERT_EQ(got.size(), want.size());
  double err = 0, moved = 0;
  const auto base = run(*fx.model, prompt, decode, nullptr);
  for (size_t r = 0; r < want.size(); ++r) {
    for (size_t i = 0; i < want[r].size(); ++i) {
      err = std::max(err, static_cast<double>(std::fabs(got[r][i] - want[r][i])));
      moved = std::max(moved, static_cast<double>(std::fabs(base[r][i] - want[r][i])));
    }
  }
  std::printf(
      "chatglm1 P-Tuning on the GPU: max |logit diff| from the CPU %.3g (prefix moves "
      "%.3g)\n",
      err, moved);
  EXPECT_LT(err, 1e-4);
  EXPECT_GT(moved, 1e-2);
  std::swap(fx.model, *gpu);
  testing::expect_batch_equals_each_alone(fx, /*prompt_prefix=*/true);
}

TEST(ChatGLM1PrefixTest, BatchMixingPrefixedAndPlainEqualsEachAlone) {
  testing::expect_batch_equals_each_alone(Chatglm1Fixture(true), /*prompt_prefix=*/true);
}

TEST(ChatGLM1PrefixTest, PrefixCostsNoPrefillAndNoKvBlocks) {
  testing::expect_prefix_costs_no_prefill(Chatglm1Fixture(false), /*prompt_prefix=*/true);
}

TEST(ChatGLM1PrefixTest, LoraStaysRefused) {
  Chatglm1Fixture fx(false);
  Adapter lora = fx.adapter;
  lora.lora.resize(fx.spec.n_layer);
  lora.lora[0].qkv.rank = 1;
  const std::vector<int32_t> toks = {1, 2};
  const int32_t block = 0;
  KvPool kv(fx.model->config(), 1, 4, DType::kF32);
  SeqInput in;
  in.tokens = toks.data();
  in.n_tokens = 2;
  in.blocks = &block;
  in.n_blocks = 1;
  in.adapter = &lora;
  std::vector<float> out;
  const Status st = fx.model->forward({in}, &kv, &out);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.to_string();
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace glm::model
