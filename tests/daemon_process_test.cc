// The engine daemon and `serve` as real processes: the glmserve binary, signals, nc, restarts.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "core/utf8.h"
#include "process_util.h"
#include "testing/test_client.h"

namespace glm::daemon {
namespace {

using glm::testing::children_of;
using glm::testing::joined_text;
using glm::testing::Proc;
using glm::testing::run_shell;
using glm::testing::TestClient;
using protocol::EventType;

class DaemonProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-daemon-proc-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // serve keeps its KV disk cache under the data directory by default: the test's own.
    ::setenv("XDG_DATA_HOME", dir_.c_str(), 1);
    socket_ = dir_ + "/e.sock";
  }
  void TearDown() override {
    ::unsetenv("XDG_DATA_HOME");
    std::system(("rm -rf " + dir_).c_str());
  }

  // Polls health until it says `want`; the model name, or "" on timeout.
  std::string wait_health(const std::string& want, int timeout_ms = 20000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      TestClient c(socket_);
      if (c.connected()) {
        auto h = c.query(R"({"type":"health"})", 2000);
        if (h && h->type == EventType::kHealth && generation::health_name(h->health) == want)
          return h->model;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
  }

  std::string dir_, socket_;
};

TEST_F(DaemonProcessTest, EchoEngineAnswersNcAndDrainsOnSigterm) {
  Proc engine({"engine", "--echo", "--echo-delay", "20", "--socket", socket_}, dir_ + "/e.log");
  ASSERT_GT(engine.pid(), 0);
  ASSERT_EQ(wait_health("ready"), "echo") << engine.log();

  // The documented one-liner streams a reply (nc -N: close the sending side at end of input).
  if (::system("command -v nc >/dev/null 2>&1") == 0) {
    const std::string out = run_shell(
                                "echo '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}' | "
                                "timeout 10 nc -N -U " +
                                socket_)
                                .out;
    EXPECT_NE(out.find("\"event\":\"token\",\"text\":\"h\""), std::string::npos) << out;
    EXPECT_NE(out.find("\"event\":\"done\""), std::string::npos) << out;
  }

  TestClient c(socket_);
  const std::string text(40, 'x');
  ASSERT_TRUE(c.send(R"({"id":"d","messages":[{"role":"user","content":")" + text + "\"}]}"));
  std::string got;
  for (;;) {  // wait for the first token, then ask the engine to stop
    auto ev = c.next();
    ASSERT_TRUE(ev.has_value()) << engine.log();
    if (ev->type == EventType::kToken) {
      got += ev->text;
      break;
    }
  }
  ASSERT_EQ(::kill(engine.pid(), SIGTERM), 0);
  auto rest = c.until_final("d");
  ASSERT_FALSE(rest.empty()) << engine.log();
  EXPECT_EQ(rest.back().finish_reason, generation::FinishReason::kStop);
  EXPECT_EQ(got + joined_text(rest), text);
  auto status = engine.wait(20000);
  ASSERT_TRUE(status.has_value()) << "engine did not exit after SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 0) << engine.log();
  struct stat st;
  EXPECT_NE(::stat(socket_.c_str(), &st), 0) << "socket left behind";
  EXPECT_NE(engine.log().find("draining"), std::string::npos) << engine.log();
}

TEST_F(DaemonProcessTest, SecondEngineOnALiveSocketRefusesToStart) {
  Proc first({"engine", "--echo", "--socket", socket_}, dir_ + "/1.log");
  ASSERT_EQ(wait_health("ready"), "echo") << first.log();
  Proc second({"engine", "--echo", "--socket", socket_}, dir_ + "/2.log");
  auto status = second.wait(10000);
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(WEXITSTATUS(*status), 0);
  EXPECT_NE(second.log().find("already serving"), std::string::npos) << second.log();
  EXPECT_EQ(wait_health("ready"), "echo");  // the first one is untouched
}

TEST_F(DaemonProcessTest, BadFlagsExitWithAMessage) {
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {{"engine", "--echo", "--socket", socket_, "--socket-mode", "0666"}, "other users"},
      {{"engine", "--socket", socket_}, "--model"},
      {{"engine", "--echo"}, "--socket"},
      {{"engine", "--echo", "--socket", socket_, "--max-batch", "0"}, "--max-batch"},
      {{"engine", "--model", dir_ + "/missing.gguf", "--socket", socket_}, ""},
      {{"serve", "--model", dir_ + "/missing.gguf"}, "cannot read model file"},
      // serve locks the socket path before it starts anything: a directory that is not there
      // fails at once.
      {{"serve", "--echo", "--no-web", "--socket", dir_ + "/no/such/dir/e.sock"}, "lock file"},
  };
  for (const Case& k : cases) {
    Proc p(k.args, dir_ + "/bad.log");
    auto status = p.wait(30000);
    ASSERT_TRUE(status.has_value()) << k.args[0] << " " << k.needle;
    EXPECT_TRUE(WIFEXITED(*status));
    EXPECT_NE(WEXITSTATUS(*status), 0) << p.log();
    EXPECT_NE(p.log().find(k.needle), std::string::npos) << p.log();
  }
}

