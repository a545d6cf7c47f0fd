// Test helpers for the gateway: a Gateway on a free port in front of a FakeEngine, and a raw
// HTTP/1.1 client (so tests control every header and can hang up mid-stream). Test-only.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gateway/fake_engine.h"
#include "gateway/gateway.h"

namespace glm::gateway::testing {

struct HttpResult {
  int status = 0;
  std::multimap<std::string, std::string> headers;  // names lower-cased
  std::string body;                                 // de-chunked
  std::string header(std::string name) const {
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

inline std::string dechunk(const std::string& raw) {
  std::string out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
    if (n == 0) break;
    out += raw.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

// One SSE event: its `id:` (-1 if none) and its `data:` payload.
struct SseEvent {
  long id = -1;
  std::string data;
};

// The events of an SSE body that have a `data:` line, in order (comments skipped).
inline std::vector<SseEvent> sse_events(const std::string& body) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    SseEvent e;
    bool has_data = false;
    for (size_t line = pos; line < end;) {
      const size_t eol = std::min(body.find('\n', line), end);
      const std::string text = body.substr(line, eol - line);
      if (text.rfind("data: ", 0) == 0) {
        e.data = text.substr(6);
        has_data = true;
      } else if (text.rfind("id: ", 0) == 0) {
        e.id = std::atol(text.c_str() + 4);
      }
      line = eol + 1;
    }
    if (has_data) out.push_back(std::move(e));
    pos = end + 2;
  }
  return out;
}

// The `data:` payloads of an SSE body, in order.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  for (SseEvent& e : sse_events(body)) out.push_back(std::move(e.data));
  return out;
}

class RawHttp {
 public:
  explicit RawHttp(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ADD_FAILURE() << "cannot connect to the gateway on port " << port;
    }
  }
  ~RawHttp() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send_request(const std::string& method, const std::string& path, const std::string& body,
                    const std::map<std::string, std::string>& headers = {},
                    const std::string& content_type = "application/json") {
    std::string req = method + " " + path + " HTTP/1.1\r\n";
    std::map<std::string, std::string> h = {{"Host", "127.0.0.1"}, {"Connection", "close"}};
    if (!body.empty() || method == "POST") {
      h["Content-Type"] = content_type;
      h["Content-Length"] = std::to_string(body.size());
    }
    for (const auto& [k, v] : headers) h[k] = v;
    for (const auto& [k, v] : h) req += k + ": " + v + "\r\n";
    req += "\r\n" + body;
    size_t off = 0;
    while (off < req.size()) {
      ssize_t n = ::send(fd_, req.data() + off, req.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may refuse early (413): read the answer anyway
      off += static_cast<size_t>(n);
    }
  }
  // Sends bytes as they are (malformed or pipelined requests).
  bool send_raw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  int fd() const { return fd_; }
  // Reads until `needle` appears in what was received, or the connection closes, or timeout.
  bool read_until(const std::string& needle, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (needle.empty() || data_.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[8192];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return needle.empty();
      data_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  const std::string& received() const { return data_; }
  HttpResult result() const {
    HttpResult r;
    const size_t hend = data_.find("\r\n\r\n");
    if (hend == std::string::npos) return r;
    const std::string head = data_.substr(0, hend);
    r.status = std::atoi(head.substr(9, 3).c_str());
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos < head.size()) {
      const size_t next = head.find("\r\n", pos + 2);
      const std::string line =
          head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string k = line.substr(0, colon);
        for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        r.headers.emplace(k, line.substr(line.find_first_not_of(' ', colon + 1)));
      }
      pos = next;
    }
    const std::string rest = data_.substr(hend + 4);
    r.body = r.header("Transfer-Encoding") == "chunked" ? dechunk(rest) : rest;
    return r;
  }

 private:
  int fd_ = -1;
  std::string data_;
};

class TestGateway {
 public:
  explicit TestGateway(const std::string& tag, GatewayOptions options = {})
      : fake_("/tmp/glm-gwt-" + std::to_string(::getpid()) + "-" + tag + ".sock") {
    options.port = 0;
    options.host = "127.0.0.1";
    options.engine_socket = fake_.socket_path();
    if (options.db_path.empty()) options.db_path = ":memory:";
    // Small pools unless the test sizes them itself.
    const GatewayOptions defaults;
    if (options.threads == defaults.threads) options.threads = 16;
    if (options.queue == defaults.queue) options.queue = 64;
    options.relay.heartbeat_ms = 100;
    auto g = Gateway::create(options);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    gateway_ = std::move(g).value();
    auto port = gateway_->bind();
    EXPECT_TRUE(port.ok()) << port.status().to_string();
    port_ = *port;
    thread_ = std::thread([this] { gateway_->serve(); });
    for (int i = 0; i < 500 && !gateway_->running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ~TestGateway() {
    gateway_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  FakeEngine& fake() { return fake_; }
  Gateway& gateway() { return *gateway_; }

  HttpResult request(const std::string& method, const std::string& path,
                     const std::string& body = "",
                     const std::map<std::string, std::string>& headers = {},
                     const std::string& content_type = "application/json") {
    RawHttp raw(port_);
    raw.send_request(method, path, body, headers, content_type);
    raw.read_until("", 20000);
    return raw.result();
  }
  HttpResult get(const std::string& path, const std::map<std::string, std::string>& h = {}) {
    return request("GET", path, "", h);
  }
  HttpResult post(const std::string& path, const std::string& body,
                  const std::map<std::string, std::string>& h = {},
                  const std::string& content_type = "application/json") {
    return request("POST", path, body, h, content_type);
  }

 private:
  FakeEngine fake_;
  std::unique_ptr<Gateway> gateway_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace glm::gateway::testing
