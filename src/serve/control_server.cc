#include "serve/control_server.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/log.h"

namespace glm::serve {
namespace {

constexpr size_t kMaxRequestBytes = 4096;

// Writes the reply line and closes: a client that left is no error (MSG_NOSIGNAL).
void reply_and_close(int fd, const std::string& line) {
  const std::string out = line + "\n";
  size_t sent = 0;
  while (sent < out.size()) {
    const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace

ControlServer::~ControlServer() {
  for (auto& [fd, conn] : conns_) {
    supervisor_->unwatch(fd);
    ::close(fd);
  }
  if (listen_fd_ >= 0) {
    supervisor_->unwatch(listen_fd_);
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
}

Status ControlServer::listen(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return invalid_argument("control socket path too long: " + path + " (give a shorter --socket)");
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status(ErrorCode::kInternal, "socket: " + std::string(strerror(errno)));
  ::unlink(path.c_str());  // serve holds PATH.lock of its engine socket: no other serve uses it
  const mode_t old = ::umask(0177);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0 || ::listen(fd, 256) != 0) {
    const std::string why = strerror(errno);
    ::close(fd);
    return invalid_argument("cannot listen on the control socket " + path + ": " + why);
  }
  listen_fd_ = fd;
  path_ = path;
  supervisor_->watch(fd, [this] { accept_all(); });
  return Status::Ok();
}

void ControlServer::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    conns_[fd].fd = fd;
    supervisor_->watch(fd, [this, fd] { on_readable(fd); });
  }
}

void ControlServer::on_readable(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {  // left before asking
    supervisor_->unwatch(fd);
    ::close(fd);
    conns_.erase(it);
    return;
  }
  it->second.in.append(buf, static_cast<size_t>(n));
  const size_t nl = it->second.in.find('\n');
  if (nl == std::string::npos && it->second.in.size() < kMaxRequestBytes) return;
  const std::string line = it->second.in.substr(0, nl);
  supervisor_->unwatch(fd);
  conns_.erase(it);
  handle(fd, line);
}

void ControlServer::handle(int fd, const std::string& line) {
  const auto j = nlohmann::json::parse(line, nullptr, false);
  const std::string type = j.is_object() ? j.value("type", "") : "";
  if (type == "models") return reply_and_close(fd, manager_->list_json());
  if (type == "ensure") {
    const auto model = j.find("model");
    const std::string name =
        model != j.end() && model->is_string() ? model->get<std::string>() : "";
    manager_->ensure(name, [fd](const std::string& reply) { reply_and_close(fd, reply); });
    return;
  }
  reply_and_close(fd, control_error_json(invalid_argument(
                          "control requests are {\"type\":\"ensure\",\"model\":NAME} or "
                          "{\"type\":\"models\"}, one line each")));
}

}  // namespace glm::serve
