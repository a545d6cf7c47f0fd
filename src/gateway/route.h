// Routes: the gateway's HTTP handlers return their error instead of writing it, and one wrapper
// writes every error answer (docs/gateway.md, "Errors"), as llama-server wraps each of its
// handlers in one exception-to-error-response function.
//
// A handler writes its answer into the Response (a body, or a stream) and returns OK, or it
// returns the error. The wrapper then writes the HTTP status of the error-code table
// (core/status.h: error_code_http_status), `Retry-After` (seconds) and `retry-after-ms` for the
// temporary errors (busy: the engine's last hint; unavailable: 2 s), and the error body of the
// route's API family, chosen once when the route is registered:
//   OpenAI     {"error":{"message","type","param":null,"code"}}   (api/openai.h)
//   Anthropic  {"type":"error","error":{"type","message"}}       (api/anthropic.h)
// Headers the handler set before returning the error (Cache-Control, WWW-Authenticate) stay.
// A streamed answer whose head went out reports later errors inside its stream, in its own
// event format, and its handler returns OK.
//
// Thread-safety: register routes on one thread before the server runs; the wrapped handlers
// run concurrently (they read the retry hint, an atomic, and count in Metrics, thread-safe).
// Cost: one std::function call around the handler; an error costs one JSON dump.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <utility>

#include "core/status.h"
#include "gateway/metrics.h"
#include "http/server.h"

namespace glm::gateway {

// The error body of an API family.
enum class ErrorFormat {
  kOpenAI,     // every route but Anthropic's (the page's /api too)
  kAnthropic,  // /v1/messages, /v1/messages/count_tokens
};

// The body of `status`'s error answer in `format`.
std::string error_body(const Status& status, ErrorFormat format);

// What a route handler returns: OK when it wrote its answer, else the error the wrapper writes.
// An error is counted in /metrics (glmserve_errors_total{code}) unless made by uncounted():
// a generation's outcome, which record_generation counted (or deliberately did not: a client
// that left, an answer cut by a drain), or an answer that is no failure of the server.
class [[nodiscard]] RouteStatus {
 public:
  RouteStatus() = default;
  RouteStatus(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  static RouteStatus uncounted(Status status) {
    RouteStatus r(std::move(status));
    r.counted_ = false;
    return r;
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  bool counted() const { return counted_; }

 private:
  Status status_;
  bool counted_ = true;
};

// A route's handler: writes the answer and returns OK, or returns the error (see above).
using RouteHandler = std::function<RouteStatus(const http::Request&, http::Response&)>;

// Registers route handlers on a server, each wrapped so that the error it returns becomes the
// error answer of its family, written by write_error() alone.
class Routes {
 public:
  // `busy_retry_ms`: the engine's last retry hint, what Retry-After says for a busy engine.
  // All three outlive this object and the server's handlers; `server` may be null when only
  // wrap() and write_error() are used (tests).
  Routes(http::Server* server, Metrics* metrics, const std::atomic<int>* busy_retry_ms)
      : server_(server), metrics_(metrics), busy_retry_ms_(busy_retry_ms) {}

  void get(const std::string& pattern, RouteHandler h, ErrorFormat f = ErrorFormat::kOpenAI) {
    add("GET", pattern, std::move(h), f);
  }
  void post(const std::string& pattern, RouteHandler h, ErrorFormat f = ErrorFormat::kOpenAI) {
    add("POST", pattern, std::move(h), f);
  }
  void patch(const std::string& pattern, RouteHandler h, ErrorFormat f = ErrorFormat::kOpenAI) {
    add("PATCH", pattern, std::move(h), f);
  }
  void del(const std::string& pattern, RouteHandler h, ErrorFormat f = ErrorFormat::kOpenAI) {
    add("DELETE", pattern, std::move(h), f);
  }

  // The server's handler for `h`: runs it, and on an error writes the answer (write_error).
  http::Handler wrap(RouteHandler h, ErrorFormat f) const;

  // Writes the error answer of `st` (not OK) into `res`: status, Retry-After when temporary,
  // the body in `f`; counts it unless uncounted. The wrapper's one writer, also used by the
  // server's hooks that answer without a route (no route, refusals before routing, exceptions).
  void write_error(http::Response& res, const RouteStatus& st,
                   ErrorFormat f = ErrorFormat::kOpenAI) const;

 private:
  void add(const char* method, const std::string& pattern, RouteHandler h, ErrorFormat f);

  http::Server* server_;
  Metrics* metrics_;
  const std::atomic<int>* busy_retry_ms_;
};

}  // namespace glm::gateway
