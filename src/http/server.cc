#include "http/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "http/connection.h"
#include "http/listen.h"
#include "http/server_core.h"

namespace glm::http {

namespace {

using boost::system::error_code;

// The answer to a connection over a limit, written without reading its request.
constexpr std::string_view kTooManyConnections =
    "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n"
    "Content-Length: 50\r\nConnection: close\r\n\r\n"
    "too many connections from this address; retry\n\n\n\n";

}  // namespace

struct Server::Impl {
  // Declared first, destroyed last: connections still queued in the event loop release their
  // counts here when the loop is destroyed.
  ServerCore core;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> guard;
  // The acceptor, its retry timer and close_everything() share one strand, so that with
  // several event-loop threads they never run at once.
  net::strand<net::io_context::executor_type> accept_strand{ioc.get_executor()};
  std::optional<tcp::acceptor> acceptor;
  net::steady_timer retry{accept_strand};
  std::atomic<bool> running{false};
  std::atomic<bool> stopping{false};

  explicit Impl(ServerOptions options) : ioc(std::max(1, options.io_threads)) {
    core.options = std::move(options);
    guard.emplace(ioc.get_executor());
  }

  void accept() {
    acceptor->async_accept(net::make_strand(ioc), [this](const error_code& ec, tcp::socket s) {
      if (ec) {
        if (stopping || !acceptor->is_open()) return;
        // Out of file descriptors, or a connection reset in the backlog: try again shortly
        // instead of spinning (the waiting connections stay in the backlog).
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([this](const error_code& e) {
          if (!e && !stopping) accept();
        });
        return;
      }
      error_code ignored;
      s.set_option(tcp::no_delay(true), ignored);
      const std::string ip = s.remote_endpoint(ignored).address().to_string();
      core.accepted.fetch_add(1);
      if (core.admit(ip)) {
        std::make_shared<Connection>(core, std::move(s), ip)->start();
      } else {
        core.refused.fetch_add(1);
        refuse(std::move(s));
      }
      accept();
    });
  }

  static void refuse(tcp::socket s) {
    auto sock = std::make_shared<tcp::socket>(std::move(s));
    net::async_write(*sock, net::buffer(kTooManyConnections.data(), kTooManyConnections.size()),
                     [sock](const error_code&, size_t) {
                       error_code ignored;
                       sock->shutdown(tcp::socket::shutdown_send, ignored);
                       sock->close(ignored);
                     });
  }

  void close_everything() {
    error_code ignored;
    if (acceptor) acceptor->close(ignored);
    retry.cancel();
    std::vector<std::shared_ptr<Connection>> conns;
    {
      std::lock_guard<std::mutex> lock(core.mu);
      for (auto& [ptr, weak] : core.live) {
        if (auto c = weak.lock()) conns.push_back(std::move(c));
      }
    }
    for (auto& c : conns) c->stop();
    guard.reset();
  }
};

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Server::~Server() {
  try {
    stop();
  } catch (...) {  // posting to the event loop throws only when out of memory: nothing to do
  }
}

void Server::route(std::string method, const std::string& pattern, Handler handler) {
  impl_->core.router.add(std::move(method), pattern, std::move(handler));
}

void Server::set_pre_routing(PreRouting hook) { impl_->core.pre_routing = std::move(hook); }
void Server::set_error_handler(ErrorHandler hook) { impl_->core.error_handler = std::move(hook); }
void Server::set_exception_handler(ExceptionHandler hook) {
  impl_->core.exception_handler = std::move(hook);
}

StatusOr<int> Server::bind() {
  const ServerOptions& o = impl_->core.options;
  int fd = o.listen_fd;
  if (fd >= 0) {
    if (!is_listening_tcp(fd)) {
      return invalid_argument("--listen-fd " + std::to_string(fd) +
                              " is not a listening TCP socket (it is passed by glmserve serve)");
    }
  } else {
    auto opened = listen_tcp(o.host, o.port, o.backlog);
    if (!opened.ok()) return opened.status();
    fd = *opened;
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  error_code ec;
  auto& acceptor = impl_->acceptor.emplace(impl_->accept_strand);
  acceptor.assign(ss.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) {
    impl_->acceptor.reset();
    ::close(fd);
    return Status(ErrorCode::kInternal, "cannot use the listening socket: " + ec.message());
  }
  return local_port(fd);
}

bool Server::run() {
  Impl& m = *impl_;
  if (!m.acceptor || m.stopping) return false;
  const ServerOptions& o = m.core.options;
  m.core.pool = std::make_unique<WorkerPool>(std::max(1, o.workers), std::max(0, o.max_queue));
  m.accept();
  m.running = true;
  std::vector<std::thread> extra;
  for (int i = 1; i < o.io_threads; ++i) extra.emplace_back([&m] { m.ioc.run(); });
  m.ioc.run();
  for (std::thread& t : extra) t.join();
  // The connections are closed: handlers still running see their writes fail and return.
  m.core.pool->shutdown();
  m.running = false;
  return true;
}

void Server::stop() {
  if (impl_->stopping.exchange(true)) return;
  net::post(impl_->accept_strand, [m = impl_.get()] { m->close_everything(); });
}

bool Server::running() const { return impl_->running; }

ServerStats Server::stats() const {
  const ServerCore& c = impl_->core;
  ServerStats s;
  s.connections = c.connections.load();
  s.accepted = c.accepted.load();
  s.refused = c.refused.load();
  s.requests = c.requests.load();
  s.overloaded = c.overloaded.load();
  s.timed_out = c.timed_out.load();
  s.bad_requests = c.bad_requests.load();
  return s;
}

const ServerOptions& Server::options() const { return impl_->core.options; }

}  // namespace glm::http
