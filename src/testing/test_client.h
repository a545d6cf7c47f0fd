// TestClient: a blocking line client of the engine socket, for tests and benchmarks.
// Every read has a deadline, so a broken daemon fails a test instead of hanging it.
// Not thread-safe (one per thread). Header-only; depends on unix_socket and protocol.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/unix_socket.h"
#include "protocol/line_buffer.h"
#include "protocol/protocol.h"

namespace glm::testing {

class TestClient {
 public:
  explicit TestClient(const std::string& path) : in_(64 << 20) {
    auto fd = connect_unix(path);
    if (fd.ok()) fd_ = *fd;
    connect_status_ = fd.status();
  }
  ~TestClient() { close(); }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  const Status& connect_status() const { return connect_status_; }
  int fd() const { return fd_; }

  bool send(const std::string& line) { return fd_ >= 0 && write_all(fd_, line + "\n").ok(); }
  bool send_raw(const std::string& bytes) { return fd_ >= 0 && write_all(fd_, bytes).ok(); }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // The next line within `timeout_ms`; nullopt on timeout or end of stream (see eof()).
  std::optional<std::string> read_line(int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::string line;
    for (;;) {
      if (in_.next(&line) == protocol::LineBuffer::Next::kLine) return line;
      if (eof_ || fd_ < 0) return std::nullopt;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        eof_ = true;
        continue;
      }
      in_.append(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  bool eof() const { return eof_; }

  std::optional<protocol::Event> next(int timeout_ms = 10000) {
    auto line = read_line(timeout_ms);
    if (!line) return std::nullopt;
    auto ev = protocol::parse_event(*line);
    if (!ev.ok()) return std::nullopt;
    return *ev;
  }

  // Events of request `id` until its done or error (events of other ids are skipped); empty if
  // the stream ended or timed out first.
  std::vector<protocol::Event> until_final(const std::string& id, int timeout_ms = 20000) {
    std::vector<protocol::Event> out;
    for (;;) {
      auto ev = next(timeout_ms);
      if (!ev) return {};
      if (ev->id != id) continue;
      out.push_back(*ev);
      if (ev->type == protocol::EventType::kDone || ev->type == protocol::EventType::kError) {
        return out;
      }
    }
  }

  // One request with a one-line reply.
  std::optional<protocol::Event> query(const std::string& line, int timeout_ms = 10000) {
    if (!send(line)) return std::nullopt;
    return next(timeout_ms);
  }

 private:
  int fd_ = -1;
  Status connect_status_;
  protocol::LineBuffer in_;
  bool eof_ = false;
};

// Concatenated text of the token events.
inline std::string joined_text(const std::vector<protocol::Event>& events) {
  std::string s;
  for (const auto& e : events) {
    if (e.type == protocol::EventType::kToken) s += e.text;
  }
  return s;
}

}  // namespace glm::testing
