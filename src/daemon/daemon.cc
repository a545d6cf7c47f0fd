#include "daemon/daemon.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/check.h"
#include "core/log.h"
#include "core/unix_socket.h"
#include "daemon/adapter_state.h"
#include "daemon/connection.h"

namespace glm::daemon {
namespace {

constexpr uint64_t kListenTag = 0;
constexpr uint64_t kEventTag = 1;  // connection tags are their fds (>= 3)

}  // namespace

protocol::Event to_protocol_event(const engine::Event& ev, const std::string& client_id,
                                  int retry_after_ms) {
  if (ev.type == engine::EventType::kError) {
    // An engine that stops to be restarted says when to ask again, and that the request may be.
    protocol::Event out =
        protocol::error_event(client_id, ev.error, ev.restart ? retry_after_ms : 0);
    out.restart = ev.restart;
    return out;
  }
  protocol::Event out;
  static_cast<generation::Event&>(out) = ev;
  out.id = client_id;
  return out;
}

engine::Request to_engine_request(const protocol::Request& r, const std::string& engine_id) {
  engine::Request out;
  static_cast<generation::GenerateRequest&>(out) = r;
  out.id = engine_id;
  return out;
}

Daemon::Daemon(DaemonOptions options)
    : options_(std::move(options)), started_at_(std::chrono::steady_clock::now()) {}

Daemon::~Daemon() {
  if (io_thread_.joinable()) {
    request_stop();
    io_thread_.join();
  }
  if (drain_thread_.joinable()) drain_thread_.join();
  // The engine may still call sinks while it stops; they use this object's members.
  engine_ptr_.store(nullptr);
  engine_.reset();
  for (auto& [fd, conn] : connections_) conn->close();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (event_fd_ >= 0) ::close(event_fd_);
}

Status Daemon::listen() {
  auto fd = listen_unix(options_.socket_path, options_.socket_mode);
  if (!fd.ok()) return fd.status();
  listen_fd_ = *fd;
  struct stat st;
  if (::stat(options_.socket_path.c_str(), &st) == 0) socket_inode_ = st.st_ino;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || event_fd_ < 0) {
    return Status(ErrorCode::kUnavailable, std::string("epoll/eventfd: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kEventTag;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev);
  return Status::Ok();
}

void Daemon::start() {
  GLM_CHECK(listen_fd_ >= 0);
  io_thread_ = std::thread([this] { io_loop(); });
}

void Daemon::set_engine(std::unique_ptr<engine::Engine> engine) {
  engine::Engine* raw = engine.get();
  engine_ = std::move(engine);
  engine_ptr_.store(raw, std::memory_order_release);
  GLM_LOG_INFO("engine: ready: model %s on %s, context %d tokens, serving on %s",
               raw->model_name().c_str(), raw->device().c_str(), raw->n_ctx(),
               options_.socket_path.c_str());
  notify(nullptr);  // a stop requested during loading now drains the engine too
}

void Daemon::fail_loading(const Status& status, int exit_code) {
  GLM_LOG_ERROR("engine: cannot load the model: %s", status.to_string().c_str());
  exit_code_.store(exit_code);
  load_failed_.store(true);
  request_stop();
}

void Daemon::fail_running(const Status& status, int exit_code) {
  GLM_LOG_ERROR("engine: stopping: %s", status.to_string().c_str());
  exit_code_.store(exit_code);
  request_stop();
}

void Daemon::request_stop() {
  stop_requested_.store(true);
  const uint64_t one = 1;
  if (event_fd_ >= 0) {
    ssize_t ignored = ::write(event_fd_, &one, sizeof(one));
    (void)ignored;
  }
}

int Daemon::wait() {
  if (io_thread_.joinable()) io_thread_.join();
  if (drain_thread_.joinable()) drain_thread_.join();
  return exit_code_.load();
}

void Daemon::notify(const std::shared_ptr<Connection>& conn) {
  if (conn != nullptr) {
    std::lock_guard<std::mutex> lock(notify_mu_);
    notified_.push_back(conn);
  }
  const uint64_t one = 1;
  ssize_t ignored = ::write(event_fd_, &one, sizeof(one));
  (void)ignored;
}

void Daemon::io_loop() {
  constexpr int kMaxEvents = 128;
  epoll_event events[kMaxEvents];
  std::chrono::steady_clock::time_point flush_deadline{};
  for (;;) {
    const int timeout_ms = draining_.load() ? 20 : -1;
    const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
    if (n < 0 && errno != EINTR) {
      GLM_LOG_ERROR("engine: epoll_wait: %s", std::strerror(errno));
      exit_code_.store(1);
      break;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      const uint32_t what = events[i].events;
      if (tag == kListenTag) {
        accept_all();
        continue;
      }
      if (tag == kEventTag) {
        uint64_t count;
        ssize_t ignored = ::read(event_fd_, &count, sizeof(count));
        (void)ignored;
        process_notifications();
        continue;
      }
      auto it = connections_.find(static_cast<int>(tag));
      if (it == connections_.end()) continue;
      std::shared_ptr<Connection> conn = it->second;
      if (what & (EPOLLHUP | EPOLLERR)) {
        // The client closed its socket: its requests are cancelled.
        close_connection(conn, /*cancel_requests=*/true);
        continue;
      }
      if (what & (EPOLLIN | EPOLLRDHUP)) on_readable(conn);
      if (!is_open(conn)) continue;
      if (what & EPOLLOUT) {
        if (!conn->flush()) {
          close_connection(conn, true);
          continue;
        }
      }
      maybe_finish(conn);
    }
    if (stop_requested_.load() && !draining_.load()) begin_drain();
    if (drain_done_.load()) {
      // The engine is stopped: flush what clients have not read yet (bounded), then close.
      const auto now = std::chrono::steady_clock::now();
      if (flush_deadline == std::chrono::steady_clock::time_point{}) {
        flush_deadline = now + std::chrono::seconds(2);
      }
      bool all_flushed = true;
      for (auto& [fd, conn] : connections_) {
        if (conn->flush() && conn->pending_bytes() > 0) all_flushed = false;
      }
      if (all_flushed || now >= flush_deadline) break;
    }
  }
  std::vector<std::shared_ptr<Connection>> conns;
  for (auto& [fd, conn] : connections_) conns.push_back(conn);
  for (auto& conn : conns) close_connection(conn, false);
  GLM_LOG_INFO("engine: stopped");
}

void Daemon::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        GLM_LOG_WARN("engine: accept: %s", std::strerror(errno));
      }
      return;
    }
    auto conn = std::make_shared<Connection>(fd, next_serial_++, options_.max_line_bytes,
                                             options_.max_pending_bytes);
    if (n_connections_.load() >= options_.max_connections) {
      conn->send_line(protocol::serialize_event(protocol::error_event(
          "",
          Status(ErrorCode::kQueueFull, "too many connections (" +
                                            std::to_string(options_.max_connections) +
                                            "); retry shortly"),
          options_.retry_after_ms)));
      conn->close();
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = static_cast<uint64_t>(fd);
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      GLM_LOG_WARN("engine: epoll_ctl: %s", std::strerror(errno));
      conn->close();
      continue;
    }
    connections_[fd] = conn;
    n_connections_.fetch_add(1);
    GLM_LOG_DEBUG("engine: connection %llu opened (%d open)",
                  static_cast<unsigned long long>(conn->serial()), n_connections_.load());
  }
}

