// PEFT LoRA directories -> LoRA GGUF (peft_convert.h), on small random adapters written here in
// PEFT's layout (adapter_config.json + adapter_model.safetensors or .bin). The expected numbers
// are what llama.cpp's convert_lora_to_gguf.py writes: lora_A and lora_B unchanged (torch
// [r, in] -> ggml {in, r}; [out, r] -> {r, out}), adapter.lora.alpha = lora_alpha.
#include "convert/peft_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "checkpoint/torch_test_writer.h"
#include "convert/test_util.h"
#include "core/fp16.h"
#include "gguf/gguf.h"

namespace glm::convert {
namespace {

using checkpoint::StTensorOut;
using testing::TempDir;

struct Module {
  std::string hf;    // "transformer.encoder.layers.0.self_attention.query_key_value"
  std::string gguf;  // "blk.0.attn_qkv.weight"
  int64_t n_in, n_out;
};

// ChatGLM3-shaped modules of a 2-layer model: hidden 64, qkv 96 rows, ffn 2 x 48.
std::vector<Module> chatglm_modules() {
  std::vector<Module> m;
  for (int l = 0; l < 2; ++l) {
    const std::string p = "transformer.encoder.layers." + std::to_string(l) + ".";
    const std::string b = "blk." + std::to_string(l) + ".";
    m.push_back({p + "self_attention.query_key_value", b + "attn_qkv.weight", 64, 96});
    m.push_back({p + "self_attention.dense", b + "attn_output.weight", 64, 64});
    m.push_back({p + "mlp.dense_h_to_4h", b + "ffn_up.weight", 64, 96});
    m.push_back({p + "mlp.dense_4h_to_h", b + "ffn_down.weight", 48, 64});
  }
  return m;
}

struct Peft {
  int64_t r = 4;
  double alpha = 32;
  std::string dtype = "F32";  // of the stored tensors
  bool bin = false;           // adapter_model.bin (torch zip) instead of safetensors
  std::string extra_config;   // more JSON members, ",\"use_rslora\": true"
  std::vector<std::string> targets = {"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"};
  std::vector<Module> modules = chatglm_modules();
};

// The values written, by tensor name (as floats after the dtype's rounding).
using Written = std::map<std::string, std::vector<float>>;

std::vector<uint8_t> encode(const std::vector<float>& v, const std::string& dtype) {
  std::vector<uint8_t> b;
  if (dtype == "F32") {
    b.resize(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
  } else {
    b.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = dtype == "BF16" ? fp32_to_bf16(v[i]) : fp32_to_fp16(v[i]);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  return b;
}

float rounded(float x, const std::string& dtype) {
  if (dtype == "BF16") return bf16_to_fp32(fp32_to_bf16(x));
  if (dtype == "F16") return fp16_to_fp32(fp32_to_fp16(x));
  return x;
}

Written write_peft(const std::string& dir, const Peft& p,
                   const std::vector<StTensorOut>& extra = {}) {
  std::string targets;
  for (const std::string& t : p.targets) targets += (targets.empty() ? "\"" : ",\"") + t + "\"";
  std::ofstream(dir + "/adapter_config.json")
      << "{\"peft_type\": \"LORA\", \"task_type\": \"CAUSAL_LM\", \"r\": " << p.r
      << ", \"lora_alpha\": " << p.alpha << ", \"lora_dropout\": 0.1, \"target_modules\": ["
      << targets << "], \"base_model_name_or_path\": \"THUDM/chatglm3-6b\"" << p.extra_config
      << "}";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<StTensorOut> ts;
  Written written;
  for (const Module& m : p.modules) {
    std::vector<float> a(p.r * m.n_in), b(m.n_out * p.r);
    for (float& x : a) x = normal(rng);
    for (float& x : b) x = normal(rng);
    const std::string an = "base_model.model." + m.hf + ".lora_A.weight";
    const std::string bn = "base_model.model." + m.hf + ".lora_B.weight";
    ts.push_back({an, p.dtype, {p.r, m.n_in}, encode(a, p.dtype)});
    ts.push_back({bn, p.dtype, {m.n_out, p.r}, encode(b, p.dtype)});
    for (float& x : a) x = rounded(x, p.dtype);
    for (float& x : b) x = rounded(x, p.dtype);
    written[m.gguf + ".lora_a"] = a;
    written[m.gguf + ".lora_b"] = b;
  }
  for (const StTensorOut& t : extra) ts.push_back(t);
  if (p.bin) {
    EXPECT_TRUE(checkpoint::testing::write_torch_checkpoint(dir + "/adapter_model.bin", ts));
  } else {
    EXPECT_TRUE(checkpoint::write_safetensors(dir + "/adapter_model.safetensors", ts).ok());
  }
  return written;
}

// Converts and checks the GGUF against what llama.cpp's converter writes for the same input.
void expect_llama_cpp_numbers(const Peft& p) {
  TempDir dir;
  const Written want = write_peft(dir.file(""), p);
  ASSERT_TRUE(is_peft_dir(dir.file("")));
  const std::string out = dir.file("a.gguf");
  Status s = convert_peft(dir.file(""), DType::kF32, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto f = gguf::File::open(out);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*(*f)->get_string("general.type"), "adapter");
  EXPECT_EQ(*(*f)->get_string("adapter.type"), "lora");
  EXPECT_EQ(*(*f)->get_string("general.architecture"), "chatglm");
  const bool rslora = p.extra_config.find("use_rslora") != std::string::npos;
  const double alpha = rslora ? p.alpha * std::sqrt(double(p.r)) : p.alpha;
  EXPECT_NEAR(*(*f)->get_float("adapter.lora.alpha"), alpha, 1e-4 * alpha);
  EXPECT_EQ((*f)->tensors().size(), want.size());
  for (const Module& m : p.modules) {
    const gguf::TensorInfo* a = (*f)->tensor(m.gguf + ".lora_a");
    const gguf::TensorInfo* b = (*f)->tensor(m.gguf + ".lora_b");
    ASSERT_NE(a, nullptr) << m.gguf;
    ASSERT_NE(b, nullptr) << m.gguf;
    EXPECT_EQ(a->shape, (std::vector<int64_t>{m.n_in, p.r}));
    EXPECT_EQ(b->shape, (std::vector<int64_t>{p.r, m.n_out}));
    ASSERT_EQ(a->type, DType::kF32);
    const std::vector<float>& wa = want.at(m.gguf + ".lora_a");
    const std::vector<float>& wb = want.at(m.gguf + ".lora_b");
    EXPECT_EQ(std::memcmp(a->data, wa.data(), wa.size() * 4), 0) << m.gguf;
    EXPECT_EQ(std::memcmp(b->data, wb.data(), wb.size() * 4), 0) << m.gguf;
  }
}

TEST(PeftConvert, SafetensorsF32MatchesLlamaCppConverter) { expect_llama_cpp_numbers(Peft()); }

TEST(PeftConvert, BinBf16MatchesLlamaCppConverter) {
  Peft p;
  p.bin = true;
  p.dtype = "BF16";
  p.r = 8;
  p.alpha = 16;
  expect_llama_cpp_numbers(p);
}

// rsLoRA's scale alpha / sqrt(r) is kept by writing alpha * sqrt(r) (alpha' / r = alpha / sqrt r).
TEST(PeftConvert, RsLoraKeepsItsScale) {
  Peft p;
  p.extra_config = ", \"use_rslora\": true";
  expect_llama_cpp_numbers(p);
}

// GLM-4-0414 (transformers' Glm4ForCausalLM) names map to llama.cpp's glm4 layout.
TEST(PeftConvert, Glm4_0414Names) {
  TempDir dir;
  Peft p;
  p.targets = {"q_proj", "o_proj", "gate_up_proj"};
  p.modules = {{"model.layers.0.self_attn.q_proj", "blk.0.attn_q.weight", 64, 64},
               {"model.layers.0.self_attn.o_proj", "blk.0.attn_output.weight", 64, 64},
               {"model.layers.1.mlp.gate_up_proj", "blk.1.ffn_up.weight", 64, 96}};
  write_peft(dir.file(""), p);
  StatusOr<LoraFile> lora = read_peft(dir.file(""));
  ASSERT_TRUE(lora.ok()) << lora.status().to_string();
  EXPECT_EQ(lora->arch, "glm4");
  ASSERT_EQ(lora->tensors.size(), 3u);
  EXPECT_EQ(lora->tensors[0].base, "blk.0.attn_q.weight");
  EXPECT_EQ(lora->tensors[1].base, "blk.0.attn_output.weight");
  EXPECT_EQ(lora->tensors[2].base, "blk.1.ffn_up.weight");
}

void expect_refused(const Peft& p, const std::vector<StTensorOut>& extra, const std::string& needle,
                    std::function<void(const std::string&)> tamper = nullptr) {
  TempDir dir;
  write_peft(dir.file(""), p, extra);
  if (tamper) tamper(dir.file(""));
  const std::string out = dir.file("a.gguf");
  Status s = convert_peft(dir.file(""), DType::kF32, out);
  ASSERT_FALSE(s.ok()) << needle;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  EXPECT_FALSE(std::ifstream(out).good()) << "nothing is written on error";
}

TEST(PeftConvert, MisfitsAreNamed) {
  Peft p;
  // A tensor whose rank disagrees with r.
  const std::string bad = "base_model.model.transformer.encoder.layers.1.mlp.dense_4h_to_h";
  Peft wrong_rank = p;
  wrong_rank.modules.pop_back();
  expect_refused(wrong_rank,
                 {{bad + ".lora_A.weight", "F32", {3, 48}, encode(std::vector<float>(144), "F32")},
                  {bad + ".lora_B.weight", "F32", {64, 3}, encode(std::vector<float>(192), "F32")}},
                 bad + ".lora_A.weight");
  // A lone A.
  expect_refused(wrong_rank,
                 {{bad + ".lora_A.weight", "F32", {4, 48}, encode(std::vector<float>(192), "F32")}},
                 "has no lora_B");
  // A module outside target_modules.
  Peft narrow = p;
  narrow.targets = {"query_key_value"};
  expect_refused(narrow, {}, "target_modules does not list");
  // Embeddings (new tokens trained) cannot be a LoRA of the layers.
  expect_refused(p,
                 {{"base_model.model.transformer.embedding.word_embeddings.lora_embedding_A",
                   "F32",
                   {4, 8},
                   encode(std::vector<float>(32), "F32")}},
                 "word_embeddings");
  // DoRA.
  Peft dora = p;
  dora.extra_config = ", \"use_dora\": true";
  expect_refused(dora, {}, "DoRA");
  // No rank.
  expect_refused(p, {}, "\"r\"", [](const std::string& dir) {
    std::ofstream(dir + "/adapter_config.json") << "{\"lora_alpha\": 8}";
  });
}

// An adapter_model.bin whose pickle calls a function: refused by the data-only unpickler,
// naming the global; nothing runs and nothing is written.
TEST(PeftConvert, PickleWithCodeIsRefused) {
  TempDir dir;
  Peft p;
  write_peft(dir.file(""), p);  // safetensors + config; replaced by an evil .bin below
  std::remove(dir.file("adapter_model.safetensors").c_str());
  const std::string evil = "cos\nsystem\n(S'touch " + dir.file("pwned") + "'\ntR.";
  checkpoint::testing::TorchZipOptions o;
  ASSERT_TRUE(checkpoint::testing::write_file(
      dir.file("adapter_model.bin"),
      checkpoint::testing::torch_zip_bytes({{"data.pkl", evil}, {"version", "3\n"}}, o, false)));
  Status s = convert_peft(dir.file(""), DType::kF32, dir.file("a.gguf"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("os.system"), std::string::npos) << s.message();
  EXPECT_FALSE(std::ifstream(dir.file("pwned")).good());
  EXPECT_FALSE(std::ifstream(dir.file("a.gguf")).good());
}

}  // namespace
}  // namespace glm::convert
