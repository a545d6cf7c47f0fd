#include "convert/hf_convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "checkpoint/torch_test_writer.h"
#include "convert/gen_model.h"
#include "convert/model_writer.h"
#include "convert/test_util.h"
#include "core/fp16.h"
#include "gguf/gguf.h"

namespace glm::convert {
namespace {

namespace fs = std::filesystem;
using checkpoint::StTensorOut;
using checkpoint::write_safetensors;
using testing::read_bytes;
using testing::shared_data;
using testing::TempDir;

enum class Format { kSafetensors, kTorch };

// Writes a HuggingFace-style checkpoint directory holding the weights of a glmserve GGUF file
// (chatglm layout): config.json from its metadata, the tensors under their HF names and shapes in
// `dtype` (F32/F16/BF16; 1-D tensors F32), split into `n_shards` files (with
// model.safetensors.index.json or pytorch_model.bin.index.json when more than one), plus a copy
// of `tokenizer_model`. kTorch writes PyTorch .bin files in torch.save's zip layout.
void export_hf(const gguf::File& m, const fs::path& dir, const std::string& dtype, int n_shards,
               const std::string& tokenizer_model, Format format = Format::kSafetensors) {
  fs::create_directories(dir);
  const nlohmann::json c = testing::chatglm3_hf_config(m, *m.get_string("general.name"));
  std::ofstream(dir / "config.json") << c.dump(2);
  fs::copy_file(tokenizer_model, dir / "tokenizer.model", fs::copy_options::overwrite_existing);

  std::vector<std::vector<StTensorOut>> shards(n_shards);
  // An HF-only tensor the converter must ignore.
  shards[0].push_back({"transformer.rotary_pos_emb.inv_freq", "F32", {2}, std::vector<uint8_t>(8)});
  for (size_t k = 0; k < m.tensors().size(); ++k) {
    const gguf::TensorInfo& t = m.tensors()[k];
    std::vector<float> x(static_cast<size_t>(t.n_elements()));
    decode_rows(t.type, t.data, t.n_rows(), t.shape[0], x.data());
    StTensorOut o;
    o.name = hf_tensor_name(t.name);
    // Matrices in `dtype`; 1-D tensors (norms, biases) stay F32, which gen-model keeps them in
    // (a mixed-precision checkpoint, which the converter must read too).
    o.dtype = t.shape.size() == 1 ? "F32" : dtype;
    o.shape.assign(t.shape.rbegin(), t.shape.rend());
    const DType dt = o.dtype == "F32" ? DType::kF32 : o.dtype == "F16" ? DType::kF16 : DType::kBF16;
    o.data.resize(row_bytes(dt, t.n_elements()));
    encode_rows(dt, x.data(), 1, t.n_elements(), o.data.data());
    shards[k % n_shards].push_back(std::move(o));
  }
  const bool pt = format == Format::kTorch;
  auto write = [&](const std::string& name, const std::vector<StTensorOut>& ts) {
    if (!pt) return write_safetensors((dir / name).string(), ts).ok();
    checkpoint::testing::TorchZipOptions o;
    o.archive = fs::path(name).stem().string();  // torch.save names the folder after the file
    return checkpoint::testing::write_torch_checkpoint((dir / name).string(), ts, o);
  };
  if (n_shards == 1) {
    ASSERT_TRUE(write(pt ? "pytorch_model.bin" : "model.safetensors", shards[0]));
    return;
  }
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  for (int s = 0; s < n_shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name),
                  pt ? "pytorch_model-%05d-of-%05d.bin" : "model-%05d-of-%05d.safetensors", s + 1,
                  n_shards);
    ASSERT_TRUE(write(name, shards[s]));
    for (const StTensorOut& t : shards[s]) index["weight_map"][t.name] = name;
  }
  std::ofstream(dir / (pt ? "pytorch_model.bin.index.json" : "model.safetensors.index.json"))
      << index.dump(2);
}

Status gen(Family arch, DType type, const std::string& vocab, const std::string& path) {
  GenOptions o;
  o.family = arch;
  o.preset = "tiny";
  o.type = type;
  o.seed = 9;
  o.vocab_path = vocab;
  return generate_model(o, path, nullptr);
}

Status convert(const fs::path& dir, DType type, const std::string& out) {
  ConvertOptions o;
  o.hf_dir = dir.string();
  o.type = type;
  return convert_hf(o, out, nullptr);
}

class HfConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = shared_data("tokenizers/chatglm3.tokenizer.model");
    if (!fs::exists(tokenizer_)) GTEST_SKIP() << "absent: " << tokenizer_;
  }
  std::string tokenizer_;
  TempDir dir_;
};

// gen-model's weights written as an HF checkpoint convert back to the very same file: same
// metadata (in the same order), same tensor names, shapes, types and bytes.
TEST_F(HfConvertTest, CheckpointOfGeneratedWeightsConvertsToTheSameFile) {
  struct Case {
    DType gen_type;       // the type gen-model writes
    std::string hf_type;  // the checkpoint's dtype
    int shards;
  };
  const Case cases[] = {
      {DType::kF32, "F32", 1}, {DType::kBF16, "BF16", 3}, {DType::kF16, "F16", 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.hf_type);
    const std::string model = dir_.file("gen.gguf");
    ASSERT_TRUE(gen(Family::kChatGLM3, c.gen_type, tokenizer_, model).ok());
    auto m = gguf::File::open(model);
    ASSERT_TRUE(m.ok());
    const fs::path hf = dir_.path() / ("hf_" + c.hf_type);
    export_hf(**m, hf, c.hf_type, c.shards, tokenizer_);
    const std::string out = dir_.file("conv.gguf");
    Status s = convert(hf, c.gen_type, out);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(testing::first_difference(read_bytes(out), read_bytes(model)), -1);
  }
}

// A ChatGLM2 checkpoint (named so in config.json) gets ChatGLM2's vocabulary, exactly as
// gen-model --arch chatglm2 writes it from the same tokenizer.model.
TEST_F(HfConvertTest, Chatglm2CheckpointGetsChatglm2Vocabulary) {
  const std::string model = dir_.file("gen2.gguf");
  ASSERT_TRUE(gen(Family::kChatGLM2, DType::kF32, tokenizer_, model).ok());
  auto m = gguf::File::open(model);
  ASSERT_TRUE(m.ok());
  ASSERT_NE((*m)->get_string("general.name")->find("chatglm2"), std::string::npos);
  const fs::path hf = dir_.path() / "hf2";
  export_hf(**m, hf, "F32", 1, tokenizer_);
  const std::string out = dir_.file("conv2.gguf");
  Status s = convert(hf, DType::kF32, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto conv = gguf::File::open(out);
  ASSERT_TRUE(conv.ok());
  StatusOr<tok::VocabSpec> v = tok::read_vocab(**conv);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(std::find(v->tokens.begin(), v->tokens.end(), "<|user|>"), v->tokens.end());
  StatusOr<tok::VocabSpec> want = tok::read_vocab(**m);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(v->tokens, want->tokens);
  EXPECT_EQ(v->types, want->types);
  EXPECT_EQ(v->chat_template, want->chat_template);
}

TEST_F(HfConvertTest, QuantizedConversionEqualsGenModelsQuantizedFile) {
  const std::string f32 = dir_.file("f32.gguf");
  ASSERT_TRUE(gen(Family::kChatGLM3, DType::kF32, tokenizer_, f32).ok());
  auto m = gguf::File::open(f32);
  ASSERT_TRUE(m.ok());
  export_hf(**m, dir_.path() / "hf", "F32", 1, tokenizer_);
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    ASSERT_TRUE(gen(Family::kChatGLM3, t, tokenizer_, dir_.file("g.gguf")).ok());
    ASSERT_TRUE(convert(dir_.path() / "hf", t, dir_.file("c.gguf")).ok());
    EXPECT_EQ(
        testing::first_difference(read_bytes(dir_.file("c.gguf")), read_bytes(dir_.file("g.gguf"))),
        -1)
        << dtype_name(t);
  }
}

