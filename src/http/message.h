// The request a handler reads and the response it fills (server.h runs them). Value types;
// a Request is read-only for handlers, a Response belongs to the one handler that fills it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/headers.h"

namespace glm::http {

struct Request {
  std::string method;                // "GET", "POST", ... ("HEAD" is served by GET routes)
  std::string target;                // as sent: "/v1/models?x=1"
  std::string path;                  // percent-decoded, without the query: "/v1/models"
  std::string query;                 // raw, after '?'
  std::vector<std::string> matches;  // the route's regex match: [0] the path, [1..] its groups
  Headers headers;
  std::string body;  // complete (the server reads it before the handler runs)
  int version = 11;  // 10 = HTTP/1.0, 11 = HTTP/1.1
  std::string remote_ip;

  const std::string& header(std::string_view name) const { return headers.get(name); }
  bool has_header(std::string_view name) const { return headers.has(name); }
  // The value of query parameter `name` (percent-decoded), or "".
  std::string param(std::string_view name) const;

  // True once the client has closed its connection (or it failed). A handler that works long
  // before answering (a non-streamed generation) polls this to stop early; the server notices
  // without writing anything, so no status is committed. Thread-safe.
  bool client_gone() const { return gone && gone->load(std::memory_order_relaxed); }
  std::shared_ptr<const std::atomic<bool>> gone;  // set by the server
};

// Where a streamed body goes. One per response, used on the handler's thread.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Sends `data` to the client at once (one chunk on HTTP/1.1). Blocks while more than the
  // server's buffer bound is still unsent (a client that reads slowly slows its writer).
  // Returns false once the client is gone; nothing more is sent then.
  virtual bool write(std::string_view data) = 0;
  bool write(const char* data, size_t n) { return write(std::string_view(data, n)); }
  // Ends the body properly. A provider that returns without done() leaves the body cut: the
  // connection is closed without the last chunk, so the client sees an incomplete answer.
  virtual void done() = 0;
};

using StreamProvider = std::function<void(StreamSink&)>;

struct Response {
  int status = 200;
  Headers headers;
  std::string body;
  // Set: the body is streamed by this function after the handler returns, on its thread
  // (chunked on HTTP/1.1; on HTTP/1.0 raw, ended by closing the connection). The head goes
  // out with the provider's first write: a provider should write at once (an SSE stream's
  // first event or comment) if its client waits for the status.
  StreamProvider stream;
  // Why the server itself refused the request (400, 408, 413, 503 ...), for an error handler
  // that writes the body; empty for answers from handlers.
  std::string reason;

  void set_header(std::string_view name, std::string value) { headers.set(name, std::move(value)); }
  void set_content(std::string content, std::string_view content_type);
  void set_content(const char* data, size_t n, std::string_view content_type) {
    set_content(std::string(data, n), content_type);
  }
  void set_stream(std::string_view content_type, StreamProvider provider);
};

}  // namespace glm::http
