#include "convert/model_spec.h"

#include <gtest/gtest.h>

#include <map>

namespace glm::convert {
namespace {

std::map<std::string, TensorPlan> by_name(const std::vector<TensorPlan>& plan) {
  std::map<std::string, TensorPlan> m;
  for (const TensorPlan& t : plan) m[t.name] = t;
  return m;
}

TEST(ModelSpec, ChatGlm3SixBMatchesTheRealModel) {
  StatusOr<Hparams> hp = preset(Family::kChatGLM3, "6b");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->n_embd, 4096);
  EXPECT_EQ(hp->n_layer, 28);
  EXPECT_EQ(hp->n_head, 32);
  EXPECT_EQ(hp->n_head_kv, 2);
  EXPECT_EQ(hp->head_dim(), 128);
  EXPECT_EQ(hp->n_rot(), 64);  // docs/models.md: rope.dimension_count = head_dim / 2
  EXPECT_EQ(hp->n_ff, 13696);
  EXPECT_EQ(hp->n_vocab, 65024);
  EXPECT_EQ(hp->n_ctx, 8192);
  const std::vector<TensorPlan> plan = tensor_plan(*hp, DType::kF16);
  // THUDM/chatglm3-6b has 6,243,584,000 parameters (its published parameter count).
  EXPECT_EQ(plan_parameters(plan), 6243584000ull);
  EXPECT_EQ(plan.size(), 2u + 28u * 7u + 1u);
  auto m = by_name(plan);
  EXPECT_EQ(m["token_embd.weight"].shape, (std::vector<int64_t>{4096, 65024}));
  EXPECT_EQ(m["blk.27.attn_qkv.weight"].shape, (std::vector<int64_t>{4096, 4608}));
  EXPECT_EQ(m["blk.27.attn_qkv.bias"].shape, (std::vector<int64_t>{4608}));
  EXPECT_EQ(m["blk.0.attn_output.weight"].shape, (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(m["blk.0.ffn_up.weight"].shape, (std::vector<int64_t>{4096, 27392}));
  EXPECT_EQ(m["blk.0.ffn_down.weight"].shape, (std::vector<int64_t>{13696, 4096}));
  EXPECT_EQ(m["output.weight"].shape, (std::vector<int64_t>{4096, 65024}));
  EXPECT_EQ(m["blk.0.attn_norm.weight"].type, DType::kF32);
  EXPECT_EQ(m["blk.0.attn_qkv.bias"].type, DType::kF32);
  EXPECT_EQ(m["blk.0.attn_qkv.weight"].type, DType::kF16);
  // F16: 2 bytes per weight except the 28 * (2 * 4096 + 4608) + 4096 F32 norm/bias values.
  const uint64_t n_f32 = 28ull * (2 * 4096 + 4608) + 4096;
  EXPECT_EQ(plan_bytes(plan), (6243584000ull - n_f32) * 2 + n_f32 * 4);
  EXPECT_EQ(plan.front().name, "token_embd.weight");
  EXPECT_EQ(plan.back().name, "output.weight");
}

TEST(ModelSpec, Glm4NineBMatchesTheRealModel) {
  StatusOr<Hparams> hp = preset(Family::kGLM4, "6b");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->n_layer, 40);
  EXPECT_EQ(hp->n_vocab, 151552);
  EXPECT_FLOAT_EQ(hp->rope_base, 5e6f);
  EXPECT_FLOAT_EQ(hp->norm_eps, 1.5625e-7f);
  // THUDM/glm-4-9b-chat: 9,399,951,360 parameters.
  EXPECT_EQ(plan_parameters(tensor_plan(*hp, DType::kF16)), 9399951360ull);
}

// GLM-4-9B-0414 (config.json: hidden 4096, intermediate 13696, 40 layers, 32 heads, 2 KV heads,
// head_dim 128, partial_rotary_factor 0.5, rms_norm_eps 1e-5, rope_theta 10000, vocabulary
// 151552, untied head): glm-4-9b-chat's weights plus two norms of 4096 per layer.
TEST(ModelSpec, Glm4_0414NineBMatchesTheRealModel) {
  StatusOr<Hparams> hp = preset(Family::kGLM4_0414, "6b");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->layout(), arch::Arch::kGLM4);
  EXPECT_EQ(hp->n_layer, 40);
  EXPECT_EQ(hp->n_head_kv, 2);
  EXPECT_EQ(hp->n_rot(), 64);
  EXPECT_EQ(hp->n_ctx, 32768);
  EXPECT_FLOAT_EQ(hp->rope_base, 10000.0f);
  EXPECT_FLOAT_EQ(hp->norm_eps, 1e-5f);
  EXPECT_EQ(plan_parameters(tensor_plan(*hp, DType::kF16)), 9399951360ull + 2 * 40 * 4096);
}

TEST(ModelSpec, Q4_0PlanQuantizesLikeLlamaCpp) {
  StatusOr<Hparams> hp = preset(Family::kChatGLM3, "6b");
  ASSERT_TRUE(hp.ok());
  const std::vector<TensorPlan> plan = tensor_plan(*hp, DType::kQ4_0);
  auto m = by_name(plan);
  EXPECT_EQ(m["token_embd.weight"].type, DType::kQ4_0);
  EXPECT_EQ(m["output.weight"].type, DType::kQ6_K);
  EXPECT_EQ(m["blk.3.ffn_down.weight"].type, DType::kQ4_0);
  EXPECT_EQ(m["blk.3.ffn_norm.weight"].type, DType::kF32);
  // Byte total from the block sizes: Q4_0 18 bytes / 32 weights, Q6_K 210 / 256, F32 4.
  const uint64_t n_f32 = 28ull * (2 * 4096 + 4608) + 4096;
  const uint64_t n_out = 4096ull * 65024;
  const uint64_t n_q4 = 6243584000ull - n_f32 - n_out;
  EXPECT_EQ(plan_bytes(plan), n_q4 / 32 * 18 + n_out / 256 * 210 + n_f32 * 4);
}

TEST(ModelSpec, KQuantsFallBackWhereTheBlockDoesNotDivide) {
  StatusOr<Hparams> hp = preset(Family::kChatGLM3, "6b");
  ASSERT_TRUE(hp.ok());
  std::vector<std::string> notes;
  auto m = by_name(tensor_plan(*hp, DType::kQ4_K, &notes));
  EXPECT_EQ(m["blk.0.attn_qkv.weight"].type, DType::kQ4_K);
  EXPECT_EQ(m["blk.0.ffn_down.weight"].type, DType::kQ5_0);  // 13696 % 256 != 0
  EXPECT_EQ(m["output.weight"].type, DType::kQ6_K);
  EXPECT_EQ(notes.size(), 28u);
  EXPECT_NE(notes[0].find("13696"), std::string::npos);
  auto q6 = by_name(tensor_plan(*hp, DType::kQ6_K));
  EXPECT_EQ(q6["blk.0.ffn_down.weight"].type, DType::kQ8_0);
}

TEST(ModelSpec, ChooseType) {
  EXPECT_EQ(choose_type(DType::kQ8_0, Role::kOutput, 4096), DType::kQ8_0);
  EXPECT_EQ(choose_type(DType::kQ4_0, Role::kOutput, 4096), DType::kQ6_K);
  EXPECT_EQ(choose_type(DType::kQ4_0, Role::kOutput, 64), DType::kQ8_0);
  EXPECT_EQ(choose_type(DType::kQ4_0, Role::kAttnQkv, 48), DType::kF16);
  EXPECT_EQ(choose_type(DType::kBF16, Role::kTokenEmbd, 48), DType::kBF16);
  EXPECT_EQ(choose_type(DType::kQ4_0, Role::kBias, 64), DType::kF32);
  std::string note;
  EXPECT_EQ(choose_type(DType::kQ4_0, Role::kFfnDown, 160, &note), DType::kQ4_0);
  EXPECT_TRUE(note.empty());
}

TEST(ModelSpec, LlamaLayout) {
  StatusOr<Hparams> hp = preset(Family::kLlama, "tiny");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->n_rot(), hp->head_dim());
  auto m = by_name(tensor_plan(*hp, DType::kF32));
  EXPECT_EQ(m.count("blk.0.attn_qkv.weight"), 0u);
  EXPECT_EQ(m["blk.1.attn_k.weight"].shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(m["blk.1.ffn_gate.weight"].shape, (std::vector<int64_t>{64, 160}));
  EXPECT_EQ(m["blk.1.ffn_down.weight"].shape, (std::vector<int64_t>{160, 64}));
  EXPECT_EQ(m.size(), 2u + 2u * 9u + 1u);
}

TEST(ModelSpec, RolesFromNames) {
  EXPECT_EQ(role_from_name("blk.12.ffn_down.weight", 2), Role::kFfnDown);
  EXPECT_EQ(role_from_name("blk.0.attn_qkv.bias", 1), Role::kBias);
  EXPECT_EQ(role_from_name("output_norm.weight", 1), Role::kNorm);
  EXPECT_EQ(role_from_name("token_embd.weight", 2), Role::kTokenEmbd);
  EXPECT_EQ(role_from_name("rope_freqs.weight", 1), Role::kNorm);
  EXPECT_EQ(role_from_name("blk.0.something.weight", 2), Role::kOther);
}

TEST(ModelSpec, BadNamesAreClearErrors) {
  EXPECT_FALSE(parse_family("chatglm5").ok());
  EXPECT_NE(parse_family("x").status().message().find("chatglm3"), std::string::npos);
  EXPECT_FALSE(preset(Family::kChatGLM3, "huge").ok());
  EXPECT_FALSE(parse_weight_type("q3_k").ok());
  ASSERT_TRUE(parse_weight_type("Q4_0").ok());
  EXPECT_EQ(*parse_weight_type("Q4_0"), DType::kQ4_0);
  EXPECT_EQ(file_type_of(DType::kQ8_0), 7u);
  EXPECT_EQ(file_type_of(DType::kBF16), 32u);
  Hparams h = *preset(Family::kChatGLM3, "tiny");
  h.n_head_kv = 3;
  EXPECT_FALSE(h.validate().ok());
}

}  // namespace
}  // namespace glm::convert
