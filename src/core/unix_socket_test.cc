// Unix sockets: listen, connect, and one request line answered by one reply line (ask_unix),
// including a peer that never answers (the timeout) and a path nothing listens on.
#include "core/unix_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace glm {
namespace {

std::string temp_socket(const char* name) {
  return "/tmp/glm-us-" + std::to_string(::getpid()) + "-" + name + ".sock";
}

// Accepts one connection, reads a line, and answers `reply` (or nothing, holding the
// connection open for `hold_ms`).
void serve_once(int listen_fd, const std::string& reply, int hold_ms) {
  int fd = -1;
  for (int i = 0; i < 2000 && fd < 0; ++i) {  // the socket is non-blocking
    fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(fd, 0);
  std::string got;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') got += c;
  EXPECT_EQ(got, "{\"type\":\"health\"}");
  if (!reply.empty()) {
    EXPECT_TRUE(write_all(fd, reply).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  ::close(fd);
}

TEST(UnixSocket, AskUnixReturnsTheFirstReplyLine) {
  const std::string path = temp_socket("ask");
  auto l = listen_unix(path, 0600);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  std::thread t(serve_once, *l, "{\"ok\":true}\nmore\n", 0);
  auto reply = ask_unix(path, "{\"type\":\"health\"}\n", 2000);
  t.join();
  ASSERT_TRUE(reply.ok()) << reply.status().to_string();
  EXPECT_EQ(*reply, "{\"ok\":true}");
  ::close(*l);
  ::unlink(path.c_str());
}

TEST(UnixSocket, APeerThatNeverAnswersTimesOutAndNoListenerIsUnavailable) {
  const std::string path = temp_socket("silent");
  auto l = listen_unix(path, 0600);
  ASSERT_TRUE(l.ok());
  std::thread t(serve_once, *l, "", 600);
  const auto t0 = std::chrono::steady_clock::now();
  auto reply = ask_unix(path, "{\"type\":\"health\"}\n", 150);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  t.join();
  EXPECT_EQ(reply.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("did not answer within 150 ms"), std::string::npos);
  EXPECT_LT(ms, 550);  // the bound, not the peer's 600 ms
  ::close(*l);
  ::unlink(path.c_str());
  EXPECT_EQ(ask_unix(path, "x\n", 100).status().code(), ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace glm
