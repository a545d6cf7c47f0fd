#include "gateway/model_router.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace glm::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Serve answers an ensure within its own bound (serve --load-wait); this one only guards against
// a serve that stopped answering without closing the socket.
constexpr int kEnsureTimeoutMs = 60 * 60 * 1000;
constexpr int kListTimeoutMs = 3000;

Status unavailable(std::string message) {
  return Status(ErrorCode::kUnavailable, std::move(message));
}

}  // namespace

StatusOr<json> ModelRouter::ask(const json& request, int timeout_ms) const {
  sockaddr_un addr{};
  if (control_socket_.size() >= sizeof(addr.sun_path)) {
    return invalid_argument("--models-control path too long: " + control_socket_);
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, control_socket_.c_str(), control_socket_.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return unavailable("socket: " + std::string(std::strerror(errno)));
  auto down = [&] {
    ::close(fd);
    return unavailable("glmserve serve does not answer on its control socket " + control_socket_ +
                       " (is it running?); retry in a moment");
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return down();
  const std::string line = request.dump() + "\n";
  if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    return down();
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string reply;
  char buf[8192];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30))) <= 0) {
      return down();
    }
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return down();
    reply.append(buf, static_cast<size_t>(n));
    if (reply.find('\n') != std::string::npos || reply.size() > (16 << 20)) break;
  }
  ::close(fd);
  json j = json::parse(reply.substr(0, reply.find('\n')), nullptr, false);
  if (!j.is_object()) return Status(ErrorCode::kInternal, "unreadable reply from serve's control");
  if (!j.value("ok", false)) {
    return Status(error_code_from_name(j.value("code", "internal")), j.value("message", ""));
  }
  return j;
}

StatusOr<EngineClient> ModelRouter::engine_for(const std::string& model) const {
  if (!several()) return EngineClient(default_socket_);
  auto reply = ask(json{{"type", "ensure"}, {"model", model}}, kEnsureTimeoutMs);
  if (!reply.ok()) return reply.status();
  return EngineClient(reply->value("socket", ""));
}

StatusOr<json> ModelRouter::list() const {
  if (!several()) return invalid_argument("one engine: no model list");
  return ask(json{{"type", "models"}}, kListTimeoutMs);
}

}  // namespace glm::gateway