void Daemon::on_readable(const std::shared_ptr<Connection>& conn) {
  char buf[65536];
  std::string line;
  for (;;) {
    if (conn->read_closed) return;
    const ssize_t n = ::recv(conn->fd(), buf, sizeof(buf), 0);
    if (n > 0) {
      conn->in.append(std::string_view(buf, static_cast<size_t>(n)));
      for (;;) {
        const auto next = conn->in.next(&line);
        if (next == protocol::LineBuffer::Next::kNone) break;
        if (next == protocol::LineBuffer::Next::kOverlong) {
          conn->send_line(protocol::serialize_event(protocol::error_event(
              "",
              invalid_argument("request line exceeds " + std::to_string(options_.max_line_bytes) +
                               " bytes (shorten the history or raise --max-line)"))));
          continue;
        }
        if (line.empty()) continue;  // blank lines are keep-alives
        handle_line(conn, line);
        if (!is_open(conn)) return;
      }
      continue;
    }
    if (n == 0) {  // the client shut down its side: answer what it asked, then close
      conn->read_closed = true;
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) close_connection(conn, true);
    return;
  }
}

void Daemon::handle_line(const std::shared_ptr<Connection>& conn, const std::string& line) {
  protocol::Limits limits;
  limits.max_line_bytes = options_.max_line_bytes;
  std::string id;
  auto request = protocol::parse_request(line, limits, &id);
  if (!request.ok()) {
    GLM_LOG_DEBUG("engine: bad request on connection %llu: %s",
                  static_cast<unsigned long long>(conn->serial()),
                  request.status().to_string().c_str());
    conn->send_line(protocol::serialize_event(protocol::error_event(id, request.status())));
    return;
  }
  switch (request->type) {
    case protocol::RequestType::kHealth:
      conn->send_line(protocol::serialize_event(health_event(request->id)));
      return;
    case protocol::RequestType::kStats:
      conn->send_line(protocol::serialize_event(stats_event(request->id)));
      return;
    case protocol::RequestType::kTokenize:
    case protocol::RequestType::kDetokenize:
    case protocol::RequestType::kPrompt: {
      engine::Engine* e = engine();
      if (e == nullptr) {
        conn->send_line(protocol::serialize_event(
            protocol::error_event(request->id,
                                  Status(ErrorCode::kUnavailable,
                                         "the model is still loading; retry when health "
                                         "says ready"),
                                  options_.retry_after_ms)));
        return;
      }
      protocol::Event ev;
      ev.type = protocol::EventType::kTokens;
      ev.id = request->id;
      if (request->type == protocol::RequestType::kTokenize) {
        ev.tokens = e->tokenize(request->text);
      } else if (request->type == protocol::RequestType::kDetokenize) {
        ev.text = e->detokenize(request->tokens, /*render_special=*/true);
      } else {
        auto ids = e->prompt_tokens(to_engine_request(*request, request->id));
        if (!ids.ok()) {
          conn->send_line(
              protocol::serialize_event(protocol::error_event(request->id, ids.status())));
          return;
        }
        ev.tokens = std::move(ids).value();
        ev.text = e->detokenize(ev.tokens, /*render_special=*/true);
      }
      conn->send_line(protocol::serialize_event(ev));
      return;
    }
    case protocol::RequestType::kLoadAdapter:
    case protocol::RequestType::kUnloadAdapter: {
      // On this connection's thread: a load reads its file here, never in the engine loop.
      engine::Engine* e = engine();
      std::lock_guard<std::mutex> lock(adapters_mu_);
      Status s = e == nullptr ? Status(ErrorCode::kUnavailable,
                                       "the model is still loading; retry when health says ready")
                 : request->type == protocol::RequestType::kLoadAdapter
                     ? e->load_adapter({request->adapter, request->path, request->scale})
                     : e->unload_adapter(request->adapter);
      if (s.ok() && !options_.adapter_state.empty()) {
        // Kept for the next engine on this socket; a failed write costs only that.
        if (Status w = save_adapter_state(options_.adapter_state, e->adapters()); !w.ok()) {
          GLM_LOG_WARN("engine: %s (a restarted engine will not serve this change)",
                       w.message().c_str());
        }
      }
      conn->send_line(protocol::serialize_event(s.ok() ? health_event(request->id)
                                                       : protocol::error_event(request->id, s)));
      return;
    }
    case protocol::RequestType::kCancel:
      handle_cancel(conn, *request);
      return;
    case protocol::RequestType::kGenerate:
      handle_generate(conn, std::move(request).value());
      return;
  }
}

