// Connection: one client of the daemon. Any thread may send event lines; the daemon's I/O
// thread reads requests, flushes what did not fit into the socket, and closes it.
// Thread-safety: send_line/flush/close/pending_bytes lock the connection's mutex; `in`,
// `read_closed` belong to the I/O thread; `requests` is guarded by the daemon's mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "protocol/line_buffer.h"

namespace glm::daemon {

class Connection {
 public:
  // Takes ownership of the non-blocking socket `fd`.
  Connection(int fd, uint64_t serial, size_t max_line_bytes, size_t max_pending_bytes);
  ~Connection();

  // Sends `line` + "\n" now if the socket takes it, else buffers the rest for flush(). Returns
  // false if the connection is closed, broken, or has more than max_pending_bytes unsent (the
  // client does not read): the caller should have the I/O thread close it.
  bool send_line(const std::string& line);
  // Writes buffered bytes until done or the socket is full. False if the socket broke.
  bool flush();
  size_t pending_bytes() const;
  bool broken() const;
  // Closes the socket; later sends are dropped. Idempotent.
  void close();

  int fd() const { return fd_; }
  uint64_t serial() const { return serial_; }

  protocol::LineBuffer in;               // I/O thread
  std::atomic<bool> read_closed{false};  // the client shut down its side (set by I/O thread)
  std::set<std::string> requests;        // client ids in flight; daemon mutex

 private:
  bool write_locked(const char* data, size_t size);  // mu_ held

  const int fd_;
  const uint64_t serial_;
  const size_t max_pending_bytes_;
  mutable std::mutex mu_;
  std::string pending_;  // unsent bytes; mu_
  bool closed_ = false;  // mu_
  bool broken_ = false;  // mu_: write error or overflow
};

}  // namespace glm::daemon
