#include "serve/engine_probe.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "protocol/line_buffer.h"

namespace glm::serve {

StatusOr<protocol::Event> probe_engine(const std::string& socket, protocol::RequestType type,
                                       int timeout_ms) {
  sockaddr_un addr{};
  if (socket.size() >= sizeof(addr.sun_path)) {
    return invalid_argument("socket path too long: " + socket);
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket.c_str(), socket.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(ErrorCode::kUnavailable, "socket: " + std::string(strerror(errno)));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return Status(ErrorCode::kUnavailable, "no engine listens on " + socket);
  }
  const std::string line = std::string("{\"type\":\"") +
                           (type == protocol::RequestType::kStats ? "stats" : "health") + "\"}\n";
  if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    ::close(fd);
    return Status(ErrorCode::kUnavailable, "the engine on " + socket + " closed the connection");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  protocol::LineBuffer in(1 << 16);
  std::string reply;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    in.append(std::string_view(buf, static_cast<size_t>(n)));
    if (in.next(&reply) == protocol::LineBuffer::Next::kLine) {
      ::close(fd);
      return protocol::parse_event(reply);
    }
  }
  ::close(fd);
  return Status(ErrorCode::kUnavailable, "the engine on " + socket + " did not answer in time");
}

}  // namespace glm::serve
