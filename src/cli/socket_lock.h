// One owner per engine socket for `glmserve serve`: the private directory its default socket
// lives in, and PATH.lock beside the socket, held by the serve that owns it.
// Thread-safety: plain functions over the file system; call them from one thread.
#pragma once

#include <string>

#include "core/status.h"

namespace glm::cli {

// A private directory for the socket ($XDG_RUNTIME_DIR/glmserve, else /tmp/glmserve-UID):
// created 0700, or an existing one owned by us and not writable by others (a shared /tmp must
// not let another user plant a socket for us). Errors name the directory and --socket.
StatusOr<std::string> socket_dir();

// One serve per engine socket: an exclusive flock on SOCKET.lock, held (close-on-exec, so by
// this process alone) until serve exits, which removes the file (unlock_socket_path); the file
// keeps the owner's pid for the message. Returns the lock's fd, or kUnavailable naming the
// owner's pid when another serve holds it.
StatusOr<int> lock_socket_path(const std::string& socket);

// Removes SOCKET.lock while still holding its lock, then releases it (closes fd).
void unlock_socket_path(const std::string& socket, int fd);

// Lock files that no serve holds in serve's own socket directory `dir` (left by a serve that was
// killed): removed, each under its lock, so they do not pile up there.
void remove_stale_locks(const std::string& dir);

}  // namespace glm::cli