TEST_F(DaemonProcessTest, ServeRestartsAKilledEngine) {
  Proc serve({"serve", "--echo", "--no-web", "--socket", socket_, "--drain-timeout", "5"},
             dir_ + "/serve.log");
  ASSERT_EQ(wait_health("ready"), "echo") << serve.log();
  auto kids = children_of(serve.pid());
  ASSERT_EQ(kids.size(), 1u) << serve.log();
  const pid_t first = kids[0];
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  // The socket file of the killed engine stays behind (stale) until the new engine replaces it.
  pid_t second = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline && second < 0) {
    for (pid_t k : children_of(serve.pid())) {
      if (k != first) second = k;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(second, 0) << "engine not restarted\n" << serve.log();
  ASSERT_EQ(wait_health("ready"), "echo") << serve.log();
  TestClient c(socket_);
  ASSERT_TRUE(c.send(R"({"id":"after","messages":[{"role":"user","content":"back"}]})"));
  auto events = c.until_final("after");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(joined_text(events), "back");
  EXPECT_NE(serve.log().find("restarting"), std::string::npos) << serve.log();

  ASSERT_EQ(::kill(serve.pid(), SIGTERM), 0);
  auto status = serve.wait(20000);
  ASSERT_TRUE(status.has_value()) << serve.log();
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 0) << serve.log();
  EXPECT_NE(::kill(second, 0), 0) << "engine child outlived serve";
}

TEST_F(DaemonProcessTest, RealTinyModelServesTurnsWithCacheAndStopsCleanly) {
  const std::string model = dir_ + "/tiny.gguf";
  const std::string gen =
      std::string(GLMSERVE_BIN) + " gen-model --arch chatglm3 --preset tiny -o " + model + " 2>&1";
  if (::system(gen.c_str()) != 0) GTEST_SKIP() << "gen-model --preset tiny failed: " << gen;
  Proc engine({"engine", "--model", model, "--socket", socket_, "--threads", "1"}, dir_ + "/e.log");
  ASSERT_FALSE(wait_health("ready").empty()) << engine.log();
  TestClient c(socket_);
  ASSERT_TRUE(c.send(R"({"id":"t1","conversation":"conv","messages":[{"role":"user",)"
                     R"("content":"hello there"}],"params":{"max_tokens":8,"temperature":0}})"));
  auto turn1 = c.until_final("t1");
  ASSERT_FALSE(turn1.empty()) << engine.log();
  ASSERT_EQ(turn1.back().type, EventType::kDone) << turn1.back().message;
  EXPECT_EQ(turn1.back().usage.completion_tokens, 8);
  EXPECT_EQ(turn1.back().usage.cached_tokens, 0);
  const int prompt1 = turn1.back().usage.prompt_tokens;
  ASSERT_GT(prompt1, 0);
  for (const auto& e : turn1) {
    if (e.type == EventType::kToken) {
      EXPECT_TRUE(utf8_valid(e.text));
    }
  }
  // Turn 2 carries turn 1 and its reply: the engine reuses the conversation's KV cache.
  protocol::Request r2;
  r2.id = "t2";
  r2.conversation = "conv";
  r2.messages = {
      {"user", "hello there", ""}, {"assistant", joined_text(turn1), ""}, {"user", "and more", ""}};
  r2.params.max_tokens = 8;
  r2.params.temperature = 0.0;
  ASSERT_TRUE(c.send(protocol::serialize_request(r2)));
  auto turn2 = c.until_final("t2");
  ASSERT_FALSE(turn2.empty());
  ASSERT_EQ(turn2.back().type, EventType::kDone) << turn2.back().message;
  EXPECT_GE(turn2.back().usage.cached_tokens, prompt1);
  EXPECT_LE(turn2.back().usage.cached_tokens, prompt1 + 8);
  EXPECT_GT(turn2.back().usage.prompt_tokens, turn2.back().usage.cached_tokens);

  ASSERT_EQ(::kill(engine.pid(), SIGTERM), 0);
  auto status = engine.wait(30000);
  ASSERT_TRUE(status.has_value()) << engine.log();
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 0) << engine.log();
}

TEST_F(DaemonProcessTest, ServeGivesUpOnAnEngineThatCannotStart) {
  // A model file that is not GGUF: the engine's load error would be the same on every try, so
  // serve stops after the first (docs/operations.md, exit code 3), not after five.
  const std::string bad = dir_ + "/bad.gguf";
  ASSERT_EQ(std::system(("echo 'not a model' > " + bad).c_str()), 0);
  Proc serve({"serve", "--model", bad, "--no-web", "--socket", socket_}, dir_ + "/serve.log");
  auto status = serve.wait(60000);
  ASSERT_TRUE(status.has_value()) << serve.log();
  EXPECT_EQ(WEXITSTATUS(*status), 1);
  EXPECT_NE(serve.log().find("will not change on retry"), std::string::npos) << serve.log();
  EXPECT_EQ(serve.log().find("restarting"), std::string::npos) << serve.log();
}

TEST_F(DaemonProcessTest, ServeNeverTakesAnotherInstancesEngineForItsOwn) {
  // Another instance's engine already owns the socket path: serve's own engine cannot listen
  // there, and the foreign engine's healthy answers must not make serve report ready.
  Proc foreign({"engine", "--echo", "--socket", socket_}, dir_ + "/foreign.log");
  ASSERT_EQ(wait_health("ready"), "echo") << foreign.log();
  Proc serve({"serve", "--echo", "--no-web", "--socket", socket_}, dir_ + "/serve.log");
  auto status = serve.wait(60000);  // its engine keeps failing: serve gives up
  ASSERT_TRUE(status.has_value()) << serve.log();
  EXPECT_NE(WEXITSTATUS(*status), 0) << serve.log();
  EXPECT_NE(serve.log().find("another instance's engine answers"), std::string::npos)
      << serve.log();
  EXPECT_EQ(serve.log().find("serve: ready"), std::string::npos) << serve.log();
  // The foreign engine is untouched.
  EXPECT_EQ(wait_health("ready"), "echo");
}

}  // namespace
}  // namespace glm::daemon
