// Test-only: a raw TCP client for the HTTP server's tests (every byte under the test's
// control: malformed heads, pipelining, slow senders, hang-ups) and a Server on a free port.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http/server.h"

namespace glm::http::testing {

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ADD_FAILURE() << "cannot connect to port " << port;
    }
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }
  bool send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until `needle` was received (true), or the peer closed / timeout (false; with an
  // empty needle, true when the peer closed).
  bool read_until(const std::string& needle, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (needle.empty() || data_.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[16384];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        return needle.empty();
      }
      data_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  // Reads until the peer closes; true if it did within the timeout.
  bool wait_closed(int timeout_ms) { return read_until("", timeout_ms); }
  bool peer_closed() const { return closed_; }
  const std::string& received() const { return data_; }
  void clear() { data_.clear(); }

 private:
  int fd_ = -1;
  std::string data_;
  bool closed_ = false;
};

// The status codes of the responses in `raw`, in order (every "HTTP/1.x " is a status line:
// the tests' bodies never contain one).
inline std::vector<int> statuses(const std::string& raw) {
  std::vector<int> out;
  size_t pos = 0;
  while ((pos = raw.find("HTTP/1.", pos)) != std::string::npos) {
    if (pos + 12 <= raw.size() && raw[pos + 8] == ' ') {
      out.push_back(std::atoi(raw.substr(pos + 9, 3).c_str()));
    }
    pos += 7;
  }
  return out;
}

// A Server on a free loopback port, run on its own thread for the test's lifetime.
class TestServer {
 public:
  explicit TestServer(ServerOptions options = {},
                      const std::function<void(Server&)>& install = nullptr) {
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<Server>(std::move(options));
    if (install) install(*server_);
    auto port = server_->bind();
    EXPECT_TRUE(port.ok()) << port.status().to_string();
    port_ = port.ok() ? *port : 0;
    thread_ = std::thread([this] { server_->run(); });
    for (int i = 0; i < 500 && !server_->running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ~TestServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  Server& server() { return *server_; }

 private:
  std::unique_ptr<Server> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace glm::http::testing