TEST_F(HfConvertTest, Glm4CheckpointGetsRopeBaseAndBpeVocabulary) {
  const std::string glm4_tok = shared_data("tokenizers/glm4.tokenizer.model");
  if (!fs::exists(glm4_tok)) GTEST_SKIP() << "absent: " << glm4_tok;
  const std::string model = dir_.file("glm4.gguf");
  ASSERT_TRUE(gen(Family::kGLM4, DType::kF16, glm4_tok, model).ok());
  auto m = gguf::File::open(model);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*(*m)->get_string("tokenizer.ggml.model"), "gpt2");
  export_hf(**m, dir_.path() / "hf4", "BF16", 2, glm4_tok);
  const std::string out = dir_.file("c4.gguf");
  ASSERT_TRUE(convert(dir_.path() / "hf4", DType::kF16, out).ok());
  auto c = gguf::File::open(out);
  ASSERT_TRUE(c.ok());
  EXPECT_FLOAT_EQ(*(*c)->get_float("chatglm.rope.freq_base"), 5e6f);  // 10000 x rope_ratio 500
  EXPECT_FLOAT_EQ(*(*c)->get_float("chatglm.attention.layer_norm_rms_epsilon"), 1.5625e-7f);
  EXPECT_EQ(*(*c)->get_string("tokenizer.ggml.pre"), "chatglm-bpe");
  EXPECT_EQ((*c)->find("tokenizer.ggml.merges")->array_size(),
            (*m)->find("tokenizer.ggml.merges")->array_size());
  // The checkpoint was BF16: the converted F16 weights are gen-model's rounded to BF16.
  const gguf::TensorInfo* a = (*m)->tensor("blk.1.attn_qkv.weight");
  const gguf::TensorInfo* b = (*c)->tensor("blk.1.attn_qkv.weight");
  std::vector<float> x(a->n_elements()), y(b->n_elements());
  decode_rows(a->type, a->data, a->n_rows(), a->shape[0], x.data());
  decode_rows(b->type, b->data, b->n_rows(), b->shape[0], y.data());
  for (size_t k = 0; k < x.size(); ++k) {
    ASSERT_EQ(y[k], fp16_to_fp32(fp32_to_fp16(bf16_to_fp32(fp32_to_bf16(x[k]))))) << k;
  }
}

TEST_F(HfConvertTest, BrokenCheckpointsAreClearErrors) {
  const std::string model = dir_.file("gen.gguf");
  ASSERT_TRUE(gen(Family::kChatGLM3, DType::kF32, tokenizer_, model).ok());
  auto m = gguf::File::open(model);
  ASSERT_TRUE(m.ok());
  const fs::path hf = dir_.path() / "hf";
  const std::string out = dir_.file("o.gguf");

  EXPECT_EQ(convert(dir_.path() / "nowhere", DType::kF16, out).code(), ErrorCode::kNotFound);

  export_hf(**m, hf, "F32", 1, tokenizer_);
  fs::remove(hf / "tokenizer.model");
  Status s = convert(hf, DType::kF16, out);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("tokenizer.model"), std::string::npos);

  export_hf(**m, hf, "F32", 1, tokenizer_);
  std::string cfg = read_bytes((hf / "config.json").string());
  {
    nlohmann::json j = nlohmann::json::parse(cfg);
    j["ffn_hidden_size"] = 96;
    std::ofstream(hf / "config.json") << j.dump();
  }
  s = convert(hf, DType::kF16, out);
  EXPECT_EQ(s.code(), ErrorCode::kBadFile);
  EXPECT_NE(s.message().find("shape"), std::string::npos) << s.message();

  {
    nlohmann::json j = nlohmann::json::parse(cfg);
    j["model_type"] = "llama";
    std::ofstream(hf / "config.json") << j.dump();
  }
  EXPECT_EQ(convert(hf, DType::kF16, out).code(), ErrorCode::kUnsupported);

  {
    nlohmann::json j = nlohmann::json::parse(cfg);
    j["num_layers"] = 3;  // one layer more than the weights hold
    std::ofstream(hf / "config.json") << j.dump();
  }
  s = convert(hf, DType::kF16, out);
  EXPECT_EQ(s.code(), ErrorCode::kBadFile);
  EXPECT_NE(s.message().find("transformer.encoder.layers.2"), std::string::npos) << s.message();
  {
    nlohmann::json j = nlohmann::json::parse(cfg);
    j.erase("hidden_size");
    std::ofstream(hf / "config.json") << j.dump();
  }
  s = convert(hf, DType::kF16, out);
  EXPECT_NE(s.message().find("hidden_size"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(out));
}

// PyTorch .bin checkpoints: the same arrays as a safetensors checkpoint convert to the same
// file, byte for byte (named TorchZip* so that the ASan run of scripts/test.sh covers them).
class TorchZipConvertTest : public HfConvertTest {};

