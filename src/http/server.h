// Server: an evented HTTP/1.1 server (Boost.Asio, Beast's request parser) for the gateway.
//
// Connections live on `io_threads` event-loop threads and cost no thread while idle or while
// they send their request; only a complete request takes a worker (worker_pool.h), for as long
// as its handler and streamed body run. So idle keep-alive connections and slow senders cannot
// starve anyone, and overload is answered at once: 503 with Retry-After when every worker is
// busy and the queue is full, or when a client address holds too many connections.
//
// Per connection: one deadline for the whole request head and body (a slowloris sender is cut
// off however it dribbles), an idle timeout between keep-alive requests, a write timeout for a
// client that stops reading, pipelining (requests answered in order, one at a time), refusal of
// ambiguous framing (Content-Length with Transfer-Encoding, repeated Content-Length or Host:
// 400), `Expect: 100-continue`, HTTP/1.0 bodies without chunked encoding, and `Connection:
// close` after every error the server answers itself.
//
// Thread-safety: add routes and hooks, then bind() and run() (which blocks) on one thread;
// stop() from any thread (not from a signal handler). Handlers and hooks run on worker threads,
// concurrently; the error handler also runs on an event-loop thread for errors the server
// answers itself, so it must be quick and must not block.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "http/headers.h"
#include "http/message.h"
#include "http/router.h"

namespace glm::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0 = any free port (bind() returns it)
  int io_threads = 1;                 // event-loop threads
  int workers = 256;                  // handlers running at once (each streamed answer holds one)
  int max_queue = 256;                // complete requests waiting for a worker; beyond: 503
  size_t max_body_bytes = 1 << 20;    // larger: 413
  size_t max_head_bytes = 16 << 10;   // request line and fields; larger: 431 (414 for the line)
  int request_timeout_ms = 30000;     // from the first byte of a request to its last: else 408
  int idle_timeout_ms = 30000;        // a keep-alive connection with no request is closed
  int write_timeout_ms = 30000;       // a client that reads nothing for this long is dropped
  int max_connections = 16384;        // open at once; beyond: 503 and close
  int max_connections_per_ip = 4096;  // from one client address; beyond: 503 and close
  int backlog = 4096;                 // listen backlog (the kernel caps it at somaxconn)
  // An already listening socket to serve on instead of binding host:port (glmserve serve
  // opens the port and hands it to the gateway it starts); owned by the server once bound.
  int listen_fd = -1;
  Headers default_headers;  // added to every response that does not set them
};

// Counters for tests and /metrics. Values of one moment; thread-safe to read.
struct ServerStats {
  int connections = 0;         // open now
  long long accepted = 0;      // connections accepted since start
  long long refused = 0;       // connections refused (connection limits)
  long long requests = 0;      // complete requests read
  long long overloaded = 0;    // requests answered 503 because the workers were all busy
  long long timed_out = 0;     // requests cut by the request deadline
  long long bad_requests = 0;  // requests refused by the parser (400, 413, 414, 431)
};

class Server {
 public:
  using PreRouting = std::function<bool(Request&, Response&)>;
  using ErrorHandler = std::function<void(const Request&, Response&)>;
  using ExceptionHandler = std::function<void(const Request&, Response&, std::exception_ptr)>;

  explicit Server(ServerOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void route(std::string method, const std::string& pattern, Handler handler);
  void get(const std::string& pattern, Handler h) { route("GET", pattern, std::move(h)); }
  void post(const std::string& pattern, Handler h) { route("POST", pattern, std::move(h)); }
  void patch(const std::string& pattern, Handler h) { route("PATCH", pattern, std::move(h)); }
  void del(const std::string& pattern, Handler h) { route("DELETE", pattern, std::move(h)); }

  // Runs before routing; returns true when it answered the request itself.
  void set_pre_routing(PreRouting hook);
  // Called for every answer with status >= 400 and no body (404 for no route, and the
  // server's own refusals, whose Response::reason says why), to write one.
  void set_error_handler(ErrorHandler hook);
  // Called when a handler throws; without one the answer is a plain 500.
  void set_exception_handler(ExceptionHandler hook);

  // Listens (backlog ServerOptions::backlog; http/listen.h: never SO_REUSEPORT, so a port in
  // use fails here with a message naming it), or takes over ServerOptions::listen_fd; returns
  // the port.
  StatusOr<int> bind();
  // Serves until stop(), then waits for the handlers still running to return; false if it
  // could not run (not bound, or already stopped).
  bool run();
  // Stops accepting and closes every connection (streamed answers see their sink fail);
  // returns at once, run() returns when the handlers are done. Idempotent.
  void stop();
  bool running() const;

  ServerStats stats() const;
  const ServerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glm::http
