// `glmserve tokenize` and `glmserve template` on the vocab-only GGUFs of ../shared/data, checked
// against the HF ids of cases.json; one-line errors on bad input.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"

namespace {

using glm::testing::CliOutput;
using glm::testing::exists;
using glm::testing::run_glmserve;
using glm::testing::shared;

std::vector<int32_t> parse_ids(const std::string& s) {
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (!j.is_array()) return {-999};
  return j.get<std::vector<int32_t>>();
}

nlohmann::json cases() {
  std::ifstream in(shared("tokenizers/cases.json"));
  return in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
}

#define SKIP_IF_NO_DATA()                                                                         \
  if (!exists(shared("vocab/chatglm3-vocab.gguf")) || !exists(shared("vocab/glm4-vocab.gguf")) || \
      !exists(shared("tokenizers/cases.json")))                                                   \
  GTEST_SKIP() << "../shared/data vocab GGUFs or cases.json absent (see its README.md)"

TEST(TokenizerCli, TokenizePrintsPlainIds) {
  SKIP_IF_NO_DATA();
  const auto c = cases();
  for (const auto& k : c["chatglm3"]["encode"]) {
    CliOutput r = run_glmserve({"tokenize", "--model", shared("vocab/chatglm3-vocab.gguf"),
                                "--text", k["prompt"].get<std::string>()});
    ASSERT_EQ(r.code, 0) << r.err;
    auto ids = k["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(parse_ids(r.out), std::vector<int32_t>(ids.begin() + 2, ids.end()));
  }
  for (const auto& k : c["chatglm4"]["encode_ordinary"]) {
    CliOutput r = run_glmserve({"tokenize", "--model", shared("vocab/glm4-vocab.gguf"), "--text",
                                k["text"].get<std::string>()});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(parse_ids(r.out), k["ids"].get<std::vector<int32_t>>());
  }
}

TEST(TokenizerCli, DecodePrintsText) {
  SKIP_IF_NO_DATA();
  CliOutput r = run_glmserve({"tokenize", "--model", shared("vocab/chatglm3-vocab.gguf"),
                              "--decode", "64790,64792,36474,54591"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "你好\n");
  r = run_glmserve({"tokenize", "--model", shared("vocab/glm4-vocab.gguf"), "--decode",
                    "151331,109377", "--render-special"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[gMASK]你好\n");
}

TEST(TokenizerCli, TemplatePrintsPromptIds) {
  SKIP_IF_NO_DATA();
  const auto c = cases();
  const std::string path = "/tmp/glm_tokcli_msgs_" + std::to_string(getpid()) + ".json";
  int n = 0;
  for (const auto& [model, vocab] : {std::pair{"chatglm3", "vocab/chatglm3-vocab.gguf"},
                                     std::pair{"chatglm4", "vocab/glm4-vocab.gguf"}}) {
    for (const auto& k : c[model]["apply_chat_template"]) {
      std::ofstream(path) << k["messages"].dump();
      CliOutput r = run_glmserve({"template", "--model", shared(vocab), "--messages", path});
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(parse_ids(r.out), k["ids"].get<std::vector<int32_t>>()) << model;
      ++n;
    }
  }
  unlink(path.c_str());
  EXPECT_EQ(n, 5);
}

// A system message's tools keep the file's key order ("name" after "parameters", "z" before
// "a"): the ChatGLM3 template appends them as json.dumps(tools, indent=4, ensure_ascii=False)
// writes them, so the prompt equals the one whose system content is that text, written out here.
TEST(TokenizerCli, TemplateKeepsTheToolsKeyOrder) {
  SKIP_IF_NO_DATA();
  const std::string vocab = shared("vocab/chatglm3-vocab.gguf");
  const std::string path = "/tmp/glm_tokcli_tools_" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << R"([{"role":"system","content":"Tools:","tools":[{"parameters":)"
                      << R"({"z":1,"a":true},"name":"天气"}]},{"role":"user","content":"hi"}])";
  CliOutput with_tools = run_glmserve({"template", "--model", vocab, "--messages", path});
  const std::string pretty =
      "Tools:\n[\n    {\n        \"parameters\": {\n            \"z\": 1,\n"
      "            \"a\": true\n        },\n        \"name\": \"天气\"\n    }\n]";
  std::ofstream(path, std::ios::trunc)
      << nlohmann::json::array(
             {{{"role", "system"}, {"content", pretty}}, {{"role", "user"}, {"content", "hi"}}})
             .dump();
  CliOutput by_hand = run_glmserve({"template", "--model", vocab, "--messages", path});
  unlink(path.c_str());
  ASSERT_EQ(with_tools.code, 0) << with_tools.err;
  ASSERT_EQ(by_hand.code, 0) << by_hand.err;
  EXPECT_EQ(parse_ids(with_tools.out), parse_ids(by_hand.out));
  EXPECT_GT(parse_ids(by_hand.out).size(), 20u);
}

// Every failure is one line on stderr, a non-zero exit, nothing on stdout.
void expect_one_line_error(const CliOutput& r) {
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(r.out.empty()) << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_EQ(r.err.rfind("glmserve: ", 0), 0u) << r.err;
}

TEST(TokenizerCli, OneLineErrors) {
  SKIP_IF_NO_DATA();
  const std::string vocab = shared("vocab/chatglm3-vocab.gguf");
  expect_one_line_error(run_glmserve({"tokenize", "--text", "hi"}));
  expect_one_line_error(run_glmserve({"tokenize", "--model", "/nonexistent.gguf", "--text", "hi"}));
  expect_one_line_error(
      run_glmserve({"tokenize", "--model", shared("tokenizers/cases.json"), "--text", "x"}));
  expect_one_line_error(run_glmserve({"tokenize", "--model", vocab}));
  expect_one_line_error(run_glmserve({"tokenize", "--model", vocab, "--decode", "1,x"}));
  expect_one_line_error(run_glmserve({"tokenize", "--model", vocab, "--decode", "70000"}));
  expect_one_line_error(run_glmserve({"tokenize", "--model", vocab, "--bogus", "1"}));
  const std::string path = "/tmp/glm_tokcli_bad_" + std::to_string(getpid()) + ".json";
  for (const char* bad :
       {"{not json", "[]", "{\"a\":1}", "[{\"content\":\"x\"}]",
        "[{\"role\":\"robot\",\"content\":\"x\"}]", "[{\"role\":\"user\",\"content\":5}]"}) {
    std::ofstream(path) << bad;
    expect_one_line_error(run_glmserve({"template", "--model", vocab, "--messages", path}));
  }
  unlink(path.c_str());
  expect_one_line_error(
      run_glmserve({"template", "--model", vocab, "--messages", "/nonexistent.json"}));
  expect_one_line_error(run_glmserve({"template", "--model", vocab}));
}

}  // namespace
