// `convert` of GLM-4-0414 / GLM-Z1 checkpoints (transformers' Glm4ForCausalLM: config.json
// model_type "glm4", model.layers.N.* tensors, tokenizer.json): a tiny checkpoint written from
// gen-model's weights converts back to the same tensors and hyperparameters.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "convert/gen_model.h"
#include "convert/hf_convert.h"
#include "convert/model_writer.h"
#include "convert/test_util.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab_convert.h"

namespace glm::convert {
namespace {

namespace fs = std::filesystem;
using checkpoint::StTensorOut;
using testing::TempDir;

int64_t meta(const gguf::File& m, const std::string& key) { return *m.get_int("glm4." + key); }

// An HF Glm4ForCausalLM directory holding the weights of a glm4-0414 GGUF file: config.json from
// its metadata, the tensors under their HF names in `dtype` (1-D ones F32) split over two
// safetensors files with their index, and a tokenizer.json of its vocabulary (byte-level BPE
// with no merges: enough for the converter, which copies it).
void export_0414(const gguf::File& m, const fs::path& dir, const std::string& dtype) {
  fs::create_directories(dir);
  nlohmann::json c = {
      {"architectures", {"Glm4ForCausalLM"}},
      {"model_type", "glm4"},
      {"_name_or_path", *m.get_string("general.name")},
      {"hidden_size", meta(m, "embedding_length")},
      {"intermediate_size", meta(m, "feed_forward_length")},
      {"num_hidden_layers", meta(m, "block_count")},
      {"num_attention_heads", meta(m, "attention.head_count")},
      {"num_key_value_heads", meta(m, "attention.head_count_kv")},
      {"head_dim", meta(m, "attention.key_length")},
      {"max_position_embeddings", meta(m, "context_length")},
      {"vocab_size", m.tensor("token_embd.weight")->shape[1]},
      {"rms_norm_eps", *m.get_float("glm4.attention.layer_norm_rms_epsilon")},
      {"rope_parameters",
       {{"rope_type", "default"},
        {"rope_theta", *m.get_float("glm4.rope.freq_base")},
        {"partial_rotary_factor", 0.5}}},
      {"attention_bias", true},
      {"tie_word_embeddings", false},
  };
  std::ofstream(dir / "config.json") << c.dump(2);

  auto vocab = tok::read_vocab(m);
  ASSERT_TRUE(vocab.ok());
  nlohmann::json tj = {{"model", {{"type", "BPE"}, {"vocab", nlohmann::json::object()}}},
                       {"added_tokens", nlohmann::json::array()}};
  tj["model"]["merges"] = nlohmann::json::array();
  for (size_t i = 0; i < vocab->tokens.size(); ++i) {
    if (vocab->types[i] == tok::kTokenControl) {
      tj["added_tokens"].push_back({{"id", i}, {"content", vocab->tokens[i]}, {"special", true}});
    } else {
      tj["model"]["vocab"][vocab->tokens[i]] = i;
    }
  }
  std::ofstream(dir / "tokenizer.json") << tj.dump();

  std::vector<std::vector<StTensorOut>> shards(2);
  for (size_t k = 0; k < m.tensors().size(); ++k) {
    const gguf::TensorInfo& t = m.tensors()[k];
    std::vector<float> x(static_cast<size_t>(t.n_elements()));
    decode_rows(t.type, t.data, t.n_rows(), t.shape[0], x.data());
    StTensorOut o;
    o.name = hf_tensor_name(t.name, Family::kGLM4_0414);
    ASSERT_FALSE(o.name.empty()) << t.name;
    o.dtype = t.shape.size() == 1 ? "F32" : dtype;
    o.shape.assign(t.shape.rbegin(), t.shape.rend());
    const DType dt = o.dtype == "F32" ? DType::kF32 : DType::kBF16;
    o.data.resize(row_bytes(dt, t.n_elements()));
    encode_rows(dt, x.data(), 1, t.n_elements(), o.data.data());
    shards[k % 2].push_back(std::move(o));
  }
  nlohmann::json index = {{"weight_map", nlohmann::json::object()}};
  for (int s = 0; s < 2; ++s) {
    const std::string name = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
    ASSERT_TRUE(checkpoint::write_safetensors((dir / name).string(), shards[s]).ok());
    for (const StTensorOut& t : shards[s]) index["weight_map"][t.name] = name;
  }
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

TEST(HfConvert0414, CheckpointConvertsToGenModelsTensorsAndHparams) {
  TempDir dir;
  const std::string model = dir.file("gen.gguf");
  GenOptions g;
  g.family = Family::kGLM4_0414;
  g.preset = "tiny";
  g.type = DType::kBF16;
  g.seed = 3;
  ASSERT_TRUE(generate_model(g, model, nullptr).ok());
  auto m = gguf::File::open(model);
  ASSERT_TRUE(m.ok());
  export_0414(**m, dir.path() / "hf", "BF16");

  ConvertOptions o;
  o.hf_dir = (dir.path() / "hf").string();
  o.type = DType::kBF16;
  const std::string out = dir.file("conv.gguf");
  Status s = convert_hf(o, out, nullptr);
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto c = gguf::File::open(out);
  ASSERT_TRUE(c.ok());
  const gguf::File& want = **m;
  const gguf::File& got = **c;
  EXPECT_EQ(*got.get_string("general.architecture"), "glm4");
  for (const auto& [key, value] : want.metadata()) {
    if (key.rfind("glm4.", 0) == 0) {
      ASSERT_NE(got.find(key), nullptr) << key;
      EXPECT_EQ(got.find(key)->type(), value.type()) << key;
      EXPECT_EQ(got.find(key)->as_double(), value.as_double()) << key;
    }
  }
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (size_t i = 0; i < want.tensors().size(); ++i) {
    const gguf::TensorInfo& a = got.tensors()[i];
    const gguf::TensorInfo& b = want.tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.shape, b.shape) << b.name;
    ASSERT_EQ(a.n_bytes, b.n_bytes) << b.name;
    EXPECT_EQ(std::memcmp(a.data, b.data, b.n_bytes), 0) << b.name;
  }
  // The vocabulary came from tokenizer.json: GLM-4's ends of turn at the synthetic ids.
  auto v = tok::read_vocab(got);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->pre, "glm4");
  EXPECT_EQ(v->tokens[v->eot], "<|user|>");
  EXPECT_EQ(v->tokens[v->eos], "<|endoftext|>");
}

TEST(HfConvert0414, ConfigErrorsNameTheField) {
  const nlohmann::json base = {
      {"model_type", "glm4"},          {"hidden_size", 256},       {"intermediate_size", 512},
      {"num_hidden_layers", 2},        {"num_attention_heads", 2}, {"num_key_value_heads", 1},
      {"max_position_embeddings", 64}, {"vocab_size", 512},
  };
  auto h = hparams_from_hf_config(base.dump(), "config.json");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(h->family, Family::kGLM4_0414);
  EXPECT_EQ(h->n_rot(), 64);
  EXPECT_FLOAT_EQ(h->norm_eps, 1e-5f);
  nlohmann::json c = base;
  c["partial_rotary_factor"] = 1.0;
  auto bad = hparams_from_hf_config(c.dump(), "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("partial_rotary_factor"), std::string::npos);
  c = base;
  c.erase("num_key_value_heads");
  bad = hparams_from_hf_config(c.dump(), "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("num_key_value_heads"), std::string::npos);
  c = base;
  c["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(hparams_from_hf_config(c.dump(), "config.json").status().code(),
            ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace glm::convert