void Daemon::handle_generate(const std::shared_ptr<Connection>& conn,
                             const protocol::Request& request) {
  const std::string client_id = request.id;
  auto refuse = [&](const Status& status, int retry_ms) {
    conn->send_line(protocol::serialize_event(protocol::error_event(client_id, status, retry_ms)));
  };
  if (stop_requested_.load()) {
    refuse(Status(ErrorCode::kUnavailable,
                  "the engine is shutting down (draining); retry on the restarted engine"),
           options_.retry_after_ms);
    return;
  }
  engine::Engine* e = engine();
  if (e == nullptr) {
    refuse(
        Status(ErrorCode::kUnavailable, "the model is still loading; retry when health says ready"),
        options_.retry_after_ms);
    return;
  }
  // An engine that stops (its GPU was lost: it fails its requests with "restart" before this
  // daemon is asked to stop) refuses first, so that such a request sent again at once is
  // retried on the engine that comes back, never refused for its id still in flight here.
  if (const generation::Health h = e->health(); h != generation::Health::kReady) {
    refuse(
        Status(ErrorCode::kUnavailable, std::string("the engine is ") + generation::health_name(h) +
                                            "; retry on the restarted engine"),
        options_.retry_after_ms);
    return;
  }
  // Ids are unique per engine, not per connection: a cancel by id then names exactly one
  // request, whichever connection sends it.
  const std::string& engine_id = client_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_.count(client_id) != 0) {
      refuse(invalid_argument("request id '" + client_id +
                              "' is already in flight on this engine (give each request a "
                              "unique id, or none to get one)"),
             0);
      return;
    }
    conn->requests.insert(client_id);
    in_flight_[engine_id] = InFlight{conn, client_id};
  }
  engine::EventSink sink = [this, conn, client_id, engine_id](const engine::Event& ev) {
    const bool final = ev.type == engine::EventType::kDone || ev.type == engine::EventType::kError;
    protocol::Event out = to_protocol_event(ev, client_id, options_.retry_after_ms);
    // Send before forgetting the request: once conn->requests is empty, the I/O thread may close
    // a half-closed connection, and a final event sent after that would be lost.
    const bool sent = conn->send_line(protocol::serialize_event(out));
    if (final) {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.erase(engine_id);
      conn->requests.erase(client_id);
    }
    if (final && ev.type == engine::EventType::kDone) {
      GLM_LOG_INFO(
          "engine: %s %s: %d prompt (%d cached) + %d tokens, queue %.1f ms, "
          "ttft %.1f ms, tpot %.1f ms, total %.1f ms",
          client_id.c_str(), generation::finish_reason_name(ev.finish_reason),
          ev.usage.prompt_tokens, ev.usage.cached_tokens, ev.usage.completion_tokens,
          ev.timings.queue_ms, ev.timings.ttft_ms, ev.timings.tpot_ms, ev.timings.total_ms);
    } else if (final) {
      GLM_LOG_WARN("engine: %s failed: %s", client_id.c_str(), ev.error.to_string().c_str());
    }
    if (!sent || (final && conn->read_closed.load())) notify(conn);
  };
  Status st = e->submit(to_engine_request(request, engine_id), std::move(sink));
  if (!st.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.erase(engine_id);
      conn->requests.erase(client_id);
    }
    const bool retry = st.code() == ErrorCode::kQueueFull || st.code() == ErrorCode::kUnavailable;
    refuse(st, retry ? options_.retry_after_ms : 0);
  }
}

