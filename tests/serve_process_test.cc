// `glmserve serve` as a real process: one owner per port and per engine socket, ready only when
// its own engine and its gateway answer (docs/operations.md).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gateway/http_test_util.h"
#include "process_util.h"

namespace glm::serve {
namespace {

using glm::gateway::testing::RawHttp;
using glm::gateway::testing::sse_data;
using glm::testing::children_of;
using glm::testing::cmdline_of;
using glm::testing::Proc;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A loopback port that was free a moment ago (bound to port 0, then closed).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// True if something accepts TCP connections on 127.0.0.1:port.
bool connects(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

bool wait_until(const std::function<bool()>& cond, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

// The port of serve's "serve: ready: ...; open http://127.0.0.1:P/" line, or -1.
int ready_port(const std::string& log) {
  const std::string mark = "open http://127.0.0.1:";
  const size_t at = log.find(mark);
  return at == std::string::npos ? -1 : std::atoi(log.c_str() + at + mark.size());
}

// Lines of output that are not empty.
int n_lines(const std::string& s) {
  int n = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t end = std::min(s.find('\n', pos), s.size());
    n += end > pos;
    pos = end + 1;
  }
  return n;
}

class ServeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-serve-proc-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/e.sock";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string dir_, socket_;
};

TEST_F(ServeProcessTest, ASecondWebOrServeOnAUsedPortExitsAtOnceNamingThePort) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const std::string p = std::to_string(port);
  Proc first({"web", "--engine", socket_, "--port", p, "--db", dir_ + "/a.db"}, dir_ + "/1.log");
  ASSERT_TRUE(wait_until([&] { return connects(port); }, 20000)) << first.log();

  // Never shared: a second gateway on the port fails at once with one line that names it.
  Proc second({"web", "--engine", socket_, "--port", p, "--db", dir_ + "/b.db"}, dir_ + "/2.log");
  auto status = second.wait(10000);
  ASSERT_TRUE(status.has_value()) << "a second web on a used port kept running\n" << second.log();
  EXPECT_NE(WEXITSTATUS(*status), 0);
  EXPECT_NE(second.log().find("127.0.0.1:" + p), std::string::npos) << second.log();
  EXPECT_NE(second.log().find("port " + p), std::string::npos) << second.log();
  EXPECT_EQ(n_lines(second.log()), 1) << second.log();

  // serve opens the port before it starts anything: it exits as fast, without children.
  const auto t0 = Clock::now();
  Proc serve({"serve", "--echo", "--port", p, "--socket", socket_}, dir_ + "/serve.log");
  status = serve.wait(10000);
  ASSERT_TRUE(status.has_value()) << serve.log();
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_NE(WEXITSTATUS(*status), 0);
  EXPECT_NE(serve.log().find("127.0.0.1:" + p), std::string::npos) << serve.log();
  EXPECT_EQ(serve.log().find("started"), std::string::npos) << serve.log();
  EXPECT_EQ(n_lines(serve.log()), 1) << serve.log();
  EXPECT_TRUE(connects(port));  // the first one still has it
}

TEST_F(ServeProcessTest, ASecondServeOnTheSameEngineSocketRefusesAtOnce) {
  Proc first({"serve", "--echo", "--no-web", "--socket", socket_}, dir_ + "/1.log");
  ASSERT_TRUE(
      wait_until([&] { return first.log().find("serve: ready") != std::string::npos; }, 20000))
      << first.log();
  const auto t0 = Clock::now();
  Proc second({"serve", "--echo", "--no-web", "--socket", socket_}, dir_ + "/2.log");
  auto status = second.wait(10000);
  ASSERT_TRUE(status.has_value()) << second.log();
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_NE(WEXITSTATUS(*status), 0);
  EXPECT_NE(second.log().find("owns the engine socket " + socket_), std::string::npos)
      << second.log();
  EXPECT_NE(second.log().find("pid " + std::to_string(first.pid())), std::string::npos)
      << second.log();
  EXPECT_EQ(second.log().find("started"), std::string::npos) << second.log();
  // The first one never noticed.
  EXPECT_EQ(first.log().find("restarting"), std::string::npos) << first.log();
  EXPECT_EQ(children_of(first.pid()).size(), 1u);
}

TEST_F(ServeProcessTest, ReadyOnlyWhenItsGatewayAnswersToo) {
  // The gateway cannot open its database: the engine is up, serve is not ready, and gives up.
  Proc broken(
      {"serve", "--echo", "--port", "0", "--socket", socket_, "--db", dir_ + "/no/such/dir/c.db"},
      dir_ + "/broken.log");
  auto status = broken.wait(90000);
  ASSERT_TRUE(status.has_value()) << broken.log();
  EXPECT_NE(WEXITSTATUS(*status), 0);
  EXPECT_NE(broken.log().find("giving up"), std::string::npos) << broken.log();
  EXPECT_EQ(broken.log().find("serve: ready"), std::string::npos) << broken.log();

  // A working one: when serve says ready, the page's /health already answers 200.
  Proc serve({"serve", "--echo", "--port", "0", "--socket", socket_, "--db", dir_ + "/c.db"},
             dir_ + "/serve.log");
  ASSERT_TRUE(wait_until([&] { return ready_port(serve.log()) > 0; }, 30000)) << serve.log();
  RawHttp raw(ready_port(serve.log()));
  raw.send_request("GET", "/health", "");
  ASSERT_TRUE(raw.read_until("", 5000));
  EXPECT_EQ(raw.result().status, 200) << raw.received();
}

}  // namespace
}  // namespace glm::serve
