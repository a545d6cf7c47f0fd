// The tensor tables: names unique, the shapes the loaders expect, file order.
#include "arch/arch.h"

#include <gtest/gtest.h>

#include <set>

namespace glm::arch {
namespace {

Dims dims(bool bias, bool tied) {
  Dims d;
  d.n_vocab = 100;
  d.n_embd = 64;
  d.n_ff = 160;
  d.n_layer = 3;
  d.n_head = 4;
  d.n_head_kv = 2;
  d.qkv_bias = bias;
  d.tied_output = tied;
  return d;
}

TEST(TensorTable, NamesAreUniqueAndOrdered) {
  for (Arch a : {Arch::kChatGLM, Arch::kChatGLM1, Arch::kLlama, Arch::kGLM4}) {
    for (bool tied : {false, true}) {
      const auto t = tensor_table(a, dims(true, tied));
      std::set<std::string> names;
      for (const TensorSpec& s : t) EXPECT_TRUE(names.insert(s.name).second) << s.name;
      EXPECT_EQ(t.front().name, "token_embd.weight");
      const char* last = !tied                  ? "output.weight"
                         : a == Arch::kChatGLM1 ? "output_norm.bias"
                                                : "output_norm.weight";
      EXPECT_EQ(t.back().name, last) << arch_name(a);
    }
  }
}

TEST(TensorTable, ShapesOfEachLayout) {
  auto find = [](const std::vector<TensorSpec>& t, const std::string& name) {
    for (const TensorSpec& s : t) {
      if (s.name == name) return s;
    }
    ADD_FAILURE() << name << " missing";
    return TensorSpec{};
  };
  const auto glm = tensor_table(Arch::kChatGLM, dims(true, false));
  EXPECT_EQ(find(glm, "blk.2.attn_qkv.weight").shape, (std::vector<int64_t>{64, 64 + 2 * 32}));
  EXPECT_EQ(find(glm, "blk.2.ffn_up.weight").shape, (std::vector<int64_t>{64, 320}));
  EXPECT_EQ(find(glm, "blk.0.ffn_down.weight").layer, 0);
  EXPECT_EQ(glm.size(), 1u + 3 * 7 + 2);
  EXPECT_EQ(tensor_table(Arch::kChatGLM, dims(false, false)).size(), 1u + 3 * 6 + 2);

  const auto v1 = tensor_table(Arch::kChatGLM1, dims(false, false));
  EXPECT_EQ(v1.size(), 1u + 3 * 12 + 3);  // biases whatever qkv_bias says
  EXPECT_EQ(find(v1, "blk.1.attn_qkv.weight").shape, (std::vector<int64_t>{64, 192}));
  EXPECT_EQ(find(v1, "blk.1.ffn_up.bias").shape, (std::vector<int64_t>{160}));
  EXPECT_EQ(find(v1, "output_norm.bias").slot, Slot::kOutputNormBias);

  const auto llama = tensor_table(Arch::kLlama, dims(false, true));
  EXPECT_EQ(llama.size(), 1u + 3 * 9 + 1);
  EXPECT_EQ(find(llama, "blk.0.attn_k.weight").shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(find(llama, "blk.0.ffn_gate.weight").role, Role::kFfnGate);

  // GLM-4-0414: separate biased Q/K/V, fused gate+up, and the two sandwich norms per layer.
  const auto glm4 = tensor_table(Arch::kGLM4, dims(true, false));
  EXPECT_EQ(glm4.size(), 1u + 3 * 13 + 2);
  EXPECT_EQ(find(glm4, "blk.1.attn_q.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(find(glm4, "blk.1.attn_v.bias").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(find(glm4, "blk.2.ffn_up.weight").shape, (std::vector<int64_t>{64, 320}));
  EXPECT_EQ(find(glm4, "blk.0.post_attention_norm.weight").slot, Slot::kAttnPostNorm);
  EXPECT_EQ(find(glm4, "blk.2.post_ffw_norm.weight").slot, Slot::kFfnPostNorm);
  EXPECT_EQ(find(glm4, "blk.2.post_ffw_norm.weight").role, Role::kNorm);
  EXPECT_EQ(find(glm4, "blk.2.post_ffw_norm.weight").layer, 2);
}

TEST(ArchNames, RoundTrip) {
  for (Arch a : {Arch::kChatGLM, Arch::kChatGLM1, Arch::kLlama, Arch::kGLM4}) {
    auto b = arch_from_name(arch_name(a));
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(*b, a);
  }
  EXPECT_FALSE(arch_from_name("gpt2").ok());
}

// glm4moe: dense leading layers, then MoE layers with 3-D expert tensors {row, rows, n_expert}.
TEST(TensorTable, Glm4MoeDenseThenExperts) {
  Dims d = dims(true, false);
  d.n_expert = 8;
  d.n_ff_exp = 32;
  d.n_expert_shared = 1;
  d.n_dense_lead = 1;
  const auto t = tensor_table(Arch::kGLM4MoE, d);
  std::set<std::string> names;
  for (const TensorSpec& s : t) EXPECT_TRUE(names.insert(s.name).second) << s.name;
  auto find = [&](const std::string& name) {
    for (const TensorSpec& s : t) {
      if (s.name == name) return s;
    }
    ADD_FAILURE() << name << " missing";
    return TensorSpec{};
  };
  // Layer 0 dense (12 tensors with its norms and Q/K/V biases), layers 1-2 MoE (17 each).
  EXPECT_EQ(t.size(), 1u + 12 + 2 * 17 + 2);
  EXPECT_EQ(find("blk.0.ffn_gate.weight").shape, (std::vector<int64_t>{64, 160}));
  EXPECT_EQ(names.count("blk.1.ffn_gate.weight"), 0u);
  EXPECT_EQ(names.count("blk.0.ffn_gate_inp.weight"), 0u);
  EXPECT_EQ(find("blk.1.post_attention_norm.weight").slot, Slot::kFfnNorm);
  EXPECT_EQ(find("blk.1.ffn_gate_inp.weight").shape, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(find("blk.1.ffn_gate_inp.weight").role, Role::kRouter);
  EXPECT_EQ(find("blk.1.exp_probs_b.bias").shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(find("blk.2.ffn_gate_exps.weight").shape, (std::vector<int64_t>{64, 32, 8}));
  EXPECT_EQ(find("blk.2.ffn_down_exps.weight").shape, (std::vector<int64_t>{32, 64, 8}));
  EXPECT_EQ(find("blk.2.ffn_up_exps.weight").slot, Slot::kFfnUpExps);
  EXPECT_EQ(find("blk.2.ffn_down_shexp.weight").shape, (std::vector<int64_t>{32, 64}));
  d.n_expert_shared = 0;
  EXPECT_EQ(tensor_table(Arch::kGLM4MoE, d).size(), 1u + 12 + 2 * 14 + 2);
}

// glm4moe's MTP block (nextn) follows the trunk as blk.<n_layer>: a MoE layer plus the six
// nextn.* tensors in llama.cpp's names and shapes.
TEST(TensorTable, Glm4MoeMtpBlockAfterTheTrunk) {
  Dims d = dims(true, false);
  d.n_expert = 8;
  d.n_ff_exp = 32;
  d.n_expert_shared = 1;
  d.n_dense_lead = 1;
  const size_t trunk = tensor_table(Arch::kGLM4MoE, d).size();
  d.n_nextn = 1;
  const auto t = tensor_table(Arch::kGLM4MoE, d);
  ASSERT_EQ(t.size(), trunk + 17 + 6);
  auto find = [&](const std::string& name) {
    for (const TensorSpec& s : t) {
      if (s.name == name) return s;
    }
    ADD_FAILURE() << name << " missing";
    return TensorSpec{};
  };
  EXPECT_EQ(find("blk.3.nextn.eh_proj.weight").shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(find("blk.3.nextn.eh_proj.weight").slot, Slot::kNextnEhProj);
  EXPECT_EQ(find("blk.3.nextn.embed_tokens.weight").shape, (std::vector<int64_t>{64, 100}));
  EXPECT_EQ(find("blk.3.nextn.shared_head_head.weight").role, Role::kOutput);
  EXPECT_EQ(find("blk.3.nextn.enorm.weight").role, Role::kNorm);
  EXPECT_EQ(find("blk.3.nextn.hnorm.weight").slot, Slot::kNextnHnorm);
  EXPECT_EQ(find("blk.3.nextn.shared_head_norm.weight").slot, Slot::kNextnHeadNorm);
  EXPECT_EQ(find("blk.3.ffn_gate_exps.weight").layer, 3);
  EXPECT_EQ(find("blk.3.attn_q.bias").shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(t.back().name, "output.weight");
}

}  // namespace
}  // namespace glm::arch
