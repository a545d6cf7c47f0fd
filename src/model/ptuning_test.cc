// load_ptuning: the prefix encoder's equations against a float64 computation written here from
// modeling_chatglm.py's PrefixEncoder and get_prompt (docs/adapters.md#p-tuning-v2), of ChatGLM2/3
// and of ChatGLM-6B (v1), and the errors of adapters that do not fit their base.
#include "model/ptuning.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/ptuning_test_util.h"
#include "model/test_util.h"

namespace glm::model {
namespace {

using testing::PtuningSpec;
using testing::PtuningWeights;
using testing::random_ptuning;
using testing::temp_path;
using testing::write_ptuning_gguf;

Config base_config(int n_layer, int n_head_kv, int head_dim) {
  Config c;
  c.arch = Arch::kChatGLM;
  c.arch_name = "chatglm";
  c.n_layer = n_layer;
  c.n_head = n_head_kv * 2;
  c.n_head_kv = n_head_kv;
  c.head_dim = head_dim;
  c.n_embd = c.n_head * head_dim;
  return c;
}

// past_key_values as the reference builds them, in float64: o = embedding(p) (then trans.2
// (tanh (trans.0 o))), viewed [pre_seq_len, n_layer * 2, groups, kv_channels], permuted to
// [n_layer * 2, pre_seq_len, groups, kv_channels] and split in pairs: layer l's keys are index
// 2l, its values 2l + 1. Returns [n_layer][2][pre_seq_len][groups * kv_channels].
std::vector<double> reference_prompt(const PtuningSpec& s, const PtuningWeights& w, int groups,
                                     int kv_channels) {
  const int P = s.pre_seq_len;
  std::vector<double> o(static_cast<size_t>(P) * w.w);
  for (int p = 0; p < P; ++p) {
    std::vector<double> e(w.emb.begin() + static_cast<size_t>(p) * w.e,
                          w.emb.begin() + static_cast<size_t>(p + 1) * w.e);
    if (!s.projection) {
      for (int i = 0; i < w.w; ++i) o[static_cast<size_t>(p) * w.w + i] = e[i];
      continue;
    }
    std::vector<double> h(w.h);
    for (int r = 0; r < w.h; ++r) {
      double acc = w.b0[r];
      for (int c = 0; c < w.e; ++c) acc += double{w.w0[static_cast<size_t>(r) * w.e + c]} * e[c];
      h[r] = std::tanh(acc);
    }
    for (int r = 0; r < w.w; ++r) {
      double acc = w.b2[r];
      for (int c = 0; c < w.h; ++c) acc += double{w.w2[static_cast<size_t>(r) * w.h + c]} * h[c];
      o[static_cast<size_t>(p) * w.w + r] = acc;
    }
  }
  const int L2 = s.n_layer * 2;
  const int kd = groups * kv_channels;
  std::vector<double> out(static_cast<size_t>(L2) * P * kd);
  for (int p = 0; p < P; ++p) {
    for (int j = 0; j < L2; ++j) {  // view index: (p, j, g, c)
      for (int g = 0; g < groups; ++g) {
        for (int c = 0; c < kv_channels; ++c) {
          const double v = o[static_cast<size_t>(p) * w.w + (j * groups + g) * kv_channels + c];
          // permute -> (j, p, g, c); split(2): layer j / 2, key (0) or value (1) j % 2.
          out[((static_cast<size_t>(j / 2) * 2 + j % 2) * P + p) * kd + g * kv_channels + c] = v;
        }
      }
    }
  }
  return out;
}

void expect_prefix(const PtuningSpec& s, const PrefixKv& got, const std::vector<double>& want) {
  const int kd = s.kv_dim;
  ASSERT_EQ(got.n_tokens, s.pre_seq_len);
  ASSERT_EQ(got.kv_dim, kd);
  ASSERT_EQ(got.k.size(), static_cast<size_t>(s.n_layer) * s.pre_seq_len * kd);
  ASSERT_EQ(got.v.size(), got.k.size());
  for (int l = 0; l < s.n_layer; ++l) {
    for (int p = 0; p < s.pre_seq_len; ++p) {
      for (int i = 0; i < kd; ++i) {
        const size_t at = (static_cast<size_t>(l) * s.pre_seq_len + p) * kd + i;
        const double k = want[((static_cast<size_t>(l) * 2 + 0) * s.pre_seq_len + p) * kd + i];
        const double v = want[((static_cast<size_t>(l) * 2 + 1) * s.pre_seq_len + p) * kd + i];
        // f32 products of E or H terms of ~0.25 against float64.
        ASSERT_NEAR(got.k[at], k, 1e-4 * (1 + std::fabs(k))) << "l=" << l << " p=" << p;
        ASSERT_NEAR(got.v[at], v, 1e-4 * (1 + std::fabs(v))) << "l=" << l << " p=" << p;
      }
    }
  }
}

StatusOr<PrefixKv> load(const PtuningSpec& s, const PtuningWeights& w, const Config& c,
                        const std::string& name) {
  const std::string path = temp_path(name);
  Status st = write_ptuning_gguf(s, w, path);
  if (!st.ok()) return st;
  StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
  if (!f.ok()) return f.status();
  PrefixKv out;
  st = load_ptuning(**f, c, &out);
  if (!st.ok()) return st;
  return out;
}

TEST(PtuningTest, EmbeddingOnlyIsThePromptOfTheReference) {
  const Config c = base_config(3, 2, 8);  // kv_dim 16
  PtuningSpec s;
  s.n_layer = 3;
  s.kv_dim = 16;
  s.pre_seq_len = 5;
  const PtuningWeights w = random_ptuning(s);
  StatusOr<PrefixKv> got = load(s, w, c, "pt_plain.gguf");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_prefix(s, *got, reference_prompt(s, w, 2, 8));
}

TEST(PtuningTest, ProjectionIsTwoLinearsWithTanh) {
  // ChatGLM2/3's projection: embedding [P, W], trans.0 W -> H, tanh, trans.2 H -> W.
  const Config c = base_config(2, 2, 16);  // kv_dim 32
  PtuningSpec s;
  s.n_layer = 2;
  s.kv_dim = 32;
  s.pre_seq_len = 4;
  s.projection = true;
  s.hidden = 24;
  const PtuningWeights w = random_ptuning(s);
  StatusOr<PrefixKv> got = load(s, w, c, "pt_proj.gguf");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_prefix(s, *got, reference_prompt(s, w, 2, 16));
  // ChatGLM-6B's shape of projection (an embedding narrower than W) computes alike.
  s.emb_dim = 40;
  s.pre_seq_len = 1;
  const PtuningWeights w1 = random_ptuning(s);
  got = load(s, w1, c, "pt_proj_narrow.gguf");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_prefix(s, *got, reference_prompt(s, w1, 2, 16));
}

// Loads an adapter expected to fail; the message must contain `part` and *out stays untouched.
void expect_error(const PtuningSpec& s, const Config& c, const std::string& part) {
  SCOPED_TRACE(part);
  const std::string path = temp_path("pt_bad.gguf");
  ASSERT_TRUE(write_ptuning_gguf(s, random_ptuning(s), path).ok());
  StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
  ASSERT_TRUE(f.ok());
  PrefixKv out;
  out.n_tokens = 7;
  out.k = {1.0f};
  const Status st = load_ptuning(**f, c, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  EXPECT_EQ(out.n_tokens, 7);
  EXPECT_EQ(out.k, std::vector<float>{1.0f});
}

TEST(PtuningTest, AdaptersThatDoNotFitTheirBaseAreRefusedByName) {
  const Config c = base_config(2, 2, 8);  // kv_dim 16
  PtuningSpec ok;
  ok.n_layer = 2;
  ok.kv_dim = 16;
  ok.projection = true;
  {
    PtuningSpec s = ok;  // made for a deeper model
    s.n_layer = 3;
    expect_error(s, c, "adapter.ptuning.block_count");
  }
  {
    PtuningSpec s = ok;
    s.kv_dim = 32;
    expect_error(s, c, "adapter.ptuning.kv_dim");
  }
  {
    PtuningSpec s = ok;  // pre_seq_len disagrees with the embedding's rows
    s.reshape = [](const std::string& n, std::vector<int64_t>* shape) {
      if (n == arch::ptuning::kEmbedding) (*shape)[1] = 9;
    };
    expect_error(s, c, "prefix_encoder.embedding.weight");
  }
  {
    PtuningSpec s = ok;
    s.reshape = [](const std::string& n, std::vector<int64_t>* shape) {
      if (n == arch::ptuning::kTrans2Weight) (*shape)[1] -= 1;
    };
    expect_error(s, c, "prefix_encoder.trans.2.weight");
  }
  {
    PtuningSpec s = ok;
    s.reshape = [](const std::string& n, std::vector<int64_t>* shape) {
      if (n == arch::ptuning::kTrans0Bias) (*shape)[0] += 1;
    };
    expect_error(s, c, "prefix_encoder.trans.0.bias");
  }
  {
    PtuningSpec s = ok;  // no projection: the embedding must be W wide
    s.projection = false;
    s.emb_dim = 20;
    expect_error(s, c, "prefix_encoder.embedding.weight");
  }
  {
    PtuningSpec s = ok;  // says projection, has only the embedding
    s.extra_metadata = [](gguf::Writer* w) {
      w->set(arch::ptuning::kKeyProjection, gguf::Value::boolean(true));
    };
    s.projection = false;
    expect_error(s, c, "prefix_encoder.trans.0.weight");
  }
  {
    PtuningSpec s = ok;
    s.arch = "llama";
    expect_error(s, c, "'llama'");
  }
  {
    PtuningSpec s = ok;
    s.extra_metadata = [](gguf::Writer* w) {
      w->set(arch::ptuning::kKeyType, gguf::Value::string("lora"));
    };
    expect_error(s, c, "adapter.type");
  }
  {
    PtuningSpec s = ok;
    s.extra_metadata = [](gguf::Writer* w) {
      w->set("general.type", gguf::Value::string("model"));
    };
    expect_error(s, c, "general.type");
  }
  {
    PtuningSpec s = ok;
    s.extra_metadata = [](gguf::Writer* w) {
      w->set(arch::ptuning::kKeyPreSeqLen, gguf::Value::u32(0));
    };
    expect_error(s, c, "adapter.ptuning.pre_seq_len");
  }
  {
    PtuningSpec s = ok;  // a NaN in the encoder
    s.reshape = [](const std::string& n, std::vector<int64_t>*) { (void)n; };
    PtuningWeights w = random_ptuning(s);
    w.b2[3] = NAN;
    const std::string path = temp_path("pt_nan.gguf");
    ASSERT_TRUE(write_ptuning_gguf(s, w, path).ok());
    StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
    ASSERT_TRUE(f.ok());
    PrefixKv out;
    const Status st = load_ptuning(**f, c, &out);
    EXPECT_NE(st.message().find("non-finite"), std::string::npos) << st.message();
    EXPECT_TRUE(out.empty());
  }
}

// A ChatGLM-6B (v1) base: K/V rows of n_head (= n_head_kv) heads, kv_dim = hidden_size.
Config v1_config(int n_layer, int n_head, int head_dim) {
  Config c = base_config(n_layer, n_head, head_dim);
  c.arch = Arch::kChatGLM1;
  c.arch_name = "chatglm1";
  c.n_head = n_head;
  c.n_embd = n_head * head_dim;
  return c;
}

TEST(PtuningTest, ChatGLM1PrefixIsThePromptOfItsReference) {
  // ChatGLM-6B's PrefixEncoder: without the projection Embedding(P, L * 2 * hidden); with it
  // Embedding(P, hidden), Linear(hidden, hidden), Tanh, Linear(hidden, L * 2 * hidden); its
  // get_prompt views [P, 2L, num_attention_heads, hidden / heads].
  const Config c = v1_config(3, 4, 8);  // hidden 32
  for (bool projection : {false, true}) {
    SCOPED_TRACE(projection ? "with projection" : "embedding only");
    PtuningSpec s;
    s.arch = "chatglm1";
    s.n_layer = 3;
    s.kv_dim = 32;
    s.pre_seq_len = 3;
    s.projection = projection;
    if (projection) s.emb_dim = s.hidden = 32;
    const PtuningWeights w = random_ptuning(s);
    StatusOr<PrefixKv> got = load(s, w, c, "pt_v1.gguf");
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    expect_prefix(s, *got, reference_prompt(s, w, 4, 8));
  }
}

TEST(PtuningTest, AnAdapterForTheOtherChatGLMGenerationIsRefusedByName) {
  PtuningSpec v1;
  v1.arch = "chatglm1";
  v1.n_layer = 2;
  v1.kv_dim = 16;
  // A ChatGLM-6B adapter on a ChatGLM2/3 base of the same K/V width, and the other way round.
  expect_error(v1, base_config(2, 2, 8),
               "made for a 'chatglm1' model; the base model is 'chatglm'");
  PtuningSpec v2 = v1;
  v2.arch = "chatglm";
  expect_error(v2, v1_config(2, 2, 8), "made for a 'chatglm' model; the base model is 'chatglm1'");
  // A ChatGLM-6B adapter for another depth or width of ChatGLM-6B.
  expect_error(v1, v1_config(3, 2, 8), "adapter.ptuning.block_count");
  expect_error(v1, v1_config(2, 4, 8), "adapter.ptuning.kv_dim");
}

}  // namespace
}  // namespace glm::model
