#include "serve/control_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/log.h"
#include "core/unix_socket.h"

namespace glm::serve {
namespace {

constexpr size_t kMaxRequestBytes = 4096;

// Writes the reply line and closes: a client that left is no error.
void reply_and_close(int fd, const std::string& line) {
  if (Status st = write_all(fd, line + "\n"); !st.ok()) {
    GLM_LOG_DEBUG("serve control: reply not delivered: %s", st.to_string().c_str());
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
  // 0600: the gateway runs as the same user. A stale file there is replaced; a live socket is
  // an error (serve holds PATH.lock of its engine socket, so no other serve uses this path).
  auto fd = listen_unix(path, 0600, 256);
  if (!fd.ok()) return fd.status();
  listen_fd_ = *fd;
  path_ = path;
  supervisor_->watch(listen_fd_, [this] { accept_all(); });
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
  const auto parsed = parse_json(line, "control request");
  const nlohmann::json j = parsed.ok() ? parsed.value() : nlohmann::json();
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
