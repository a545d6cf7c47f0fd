// P-Tuning v2 through the binary: `glmserve convert` of a P-Tuning checkpoint directory, then
// `glmserve eval --ptuning` prints what the library computes with the adapter (the numbers
// themselves are checked against float64 references in src/model's tests), differs from the
// base model, and a base of another shape is a one-line error naming what differs; for
// ChatGLM2/3 and for ChatGLM-6B (v1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "cli_util.h"
#include "gguf/gguf.h"
#include "model/eval.h"
#include "model/model.h"
#include "model/ptuning.h"

namespace {

namespace fs = std::filesystem;
using glm::testing::run_cli;

class PtuningCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptuning_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& n) const { return (dir_ / n).string(); }

  // A P-Tuning checkpoint directory (config.json + model.safetensors with the projection) for
  // a base of `g`'s shape, with `n_layer` layers.
  void write_checkpoint(const fs::path& dir, const glm::gguf::File& g, int64_t n_layer) {
    fs::create_directories(dir);
    auto i = [&](const std::string& k) { return *g.get_int("chatglm." + k); };
    const int64_t hidden = i("embedding_length"), heads = i("attention.head_count");
    const int64_t groups = i("attention.head_count_kv"), hd = hidden / heads;
    nlohmann::json c = {
        {"model_type", "chatglm"},
        {"hidden_size", hidden},
        {"num_layers", n_layer},
        {"num_attention_heads", heads},
        {"multi_query_attention", true},
        {"multi_query_group_num", groups},
        {"kv_channels", hd},
        {"ffn_hidden_size", i("feed_forward_length")},
        {"padded_vocab_size", g.tensor("token_embd.weight")->shape[1]},
        {"seq_length", i("context_length")},
        {"layernorm_epsilon", 1e-5},
        {"pre_seq_len", 4},
        {"prefix_projection", true},
    };
    std::ofstream(dir / "config.json") << c.dump(2);
    const int64_t w = n_layer * 2 * groups * hd;
    write_encoder(dir, w, w, hidden, 0.5f, 3);
  }

  // A prefix encoder with the projection as safetensors (model.safetensors in `dir`): embedding
  // [4, e], trans.0 [hidden, e] + [hidden], trans.2 [w, hidden] + [w], N(0, sd) from `seed`.
  static void write_encoder(const fs::path& dir, int64_t w, int64_t e, int64_t hidden, float sd,
                            uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, sd);
    auto tensor = [&](const std::string& name, std::vector<int64_t> shape) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      glm::checkpoint::StTensorOut t{"transformer.prefix_encoder." + name, "F32", shape, {}};
      t.data.resize(static_cast<size_t>(n) * 4);
      for (int64_t k = 0; k < n; ++k) {
        const float x = normal(rng);
        std::memcpy(t.data.data() + k * 4, &x, 4);
      }
      return t;
    };
    ASSERT_TRUE(glm::checkpoint::write_safetensors(
                    (dir / "model.safetensors").string(),
                    {tensor("embedding.weight", {4, e}), tensor("trans.0.weight", {hidden, e}),
                     tensor("trans.0.bias", {hidden}), tensor("trans.2.weight", {w, hidden}),
                     tensor("trans.2.bias", {w})})
                    .ok());
  }

  // ChatGLM-6B (v1)'s P-Tuning save for a base of `g`'s shape (a chatglm1 file): its
  // ChatGLMConfig (no kv_channels) and the encoder with the projection, E = H = hidden_size,
  // W = num_layers * 2 * hidden_size, as pytorch-free safetensors.
  void write_v1_checkpoint(const fs::path& dir, const glm::gguf::File& g) {
    fs::create_directories(dir);
    auto i = [&](const std::string& k) { return *g.get_int("chatglm1." + k); };
    const int64_t hidden = i("embedding_length"), n_layer = i("block_count");
    nlohmann::json c = {
        {"model_type", "chatglm"},
        {"hidden_size", hidden},
        {"num_layers", n_layer},
        {"num_attention_heads", i("attention.head_count")},
        {"inner_hidden_size", i("feed_forward_length")},
        {"vocab_size", g.tensor("token_embd.weight")->shape[1]},
        {"max_sequence_length", i("context_length")},
        {"layernorm_epsilon", 1e-5},
        {"position_encoding_2d", true},
        {"pre_seq_len", 4},
        {"prefix_projection", true},
    };
    std::ofstream(dir / "config.json") << c.dump(2);
    // v1's sqrt(56) residual needs a larger push than ChatGLM2/3's.
    write_encoder(dir, n_layer * 2 * hidden, hidden, hidden, 4.0f, 5);
  }

  fs::path dir_;
};

std::vector<std::vector<float>> parse_rows(const std::string& out) {
  std::vector<std::vector<float>> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    rows.push_back(nlohmann::json::parse(line)["values"].get<std::vector<float>>());
  }
  return rows;
}

