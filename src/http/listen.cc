#include "http/listen.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace glm::http {

StatusOr<int> listen_tcp(const std::string& host, int port, int backlog) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int gai =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (gai != 0 || found == nullptr) {
    return invalid_argument("cannot resolve the address " + host + " (" + gai_strerror(gai) +
                            "); pass an IP address or a resolvable name to --host");
  }
  const addrinfo* a = found;
  const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    const int one = 1;
    if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        ::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, backlog) != 0) {
      err = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (err != 0) {
    std::string hint = err == EADDRINUSE
                           ? "; another server listens on port " + std::to_string(port) +
                                 ": stop it or pick another "
                                 "port with --port"
                           : "; pick another address or port (--host, --port)";
    return Status(ErrorCode::kUnavailable,
                  "cannot listen on " + where + " (" + std::strerror(err) + hint + ")");
  }
  return fd;
}

int local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

bool is_listening_tcp(int fd) {
  int type = 0, listening = 0;
  socklen_t len = sizeof(type);
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
    return false;
  }
  len = sizeof(listening);
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) {
    return false;
  }
  return local_port(fd) >= 0;
}

}  // namespace glm::http
