#include "gateway/engine_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/unix_socket.h"

namespace glm::gateway {
namespace {

// An event line longer than this is a broken engine, not a big answer (token events are tiny;
// a tokenize reply of a 1 MB request is ~6 MB).
constexpr size_t kMaxEventLineBytes = 16u << 20;

Status unavailable(std::string message) {
  return Status(ErrorCode::kUnavailable, std::move(message));
}

bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

EngineStream::EngineStream(int fd, protocol::Request request)
    : fd_(fd), request_(std::move(request)) {}

EngineStream::~EngineStream() { ::close(fd_); }

StatusOr<std::optional<protocol::Event>> EngineStream::next(int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  while (true) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (line.empty()) continue;
      auto ev = protocol::parse_event(line);
      if (!ev.ok()) {
        return unavailable("the engine sent an unreadable event (" + ev.status().message() +
                           "); is the engine the same glmserve version as the gateway?");
      }
      return std::optional<protocol::Event>(std::move(ev).value());
    }
    if (buffer_.size() > kMaxEventLineBytes) {
      return unavailable("the engine sent an event line over 16 MB; restart the engine");
    }
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    pollfd pfd{fd_, POLLIN, 0};
    const int r = ::poll(&pfd, 1, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return unavailable(std::string("engine socket: ") + std::strerror(errno));
    }
    if (r == 0) return std::optional<protocol::Event>();
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return unavailable(std::string("the engine connection failed: ") + std::strerror(errno) +
                         " (the engine may have crashed or restarted; retry)");
    }
    if (n == 0) {
      return unavailable(
          "the engine closed the connection before the answer was complete (it may have "
          "crashed or restarted; retry)");
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void EngineStream::cancel() {
  std::lock_guard<std::mutex> lock(write_mutex_);
  if (cancel_sent_) return;
  cancel_sent_ = true;
  protocol::Request req;
  req.type = protocol::RequestType::kCancel;
  req.id = request_.id;
  // A failed send means the engine is gone; next() reports that.
  send_all(fd_, protocol::serialize_request(req) + "\n");
}

void EngineStream::adopt(int fd) {
  std::lock_guard<std::mutex> lock(write_mutex_);
  ::close(fd_);
  fd_ = fd;
  buffer_.clear();
  if (cancel_sent_) {  // the client stopped the answer while the engine was away
    protocol::Request req;
    req.type = protocol::RequestType::kCancel;
    req.id = request_.id;
    send_all(fd_, protocol::serialize_request(req) + "\n");
  }
}

bool EngineStream::cancel_sent() const {
  std::lock_guard<std::mutex> lock(write_mutex_);
  return cancel_sent_;
}

StatusOr<int> EngineClient::connect_socket() const {
  auto fd = connect_unix(socket_path_);
  if (fd.ok() || fd.status().code() != ErrorCode::kUnavailable) return fd;
  return unavailable("the engine is not reachable at " + socket_path_ + " (" +
                     fd.status().message() +
                     "); start it with `glmserve engine --model M --socket " + socket_path_ +
                     "` or wait for it to restart");
}

StatusOr<std::unique_ptr<EngineStream>> EngineClient::start(
    const protocol::Request& request) const {
  auto fd = connect_socket();
  if (!fd.ok()) return fd.status();
  auto stream = std::make_unique<EngineStream>(*fd, request);
  stream->socket_path_ = socket_path_;
  if (!send_all(*fd, protocol::serialize_request(request) + "\n")) {
    return unavailable("the engine at " + socket_path_ +
                       " closed the connection before taking the request; retry");
  }
  return stream;
}

Status EngineClient::resume(EngineStream* stream, const std::vector<int32_t>& generated) const {
  auto fd = connect_socket();
  if (!fd.ok()) return fd.status();
  protocol::Request request = stream->request();
  // After what the request already resumed from (a continued answer's text), if anything.
  request.resume.insert(request.resume.end(), generated.begin(), generated.end());
  if (!send_all(*fd, protocol::serialize_request(request) + "\n")) {
    ::close(*fd);
    return unavailable("the engine at " + socket_path_ +
                       " closed the connection before taking the request; retry");
  }
  stream->adopt(*fd);
  return Status::Ok();
}

StatusOr<protocol::Event> EngineClient::query(const protocol::Request& request,
                                              int timeout_ms) const {
  auto stream = start(request);
  if (!stream.ok()) return stream.status();
  auto ev = (*stream)->next(timeout_ms);
  if (!ev.ok()) return ev.status();
  if (!ev->has_value()) {
    return unavailable("the engine did not answer within " + std::to_string(timeout_ms) +
                       " ms (it may be loading or overloaded)");
  }
  return std::move(**ev);
}

}  // namespace glm::gateway
