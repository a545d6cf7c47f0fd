#include "serve/engine_probe.h"

#include "core/unix_socket.h"

namespace glm::serve {

StatusOr<protocol::Event> probe_engine(const std::string& socket, protocol::RequestType type,
                                       int timeout_ms) {
  const std::string line = std::string("{\"type\":\"") +
                           (type == protocol::RequestType::kStats ? "stats" : "health") + "\"}\n";
  auto reply = ask_unix(socket, line, timeout_ms, 1 << 16);
  if (!reply.ok()) return Status(ErrorCode::kUnavailable, "no engine answers on " + socket);
  return protocol::parse_event(*reply);
}

}  // namespace glm::serve
