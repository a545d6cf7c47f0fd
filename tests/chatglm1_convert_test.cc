// `convert` of a ChatGLM-6B (v1) checkpoint as THUDM/chatglm-6b publishes it: PyTorch .bin in
// torch.save's zip layout, HF tensor names (transformer.layers.N.attention.query_key_value with
// HF's per-head [q k v] rows), a v1 config.json (inner_hidden_size, max_sequence_length,
// position_encoding_2d) and ice_text.model. The weights are chatglm.cpp's HF golden
// (oracle/chatglm-v1/glm_model.data, computed by HF's modeling_chatglm.py): the converted GGUF
// must give HF's hidden states, which only a right name map and QKV un-interleave can.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/torch_test_writer.h"
#include "convert/hf_convert.h"
#include "gguf/gguf.h"
#include "model/chatglm1_golden.h"
#include "model/eval.h"
#include "model/test_util.h"
#include "tokenizer/sp_test_models.h"

namespace glm {
namespace {

namespace fs = std::filesystem;
using checkpoint::StTensorOut;
using model::testing::Golden;
using model::testing::kFf;
using model::testing::kH;
using model::testing::kHeads;
using model::testing::kVocab;

StTensorOut f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
  StTensorOut t;
  t.name = name;
  t.dtype = "F32";
  t.shape = std::move(shape);
  t.data.resize(v.size() * sizeof(float));
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

// The golden's arrays under HF's names, in HF's order; the embedding grown to `n_vocab` rows
// (zeros past the golden's 5: the ids evaluated are 0-4, and the LM head is not compared).
std::vector<StTensorOut> hf_tensors(const Golden& g, int64_t n_vocab) {
  std::vector<float> embd(static_cast<size_t>(n_vocab * kH), 0.0f);
  std::copy(g.w[0].begin(), g.w[0].end(), embd.begin());
  const std::string l = "transformer.layers.0.";
  return {
      f32("transformer.word_embeddings.weight", {n_vocab, kH}, embd),
      f32(l + "input_layernorm.weight", {kH}, g.w[1]),
      f32(l + "input_layernorm.bias", {kH}, g.w[2]),
      f32(l + "attention.query_key_value.weight", {3 * kH, kH}, g.w[3]),
      f32(l + "attention.query_key_value.bias", {3 * kH}, g.w[4]),
      f32(l + "attention.dense.weight", {kH, kH}, g.w[5]),
      f32(l + "attention.dense.bias", {kH}, g.w[6]),
      f32(l + "post_attention_layernorm.weight", {kH}, g.w[7]),
      f32(l + "post_attention_layernorm.bias", {kH}, g.w[8]),
      f32(l + "mlp.dense_h_to_4h.weight", {kFf, kH}, g.w[9]),
      f32(l + "mlp.dense_h_to_4h.bias", {kFf}, g.w[10]),
      f32(l + "mlp.dense_4h_to_h.weight", {kH, kFf}, g.w[11]),
      f32(l + "mlp.dense_4h_to_h.bias", {kH}, g.w[12]),
      f32("transformer.final_layernorm.weight", {kH}, g.w[13]),
      f32("transformer.final_layernorm.bias", {kH}, g.w[14]),
  };
}

nlohmann::json v1_config(int64_t n_vocab) {
  return {{"_name_or_path", "THUDM/chatglm-6b"},
          {"architectures", {"ChatGLMModel"}},
          {"model_type", "chatglm"},
          {"bos_token_id", 130004},
          {"eos_token_id", 130005},
          {"mask_token_id", 130000},
          {"gmask_token_id", 130001},
          {"pad_token_id", 3},
          {"hidden_size", kH},
          {"inner_hidden_size", kFf},
          {"layernorm_epsilon", 1e-5},
          {"max_sequence_length", 8},
          {"num_attention_heads", kHeads},
          {"num_layers", 1},
          {"position_encoding_2d", true},
          {"quantization_bit", 0},
          {"torch_dtype", "float32"},
          {"vocab_size", n_vocab}};
}

// An HF ChatGLM-6B directory from the golden; returns its path.
std::string write_v1_checkpoint(const Golden& g, const fs::path& dir) {
  fs::create_directories(dir);
  const std::string sp = tok::testing::unigram_proto(tok::testing::small_v1_pieces());
  std::ofstream(dir / "ice_text.model", std::ios::binary) << sp;
  const int64_t n_vocab = static_cast<int64_t>(tok::testing::small_v1_pieces().size()) + 9;
  std::ofstream(dir / "config.json") << v1_config(n_vocab).dump(2);
  checkpoint::testing::TorchZipOptions o;
  o.archive = "pytorch_model";
  EXPECT_TRUE(checkpoint::testing::write_torch_checkpoint((dir / "pytorch_model.bin").string(),
                                                          hf_tensors(g, n_vocab), o));
  return dir.string();
}

// The golden read and written as an HF directory (`name` under the temp dir), removed after.
class Chatglm1Convert : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string data = model::testing::data_path("oracle/chatglm-v1/glm_model.data");
    if (!model::testing::file_exists(data)) GTEST_SKIP() << data << " is absent";
    ASSERT_TRUE(model::testing::read_golden(data, &g_));
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::path(model::testing::temp_path("chatglm1_" + name));
    opts_.hf_dir = write_v1_checkpoint(g_, dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Golden g_;
  fs::path dir_;
  convert::ConvertOptions opts_;
};

TEST_F(Chatglm1Convert, ATorchCheckpointConvertsToHfsHiddenStates) {
  const Golden& g = g_;
  convert::ConvertOptions opts = opts_;
  opts.type = DType::kF32;
  const std::string out = model::testing::temp_path("chatglm1_converted.gguf");
  convert::WriteReport rep;
  const Status st = convert::convert_hf(opts, out, &rep);
  ASSERT_TRUE(st.ok()) << st.to_string();

  auto file = gguf::File::open(out);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(*(*file)->get_string("general.architecture"), "chatglm1");
  EXPECT_EQ(*(*file)->get_string("tokenizer.ggml.model"), "t5");
  EXPECT_EQ(*(*file)->get_string("tokenizer.ggml.pre"), "chatglm1");
  EXPECT_EQ((*file)->tensor("output.weight"), nullptr);  // tied, as HF's lm_head
  auto m = model::testing::load(out);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  model::EvalOptions eo;
  eo.output = model::OutputKind::kHidden;
  eo.kv_type = DType::kF32;
  eo.block_tokens = 2;
  auto rows = model::evaluate(**m, {0, 1, 2}, {3, 4}, eo);
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  float max_diff = 0;
  for (int r = 0; r < 5; ++r) {
    ASSERT_EQ((*rows)[r].values.size(), static_cast<size_t>(kH));
    for (int i = 0; i < kH; ++i) {
      max_diff = std::max(max_diff, std::fabs((*rows)[r].values[i] - g.y[r][i]));
    }
  }
  EXPECT_LT(max_diff, 1e-5f) << "the converted model's hidden states are not HF's";
  fs::remove(out);
}

TEST_F(Chatglm1Convert, RefusesQuantizedCheckpointsAndAForeignTokenizer) {
  const fs::path& dir = dir_;
  const convert::ConvertOptions& opts = opts_;
  const std::string out = model::testing::temp_path("chatglm1_bad.gguf");
  // chatglm-6b-int4: its weights are packed ints, not a float checkpoint.
  nlohmann::json c = v1_config(kVocab);
  c["quantization_bit"] = 4;
  std::ofstream(dir / "config.json") << c.dump();
  Status st = convert::convert_hf(opts, out, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find("quantization_bit"), std::string::npos) << st.message();
  // A unigram model without v1's pieces is not ice_text.model.
  std::ofstream(dir / "config.json") << v1_config(400).dump();
  std::vector<tok::testing::Piece> plain = {{"<unk>", 0, tok::kTokenUnknown}, {"a", -1, 1}};
  std::ofstream(dir / "ice_text.model", std::ios::binary) << tok::testing::unigram_proto(plain);
  st = convert::convert_hf(opts, out, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kBadFile) << st.to_string();
  EXPECT_NE(st.message().find("ice_text.model"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace glm