void Daemon::handle_cancel(const std::shared_ptr<Connection>& conn,
                           const protocol::Request& request) {
  // Ids are unique per engine: the request with this id, from whichever connection.
  protocol::Event reply;
  reply.type = protocol::EventType::kCancel;
  reply.id = request.id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reply.found = in_flight_.count(request.id) != 0;
  }
  const std::string& engine_id = request.id;
  // Reply first: the cancelled request's final "done" follows it.
  conn->send_line(protocol::serialize_event(reply));
  engine::Engine* e = engine();
  if (reply.found && e != nullptr) e->cancel(engine_id);
}

bool Daemon::is_open(const std::shared_ptr<Connection>& conn) const {
  auto it = connections_.find(conn->fd());
  return it != connections_.end() && it->second == conn;
}

void Daemon::close_connection(const std::shared_ptr<Connection>& conn, bool cancel_requests) {
  if (!is_open(conn)) return;
  connections_.erase(conn->fd());
  conn->close();
  n_connections_.fetch_sub(1);
  std::vector<std::string> to_cancel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& client_id : conn->requests) {
      to_cancel.push_back(client_id);  // engine ids are the client ids
    }
  }
  GLM_LOG_DEBUG("engine: connection %llu closed (%zu requests in flight)",
                static_cast<unsigned long long>(conn->serial()), to_cancel.size());
  engine::Engine* e = engine();
  if (cancel_requests && e != nullptr) {
    for (const std::string& id : to_cancel) e->cancel(id);
  }
}

