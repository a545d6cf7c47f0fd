#include "cli/socket_lock.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace glm::cli {
namespace {

// True if `fd` is still the file at `path` (not unlinked or replaced since it was opened).
bool same_file(int fd, const std::string& path) {
  struct stat a, b;
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

}  // namespace

// A private directory for the socket: created 0700, or an existing one owned by us and not
// writable by others (a shared /tmp must not let another user plant a socket for us).
StatusOr<std::string> socket_dir() {
  std::string dir;
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && *xdg != '\0') {
    dir = std::string(xdg) + "/glmserve";
  } else {
    dir = "/tmp/glmserve-" + std::to_string(::getuid());
  }
  ::mkdir(dir.c_str(), 0700);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return invalid_argument("cannot create the socket directory " + dir + " (give --socket PATH)");
  }
  if (st.st_uid != ::getuid() || (st.st_mode & 0022) != 0) {
    return invalid_argument("socket directory " + dir +
                            " is not private to this user (remove it, or give --socket PATH)");
  }
  return dir;
}

// One serve per engine socket: an exclusive flock on PATH.lock, held (close-on-exec, so by
// this process alone) until serve exits, which removes the file (unlock_socket_path); the file
// keeps the owner's pid for the message. A lock taken on a file its owner removed meanwhile is
// not a lock (another serve may have made a new one): taken again on the file now there.
StatusOr<int> lock_socket_path(const std::string& socket) {
  const std::string path = socket + ".lock";
  int fd = -1;
  for (int attempt = 0;; ++attempt) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      return invalid_argument("cannot create the lock file " + path + " (" + std::strerror(errno) +
                              "); give --socket a path in a writable directory");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 || same_file(fd, path) || attempt >= 10) break;
    ::close(fd);
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    const ssize_t n = ::pread(fd, pid, sizeof(pid) - 1, 0);
    ::close(fd);
    std::string owner = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "";
    while (!owner.empty() && (owner.back() == '\n' || owner.back() == ' ')) owner.pop_back();
    return Status(ErrorCode::kUnavailable,
                  "another glmserve serve" + (owner.empty() ? "" : " (pid " + owner + ")") +
                      " owns the engine socket " + socket + " (" + path +
                      " is locked); stop it, or give this one another --port or --socket");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    GLM_LOG_WARN("serve: cannot write the pid into %s", path.c_str());
  }
  return fd;
}

// Removes the lock file while still holding its lock (a serve that opens it meanwhile sees it
// gone by same_file and retries), then releases it.
void unlock_socket_path(const std::string& socket, int fd) {
  const std::string path = socket + ".lock";
  if (same_file(fd, path)) ::unlink(path.c_str());
  ::close(fd);
}

// Lock files that no serve holds in serve's own socket directory (left by a serve that was
// killed): removed, each under its lock, so they do not pile up there.
void remove_stale_locks(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("engine-", 0) != 0 || name.size() < 10 ||
        name.compare(name.size() - 10, 10, ".sock.lock") != 0) {
      continue;
    }
    const std::string path = dir + "/" + name;
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && same_file(fd, path)) ::unlink(path.c_str());
    ::close(fd);
  }
  ::closedir(d);
}

}  // namespace glm::cli
