#include "core/unix_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace glm {
namespace {

Status fill_address(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.empty()) return invalid_argument("socket path is empty (give --socket PATH)");
  if (path.size() >= sizeof(addr->sun_path)) {
    return invalid_argument("socket path '" + path + "' is " + std::to_string(path.size()) +
                            " bytes; Unix sockets allow at most " +
                            std::to_string(sizeof(addr->sun_path) - 1) +
                            " (choose a shorter path)");
  }
  std::memcpy(addr->sun_path, path.data(), path.size());
  return Status::Ok();
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

StatusOr<mode_t> parse_socket_mode(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 8);
  if (text.empty() || *end != '\0' || errno != 0 || v < 0 || v > 0777) {
    return invalid_argument("--socket-mode: expected an octal mode like 0600 or 0660, got '" +
                            text + "'");
  }
  const mode_t mode = static_cast<mode_t>(v);
  if ((mode & 0600) != 0600) {
    return invalid_argument("--socket-mode " + text + ": the owner needs read and write (0600)");
  }
  if ((mode & 0007) != 0) {
    return invalid_argument("--socket-mode " + text +
                            ": other users must get no access (use 0600, or 0660 for a group)");
  }
  return mode;
}

StatusOr<int> listen_unix(const std::string& path, mode_t mode, int backlog) {
  sockaddr_un addr;
  GLM_RETURN_IF_ERROR(fill_address(path, &addr));
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return invalid_argument("'" + path +
                              "' exists and is not a socket (remove it or choose "
                              "another --socket)");
    }
    auto probe = connect_unix(path);
    if (probe.ok()) {
      ::close(*probe);
      return Status(ErrorCode::kUnavailable, "another engine is already serving on '" + path +
                                                 "' (stop it, or choose another --socket)");
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status(ErrorCode::kUnavailable,
                    "cannot remove stale socket '" + path + "': " + errno_text());
    }
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(ErrorCode::kUnavailable, "socket(): " + errno_text());
  // bind() creates the file with 0777 & ~umask: restrict it from the start, then set `mode`.
  const mode_t old_umask = ::umask(0177);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  ::umask(old_umask);
  if (rc != 0) {
    ::close(fd);
    return Status(ErrorCode::kUnavailable, "cannot bind '" + path +
                                               "': " + std::strerror(bind_errno) +
                                               " (does the directory exist and is it writable?)");
  }
  if (::chmod(path.c_str(), mode) != 0 || ::listen(fd, backlog) != 0) {
    const std::string err = errno_text();
    ::close(fd);
    ::unlink(path.c_str());
    return Status(ErrorCode::kUnavailable, "cannot listen on '" + path + "': " + err);
  }
  return fd;
}

StatusOr<int> connect_unix(const std::string& path) {
  sockaddr_un addr;
  GLM_RETURN_IF_ERROR(fill_address(path, &addr));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(ErrorCode::kUnavailable, "socket(): " + errno_text());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string err = errno_text();
    ::close(fd);
    return Status(ErrorCode::kUnavailable, "cannot connect to the engine at '" + path +
                                               "': " + err + " (is `glmserve engine --socket " +
                                               path + "` running?)");
  }
  return fd;
}

StatusOr<std::string> ask_unix(const std::string& path, const std::string& line, int timeout_ms,
                               size_t max_reply_bytes) {
  auto fd = connect_unix(path);
  if (!fd.ok()) return fd.status();
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{*fd};
  if (Status st = write_all(*fd, line); !st.ok()) {
    return Status(ErrorCode::kUnavailable, "'" + path + "' closed the connection: " + st.message());
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string reply;
  char buf[8192];
  for (;;) {
    if (const size_t nl = reply.find('\n'); nl != std::string::npos) return reply.substr(0, nl);
    if (reply.size() > max_reply_bytes) {
      return Status(ErrorCode::kUnavailable, "the reply from '" + path + "' is over " +
                                                 std::to_string(max_reply_bytes) + " bytes");
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{*fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30))) <= 0) {
      return Status(ErrorCode::kUnavailable,
                    "'" + path + "' did not answer within " + std::to_string(timeout_ms) + " ms");
    }
    const ssize_t n = ::read(*fd, buf, sizeof(buf));
    if (n <= 0) {
      return Status(ErrorCode::kUnavailable,
                    "'" + path + "' closed the connection before answering");
    }
    reply.append(buf, static_cast<size_t>(n));
  }
}

Status write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(ErrorCode::kPeerGone, "write to socket failed: " + errno_text());
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace glm