// `glmserve eval --ptuning ADAPTER` on MODEL prints exactly the rows the library computes with
// the adapter (eval prints float32 exactly), and they differ from the base model's; with
// --device vulkan, the same rows within rounding.
void expect_eval_rows_are_the_librarys(const std::string& model, const std::string& adapter) {
  const std::string tokens = " --tokens 1,2,3,4,5 --decode 6,7";
  glm::testing::CliRun r =
      run_cli("eval --model " + model + " --device cpu --threads 1 --ptuning " + adapter + tokens);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto with = parse_rows(r.out);
  r = run_cli("eval --model " + model + " --threads 1" + tokens);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto without = parse_rows(r.out);
  ASSERT_EQ(with.size(), 7u);
  ASSERT_EQ(without.size(), 7u);
  auto f = glm::gguf::File::open(model);
  ASSERT_TRUE(f.ok());
  glm::model::LoadOptions lo;
  lo.n_threads = 1;
  auto m = glm::model::load_model(std::shared_ptr<const glm::gguf::File>(std::move(*f)), lo);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto af = glm::gguf::File::open(adapter);
  ASSERT_TRUE(af.ok());
  glm::model::Adapter a;
  ASSERT_TRUE(glm::model::load_ptuning(**af, (*m)->config(), &a.prefix).ok());
  glm::model::EvalOptions eo;
  eo.adapter = &a;
  auto rows = glm::model::evaluate(**m, {1, 2, 3, 4, 5}, {6, 7}, eo);
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  double moved = 0;
  for (size_t p = 0; p < 7; ++p) {
    ASSERT_EQ(with[p].size(), (*rows)[p].values.size());
    for (size_t i = 0; i < with[p].size(); ++i) {
      ASSERT_EQ(with[p][i], (*rows)[p].values[i]) << "pos " << p << " i " << i;
      moved = std::max(moved, static_cast<double>(std::fabs(with[p][i] - without[p][i])));
    }
  }
  EXPECT_GT(moved, 1e-3);  // the prefix changes the logits
  // On the GPU (lavapipe in CI) the same rows within f32 rounding.
  r = run_cli("eval --model " + model + " --device vulkan --threads 1 --ptuning " + adapter +
              tokens);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto gpu = parse_rows(r.out);
  ASSERT_EQ(gpu.size(), with.size());
  for (size_t p = 0; p < gpu.size(); ++p) {
    ASSERT_EQ(gpu[p].size(), with[p].size());
    for (size_t i = 0; i < gpu[p].size(); ++i) {
      ASSERT_NEAR(gpu[p][i], with[p][i], 1e-4 * (1 + std::fabs(with[p][i]))) << "pos " << p;
    }
  }
}

TEST_F(PtuningCliTest, ConvertThenEvalWithThePrefix) {
  const std::string model = file("m.gguf");
  ASSERT_EQ(
      run_cli("gen-model --arch chatglm3 --preset tiny --type f32 --seed 2 -o " + model).exit_code,
      0);
  auto g = glm::gguf::File::open(model);
  ASSERT_TRUE(g.ok());
  const int64_t n_layer = *(*g)->get_int("chatglm.block_count");
  write_checkpoint(dir_ / "pt", **g, n_layer);

  const std::string adapter = file("a.gguf");
  glm::testing::CliRun r = run_cli("convert " + (dir_ / "pt").string() + " -o " + adapter);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("P-Tuning v2 adapter"), std::string::npos) << r.out;

  expect_eval_rows_are_the_librarys(model, adapter);
  const std::string tokens = " --tokens 1,2,3,4,5 --decode 6,7";

  // An adapter trained on a deeper base: converted fine, refused by eval, naming the key.
  write_checkpoint(dir_ / "deep", **g, n_layer + 1);
  ASSERT_EQ(run_cli("convert " + (dir_ / "deep").string() + " -o " + file("deep.gguf")).exit_code,
            0);
  r = run_cli("eval --model " + model + " --ptuning " + file("deep.gguf") + tokens);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("adapter.ptuning.block_count"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
}

// ChatGLM-6B (v1): convert its P-Tuning save, eval with it (the library's rows, moved from the
// base model's), and the v1 adapter on a ChatGLM3 base is a one-line error naming both.
TEST_F(PtuningCliTest, AChatGLM1CheckpointConvertsAndEvalsOnItsBaseOnly) {
  const std::string model = file("v1.gguf");
  ASSERT_EQ(
      run_cli("gen-model --arch chatglm1 --preset tiny --type f32 --seed 2 -o " + model).exit_code,
      0);
  auto g = glm::gguf::File::open(model);
  ASSERT_TRUE(g.ok());
  write_v1_checkpoint(dir_ / "v1pt", **g);
  const std::string adapter = file("v1a.gguf");
  glm::testing::CliRun r = run_cli("convert " + (dir_ / "v1pt").string() + " -o " + adapter);
  ASSERT_EQ(r.exit_code, 0) << r.out;

  expect_eval_rows_are_the_librarys(model, adapter);
  auto af = glm::gguf::File::open(adapter);
  ASSERT_TRUE(af.ok());
  EXPECT_EQ(*(*af)->get_string("general.architecture"), "chatglm1");
  const std::string tokens = " --tokens 1,2,3,4,5 --decode 6,7";

  const std::string v3 = file("v3.gguf");
  ASSERT_EQ(
      run_cli("gen-model --arch chatglm3 --preset tiny --type f32 --seed 2 -o " + v3).exit_code, 0);
  r = run_cli("eval --model " + v3 + " --ptuning " + adapter + tokens);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("made for a 'chatglm1' model; the base model is 'chatglm'"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
}

}  // namespace
