// convert of P-Tuning v2 checkpoint directories (what ChatGLM's ptuning/main.py saves: config.json
// with pre_seq_len, and a pytorch_model.bin or safetensors holding transformer.prefix_encoder.*),
// of ChatGLM2/3 and of ChatGLM-6B (v1), written here by the checkpoint test writers, including
// hostile ones.
#include "convert/ptuning_convert.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "arch/ptuning_names.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/torch_test_writer.h"
#include "convert/test_util.h"
#include "core/fp16.h"
#include "gguf/gguf.h"

namespace glm::convert {
namespace {

namespace fs = std::filesystem;
namespace pt = arch::ptuning;
using checkpoint::StTensorOut;
using testing::TempDir;

// A tiny ChatGLM3's config: 2 layers, 2 KV groups of 16 channels: kv_dim 32, W = 128.
constexpr int kLayers = 2, kKvDim = 32, kW = kLayers * 2 * kKvDim, kHidden = 64;

void write_config(const fs::path& dir, int pre_seq_len, bool projection) {
  fs::create_directories(dir);
  nlohmann::json c = {
      {"model_type", "chatglm"},
      {"hidden_size", kHidden},
      {"num_layers", kLayers},
      {"num_attention_heads", 4},
      {"multi_query_attention", true},
      {"multi_query_group_num", 2},
      {"kv_channels", 16},
      {"ffn_hidden_size", 96},
      {"padded_vocab_size", 64},
      {"seq_length", 512},
      {"layernorm_epsilon", 1e-5},
      {"pre_seq_len", pre_seq_len},
      {"prefix_projection", projection},
  };
  std::ofstream(dir / "config.json") << c.dump(2);
}

// A tensor of random values in `dtype` (F32, F16, BF16) and its values as f32 after rounding.
StTensorOut random_tensor(const std::string& name, std::vector<int64_t> shape,
                          const std::string& dtype, uint32_t seed, std::vector<float>* values) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  StTensorOut t{name, dtype, shape, {}};
  values->clear();
  for (int64_t i = 0; i < n; ++i) {
    float x = normal(rng);
    if (dtype == "F32") {
      const size_t at = t.data.size();
      t.data.resize(at + 4);
      std::memcpy(t.data.data() + at, &x, 4);
    } else {
      const uint16_t h = dtype == "F16" ? fp32_to_fp16(x) : fp32_to_bf16(x);
      x = dtype == "F16" ? fp16_to_fp32(h) : bf16_to_fp32(h);
      t.data.push_back(static_cast<uint8_t>(h & 0xff));
      t.data.push_back(static_cast<uint8_t>(h >> 8));
    }
    values->push_back(x);
  }
  return t;
}

// The encoder's widths: W = num_layers * 2 * kv_dim, E the embedding's width with the projection
// (ChatGLM2/3: W; ChatGLM-6B: hidden_size), H the projection's hidden width.
struct Geometry {
  std::string arch = "chatglm";
  int kv_dim = kKvDim;
  int w = kW;
  int e_proj = kW;
  int hidden = kHidden;
  int e(bool projection) const { return projection ? e_proj : w; }
};

// ChatGLM-6B (v1) of write_v1_config: hidden 64, 2 layers, 4 heads: kv_dim 64, W = 256, E = H = 64.
const Geometry kV1{"chatglm1", 64, kLayers * 2 * 64, 64, 64};

struct Encoder {
  std::vector<StTensorOut> tensors;
  std::vector<std::vector<float>> values;  // in pt:: order: embedding, trans.0.{w,b}, trans.2.{w,b}
};

Encoder random_encoder(int pre_seq_len, bool projection, const std::string& dtype,
                       const std::string& prefix = "transformer.prefix_encoder.",
                       const Geometry& g = Geometry()) {
  Encoder e;
  std::vector<float> v;
  const int ew = g.e(projection);
  e.tensors.push_back(random_tensor(prefix + "embedding.weight", {pre_seq_len, ew}, dtype, 1, &v));
  e.values.push_back(v);
  if (projection) {
    e.tensors.push_back(random_tensor(prefix + "trans.0.weight", {g.hidden, ew}, dtype, 2, &v));
    e.values.push_back(v);
    e.tensors.push_back(random_tensor(prefix + "trans.0.bias", {g.hidden}, dtype, 3, &v));
    e.values.push_back(v);
    e.tensors.push_back(random_tensor(prefix + "trans.2.weight", {g.w, g.hidden}, dtype, 4, &v));
    e.values.push_back(v);
    e.tensors.push_back(random_tensor(prefix + "trans.2.bias", {g.w}, dtype, 5, &v));
    e.values.push_back(v);
  }
  return e;
}

void expect_adapter(const std::string& path, int pre_seq_len, bool projection, const Encoder& e,
                    const Geometry& geo = Geometry()) {
  StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const gguf::File& g = **f;
  EXPECT_EQ(*g.get_string("general.architecture"), geo.arch);
  EXPECT_EQ(*g.get_string("general.type"), "adapter");
  EXPECT_EQ(*g.get_string(pt::kKeyType), "ptuning");
  EXPECT_EQ(*g.get_int(pt::kKeyPreSeqLen), pre_seq_len);
  EXPECT_EQ(*g.get_bool(pt::kKeyProjection), projection);
  EXPECT_EQ(*g.get_int(pt::kKeyBlockCount), kLayers);
  EXPECT_EQ(*g.get_int(pt::kKeyKvDim), geo.kv_dim);
  const int64_t ew = geo.e(projection);
  const std::vector<std::pair<const char*, std::vector<int64_t>>> want = {
      {pt::kEmbedding, {ew, pre_seq_len}}, {pt::kTrans0Weight, {ew, geo.hidden}},
      {pt::kTrans0Bias, {geo.hidden}},     {pt::kTrans2Weight, {geo.hidden, geo.w}},
      {pt::kTrans2Bias, {geo.w}},
  };
  ASSERT_EQ(g.tensors().size(), projection ? 5u : 1u);
  for (size_t i = 0; i < g.tensors().size(); ++i) {
    const gguf::TensorInfo* t = g.tensor(want[i].first);
    ASSERT_NE(t, nullptr) << want[i].first;
    EXPECT_EQ(t->type, DType::kF32);
    EXPECT_EQ(t->shape, want[i].second) << want[i].first;
    ASSERT_EQ(static_cast<size_t>(t->n_elements()), e.values[i].size());
    EXPECT_EQ(std::memcmp(t->data, e.values[i].data(), e.values[i].size() * 4), 0) << want[i].first;
  }
}

TEST(PtuningConvertTest, TorchBinAndSafetensorsBecomeTheAdapter) {
  TempDir tmp;
  struct Case {
    bool projection;
    std::string dtype;
    bool torch;
  };
  for (const Case& c : {Case{false, "F16", true}, Case{true, "F32", true},
                        Case{true, "BF16", false}, Case{false, "F32", false}}) {
    SCOPED_TRACE(c.dtype + (c.torch ? " .bin" : " safetensors"));
    const fs::path dir = tmp.path() / ("pt_" + c.dtype + (c.torch ? "_bin" : "_st"));
    write_config(dir, 4, c.projection);
    const Encoder e = random_encoder(4, c.projection, c.dtype);
    if (c.torch) {
      ASSERT_TRUE(checkpoint::testing::write_torch_checkpoint((dir / "pytorch_model.bin").string(),
                                                              e.tensors));
    } else {
      ASSERT_TRUE(
          checkpoint::write_safetensors((dir / "model.safetensors").string(), e.tensors).ok());
    }
    EXPECT_TRUE(is_ptuning_dir(dir.string()));
    const std::string out = tmp.file("a.gguf");
    WriteReport rep;
    const Status st = convert_ptuning(dir.string(), out, &rep);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(rep.n_tensors, c.projection ? 5u : 1u);
    expect_adapter(out, 4, c.projection, e);
  }
}

TEST(PtuningConvertTest, AWholeModelSaveGivesItsPrefixEncoderOnly) {
  // ChatGLM3's finetune_demo may save the whole model: the base's tensors are skipped.
  TempDir tmp;
  const fs::path dir = tmp.path() / "whole";
  write_config(dir, 2, false);
  Encoder e = random_encoder(2, false, "F32");
  std::vector<float> v;
  e.tensors.insert(e.tensors.begin(), random_tensor("transformer.embedding.word_embeddings.weight",
                                                    {64, kHidden}, "F32", 9, &v));
  ASSERT_TRUE(
      checkpoint::write_safetensors((dir / "model-00001-of-00001.safetensors").string(), e.tensors)
          .ok());
  WriteReport rep;
  ASSERT_TRUE(convert_ptuning(dir.string(), tmp.file("w.gguf"), &rep).ok());
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_NE(rep.notes[0].find("skipped 1"), std::string::npos);
  expect_adapter(tmp.file("w.gguf"), 2, false, e);
}

TEST(PtuningConvertTest, APlainModelIsNotAPtuningDirectory) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "plain";
  write_config(dir, 2, false);
  nlohmann::json c = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  c["pre_seq_len"] = nullptr;  // ChatGLM's own config.json carries "pre_seq_len": null
  std::ofstream(dir / "config.json") << c.dump();
  EXPECT_FALSE(is_ptuning_dir(dir.string()));
  EXPECT_FALSE(is_ptuning_dir((tmp.path() / "missing").string()));
}

