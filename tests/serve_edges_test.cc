// `glmserve serve` at the edges a real user hits (issue 30): no key on any command line (`ps`),
// /metrics behind its own key, a model that cannot load stops serve at once with its reason,
// state that does not pile up in the runtime and data directories, and adapters loaded at run
// time that an engine restart keeps.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "gateway/http_test_util.h"
#include "process_util.h"

namespace glm::serve {
namespace {

using glm::gateway::testing::RawHttp;
using glm::testing::children_of;
using glm::testing::cmdline_of;
using glm::testing::Proc;
using glm::testing::ready_port;
using glm::testing::run_shell;
using glm::testing::wait_until;
using Clock = std::chrono::steady_clock;

int status_of(int port, const std::string& method, const std::string& path,
              const std::map<std::string, std::string>& headers = {},
              const std::string& body = "") {
  RawHttp raw(port);
  raw.send_request(method, path, body, headers);
  if (!raw.read_until("", 10000)) return -1;
  return raw.result().status;
}

class ServeEdgesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-serve-edges-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/e.sock";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  void write_file(const std::string& path, const std::string& text, mode_t mode = 0600) {
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
  }

  std::string dir_, socket_;
};

// Every command line on the machine, as `ps` shows them.
std::string all_command_lines() { return run_shell("ps -eo args").out; }

TEST_F(ServeEdgesTest, NoKeyOnAnyCommandLineAndMetricsBehindTheirOwnKey) {
  const std::string api_key = "k3y-on-the-command-line-0123456789";
  const std::string file_key = "k3y-from-a-file-9876543210";
  const std::string metrics_key = "m3trics-k3y-from-a-file-555";
  write_file(dir_ + "/api-key", file_key + "\n");
  write_file(dir_ + "/metrics-key", metrics_key + "\n");

  // The key on serve's own command line (the compatible way): blanked once read, and never
  // passed on in the gateway's argv.
  {
    Proc serve({"serve", "--echo", "--port", "0", "--socket", socket_, "--db", dir_ + "/a.db",
                "--api-key", api_key},
               dir_ + "/a.log");
    ASSERT_TRUE(wait_until([&] { return ready_port(serve.log()) > 0; }, 30000)) << serve.log();
    const int port = ready_port(serve.log());
    ASSERT_EQ(children_of(serve.pid()).size(), 2u);  // the engine and the gateway run
    const std::string ps = all_command_lines();
    ASSERT_NE(ps.find("glmserve web"), std::string::npos) << ps;
    EXPECT_EQ(ps.find(api_key), std::string::npos) << ps;
    for (pid_t child : children_of(serve.pid())) {
      EXPECT_EQ(cmdline_of(child).find(api_key), std::string::npos) << cmdline_of(child);
    }
    // The gateway has the key all the same.
    EXPECT_EQ(status_of(port, "GET", "/v1/models"), 401);
    EXPECT_EQ(status_of(port, "GET", "/v1/models", {{"Authorization", "Bearer " + api_key}}), 200);
    EXPECT_EQ(status_of(port, "GET", "/metrics"), 200);  // open: no metrics key given
  }
  // The key from a file, the metrics key from a file: no key in any command line either.
  Proc serve({"serve", "--echo", "--port", "0", "--socket", socket_, "--db", dir_ + "/b.db",
              "--api-key-file", dir_ + "/api-key", "--metrics-key-file", dir_ + "/metrics-key"},
             dir_ + "/b.log");
  ASSERT_TRUE(wait_until([&] { return ready_port(serve.log()) > 0; }, 30000)) << serve.log();
  const int port = ready_port(serve.log());
  const std::string ps = all_command_lines();
  EXPECT_EQ(ps.find(file_key), std::string::npos) << ps;
  EXPECT_EQ(ps.find(metrics_key), std::string::npos) << ps;
  EXPECT_EQ(status_of(port, "GET", "/v1/models", {{"Authorization", "Bearer " + file_key}}), 200);
  EXPECT_EQ(status_of(port, "GET", "/v1/models"), 401);
  EXPECT_EQ(status_of(port, "GET", "/metrics"), 401);
  EXPECT_EQ(status_of(port, "GET", "/metrics", {{"Authorization", "Bearer " + file_key}}), 401);
  EXPECT_EQ(status_of(port, "GET", "/metrics", {{"Authorization", "Bearer " + metrics_key}}), 200);
}

