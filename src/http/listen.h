// One owner per port: the listening TCP socket of the gateway, opened here for `glmserve web`
// and for `glmserve serve` (which opens it before starting its children and hands it to every
// web child it starts, so the port stays its own across gateway restarts).
//
// SO_REUSEADDR only (a restarted server can bind while old connections sit in TIME_WAIT);
// never SO_REUSEPORT, so a second server on a port in use fails at once instead of sharing it.
// Thread-safety: plain functions. Cost: a few system calls.
#pragma once

#include <string>

#include "core/status.h"

namespace glm::http {

// A listening socket (close-on-exec, backlog `backlog`) bound to host:port; port 0 picks a
// free one. kUnavailable naming host:port when the port is in use ("pick another with
// --port"), kInvalidArgument when the host does not resolve.
StatusOr<int> listen_tcp(const std::string& host, int port, int backlog);

// The port a bound socket listens on; -1 if `fd` is not a bound TCP socket.
int local_port(int fd);

// True if `fd` is a listening TCP socket (an inherited --listen-fd is checked with it).
bool is_listening_tcp(int fd);

}  // namespace glm::http