TEST_F(TorchZipConvertTest, BinCheckpointConvertsLikeSafetensors) {
  struct Case {
    DType gen_type;
    std::string hf_type;
    int shards;
  };
  const Case cases[] = {
      {DType::kF32, "F32", 1}, {DType::kBF16, "BF16", 3}, {DType::kF16, "F16", 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.hf_type + " x" + std::to_string(c.shards));
    const std::string model = dir_.file("gen.gguf");
    ASSERT_TRUE(gen(Family::kChatGLM3, c.gen_type, tokenizer_, model).ok());
    auto m = gguf::File::open(model);
    ASSERT_TRUE(m.ok());
    const fs::path st = dir_.path() / ("st_" + c.hf_type);
    const fs::path pt = dir_.path() / ("pt_" + c.hf_type);
    export_hf(**m, st, c.hf_type, c.shards, tokenizer_);
    export_hf(**m, pt, c.hf_type, c.shards, tokenizer_, Format::kTorch);
    ASSERT_TRUE(
        fs::exists(pt / (c.shards == 1 ? "pytorch_model.bin" : "pytorch_model.bin.index.json")));
    ASSERT_FALSE(fs::exists(pt / "model.safetensors"));
    Status s = convert(st, c.gen_type, dir_.file("st.gguf"));
    ASSERT_TRUE(s.ok()) << s.to_string();
    s = convert(pt, c.gen_type, dir_.file("pt.gguf"));
    ASSERT_TRUE(s.ok()) << s.to_string();
    const std::string a = read_bytes(dir_.file("st.gguf"));
    const std::string b = read_bytes(dir_.file("pt.gguf"));
    EXPECT_EQ(testing::first_difference(a, b), -1);
    EXPECT_EQ(testing::first_difference(b, read_bytes(model)), -1);
    // And every tensor of the two files: same name, type, shape and bytes.
    auto fa = gguf::File::open(dir_.file("st.gguf"));
    auto fb = gguf::File::open(dir_.file("pt.gguf"));
    ASSERT_TRUE(fa.ok() && fb.ok());
    ASSERT_EQ((*fa)->tensors().size(), (*fb)->tensors().size());
    for (size_t k = 0; k < (*fa)->tensors().size(); ++k) {
      const gguf::TensorInfo& x = (*fa)->tensors()[k];
      const gguf::TensorInfo& y = (*fb)->tensors()[k];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.type, y.type);
      EXPECT_EQ(x.shape, y.shape);
      ASSERT_EQ(x.n_bytes, y.n_bytes);
      EXPECT_EQ(std::memcmp(x.data, y.data, x.n_bytes), 0) << x.name;
    }
  }
}

// How PyTorch really holds some weights: a transposed (strided) view, and the qkv weight and
// bias as two views of one storage. Same file as gen-model's.
TEST_F(TorchZipConvertTest, StridedAndSharedStoragesConvert) {
  const std::string model = dir_.file("gen.gguf");
  ASSERT_TRUE(gen(Family::kChatGLM3, DType::kF32, tokenizer_, model).ok());
  auto m = gguf::File::open(model);
  ASSERT_TRUE(m.ok());
  const fs::path hf = dir_.path() / "hf";
  export_hf(**m, hf, "F32", 1, tokenizer_);  // config.json, tokenizer.model
  fs::remove(hf / "model.safetensors");
  std::vector<checkpoint::testing::TorchStorageOut> storages;
  std::vector<checkpoint::testing::TorchViewOut> views;
  auto floats = [&](const gguf::TensorInfo& t) {
    std::vector<float> x(static_cast<size_t>(t.n_elements()));
    decode_rows(t.type, t.data, t.n_rows(), t.shape[0], x.data());
    return x;
  };
  auto bytes_of = [](const std::vector<float>& x) {
    std::vector<uint8_t> b(x.size() * 4);
    std::memcpy(b.data(), x.data(), b.size());
    return b;
  };
  int n_strided = 0;
  int n_shared = 0;
  for (const gguf::TensorInfo& t : (*m)->tensors()) {
    const std::string name = hf_tensor_name(t.name);
    std::vector<int64_t> shape(t.shape.rbegin(), t.shape.rend());  // PyTorch order
    std::vector<float> x = floats(t);
    if (t.name.find("ffn_down") != std::string::npos) {
      // Stored as the contiguous transpose [in, out]; the tensor is its .t() view.
      const int64_t rows = shape[0], cols = shape[1];
      std::vector<float> tr(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) tr[c * rows + r] = x[r * cols + c];
      }
      storages.push_back({"F32", bytes_of(tr)});
      views.push_back({name, storages.size() - 1, 0, shape, {1, rows}});
      ++n_strided;
    } else if (t.name.find("attn_qkv.weight") != std::string::npos) {
      // One storage: the weight, then the bias (written with the bias below).
      const gguf::TensorInfo* bias =
          (*m)->tensor(t.name.substr(0, t.name.size() - std::string("weight").size()) + "bias");
      ASSERT_NE(bias, nullptr);
      std::vector<float> both = x;
      std::vector<float> bx = floats(*bias);
      both.insert(both.end(), bx.begin(), bx.end());
      storages.push_back({"F32", bytes_of(both)});
      views.push_back({name, storages.size() - 1, 0, shape, {}});
      views.push_back({hf_tensor_name(bias->name),
                       storages.size() - 1,
                       static_cast<int64_t>(x.size()),
                       {bias->shape[0]},
                       {}});
      ++n_shared;
    } else if (t.name.find("attn_qkv.bias") == std::string::npos) {
      storages.push_back({"F32", bytes_of(x)});
      views.push_back({name, storages.size() - 1, 0, shape, {}});
    }
  }
  ASSERT_EQ(n_strided, 2);
  ASSERT_EQ(n_shared, 2);
  checkpoint::testing::TorchZipOptions o;
  o.archive = "pytorch_model";
  ASSERT_TRUE(checkpoint::testing::write_file(
      (hf / "pytorch_model.bin").string(),
      checkpoint::testing::torch_checkpoint_bytes(storages, views, o)));
  const std::string out = dir_.file("conv.gguf");
  Status s = convert(hf, DType::kF32, out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(testing::first_difference(read_bytes(out), read_bytes(model)), -1);
}

