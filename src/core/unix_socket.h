// Unix-domain stream sockets: the engine daemon listens, its clients (the gateway, serve, the
// bench, tests) connect.
// Thread-safety: plain functions over file descriptors; listen_unix changes the process umask for
// the duration of bind(), so call it before starting other threads that create files.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/status.h"

namespace glm {

// Validates a socket permission mode: owner read/write required, never world-accessible
// ("0660" for group access). Returns the parsed mode.
StatusOr<mode_t> parse_socket_mode(const std::string& text);

// Creates a listening, non-blocking, close-on-exec socket at `path` with permissions `mode`
// (created with them: no window with wider access). If `path` exists: a live daemon answering
// there is an error; a stale socket (nothing listening) is removed; anything else is an error.
StatusOr<int> listen_unix(const std::string& path, mode_t mode, int backlog = 512);

// Connects a blocking, close-on-exec socket to `path`. kUnavailable when nothing listens.
StatusOr<int> connect_unix(const std::string& path);

// Writes all of `data` to a blocking fd (MSG_NOSIGNAL). kPeerGone if the peer closed.
Status write_all(int fd, const std::string& data);

// One request line and its one reply line on a connection of their own (health, stats, serve's
// control): connects to `path`, writes `line` (which ends in '\n'), and returns the first line
// it reads back, without its '\n', within `timeout_ms`. kUnavailable when nothing listens, the
// peer closes first, no full line comes in time, or the reply passes `max_reply_bytes`.
StatusOr<std::string> ask_unix(const std::string& path, const std::string& line, int timeout_ms,
                               size_t max_reply_bytes = 1 << 20);

}  // namespace glm
