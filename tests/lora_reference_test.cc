// LoRA against llama.cpp: the logits that a libllama program printed with
// llama_adapter_lora_init + llama_set_adapters_lora for random tiny models and random LoRA GGUF
// files written by our tools (tests/data/lora/README.md says how). The files are regenerated
// here from their seeds (gen-model and gen-model --lora-of write the same bytes for a seed), and
// glmserve's two ways of applying an adapter, per request (the side path) and merged at load,
// are each compared with llama.cpp's; then one batch with sequences of three adapters and the
// bare base against the same references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "convert/gen_model.h"
#include "convert/lora_file.h"
#include "gguf/gguf.h"
#include "llama_reference.h"
#include "model/eval.h"
#include "model/lora.h"
#include "model/test_util.h"

namespace glm {
namespace {

using glm::testing::Compare;
using glm::testing::kPrefill;
using model::testing::JsonRow;

std::string ref_lora(const std::string& name) {
  return std::string(GLM_SOURCE_DIR) + "/tests/data/lora/" + name;
}

std::string lora_base(convert::Family family, DType type) {
  return glm::testing::tiny_model("lora-base", family, type);
}

// `gen-model --lora-of BASE --rank 8 --alpha 16 --seed <seed> [--targets ...]` (f32).
std::string tiny_lora(const std::string& base, uint64_t seed,
                      const std::vector<std::string>& targets = {}) {
  const std::string path = base + ".lora" + std::to_string(seed) + ".gguf";
  if (!model::testing::file_exists(path)) {
    auto f = gguf::File::open(base);
    EXPECT_TRUE(f.ok());
    if (!f.ok()) return path;
    StatusOr<convert::LoraFile> lora = convert::random_lora(**f, 8, 16.0f, seed, targets);
    EXPECT_TRUE(lora.ok()) << lora.status().to_string();
    if (!lora.ok()) return path;
    Status s = convert::write_lora_file(*lora, DType::kF32, path);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  return path;
}

struct Case {
  convert::Family family;
  DType type;
  uint64_t lora_seed;
  float scale;
  const char* golden;
  std::vector<std::string> targets;  // empty: every matrix
};

const Case kChatglm1 = {convert::Family::kChatGLM3, DType::kF32, 1, 1.0f,
                        "chatglm3-tiny-f32.lora1.logits.jsonl"};
const Case kChatglm2 = {convert::Family::kChatGLM3, DType::kF32, 2, 0.5f,
                        "chatglm3-tiny-f32.lora2-x0.5.logits.jsonl"};
// llama.cpp (d32676d) aborts on a LoRA of glm4's attn_output or ffn_down (it sets F32 precision
// on their output, which a LoRA turns from a matmul into an add): the others only.
const Case kGlm4_0414 = {convert::Family::kGLM4_0414,
                         DType::kF32,
                         3,
                         1.0f,
                         "glm4-0414-tiny-f32.lora3.logits.jsonl",
                         {"attn_q", "attn_k", "attn_v", "ffn_up"}};
const Case kChatglmQ8 = {convert::Family::kChatGLM3, DType::kQ8_0, 1, 1.0f,
                         "chatglm3-tiny-q8_0.lora1.logits.jsonl"};
int argmax(const float* v, size_t n) { return static_cast<int>(std::max_element(v, v + n) - v); }

void compare_rows(const std::vector<JsonRow>& want, const std::vector<float>& got, size_t first,
                  Compare* c) {
  for (size_t i = 0; i < want.size(); ++i) {
    const size_t n = want[i].values.size();
    const float* g = got.data() + (first + i) * n;
    for (size_t j = 0; j < n; ++j) {
      c->max_diff = std::max(c->max_diff, std::fabs(g[j] - want[i].values[j]));
      c->max_abs = std::max(c->max_abs, std::fabs(want[i].values[j]));
    }
    if (argmax(g, n) != argmax(want[i].values.data(), n)) ++c->argmax_mismatches;
  }
}

// merged: the adapter merged into the weights at load (--lora); else per request.
Compare run_case(const Case& k, bool merged) {
  const std::vector<JsonRow> want = model::testing::read_jsonl(ref_lora(k.golden));
  EXPECT_EQ(want.size(), 20u);
  std::vector<int32_t> prompt, decode;
  for (size_t i = 0; i < want.size(); ++i) {
    (static_cast<int>(i) < kPrefill ? prompt : decode).push_back(want[i].token);
  }
  const std::string base = lora_base(k.family, k.type);
  const std::string lora = tiny_lora(lora_base(k.family, DType::kF32), k.lora_seed, k.targets);
  auto f = gguf::File::open(base);
  EXPECT_TRUE(f.ok());
  if (!f.ok()) return {1e9f};
  model::LoadOptions o;
  o.n_threads = 2;
  o.device = "cpu";
  if (merged) o.lora.push_back({lora, k.scale});
  auto m = model::load_model(std::shared_ptr<const gguf::File>(std::move(*f)), o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return {1e9f};
  std::shared_ptr<const model::Adapter> adapter;
  if (!merged) {
    auto a = model::load_adapter(lora, (*m)->config(), k.scale, "a");
    EXPECT_TRUE(a.ok()) << a.status().to_string();
    if (!a.ok()) return {1e9f};
    adapter = *a;
  }
  // evaluate() with the adapter on every step: prefill in one batch, then one step per token.
  const int bt = 4;
  const int n_pos = static_cast<int>(want.size());
  model::KvPool kv((*m)->config(), (n_pos + bt - 1) / bt, bt, DType::kF32);
  std::vector<int32_t> blocks((n_pos + bt - 1) / bt);
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);
  std::vector<float> out;
  model::SeqInput in;
  in.tokens = prompt.data();
  in.n_tokens = kPrefill;
  in.blocks = blocks.data();
  in.n_blocks = static_cast<int>(blocks.size());
  in.all_logits = true;
  in.adapter = adapter.get();
  Status s = (*m)->forward({in}, &kv, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  for (size_t i = 0; i < decode.size(); ++i) {
    in.tokens = &decode[i];
    in.n_tokens = 1;
    in.n_past = kPrefill + static_cast<int>(i);
    in.all_logits = false;
    s = (*m)->forward({in}, &kv, &out);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  Compare c;
  EXPECT_EQ(out.size(), want.size() * want[0].values.size());
  if (out.size() == want.size() * want[0].values.size()) compare_rows(want, out, 0, &c);
  return c;
}

// F32 weights: llama.cpp's CPU graph stays in F32, so the tolerance is the base model's (1e-4,
// tests/data/glm4-0414/README.md): only the summation order differs.
void expect_f32_match(const Case& k) {
  for (bool merged : {false, true}) {
    Compare c = run_case(k, merged);
    std::printf("%s (%s): max |diff| %.3g (max |logit| %.3g), argmax mismatches %d\n", k.golden,
                merged ? "merged" : "per request", c.max_diff, c.max_abs, c.argmax_mismatches);
    EXPECT_LT(c.max_diff, 1e-4f) << (merged ? "merged" : "per request");
    EXPECT_EQ(c.argmax_mismatches, 0);
  }
}

TEST(LoraReference, ChatglmMatchesLlamaCpp) { expect_f32_match(kChatglm1); }
TEST(LoraReference, ChatglmHalfScaleMatchesLlamaCpp) { expect_f32_match(kChatglm2); }
TEST(LoraReference, Glm4_0414SeparateQkvMatchesLlamaCpp) { expect_f32_match(kGlm4_0414); }

// Q8_0 base weights with the F32 LoRA beside them (llama.cpp applies it unmerged): per request,
// the base model's quantized tolerance (0.05); merged, the merged weights are re-quantized to
// Q8_0, which llama.cpp does not do: the same bound still holds.
TEST(LoraReference, Q8BaseWithinQuantizedTolerance) {
  for (bool merged : {false, true}) {
    Compare c = run_case(kChatglmQ8, merged);
    std::printf("%s (%s): max |diff| %.3g (max |logit| %.3g), argmax mismatches %d\n",
                kChatglmQ8.golden, merged ? "merged" : "per request", c.max_diff, c.max_abs,
                c.argmax_mismatches);
    EXPECT_LT(c.max_diff, 0.05f) << (merged ? "merged" : "per request");
  }
}

// One prefill batch: the llama.cpp-checked adapters 1 and 2 (x0.5), a third adapter and the
// bare base, on the reference's prompt; adapters 1 and 2 must still match llama.cpp, and the
// third and the base must equal their own runs alone.
TEST(LoraReference, BatchOfThreeAdaptersAndBaseMatchesEachAlone) {
  const std::vector<JsonRow> want1 = model::testing::read_jsonl(ref_lora(kChatglm1.golden));
  const std::vector<JsonRow> want2 = model::testing::read_jsonl(ref_lora(kChatglm2.golden));
  ASSERT_GE(want1.size(), static_cast<size_t>(kPrefill));
  std::vector<JsonRow> p1(want1.begin(), want1.begin() + kPrefill);
  std::vector<JsonRow> p2(want2.begin(), want2.begin() + kPrefill);
  std::vector<int32_t> prompt;
  for (const JsonRow& r : p1) prompt.push_back(r.token);
  const std::string base = lora_base(convert::Family::kChatGLM3, DType::kF32);
  auto m = model::testing::load(base, 2);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const model::Config& c = (*m)->config();
  auto a1 = model::load_adapter(tiny_lora(base, 1), c, 1.0f, "a1");
  auto a2 = model::load_adapter(tiny_lora(base, 2), c, 0.5f, "a2");
  auto a4 = model::load_adapter(tiny_lora(base, 4), c, 1.0f, "a4");
  ASSERT_TRUE(a1.ok() && a2.ok() && a4.ok());
  const model::Adapter* adapters[] = {a1->get(), nullptr, a2->get(), a4->get()};
  const std::vector<int32_t> other = {3, 99, 250, 7, 41};
  const int bt = 4, per = kPrefill / bt;
  model::KvPool kv(c, 4 * per, bt, DType::kF32);
  std::vector<std::vector<int32_t>> blocks(4);
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < per; ++b) blocks[s].push_back(b * 4 + s);  // interleaved in the pool
  }
  std::vector<model::SeqInput> batch;
  for (int s = 0; s < 4; ++s) {
    const std::vector<int32_t>& toks = s == 3 ? other : prompt;
    model::SeqInput in{toks.data(), static_cast<int>(toks.size()), 0, blocks[s].data(), per, true};
    in.adapter = adapters[s];
    batch.push_back(in);
  }
  std::vector<float> out;
  ASSERT_TRUE((*m)->forward(batch, &kv, &out).ok());
  const size_t nv = c.n_vocab;
  Compare c1, c2;
  compare_rows(p1, out, 0, &c1);
  compare_rows(p2, out, 2 * kPrefill, &c2);
  std::printf("batched: adapter 1 vs llama.cpp %.3g, adapter 2 (x0.5) vs llama.cpp %.3g\n",
              c1.max_diff, c2.max_diff);
  EXPECT_LT(c1.max_diff, 1e-4f);
  EXPECT_LT(c2.max_diff, 1e-4f);
  // The base and the third adapter alone.
  for (int s : {1, 3}) {
    const std::vector<int32_t>& toks = s == 3 ? other : prompt;
    model::KvPool own(c, per, bt, DType::kF32);
    std::vector<int32_t> own_blocks(per);
    for (int b = 0; b < per; ++b) own_blocks[b] = b;
    model::SeqInput in{toks.data(), static_cast<int>(toks.size()), 0, own_blocks.data(), per, true};
    in.adapter = adapters[s];
    std::vector<float> alone;
    ASSERT_TRUE((*m)->forward({in}, &own, &alone).ok());
    const size_t first = (s == 1 ? kPrefill : 3 * kPrefill) * nv;
    float d = 0;
    for (size_t j = 0; j < alone.size(); ++j) d = std::max(d, std::fabs(alone[j] - out[first + j]));
    EXPECT_LT(d, 1e-5f) << "sequence " << s;
  }
  // And the base differs from adapter 1 on the same prompt (the adapter is not a no-op).
  float d = 0;
  for (size_t j = 0; j < kPrefill * nv; ++j)
    d = std::max(d, std::fabs(out[j] - out[kPrefill * nv + j]));
  EXPECT_GT(d, 0.05f);
}

}  // namespace
}  // namespace glm
