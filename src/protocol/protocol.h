// The engine's wire protocol, version 1 (docs/protocol.md): newline-delimited JSON over a Unix
// socket. One request per line; each request gets one or more event lines back, tagged with the
// request's id. This header holds the native C++ shapes; request.cc and event.cc convert them to
// and from JSON and validates every field, so the daemon and the gateway never touch raw JSON.
//
// Depends on generation and core only (never on the engine): the gateway links this module, not
// the engine.
// Thread-safety: all functions are pure except make_request_id (an atomic counter); safe from any
// thread. Cost: parse/serialize are O(line length); a token event serializes in ~1 us.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "generation/event.h"
#include "generation/outcome.h"
#include "generation/request.h"
#include "generation/usage.h"

namespace glm::protocol {

constexpr int kProtocolVersion = 1;
// The most choices (Request::n) any request may ask for, on the socket and the HTTP APIs.
constexpr int kMaxChoices = 128;

// Size limits applied by parse_request. The daemon takes max_line_bytes from --max-line.
struct Limits {
  size_t max_line_bytes = 1 << 20;  // one request line, newline excluded
  int max_messages = 1024;
  size_t max_id_bytes = 128;  // id and conversation
  int max_depth = 16;         // JSON nesting
};

// kPrompt: a generate request's prompt, not run: the tokens (and their text) the engine would
// prefill for it. kDetokenize: ids -> text.
// kLoadAdapter / kUnloadAdapter: serve an adapter by name from now on, or stop
// (docs/adapters.md); answered with the health event (its adapters) or an error.
enum class RequestType {
  kGenerate,
  kCancel,
  kHealth,
  kStats,
  kTokenize,
  kDetokenize,
  kPrompt,
  kLoadAdapter,
  kUnloadAdapter
};
const char* request_type_name(RequestType t);

using Message = generation::Message;

using generation::Constraint;
using generation::FinishReason;
using generation::Health;
using generation::SamplingParams;
using generation::Timings;
using generation::Usage;

// A socket request: the generation request (generation/request.h, for kGenerate and kPrompt)
// plus what only the wire has.
struct Request : generation::GenerateRequest {
  RequestType type = RequestType::kGenerate;
  std::string id;            // never empty after parse_request (assigned if absent)
  bool id_assigned = false;  // true if the client sent no id
  // kTokenize
  std::string text;
  // kDetokenize
  std::vector<int32_t> tokens;
  // kLoadAdapter (the name in `adapter`, also kUnloadAdapter's): the adapter file on the
  // engine's machine and the user's scale.
  std::string path;
  float scale = 1.0f;
  // kCancel: `id` names the request to cancel.
};

using generation::EventType;
const char* event_type_name(EventType t);

// Whole percent of a load, 0..100 (0 when total is 0).
int load_percent(uint64_t done, uint64_t total);

// The engine's counters plus the daemon's own.
struct StatsInfo : generation::Stats {
  int connections = 0;  // daemon: open client connections
  double uptime_s = 0;
};

// One event line: the generation event (generation/event.h) plus the wire's one-line replies
// and error codes. Which fields are meaningful depends on `type` (see docs/protocol.md).
struct Event : generation::Event {
  ErrorCode code = ErrorCode::kOk;  // kError (its text in `message`)
  int retry_after_ms = 0;           // kError with code busy/unavailable: a retry hint (0 = none)
  // kError: the engine as a whole cannot run any more (a lost GPU) and exits so that its
  // supervisor starts a fresh one; the request was not at fault, and a gateway resumes it on
  // the engine that comes back (docs/protocol.md#resume).
  bool restart = false;
  Health health = Health::kReady;  // kHealth
  std::string model;               // kHealth
  int n_ctx = 0;                   // kHealth
  std::string device;              // kHealth: where the model runs ("cpu", "vulkan:0 (...)")
  std::string instance;            // kHealth: the engine's --instance token (empty if none)
  // kHealth: the adapters served by name (docs/adapters.md).
  std::vector<std::string> adapters;
  // kHealth while loading: weight bytes in place of the total (written when total > 0).
  uint64_t load_done_bytes = 0, load_total_bytes = 0;
  StatsInfo stats;     // kStats
  bool found = false;  // kCancel: the id was in flight
};

// Parses and validates one request line (without its newline). On failure, *id_out (if given)
// receives the request's id when one could be read, so the error event can carry it. Every
// failure is kInvalidArgument (kUnsupported for a newer protocol version), with a message that
// names the field and says what is allowed.
StatusOr<Request> parse_request(std::string_view line, const Limits& limits = {},
                                std::string* id_out = nullptr);

// One JSON line (no trailing newline). Writes only what a client set; parse_request(serialize)
// yields the same request.
std::string serialize_request(const Request& request);

// Whether `s` may be an id on the wire (a request id, conversation, adapter or model name): 1 to
// limits.max_id_bytes bytes, no control characters; else invalid_argument naming `field`.
Status check_id(std::string_view s, const std::string& field, const Limits& limits = {});

// One JSON line (no trailing newline). Invalid UTF-8 in text fields is replaced by U+FFFD.
std::string serialize_event(const Event& event);
// Parses an event line (clients: gateway, bench). kInvalidArgument on a malformed line.
StatusOr<Event> parse_event(std::string_view line);

// Builds the error event for `status` (`id` may be empty).
Event error_event(const std::string& id, const Status& status, int retry_after_ms = 0);

// A fresh id, unique within this process: "req-<pid>-<n>".
std::string make_request_id();

}  // namespace glm::protocol
