// The engine's wire protocol, version 1 (docs/protocol.md): newline-delimited JSON over a Unix
// socket. One request per line; each request gets one or more event lines back, tagged with the
// request's id. This header holds the native C++ shapes; protocol.cc converts them to and from
// JSON and validates every field, so the daemon and the gateway never touch raw JSON.
//
// Depends on core only (never on the engine): the gateway links this module, not the engine.
// Thread-safety: all functions are pure except make_request_id (an atomic counter); safe from any
// thread. Cost: parse/serialize are O(line length); a token event serializes in ~1 us.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace glm::protocol {

constexpr int kProtocolVersion = 1;

// Size limits applied by parse_request. The daemon takes max_line_bytes from --max-line.
struct Limits {
  size_t max_line_bytes = 1 << 20;   // one request line, newline excluded
  int max_messages = 1024;
  size_t max_id_bytes = 128;          // id and conversation
  int max_stop = 8;                   // stop strings
  size_t max_stop_bytes = 64;         // one stop string
  int max_depth = 16;                 // JSON nesting
};

enum class RequestType { kGenerate, kCancel, kHealth, kStats, kTokenize };
const char* request_type_name(RequestType t);

struct Message {
  std::string role;      // system, user, assistant, observation
  std::string content;
  std::string metadata;  // ChatGLM3 tool-call metadata (optional)
};

// Sampling parameters; an absent field means "the engine's default".
struct Params {
  std::optional<double> temperature;          // [0, 2]; 0 = greedy
  std::optional<double> top_p;                // (0, 1]
  std::optional<int> top_k;                   // [0, 1000]; 0 = off
  std::optional<double> repetition_penalty;   // (0, 10]; 1 = off
  std::optional<uint64_t> seed;               // 0 = nondeterministic
  std::optional<int> max_tokens;              // [1, 1048576]
  std::vector<std::string> stop;              // at most Limits::max_stop strings
};

struct Request {
  RequestType type = RequestType::kGenerate;
  std::string id;              // never empty after parse_request (assigned if absent)
  bool id_assigned = false;    // true if the client sent no id
  // kGenerate
  std::string conversation;    // optional: KV reuse across turns
  std::vector<Message> messages;
  bool raw = false;            // true: `prompt` is plain text without the chat template
  std::string prompt;          // only with raw
  Params params;
  // kTokenize
  std::string text;
  // kCancel: `id` names the request to cancel.
};

enum class EventType {
  kQueued, kStart, kToken, kNotice, kDone, kError,  // generation stream
  kHealth, kStats, kTokens, kCancel,                // one-line replies
};
const char* event_type_name(EventType t);

struct Usage {
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int completion_tokens = 0;
};

struct Timings {
  double queue_ms = 0;
  double prefill_ms = 0;
  double ttft_ms = 0;
  double tpot_ms = 0;
  double total_ms = 0;
};

struct StatsInfo {
  int queued = 0;
  int running = 0;
  int kv_blocks_used = 0;
  int kv_blocks_free = 0;
  int64_t requests_total = 0;
  int64_t prompt_tokens_total = 0;
  int64_t cached_tokens_total = 0;
  int64_t generated_tokens_total = 0;
  int connections = 0;     // daemon: open client connections
  double uptime_s = 0;
};

// One event line. Which fields are meaningful depends on `type` (see docs/protocol.md).
struct Event {
  EventType type = EventType::kToken;
  std::string id;               // may be empty only for kError on a line without a readable id
  int position = 0;             // kQueued
  int prompt_tokens = 0;        // kStart
  int cached_tokens = 0;        // kStart
  std::string text;             // kToken: whole UTF-8 characters
  std::string message;          // kNotice, kError
  int dropped_messages = 0;     // kNotice
  std::string finish_reason;    // kDone: stop, length, cancelled
  Usage usage;                  // kDone
  Timings timings;              // kDone
  ErrorCode code = ErrorCode::kOk;  // kError
  int retry_after_ms = 0;       // kError with code busy/unavailable: a retry hint (0 = none)
  std::string health;           // kHealth: loading, ready, draining, stopped
  std::string model;            // kHealth
  int n_ctx = 0;                // kHealth
  StatsInfo stats;              // kStats
  std::vector<int32_t> tokens;  // kTokens
  bool found = false;           // kCancel: the id was in flight
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

// One JSON line (no trailing newline). Invalid UTF-8 in text fields is replaced by U+FFFD.
std::string serialize_event(const Event& event);
// Parses an event line (clients: gateway, bench). kInvalidArgument on a malformed line.
StatusOr<Event> parse_event(std::string_view line);

// Builds the error event for `status` (`id` may be empty).
Event error_event(const std::string& id, const Status& status, int retry_after_ms = 0);

// A fresh id, unique within this process: "req-<pid>-<n>".
std::string make_request_id();

}  // namespace glm::protocol