TEST_F(ServeEdgesTest, AKeyFileThatCannotBeReadStopsServeWithItsName) {
  write_file(dir_ + "/empty-key", "");
  for (const std::string& file : {dir_ + "/no-such-key", dir_ + "/empty-key"}) {
    Proc serve({"serve", "--echo", "--port", "0", "--socket", socket_, "--api-key-file", file},
               dir_ + "/k.log");
    auto status = serve.wait(10000);
    ASSERT_TRUE(status.has_value()) << serve.log();
    EXPECT_NE(WEXITSTATUS(*status), 0);
    EXPECT_NE(serve.log().find("--api-key-file"), std::string::npos) << serve.log();
    EXPECT_NE(serve.log().find(file), std::string::npos) << serve.log();
  }
}

// A truncated GGUF: the engine's load error is the same on every try, so serve stops on the
// first one with the reason, prints no URL (nothing serves), and does not restart.
TEST_F(ServeEdgesTest, AModelThatCannotLoadStopsServeAtOnceWithTheReasonAndNoUrl) {
  const std::string model = dir_ + "/cut.gguf";
  auto gen = glm::testing::run_cli("gen-model --arch chatglm3 --preset tiny -o " + model);
  ASSERT_EQ(gen.exit_code, 0) << gen.out;
  struct stat st;
  ASSERT_EQ(::stat(model.c_str(), &st), 0);
  ASSERT_EQ(::truncate(model.c_str(), st.st_size / 2), 0);

  const auto t0 = Clock::now();
  // stdout and stderr together, as a user's terminal shows them.
  auto run = run_shell("XDG_DATA_HOME=" + dir_ + " timeout 120 " + std::string(GLMSERVE_BIN) +
                       " serve --model " + model + " --port 0 --socket " + socket_ + " --db " +
                       dir_ + "/c.db 2>&1");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_LT(seconds, 20) << run.out;
  // One try: the reason once, no restart, no URL.
  const std::string reason = "cannot load the model";
  const size_t first = run.out.find(reason);
  ASSERT_NE(first, std::string::npos) << run.out;
  EXPECT_EQ(run.out.find(reason, first + 1), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("restarting"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("http://"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("will not change on retry"), std::string::npos) << run.out;
  // The last line of serve names the engine's stop; the line above it is the reason.
  EXPECT_NE(run.out.find("serve: engine exited with code 3"), std::string::npos) << run.out;
}

// The runtime directory does not collect lock files: serve removes its own when it stops, and
// at start the ones no serve holds (a killed serve's); one that a live process holds stays.
TEST_F(ServeEdgesTest, LockFilesDoNotPileUpInTheRuntimeDirectory) {
  const std::string run = dir_ + "/run";
  ASSERT_EQ(::mkdir(run.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((run + "/glmserve").c_str(), 0700), 0);
  const std::string stale = run + "/glmserve/engine-1.sock.lock";
  const std::string held = run + "/glmserve/engine-2.sock.lock";
  write_file(stale, "12345\n");
  write_file(held, "1\n");
  const int held_fd = ::open(held.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_EQ(::flock(held_fd, LOCK_EX | LOCK_NB), 0);
  ::setenv("XDG_RUNTIME_DIR", run.c_str(), 1);
  Proc serve({"serve", "--echo", "--port", "0", "--db", dir_ + "/c.db"}, dir_ + "/serve.log");
  ::unsetenv("XDG_RUNTIME_DIR");
  ASSERT_TRUE(wait_until([&] { return ready_port(serve.log()) > 0; }, 30000)) << serve.log();
  const std::string own =
      run + "/glmserve/engine-" + std::to_string(ready_port(serve.log())) + ".sock.lock";
  EXPECT_FALSE(std::filesystem::exists(stale)) << "a lock nobody holds is removed at start";
  EXPECT_TRUE(std::filesystem::exists(held)) << "a lock a live process holds stays";
  EXPECT_TRUE(std::filesystem::exists(own));
  ::kill(serve.pid(), SIGTERM);
  auto status = serve.wait(30000);
  ASSERT_TRUE(status.has_value()) << serve.log();
  EXPECT_EQ(WEXITSTATUS(*status), 0) << serve.log();
  EXPECT_FALSE(std::filesystem::exists(own)) << "serve removes its lock file when it stops";
  EXPECT_TRUE(std::filesystem::exists(held));
  ::close(held_fd);
}

// One model under serve: named by its file's stem as several models are (not by the file's
// description), and the KV disk cache on by default under the data directory, off with
// --kv-disk off.
TEST_F(ServeEdgesTest, OneModelIsNamedByItsFileAndKeepsItsKvOnDiskByDefault) {
  const std::string model = dir_ + "/tiny-named.gguf";
  auto gen = glm::testing::run_cli("gen-model --arch chatglm3 --preset tiny -o " + model);
  ASSERT_EQ(gen.exit_code, 0) << gen.out;
  for (const bool off : {false, true}) {
    SCOPED_TRACE(off ? "--kv-disk off" : "default");
    const std::string data = dir_ + (off ? "/data-off" : "/data");
    ::setenv("XDG_DATA_HOME", data.c_str(), 1);
    std::vector<std::string> args = {"serve",    "--model", model,  "--port",      "0",
                                     "--socket", socket_,   "--db", dir_ + "/c.db"};
    if (off) args.insert(args.end(), {"--kv-disk", "off"});
    Proc serve(args, dir_ + "/named.log");
    ::unsetenv("XDG_DATA_HOME");
    ASSERT_TRUE(wait_until([&] { return ready_port(serve.log()) > 0; }, 60000)) << serve.log();
    const int port = ready_port(serve.log());
    RawHttp models(port);
    models.send_request("GET", "/v1/models", "");
    ASSERT_TRUE(models.read_until("", 10000));
    const auto list = nlohmann::json::parse(models.result().body);
    ASSERT_EQ(list["data"].size(), 1u);
    EXPECT_EQ(list["data"][0]["id"], "tiny-named");
    EXPECT_EQ(status_of(port, "GET", "/v1/models/tiny-named"), 200);
    EXPECT_EQ(status_of(port, "POST", "/v1/chat/completions", {},
                        R"({"model":"tiny-named","max_tokens":4,"conversation":"c1",)"
                        R"("messages":[{"role":"user","content":"hello there"}]})"),
              200);
    ::kill(serve.pid(), SIGTERM);  // the engine writes its KV on a graceful stop
    ASSERT_TRUE(serve.wait(60000).has_value()) << serve.log();
    const std::string kv = data + "/glmserve/kv-cache";
    if (off) {
      EXPECT_FALSE(std::filesystem::exists(kv)) << serve.log();
    } else {
      ASSERT_TRUE(std::filesystem::is_directory(kv)) << serve.log();
      EXPECT_FALSE(std::filesystem::is_empty(kv)) << serve.log();
      EXPECT_EQ(std::filesystem::status(kv).permissions() & std::filesystem::perms::others_all,
                std::filesystem::perms::none);
    }
  }
}

// An adapter loaded at run time (POST /v1/load_lora_adapter) is served again by the engine serve
// restarts after a kill -9, with the same greedy answer; one unloaded stays unloaded; the list
// goes with serve.
TEST_F(ServeEdgesTest, AdaptersLoadedAtRunTimeSurviveAnEngineRestart) {
  const std::string model = dir_ + "/tiny.gguf", lora = dir_ + "/rt.gguf";
  ASSERT_EQ(glm::testing::run_cli("gen-model --arch chatglm3 --preset tiny -o " + model).exit_code,
            0);
  ASSERT_EQ(
      glm::testing::run_cli("gen-model --lora-of " + model + " --rank 8 -o " + lora).exit_code, 0);
  const std::string key = "adapter-key-0123456789";
  write_file(dir_ + "/key", key + "\n");
  Proc serve({"serve", "--model", model, "--port", "0", "--socket", socket_, "--db", dir_ + "/c.db",
              "--api-key-file", dir_ + "/key", "--kv-disk", "off"},
             dir_ + "/rt.log");
  ASSERT_TRUE(wait_until([&] { return ready_port(serve.log()) > 0; }, 60000)) << serve.log();
  const int port = ready_port(serve.log());
  const std::map<std::string, std::string> auth = {{"Authorization", "Bearer " + key}};
  auto post = [&](const std::string& path, const nlohmann::json& body) {
    RawHttp raw(port);
    raw.send_request("POST", path, body.dump(), auth);
    if (!raw.read_until("", 60000)) return std::make_pair(-1, nlohmann::json());
    return std::make_pair(raw.result().status,
                          nlohmann::json::parse(raw.result().body, nullptr, false));
  };
  auto answer = [&](const std::string& name) {
    auto [status, body] = post("/v1/chat/completions",
                               {{"model", name},
                                {"max_tokens", 8},
                                {"temperature", 0},
                                {"messages", {{{"role", "user"}, {"content", "hello there"}}}}});
    return status == 200 ? body["choices"][0]["message"].value("content", "")
                         : "HTTP " + std::to_string(status);
  };
  // Kills the engine and waits for serve's next one to answer.
  auto restart_engine = [&] {
    pid_t engine = -1;
    for (pid_t c : children_of(serve.pid())) {
      if (cmdline_of(c).find(" engine ") != std::string::npos) engine = c;
    }
    ASSERT_GT(engine, 0);
    ASSERT_EQ(::kill(engine, SIGKILL), 0);
    ASSERT_TRUE(wait_until(
        [&] {
          for (pid_t c : children_of(serve.pid())) {
            if (c != engine && cmdline_of(c).find(" engine ") != std::string::npos &&
                answer("tiny").rfind("HTTP ", 0) != 0) {
              return true;
            }
          }
          return false;
        },
        60000))
        << serve.log();
  };
  ASSERT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "rt"}, {"lora_path", lora}}).first, 200);
  ASSERT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "rt2"}, {"lora_path", lora}, {"scale", 2}})
                .first,
            200);
  const std::string bare = answer("tiny"), adapted = answer("rt"), twice = answer("rt2");
  ASSERT_EQ(adapted.rfind("HTTP ", 0), std::string::npos) << adapted;
  EXPECT_NE(adapted, bare);
  EXPECT_NE(twice, adapted);  // the scale was kept
  ASSERT_EQ(post("/v1/unload_lora_adapter", {{"lora_name", "rt2"}}).first, 200);

  restart_engine();
  EXPECT_EQ(answer("rt"), adapted) << serve.log();
  EXPECT_EQ(answer("tiny"), bare);
  EXPECT_EQ(answer("tiny:rt2"), "HTTP 404");  // unloaded before the crash: still unloaded
  const std::string state = dir_ + "/e.adapters.json";
  EXPECT_EQ(::access(state.c_str(), F_OK), 0);
  ::kill(serve.pid(), SIGTERM);
  ASSERT_TRUE(serve.wait(60000).has_value()) << serve.log();
  EXPECT_NE(::access(state.c_str(), F_OK), 0);  // the next serve starts from its flags
}

}  // namespace
}  // namespace glm::serve
