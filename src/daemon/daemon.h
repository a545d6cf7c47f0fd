// Daemon: the engine's Unix-socket service (`glmserve engine`, docs/protocol.md).
//
// Design: one I/O thread runs an edge-triggered epoll loop over the listening socket, every
// client connection and an eventfd; the engine's own thread writes events straight to the
// client's socket (non-blocking, under the connection's mutex) and only falls back to a buffer
// flushed by the I/O thread when the socket is full. So a token costs one serialize + one send()
// on the engine thread and no thread hop, and idle connections cost no thread: hundreds of
// clients are one epoll set. A thread per connection would add a wake-up per token and a stack
// per client for nothing, since the engine is the only producer.
//
// Lifecycle: listen() -> start() (accepts at once; health answers "loading" and generate
// requests are refused with "unavailable") -> set_engine() when the model is loaded ->
// request_stop() (async-signal-safe; SIGTERM) drains: stop accepting, refuse new requests, let
// the engine finish in-flight ones within drain_timeout, flush, close -> wait() returns.
//
// Thread-safety: listen/start/wait from the owning thread; set_engine, fail_loading and
// request_stop from any thread (request_stop also from a signal handler).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "protocol/protocol.h"

namespace glm::daemon {

// The wire request as an engine request under `engine_id` (the value types are shared: this
// copies the messages and takes the parameters as they are).
engine::Request to_engine_request(const protocol::Request& r, const std::string& engine_id);
// The engine's event as a wire event under the client's id; an error the engine stops for
// (engine::Event::restart) carries `retry_after_ms` as its hint.
protocol::Event to_protocol_event(const engine::Event& ev, const std::string& client_id,
                                  int retry_after_ms);

struct DaemonOptions {
  std::string socket_path;
  mode_t socket_mode = 0600;
  size_t max_line_bytes = 1 << 20;
  int max_connections = 1024;           // more are answered "busy" and closed
  size_t max_pending_bytes = 16 << 20;  // unsent events per connection before it is dropped
  std::chrono::milliseconds drain_timeout{30000};
  int retry_after_ms = 1000;  // hint sent with busy / unavailable errors
  // Echoed in health answers, so a supervisor can tell its own engine from another instance's
  // on the same socket path (`glmserve serve` passes a random one).
  std::string instance;
  // Where the adapters loaded at run time are kept (adapter_state.h), so that the next engine
  // on this socket serves them too; "" = not kept (`glmserve serve` gives its engine one).
  std::string adapter_state;
};

class Connection;

class Daemon {
 public:
  explicit Daemon(DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Creates the socket (see listen_unix for stale-socket handling). Call once, before start().
  Status listen();
  // Starts the I/O thread.
  void start();
  // Hands over the loaded engine: from now on requests are served.
  void set_engine(std::unique_ptr<engine::Engine> engine);
  // Loading progress, reported in health answers while loading. Any thread (the loader's).
  void set_load_progress(uint64_t done_bytes, uint64_t total_bytes) {
    load_done_.store(done_bytes, std::memory_order_relaxed);
    load_total_.store(total_bytes, std::memory_order_relaxed);
  }
  // Model loading failed: logs, stops the daemon; wait() returns `exit_code`.
  void fail_loading(const Status& status, int exit_code);
  // The engine cannot run any more (a lost GPU): drain and exit with exit_code.
  void fail_running(const Status& status, int exit_code);
  // Begins a graceful stop (drain). Async-signal-safe.
  void request_stop();
  // Blocks until the daemon stopped; returns the process exit code (0 after a graceful stop).
  int wait();

  bool stopping() const { return stop_requested_.load(); }
  const DaemonOptions& options() const { return options_; }

 private:
  struct InFlight {
    std::shared_ptr<Connection> conn;
    std::string client_id;
  };

  void io_loop();
  void accept_all();
  void on_readable(const std::shared_ptr<Connection>& conn);
  void handle_line(const std::shared_ptr<Connection>& conn, const std::string& line);
  void handle_generate(const std::shared_ptr<Connection>& conn, const protocol::Request& request);
  void handle_cancel(const std::shared_ptr<Connection>& conn, const protocol::Request& request);
  bool is_open(const std::shared_ptr<Connection>& conn) const;
  void close_connection(const std::shared_ptr<Connection>& conn, bool cancel_requests);
  // Closes a half-closed connection once its requests finished and its events were sent.
  void maybe_finish(const std::shared_ptr<Connection>& conn);
  void process_notifications();
  void notify(const std::shared_ptr<Connection>& conn);  // any thread: wake the I/O thread
  void begin_drain();
  protocol::Event health_event(const std::string& id) const;
  protocol::Event stats_event(const std::string& id) const;
  engine::Engine* engine() const { return engine_ptr_.load(std::memory_order_acquire); }

  const DaemonOptions options_;
  const std::chrono::steady_clock::time_point started_at_;
  int listen_fd_ = -1;
  ino_t socket_inode_ = 0;  // of our socket file, so a stop never unlinks a successor's
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::thread io_thread_;
  std::thread drain_thread_;

  std::unique_ptr<engine::Engine> engine_;  // owned; published through engine_ptr_
  std::atomic<engine::Engine*> engine_ptr_{nullptr};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> drain_done_{false};
  std::atomic<int> exit_code_{0};
  std::atomic<bool> load_failed_{false};
  std::atomic<uint64_t> load_done_{0}, load_total_{0};  // set_load_progress

  // I/O thread only.
  std::unordered_map<int, std::shared_ptr<Connection>> connections_;
  uint64_t next_serial_ = 1;
  std::atomic<int> n_connections_{0};

  // Requests in flight, by engine id "<serial>/<client id>"; guarded by mu_ (also each
  // connection's request set).
  mutable std::mutex mu_;
  std::unordered_map<std::string, InFlight> in_flight_;

  std::mutex notify_mu_;
  std::mutex adapters_mu_;  // one adapter load or unload (and its state write) at a time
  std::vector<std::shared_ptr<Connection>> notified_;  // guarded by notify_mu_
};

}  // namespace glm::daemon
