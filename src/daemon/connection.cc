#include "daemon/connection.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

namespace glm::daemon {

Connection::Connection(int fd, uint64_t serial, size_t max_line_bytes, size_t max_pending_bytes)
    : in(max_line_bytes), fd_(fd), serial_(serial), max_pending_bytes_(max_pending_bytes) {}

Connection::~Connection() { close(); }

bool Connection::write_locked(const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    broken_ = true;
    return false;
  }
  pending_.insert(0, data, size);  // only ever called with pending_ empty
  if (pending_.size() > max_pending_bytes_) {
    broken_ = true;
    return false;
  }
  return true;
}

bool Connection::send_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || broken_) return false;
  if (!pending_.empty()) {
    pending_ += line;
    pending_ += '\n';
    if (pending_.size() > max_pending_bytes_) {
      broken_ = true;
      return false;
    }
    return true;
  }
  std::string buf;
  buf.reserve(line.size() + 1);
  buf += line;
  buf += '\n';
  return write_locked(buf.data(), buf.size());
}

bool Connection::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || broken_) return false;
  if (pending_.empty()) return true;
  std::string data;
  data.swap(pending_);
  return write_locked(data.data(), data.size());
}

size_t Connection::pending_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

bool Connection::broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

void Connection::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  pending_.clear();
  ::close(fd_);
}

}  // namespace glm::daemon