void Daemon::maybe_finish(const std::shared_ptr<Connection>& conn) {
  if (!conn->read_closed) return;
  if (conn->broken()) {
    close_connection(conn, true);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!conn->requests.empty()) return;
  }
  if (conn->flush() && conn->pending_bytes() == 0) close_connection(conn, false);
}

void Daemon::process_notifications() {
  std::vector<std::shared_ptr<Connection>> list;
  {
    std::lock_guard<std::mutex> lock(notify_mu_);
    list.swap(notified_);
  }
  for (auto& conn : list) {
    if (!is_open(conn)) continue;
    if (conn->broken()) {
      GLM_LOG_WARN("engine: dropping connection %llu: it stopped reading or broke",
                   static_cast<unsigned long long>(conn->serial()));
      close_connection(conn, true);
      continue;
    }
    maybe_finish(conn);
  }
}

void Daemon::begin_drain() {
  draining_.store(true);
  if (listen_fd_ >= 0) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
  // Remove the socket file unless another engine has taken the path over since.
  struct stat st;
  if (::stat(options_.socket_path.c_str(), &st) == 0 && st.st_ino == socket_inode_) {
    ::unlink(options_.socket_path.c_str());
  }
  engine::Engine* e = engine();
  if (e == nullptr) {
    if (!load_failed_.load()) GLM_LOG_INFO("engine: stopping during model load");
    drain_done_.store(true);
    return;
  }
  int in_flight;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight = static_cast<int>(in_flight_.size());
  }
  GLM_LOG_INFO("engine: draining: %d requests in flight, up to %lld ms", in_flight,
               static_cast<long long>(options_.drain_timeout.count()));
  drain_thread_ = std::thread([this, e] {
    const bool finished = e->drain(options_.drain_timeout);
    if (!finished) {
      GLM_LOG_WARN("engine: drain bound of %lld ms reached; remaining requests were cancelled",
                   static_cast<long long>(options_.drain_timeout.count()));
    }
    drain_done_.store(true);
    notify(nullptr);
  });
}

protocol::Event Daemon::health_event(const std::string& id) const {
  protocol::Event ev;
  ev.type = protocol::EventType::kHealth;
  ev.id = id;
  ev.instance = options_.instance;
  engine::Engine* e = engine();
  if (draining_.load()) {
    ev.health = generation::Health::kDraining;
  } else if (e == nullptr) {
    ev.health = generation::Health::kLoading;
    ev.load_done_bytes = load_done_.load(std::memory_order_relaxed);
    ev.load_total_bytes = load_total_.load(std::memory_order_relaxed);
  } else {
    ev.health = e->health();
  }
  if (e != nullptr) {
    ev.model = e->model_name();
    ev.n_ctx = e->n_ctx();
    ev.device = e->device();
    for (const engine::AdapterSpec& a : e->adapters()) ev.adapters.push_back(a.name);
  }
  return ev;
}

protocol::Event Daemon::stats_event(const std::string& id) const {
  protocol::Event ev;
  ev.type = protocol::EventType::kStats;
  ev.id = id;
  if (engine::Engine* e = engine()) {
    static_cast<generation::Stats&>(ev.stats) = e->stats();
  }
  ev.stats.connections = n_connections_.load();
  ev.stats.uptime_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at_).count();
  return ev;
}

}  // namespace glm::daemon
