// ChatGLM-6B (v1) through the glmserve binary like every other family: gen-model --arch chatglm1,
// `run`, `chat`, the chat template of a two-turn conversation, and `serve` answering two turns
// of /v1/chat/completions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli_util.h"
#include "gateway/http_test_util.h"
#include "process_util.h"

namespace glm {
namespace {

using glm::gateway::testing::RawHttp;
using glm::testing::run_cli;
using glm::testing::run_shell;
using json = nlohmann::json;

// The synthetic tiny vocabulary's ids (synthetic_vocab.cc: the 344 v1 pieces end the 1024).
constexpr int kGmask = 680 + 1, kSop = 680 + 4;

class Chatglm1E2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-v1-e2e-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // serve keeps its KV disk cache under the data directory by default: the test's own.
    ::setenv("XDG_DATA_HOME", dir_.c_str(), 1);
    model_ = dir_ + "/v1.gguf";
    const auto r = run_cli("gen-model --arch chatglm1 --preset tiny --seed 1 -o " + model_);
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  void TearDown() override {
    ::unsetenv("XDG_DATA_HOME");
    std::system(("rm -rf " + dir_).c_str());
  }
  std::string dir_, model_;
};

TEST_F(Chatglm1E2eTest, RunAndChatAnswer) {
  const auto run = run_shell(std::string(GLMSERVE_BIN) + " run --model " + model_ +
                             " --prompt hello -n 12 --temp 0 -t 1 2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // Text comes back (run ends its answer with a newline of its own).
  EXPECT_NE(run.out.find_first_not_of(" \t\n"), std::string::npos) << run.out;
  // The engine's warm-up pass is a valid v1 prompt too (it needs [gMASK] <sop>).
  const auto log = run_shell(std::string(GLMSERVE_BIN) + " run --model " + model_ +
                             " --prompt hello -n 2 --temp 0 -t 1 2>&1 >/dev/null");
  EXPECT_NE(log.out.find("warm-up forward done"), std::string::npos) << log.out;
  // Two turns piped into the terminal chat: both get an answer, the process ends cleanly.
  const auto chat = run_shell("printf 'hello\\nagain\\n' | " + std::string(GLMSERVE_BIN) +
                              " chat --model " + model_ + " --temp 0 -n 8 -t 1 2>&1");
  EXPECT_EQ(chat.exit_code, 0) << chat.out;
  EXPECT_FALSE(chat.out.empty());
}

// The answer as ChatGLM-6B's chat() returns it (HF process_response): a grammar makes the
// model write exactly this raw text, whose chat answer is then stripped, the training-time
// marker replaced and the marks beside Chinese text made full-width; --raw continues text and
// keeps it as generated.
TEST_F(Chatglm1E2eTest, ChatAnswersAreCleanedAsHfProcessResponseDoes) {
  {
    std::ofstream(dir_ + "/g.gbnf") << "root ::= \"  \u4e2d,\u6587!a b: [[\u8bad\u7ec3\u65f6"
                                       "\u95f4]] \"\n";
  }
  const std::string cmd = std::string(GLMSERVE_BIN) + " run --model " + model_ +
                          " --prompt hi -n 64 --temp 0 -t 1 --grammar-file " + dir_ + "/g.gbnf";
  const auto chat = run_shell(cmd + " 2>/dev/null");
  ASSERT_EQ(chat.exit_code, 0) << chat.out;
  EXPECT_EQ(chat.out, "\u4e2d\uff0c\u6587\uff01a b: 2023\u5e74\n");  // 中，文！a b: 2023年
  const auto raw = run_shell(cmd + " --raw 2>/dev/null");
  ASSERT_EQ(raw.exit_code, 0) << raw.out;
  EXPECT_EQ(raw.out, "  \u4e2d,\u6587!a b: [[\u8bad\u7ec3\u65f6\u95f4]] \n");
}

TEST_F(Chatglm1E2eTest, TwoTurnTemplateIsTheRoundFormat) {
  const std::string msgs = dir_ + "/m.json";
  std::ofstream(msgs) << json::array({{{"role", "user"}, {"content", "你好"}},
                                      {{"role", "assistant"}, {"content", "你好，我是助手"}},
                                      {{"role", "user"}, {"content", "晚上睡不着怎么办"}}})
                             .dump();
  const auto t = run_shell(std::string(GLMSERVE_BIN) + " template --model " + model_ +
                           " --messages " + msgs + " 2>&1");
  ASSERT_EQ(t.exit_code, 0) << t.out;
  const json ids = json::parse(t.out, nullptr, false);
  ASSERT_TRUE(ids.is_array() && ids.size() > 2) << t.out;
  EXPECT_EQ(ids[ids.size() - 2], kGmask);
  EXPECT_EQ(ids[ids.size() - 1], kSop);
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(int(ids[i]));
  const auto d = run_shell(std::string(GLMSERVE_BIN) + " tokenize --model " + model_ +
                           " --render-special --decode " + list + " 2>&1");
  ASSERT_EQ(d.exit_code, 0) << d.out;
  EXPECT_EQ(d.out,
            "[Round 0]\n问：你好\n答：你好，我是助手\n[Round 1]\n问：晚上睡不着怎么办\n答："
            "[gMASK]<sop>\n");
  // A first turn without history is the bare query.
  std::ofstream(msgs) << json::array({{{"role", "user"}, {"content", "你好"}}}).dump();
  const auto one = run_shell(std::string(GLMSERVE_BIN) + " template --model " + model_ +
                             " --messages " + msgs + " --text 2>&1 >/dev/null");
  EXPECT_NE(one.out.find("你好[gMASK]<sop> ("), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("template chatglm1"), std::string::npos) << one.out;
}

TEST_F(Chatglm1E2eTest, ServeAnswersTwoTurnsOfChatCompletions) {
  glm::testing::Proc serve({"serve", "--model", model_, "--port", "0", "--socket", dir_ + "/e.sock",
                            "--db", dir_ + "/c.db", "--threads", "1"},
                           dir_ + "/serve.log");
  int port = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const std::string mark = "open http://127.0.0.1:";
  while (port < 0 && std::chrono::steady_clock::now() < deadline) {
    const std::string log = serve.log();
    if (const size_t at = log.find(mark); at != std::string::npos) {
      port = std::atoi(log.c_str() + at + mark.size());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(port, 0) << serve.log();
  json messages = json::array({{{"role", "user"}, {"content", "你好"}}});
  for (int turn = 0; turn < 2; ++turn) {
    json body = {{"messages", messages}, {"temperature", 0}, {"max_tokens", 8}};
    RawHttp http(port);
    http.send_request("POST", "/v1/chat/completions", body.dump());
    ASSERT_TRUE(http.read_until("", 60000)) << http.received();
    ASSERT_EQ(http.result().status, 200) << http.received();
    const json r = json::parse(http.result().body, nullptr, false);
    ASSERT_TRUE(r.is_object()) << http.result().body;
    const std::string text = r["choices"][0]["message"]["content"];
    EXPECT_FALSE(text.empty()) << http.result().body;
    EXPECT_GT(r["usage"]["completion_tokens"].get<int>(), 0);
    // v1 reuses no KV across turns: every prompt is a new bidirectional prefix.
    if (r["usage"].contains("prompt_tokens_details")) {
      EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    }
    messages.push_back({{"role", "assistant"}, {"content", text}});
    messages.push_back({{"role", "user"}, {"content", "再见"}});
  }
}

}  // namespace
}  // namespace glm