// Converts `dir`, expecting an error whose message contains `part`, and no output file.
void expect_refused(const fs::path& dir, const std::string& out, const std::string& part) {
  SCOPED_TRACE(part);
  const Status st = convert_ptuning(dir.string(), out, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

TEST(PtuningConvertTest, HostileAndMismatchedCheckpointsAreRefusedByName) {
  TempDir tmp;
  const std::string out = tmp.file("bad.gguf");
  {
    // A pickle that would run os.system: refused by the unpickler, the command never runs.
    const fs::path dir = tmp.path() / "evil";
    write_config(dir, 2, false);
    const std::string witness = tmp.file("pwned");
    checkpoint::testing::PickleWriter w;
    w.global("os", "system");
    w.str("touch " + witness, false);
    w.op(0x85);  // TUPLE1
    w.op('R');   // REDUCE
    w.op('.');
    ASSERT_TRUE(checkpoint::testing::write_file(
        (dir / "pytorch_model.bin").string(),
        checkpoint::testing::torch_zip_bytes({{"data.pkl", w.bytes()}, {"version", "3\n"}}, {},
                                             false)));
    expect_refused(dir, out, "refusing global os.system");
    EXPECT_FALSE(fs::exists(witness));
  }
  {
    // pre_seq_len disagrees with the embedding's rows.
    const fs::path dir = tmp.path() / "len";
    write_config(dir, 8, false);
    ASSERT_TRUE(checkpoint::write_safetensors((dir / "model.safetensors").string(),
                                              random_encoder(4, false, "F32").tensors)
                    .ok());
    expect_refused(dir, out, "pre_seq_len is 8");
  }
  {
    // Made for another base: the embedding is not num_layers * 2 * kv_dim wide.
    const fs::path dir = tmp.path() / "wide";
    write_config(dir, 2, false);
    std::vector<float> v;
    ASSERT_TRUE(
        checkpoint::write_safetensors((dir / "model.safetensors").string(),
                                      {random_tensor("transformer.prefix_encoder.embedding.weight",
                                                     {2, kW + 32}, "F32", 1, &v)})
            .ok());
    expect_refused(dir, out, "prefix_encoder.embedding.weight is [2, 160]");
  }
  {
    // A projection whose second Linear does not give W.
    const fs::path dir = tmp.path() / "proj";
    write_config(dir, 2, true);
    Encoder e = random_encoder(2, true, "F32");
    std::vector<float> v;
    e.tensors[3] =
        random_tensor("transformer.prefix_encoder.trans.2.weight", {kW, kHidden + 1}, "F32", 4, &v);
    ASSERT_TRUE(
        checkpoint::write_safetensors((dir / "model.safetensors").string(), e.tensors).ok());
    expect_refused(dir, out, "prefix_encoder.trans.2.weight");
  }
  {
    // prefix_projection true, only the embedding saved.
    const fs::path dir = tmp.path() / "noproj";
    write_config(dir, 2, true);
    std::vector<StTensorOut> ts = random_encoder(2, false, "F32").tensors;
    ASSERT_TRUE(checkpoint::write_safetensors((dir / "model.safetensors").string(), ts).ok());
    expect_refused(dir, out, "prefix_encoder.trans.0.weight");
  }
  {
    // No prefix encoder at all (a base model with pre_seq_len set).
    const fs::path dir = tmp.path() / "none";
    write_config(dir, 2, false);
    std::vector<float> v;
    ASSERT_TRUE(checkpoint::write_safetensors(
                    (dir / "model.safetensors").string(),
                    {random_tensor("transformer.output_layer.weight", {64, kHidden}, "F32", 1, &v)})
                    .ok());
    expect_refused(dir, out, "no prefix_encoder.embedding.weight");
  }
  {
    // No weights.
    const fs::path dir = tmp.path() / "empty";
    write_config(dir, 2, false);
    expect_refused(dir, out, "no weights");
  }
}

// ChatGLM-6B (v1)'s config.json as its save_pretrained writes it (ChatGLMConfig: no kv_channels,
// inner_hidden_size, position_encoding_2d), 2 layers of hidden 64 and 4 heads.
void write_v1_config(const fs::path& dir, int pre_seq_len, bool projection) {
  fs::create_directories(dir);
  nlohmann::json c = {
      {"model_type", "chatglm"},    {"hidden_size", 64},          {"num_layers", kLayers},
      {"num_attention_heads", 4},   {"inner_hidden_size", 96},    {"vocab_size", 100},
      {"max_sequence_length", 256}, {"layernorm_epsilon", 1e-5},  {"position_encoding_2d", true},
      {"bos_token_id", 130004},     {"pre_seq_len", pre_seq_len}, {"prefix_projection", projection},
  };
  std::ofstream(dir / "config.json") << c.dump(2);
}

TEST(PtuningConvertTest, AChatGLM1CheckpointBecomesAChatGLM1Adapter) {
  // ChatGLM-6B's ptuning/main.py saves transformer.prefix_encoder.* only (pytorch_model.bin); its
  // PrefixEncoder's embedding is hidden_size wide with the projection, L * 2 * hidden without.
  TempDir tmp;
  for (bool torch : {true, false}) {
    for (bool projection : {false, true}) {
      SCOPED_TRACE(std::string(torch ? ".bin" : "safetensors") +
                   (projection ? ", projection" : ""));
      const fs::path dir =
          tmp.path() / ("v1_" + std::to_string(torch) + std::to_string(projection));
      write_v1_config(dir, 3, projection);
      const Encoder e =
          random_encoder(3, projection, torch ? "F16" : "F32", "transformer.prefix_encoder.", kV1);
      if (torch) {
        ASSERT_TRUE(checkpoint::testing::write_torch_checkpoint(
            (dir / "pytorch_model.bin").string(), e.tensors));
      } else {
        ASSERT_TRUE(
            checkpoint::write_safetensors((dir / "model.safetensors").string(), e.tensors).ok());
      }
      EXPECT_TRUE(is_ptuning_dir(dir.string()));
      const std::string out = tmp.file("v1.gguf");
      const Status st = convert_ptuning(dir.string(), out, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      expect_adapter(out, 3, projection, e, kV1);
    }
  }
}

TEST(PtuningConvertTest, AChatGLM1CheckpointOfAnotherShapeIsRefusedByName) {
  TempDir tmp;
  const std::string out = tmp.file("bad.gguf");
  {
    // A ChatGLM2/3-shaped encoder (W of 2 KV groups) under a ChatGLM-6B config.
    const fs::path dir = tmp.path() / "v1_w";
    write_v1_config(dir, 2, false);
    ASSERT_TRUE(checkpoint::write_safetensors((dir / "model.safetensors").string(),
                                              random_encoder(2, false, "F32").tensors)
                    .ok());
    expect_refused(dir, out, "prefix_encoder.embedding.weight is [2, 128]");
  }
  {
    // The projection's output is not num_layers * 2 * hidden_size.
    const fs::path dir = tmp.path() / "v1_proj";
    write_v1_config(dir, 2, true);
    Geometry g = kV1;
    g.w = kW;
    ASSERT_TRUE(checkpoint::write_safetensors(
                    (dir / "model.safetensors").string(),
                    random_encoder(2, true, "F32", "transformer.prefix_encoder.", g).tensors)
                    .ok());
    expect_refused(dir, out, "prefix_encoder.trans.2.weight is [128, 64]");
  }
}

}  // namespace
}  // namespace glm::convert
