// Relay: moves one generation's events from the engine connection to an HTTP client, and
// cancels the engine request the moment the client is gone.
//
// A client that closes its connection is noticed on the next write: a token, or a heartbeat
// called every `heartbeat_ms` (the caller writes an SSE comment or JSON whitespace if it wrote
// nothing else since the last one). After a cancel the relay keeps
// reading (at most `drain_ms`) until the engine confirms with its done event, so the slot is
// known to be free and the partial answer is complete.
// Thread-safety: one relay per request, on the thread that serves it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "gateway/engine_client.h"
#include "gateway/outcome.h"
#include "protocol/protocol.h"

namespace glm::gateway {

struct RelayResult {
  // The engine's finish reason, kDisconnected (the client left and the request was
  // cancelled) or kError.
  Outcome outcome = Outcome::kError;
  Status error;      // with kError
  std::string text;  // everything generated (the partial answer if stopped)
  std::vector<generation::GeneratedLogprobs> logprobs;  // of every token, when asked for
  protocol::Usage usage;
  protocol::Timings timings;  // engine-side, from the done event
  std::string notice;         // the engine's trim notice, if any
  int dropped_messages = 0;
  // When the first token was handed to the client (epoch = none).
  std::chrono::steady_clock::time_point first_token_at{};
  bool engine_confirmed_cancel = false;  // a done event with finish_reason kCancelled arrived
};

struct RelayOptions {
  int heartbeat_ms = 500;
  int drain_ms = 3000;
  // No event at all for this long ends the request with an error (a wedged engine).
  int idle_timeout_ms = 10 * 60 * 1000;
};

// The error a client gets for an answer that did not complete: the relay's error, or for a
// cancelled one (the server's drain bound, an operator's stop) a cut notice.
Status cut_or_error(const RelayResult& r);

// `emit` is called for each event (queued, start, token, notice) and returns false if the
// client is gone; `heartbeat` likewise. Done and error events end the relay and are reported
// in the result, not emitted.
RelayResult relay_generation(EngineStream& stream,
                             const std::function<bool(const protocol::Event&)>& emit,
                             const std::function<bool()>& heartbeat,
                             const RelayOptions& options = {});

}  // namespace glm::gateway