TEST_F(TorchZipConvertTest, SafetensorsWinAndRefusedPicklesAreErrors) {
  const std::string model = dir_.file("gen.gguf");
  ASSERT_TRUE(gen(Family::kChatGLM3, DType::kF32, tokenizer_, model).ok());
  auto m = gguf::File::open(model);
  ASSERT_TRUE(m.ok());
  const fs::path hf = dir_.path() / "hf";
  const std::string out = dir_.file("o.gguf");
  // Both formats present: safetensors are used and the (broken) .bin is never opened.
  export_hf(**m, hf, "F32", 1, tokenizer_);
  std::ofstream(hf / "pytorch_model.bin") << "not a checkpoint";
  Status s = convert(hf, DType::kF32, out);
  ASSERT_TRUE(s.ok()) << s.to_string();

  // Only a .bin whose pickle names os.system: refused by name, nothing written.
  fs::remove(hf / "model.safetensors");
  fs::remove(out);
  checkpoint::testing::PickleWriter w;
  w.global("os", "system");
  w.str("touch /tmp/pwned", false);
  w.op(0x85);
  w.op('R');
  w.op('.');
  ASSERT_TRUE(checkpoint::testing::write_file(
      (hf / "pytorch_model.bin").string(),
      checkpoint::testing::torch_zip_bytes({{"data.pkl", w.bytes()}, {"version", "3\n"}}, {},
                                           false)));
  s = convert(hf, DType::kF32, out);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("refusing global os.system"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pytorch_model.bin"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(out));

  // The oldest (tar) format says how to fix it.
  {
    std::string tar(1024, '\0');
    tar.replace(257, 5, "ustar");
    std::ofstream(hf / "pytorch_model.bin", std::ios::binary) << tar;
  }
  s = convert(hf, DType::kF32, out);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("re-save with torch>=1.6"), std::string::npos) << s.message();

  // No weights at all.
  fs::remove(hf / "pytorch_model.bin");
  s = convert(hf, DType::kF32, out);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("pytorch_model*.bin"), std::string::npos) << s.message();
}

// The progress callback sees every tensor once, in order, and ends with all bytes read.
TEST_F(HfConvertTest, ReportsProgressPerTensor) {
  const std::string model = dir_.file("gen.gguf");
  ASSERT_TRUE(gen(Family::kChatGLM3, DType::kF16, tokenizer_, model).ok());
  auto m = gguf::File::open(model);
  ASSERT_TRUE(m.ok());
  export_hf(**m, dir_.path() / "hf", "F16", 1, tokenizer_, Format::kTorch);
  ConvertOptions o;
  o.hf_dir = (dir_.path() / "hf").string();
  o.type = DType::kF16;
  std::vector<ConvertProgress> seen;
  std::vector<std::string> names;
  o.progress = [&](const ConvertProgress& p) {
    seen.push_back(p);
    if (names.empty() || names.back() != *p.name) names.push_back(*p.name);
  };
  Status s = convert_hf(o, dir_.file("o.gguf"), nullptr);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_FALSE(seen.empty());
  ASSERT_EQ(names.size(), (*m)->tensors().size());
  for (size_t k = 0; k < names.size(); ++k) EXPECT_EQ(names[k], (*m)->tensors()[k].name);
  for (size_t k = 1; k < seen.size(); ++k) {
    EXPECT_GE(seen[k].tensor, seen[k - 1].tensor);
    EXPECT_GT(seen[k].bytes_read, seen[k - 1].bytes_read);
  }
  EXPECT_EQ(seen.back().tensor, seen.back().n_tensors);
  EXPECT_EQ(seen.back().n_tensors, names.size());
  EXPECT_EQ(seen.back().bytes_read, seen.back().bytes_total);
}

