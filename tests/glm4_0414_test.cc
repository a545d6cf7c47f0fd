// GLM-4-0414 / GLM-Z1 (llama.cpp's `glm4` layout) against llama.cpp: the logits and greedy ids
// that a libllama program printed for `gen-model --arch glm4-0414 --preset tiny` files
// (tests/data/glm4-0414/README.md says how they were made). The files are regenerated here from
// their seed: gen-model writes the same bytes for the same seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "convert/gen_model.h"
#include "convert/lora_file.h"
#include "gguf/gguf.h"
#include "llama_reference.h"
#include "model/eval.h"
#include "model/lora.h"
#include "model/test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace glm {
namespace {

using model::testing::JsonRow;

std::string ref_0414(const std::string& name) {
  return std::string(GLM_SOURCE_DIR) + "/tests/data/glm4-0414/" + name;
}

std::string tiny_0414(DType type) {
  return glm::testing::tiny_model("glm4-0414-tiny", convert::Family::kGLM4_0414, type);
}

using glm::testing::argmax;
using glm::testing::Compare;
using glm::testing::kPrefill;

Compare compare(DType weights, const std::string& golden, int n_prefill, DType kv,
                const std::string& device = "cpu") {
  return glm::testing::compare_with_reference(tiny_0414(weights), ref_0414(golden), n_prefill, kv,
                                              device);
}

// F32 weights: llama.cpp's CPU matmuls stay in F32, so only summation order differs.
TEST(Glm4_0414, TinyF32LogitsMatchLlamaCpp) {
  Compare c = compare(DType::kF32, "tiny-f32.logits.jsonl", kPrefill, DType::kF32);
  std::printf("glm4-0414 tiny f32: max |diff| %.3g (max |logit| %.3g), argmax mismatches %d\n",
              c.max_diff, c.max_abs, c.argmax_mismatches);
  EXPECT_LT(c.max_diff, 1e-4f);
  EXPECT_EQ(c.argmax_mismatches, 0);
}

// F16 KV cache against the same F32-KV reference: the README's 5e-3 bound for logits.
TEST(Glm4_0414, TinyF32LogitsF16KvWithinTolerance) {
  Compare c = compare(DType::kF32, "tiny-f32.logits.jsonl", kPrefill, DType::kF16);
  std::printf("glm4-0414 tiny f32, f16 KV: max |diff| %.3g\n", c.max_diff);
  EXPECT_LT(c.max_diff, 5e-3f);
}

// Q8_0 weights: both sides round the activations to 8 bits for the dot products, each its own
// way; each lands ~0.02 from the F32 computation of the same dequantized weights (README), so
// 0.05 here. A wrong layout moves these logits by 0.2 or more.
TEST(Glm4_0414, TinyQ8LogitsMatchLlamaCpp) {
  Compare c = compare(DType::kQ8_0, "tiny-q8_0.logits.jsonl", kPrefill, DType::kF32);
  std::printf("glm4-0414 tiny q8_0: max |diff| %.3g (max |logit| %.3g), argmax mismatches %d\n",
              c.max_diff, c.max_abs, c.argmax_mismatches);
  EXPECT_LT(c.max_diff, 0.05f);
  EXPECT_EQ(c.clear_argmax_mismatches, 0);
}

// The Vulkan path (lavapipe here) against the same references and tolerances: the sandwich
// norms run as its rms_norm and add shaders.
TEST(Glm4_0414Gpu, TinyF32LogitsF16KvMatchLlamaCpp) {
  Compare c = compare(DType::kF32, "tiny-f32.logits.jsonl", kPrefill, DType::kF16, "vulkan");
  std::printf("vulkan glm4-0414 tiny f32, f16 KV: max |diff| %.3g, argmax mismatches %d\n",
              c.max_diff, c.argmax_mismatches);
  EXPECT_LT(c.max_diff, 5e-3f);
  EXPECT_EQ(c.argmax_mismatches, 0);
}

TEST(Glm4_0414Gpu, TinyQ8LogitsMatchLlamaCpp) {
  Compare c = compare(DType::kQ8_0, "tiny-q8_0.logits.jsonl", kPrefill, DType::kF16, "vulkan");
  std::printf("vulkan glm4-0414 tiny q8_0, f16 KV: max |diff| %.3g, argmax mismatches %d\n",
              c.max_diff, c.argmax_mismatches);
  EXPECT_LT(c.max_diff, 0.05f);
  EXPECT_EQ(c.clear_argmax_mismatches, 0);
}

// LoRA per request on the GPU with GLM-4-0414's sandwich norms: a sequence's attn_output and
// ffn_down pairs join those products before their post norms, as on the CPU; every matrix has
// a pair (gen-model --lora-of's random_lora).
TEST(Glm4_0414Gpu, LoraPerRequestEqualsTheCpu) {
  const std::string base = tiny_0414(DType::kF32);
  const std::string lora = model::testing::temp_path("glm4-0414-tiny-lora.gguf");
  {
    auto f = gguf::File::open(base);
    ASSERT_TRUE(f.ok());
    auto l = convert::random_lora(**f, 8, 16.0f, 7);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    ASSERT_TRUE(convert::write_lora_file(*l, DType::kF32, lora).ok());
  }
  const std::vector<int32_t> prompt = {17,  300, 5,  211, 42, 7, 150, 99, 1,
                                       498, 3,   77, 201, 64, 9, 310, 12, 45};
  const std::vector<int32_t> decode = {11, 222, 33};
  std::vector<std::vector<float>> rows[3];  // cpu with, vulkan with, cpu without
  int i = 0;
  for (const char* device : {"cpu", "vulkan", "cpu"}) {
    auto m = model::testing::load(base, 2, true, device);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ((*m)->device_name().substr(0, 3), std::string(device).substr(0, 3));
    auto adapter = model::load_adapter(lora, (*m)->config(), 1.0f, "a");
    ASSERT_TRUE(adapter.ok()) << adapter.status().to_string();
    model::EvalOptions o;
    o.adapter = i < 2 ? adapter->get() : nullptr;
    auto r = model::evaluate(**m, prompt, decode, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    for (const auto& row : *r) rows[i].push_back(row.values);
    ++i;
  }
  ASSERT_EQ(rows[1].size(), rows[0].size());
  float worst = 0, moved = 0;
  for (size_t r = 0; r < rows[0].size(); ++r) {
    for (size_t j = 0; j < rows[0][r].size(); ++j) {
      const float want = rows[0][r][j];
      worst = std::max(worst, std::fabs(rows[1][r][j] - want) / (1 + std::fabs(want)));
      moved = std::max(moved, std::fabs(rows[2][r][j] - want));
    }
  }
  std::printf(
      "glm4-0414 tiny + LoRA: vulkan vs cpu max rel diff %.3g (the LoRA moves logits by "
      "%.3g)\n",
      worst, moved);
  EXPECT_LT(worst, 1e-4f);
  EXPECT_GT(moved, 0.01f);
}

// Greedy continuations of several prompts: the same ids as llama.cpp's argmax loop.
TEST(Glm4_0414, TinyGreedyIdsMatchLlamaCpp) {
  glm::testing::expect_greedy_ids_match(tiny_0414(DType::kF32), ref_0414("tiny-f32.greedy.jsonl"));
}

// A file without one of the sandwich norms is refused at load, naming the tensor.
TEST(Glm4_0414, MissingPostNormIsNamed) {
  auto f = gguf::File::open(tiny_0414(DType::kF32));
  ASSERT_TRUE(f.ok());
  gguf::Writer w;
  for (const auto& [key, value] : (*f)->metadata()) {
    if (key != "general.alignment") w.set(key, value);
  }
  const std::string drop = "blk.1.post_ffw_norm.weight";
  for (const gguf::TensorInfo& t : (*f)->tensors()) {
    if (t.name != drop) w.add_tensor(t.name, t.type, t.shape);
  }
  const std::string path = model::testing::temp_path("glm4-0414-no-post-norm.gguf");
  ASSERT_TRUE(w.begin(path).ok());
  for (const gguf::TensorInfo& t : (*f)->tensors()) {
    if (t.name != drop) {
      ASSERT_TRUE(w.write_tensor_data(t.data, t.n_bytes).ok());
    }
  }
  ASSERT_TRUE(w.finish().ok());
  auto m = model::testing::load(path);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(drop), std::string::npos) << m.status().message();
}

// The model's own files choose GLM-4-0414's chat format and its three ends of turn.
TEST(Glm4_0414, GeneratedFileGetsTheGlm4_0414Template) {
  auto f = gguf::File::open(tiny_0414(DType::kF32));
  ASSERT_TRUE(f.ok());
  auto t = tok::Tokenizer::from_gguf(**f);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  auto tmpl = tok::ChatTemplate::for_model(**f, **t);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  EXPECT_STREQ((*tmpl)->name(), "glm4-0414");
  const int32_t base = 512 - 14;  // the synthetic vocabulary's 14 GLM-4 specials end it
  EXPECT_EQ((*tmpl)->stop_ids(), (std::vector<int32_t>{base, base + 7, base + 9}));
  auto ids = (*tmpl)->render({{"user", "hi"}});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), base + 2);  // [gMASK]
  EXPECT_EQ((*ids)[1], base + 4);     // <sop>
  EXPECT_EQ((*ids)[2], base + 7);     // <|user|>
}

}  // namespace
}  // namespace glm
