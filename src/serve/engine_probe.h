// One short query to an engine socket from `glmserve serve` (health, stats): connect, send one
// request line, read one event line within `timeout_ms`. Blocking; any thread. Cost: one Unix
// socket connect and a line each way (~0.1 ms against a live engine); at most `timeout_ms` when
// the engine is stuck.
#pragma once

#include <string>

#include "core/status.h"
#include "protocol/protocol.h"

namespace glm::serve {

// kUnavailable when nothing listens on `socket` or no line came back in time; the event (an
// error event included) otherwise.
StatusOr<protocol::Event> probe_engine(const std::string& socket, protocol::RequestType type,
                                       int timeout_ms);

}  // namespace glm::serve