// rope_ratio means two things: ChatGLM2-6B-32K divides the positions by it (linear scaling,
// written as llama.cpp's rope.scaling keys), ChatGLM3-6B-32K and GLM-4 multiply the base by it.
TEST_F(HfConvertTest, RopeRatioIsPositionScalingForChatglm2AndABaseForChatglm3) {
  for (const Family f : {Family::kChatGLM2, Family::kChatGLM3}) {
    const bool v2 = f == Family::kChatGLM2;
    SCOPED_TRACE(v2 ? "chatglm2" : "chatglm3");
    const std::string model = dir_.file(v2 ? "r2.gguf" : "r3.gguf");
    ASSERT_TRUE(gen(f, DType::kF32, tokenizer_, model).ok());
    auto m = gguf::File::open(model);
    ASSERT_TRUE(m.ok());
    const fs::path hf = dir_.path() / (v2 ? "hf_r2" : "hf_r3");
    export_hf(**m, hf, "F32", 1, tokenizer_);
    nlohmann::json c = nlohmann::json::parse(read_bytes((hf / "config.json").string()));
    c["rope_ratio"] = v2 ? 16 : 50;
    std::ofstream(hf / "config.json") << c.dump();
    const std::string out = dir_.file(v2 ? "r2c.gguf" : "r3c.gguf");
    ASSERT_TRUE(convert(hf, DType::kF32, out).ok());
    auto conv = gguf::File::open(out);
    ASSERT_TRUE(conv.ok());
    EXPECT_FLOAT_EQ(*(*conv)->get_float("chatglm.rope.freq_base"), v2 ? 10000.0f : 500000.0f);
    StatusOr<std::string> type = (*conv)->get_string("chatglm.rope.scaling.type");
    if (v2) {
      ASSERT_TRUE(type.ok());
      EXPECT_EQ(*type, "linear");
      EXPECT_FLOAT_EQ(*(*conv)->get_float("chatglm.rope.scaling.factor"), 16.0f);
    } else {
      EXPECT_FALSE(type.ok());
    }
  }
}

TEST(HfNames, MapTheChatglmLayout) {
  EXPECT_EQ(hf_tensor_name("blk.12.attn_qkv.weight"),
            "transformer.encoder.layers.12.self_attention.query_key_value.weight");
  EXPECT_EQ(hf_tensor_name("blk.0.ffn_up.weight"),
            "transformer.encoder.layers.0.mlp.dense_h_to_4h.weight");
  EXPECT_EQ(hf_tensor_name("blk.0.ffn_down.weight"),
            "transformer.encoder.layers.0.mlp.dense_4h_to_h.weight");
  EXPECT_EQ(hf_tensor_name("output.weight"), "transformer.output_layer.weight");
  EXPECT_EQ(hf_tensor_name("blk.0.nothing.weight"), "");
}

TEST(HfConfig, RopeRatioAndGroups) {
  StatusOr<Hparams> h = hparams_from_hf_config(
      R"({"model_type":"chatglm","hidden_size":4096,"num_layers":40,"num_attention_heads":32,
          "multi_query_attention":true,"multi_query_group_num":2,"ffn_hidden_size":13696,
          "padded_vocab_size":151552,"seq_length":131072,"layernorm_epsilon":1.5625e-07,
          "rope_ratio":500,"kv_channels":128})",
      "config.json");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_FLOAT_EQ(h->rope_base, 5e6f);
  EXPECT_EQ(h->n_head_kv, 2);
  EXPECT_EQ(h->n_rot(), 64);
  EXPECT_FALSE(hparams_from_hf_config("{", "c").ok());
  EXPECT_FALSE(hparams_from_hf_config(R"({"hidden_size":-3})", "c").ok());
}

}  // namespace
}  // namespace glm::convert
