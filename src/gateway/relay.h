// Relay: moves one generation's events from the engine connection to an HTTP client, and
// cancels the engine request the moment the client is gone.
//
// A client that closes its connection is noticed on the next write: a token, or a heartbeat
// called every `heartbeat_ms` (the caller writes an SSE comment or JSON whitespace if it wrote
// nothing else since the last one). After a cancel the relay keeps
// reading (at most `drain_ms`) until the engine confirms with its done event, so the slot is
// known to be free and the partial answer is complete.
// When the engine dies mid-answer (its connection ends before done), or ends it cancelled
// without being asked (its drain bound, at a restart), and the relay was given the
// EngineClient, it resumes instead of failing: it waits for the restarted engine (`serve`,
// systemd or supervisord brings it back), sends the same request again with the token ids
// generated so far (protocol "resume"), and relays the rest as if nothing had happened; only
// heartbeats go out meanwhile. The engine's queued/start/notice events of a resumed request are
// not relayed again. Bounded: ResumeOptions (time per wait, crashes per answer); past them the
// answer ends with an unavailable error, its partial text kept.
// Thread-safety: one relay per request, on the thread that serves it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "api/outcome.h"
#include "core/status.h"
#include "gateway/engine_client.h"
#include "protocol/protocol.h"

namespace glm::gateway {

// One choice of a request with n > 1 (protocol: token events' index, choice_done).
struct ChoiceResult {
  std::string text;
  std::string reasoning;  // a reasoning model's thinking (apart from text)
  std::vector<generation::GeneratedLogprobs> logprobs;
  api::Outcome outcome = api::Outcome::kError;  // from its choice_done; kError if none came
  int completion_tokens = 0;
};

struct RelayResult {
  // The engine's finish reason, kDisconnected (the client left and the request was
  // cancelled) or kError.
  api::Outcome outcome = api::Outcome::kError;
  Status error;           // with kError
  std::string text;       // everything generated (the partial answer if stopped); choice 0's
  std::string reasoning;  // a reasoning model's thinking, apart from text; choice 0's
  std::vector<generation::GeneratedLogprobs> logprobs;  // of every token, when asked for
  // With tools: the engine's reading of the answer (Event::tool), the token events' pieces and
  // the done event's (what its reader held to the end); ToolAnswerStream takes them apart.
  std::vector<generation::ToolDelta> tool;
  std::vector<generation::ToolDelta> tool_end;
  // n > 1: every choice, by index (choice 0's text and logprobs are also above). Empty for
  // a request with one choice.
  std::vector<ChoiceResult> choices;
  protocol::Usage usage;
  protocol::Timings timings;  // engine-side, from the done event
  std::string notice;         // the engine's trim notice, if any
  int dropped_messages = 0;
  // When the first token was handed to the client (epoch = none).
  std::chrono::steady_clock::time_point first_token_at{};
  bool engine_confirmed_cancel = false;  // a done event with finish_reason kCancelled arrived
  int resumes = 0;                       // times the answer was resumed after the engine died
  double resume_wait_ms = 0;             // total time spent waiting for the engine to come back
};

struct ResumeOptions {
  int max_resumes = 3;    // engine deaths one answer survives
  int window_ms = 60000;  // from each death: the engine must take the request again within this
  int retry_ms = 50;      // between attempts to reach it
};

struct RelayOptions {
  int heartbeat_ms = 500;
  int drain_ms = 3000;
  // No event at all for this long ends the request with an error (a wedged engine).
  int idle_timeout_ms = 10 * 60 * 1000;
  ResumeOptions resume;
};

// The error a client gets for an answer that did not complete: the relay's error, for a
// client that left kCancelled, or for a cancelled one (the server's drain bound, an operator's
// stop) a cut notice.
Status cut_or_error(const RelayResult& r);

// `emit` is called for each event (queued, start, token, notice, choice_done) and returns false if
// the client is gone; `heartbeat` likewise. Done and error events end the relay and are reported in
// the result, not emitted. With `engine` (the client that started `stream`), an engine that dies
// mid-answer is waited for and the answer resumed (above); without it, or for a request with
// several choices (their tokens interleave), that is an error.
RelayResult relay_generation(EngineStream& stream,
                             const std::function<bool(const protocol::Event&)>& emit,
                             const std::function<bool()>& heartbeat,
                             const RelayOptions& options = {},
                             const EngineClient* engine = nullptr);

}  // namespace glm::gateway
