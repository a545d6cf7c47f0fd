#include "http/connection.h"

#include <sys/socket.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <cerrno>
#include <chrono>

#include "http/wire.h"

namespace glm::http {
namespace {

namespace bhttp = boost::beast::http;
using boost::system::error_code;

constexpr size_t kHighWater = 256 << 10;     // unsent bytes a writer may queue before it waits
constexpr size_t kPipelineBytes = 64 << 10;  // read ahead while a request is being answered
constexpr int kLingerMs = 2000;

// The streamed body of one response: chunk frames on HTTP/1.1, raw bytes on HTTP/1.0. The
// response head goes out with the first write (one segment, one send), or when the provider
// returns without writing.
class ConnectionSink : public StreamSink {
 public:
  ConnectionSink(Connection& conn, std::string head, bool chunked)
      : conn_(conn), head_(std::move(head)), chunked_(chunked) {}
  bool write(std::string_view data) override {
    if (data.empty()) return head_.empty() ? conn_.send("", true) : flush_head();
    if (head_.empty() && !chunked_) return conn_.send(data, true);
    std::string bytes = std::move(head_);
    head_.clear();
    if (chunked_) {
      bytes += chunk_frame(data);
    } else {
      bytes.append(data);
    }
    return conn_.send(bytes, true);
  }
  void done() override { done_ = true; }
  bool is_done() const { return done_; }
  // Sends the head if no write did.
  bool flush_head() {
    if (head_.empty()) return true;
    const std::string head = std::move(head_);
    head_.clear();
    return conn_.send(head, false);
  }

 private:
  Connection& conn_;
  std::string head_;
  const bool chunked_;
  bool done_ = false;
};

}  // namespace

Connection::Connection(ServerCore& core, tcp::socket socket, std::string ip)
    : core_(core), socket_(std::move(socket)), ip_(std::move(ip)), timer_(socket_.get_executor()) {}

Connection::~Connection() {
  {
    std::lock_guard<std::mutex> lock(core_.mu);
    core_.live.erase(this);
  }
  core_.release(ip_);
}

void Connection::start() {
  {
    std::lock_guard<std::mutex> lock(core_.mu);
    core_.live[this] = weak_from_this();
  }
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->parse_io(); });
}

void Connection::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
  gone_->store(true);
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->close_io(); });
}

void Connection::arm(Phase phase, int ms) {
  phase_ = phase;
  const unsigned gen = ++timer_gen_;
  timer_.expires_after(std::chrono::milliseconds(ms));
  timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) {
    if (!ec && gen == self->timer_gen_) self->on_timer();
  });
}

void Connection::disarm() {
  ++timer_gen_;
  timer_.cancel();
}

void Connection::on_timer() {
  switch (phase_) {
    case Phase::kNone:
      return;
    case Phase::kIdle:
    case Phase::kLingering:
      close_io();
      return;
    case Phase::kRequest:
      core_.timed_out.fetch_add(1);
      refuse_io(408,
                "the request was not complete within " +
                    std::to_string(core_.options.request_timeout_ms / 1000) + " s",
                true, nullptr);
      return;
    case Phase::kHandling:  // a write made no progress: the client stopped reading
      mark_gone();
      close_io();
      return;
  }
}

void Connection::read_io() {
  if (reading_ || closed_io_ || eof_) return;
  if (busy_ && in_.size() >= kPipelineBytes) return;  // resumed after the answer
  reading_ = true;
  socket_.async_read_some(
      net::buffer(read_buf_),
      [self = shared_from_this()](const error_code& ec, size_t n) { self->on_read(ec, n); });
}

void Connection::on_read(const error_code& ec, size_t n) {
  reading_ = false;
  if (closed_io_) return;
  if (ec) {
    mark_gone();  // end of stream or a failure: either way nothing more comes
    if (phase_ == Phase::kLingering) return close_io();
    if (!busy_) parse_io();  // answers what is complete in the buffer, then closes
    return;
  }
  if (phase_ == Phase::kLingering) return read_io();  // drained and dropped
  net::buffer_copy(in_.prepare(n), net::buffer(read_buf_.data(), n));
  in_.commit(n);
  if (busy_) return read_io();
  parse_io();
}

void Connection::parse_io() {
  while (!busy_ && !closed_io_) {
    if (in_.size() == 0) {
      if (eof_) return close_io();
      if (!parser_ && phase_ != Phase::kIdle) arm(Phase::kIdle, core_.options.idle_timeout_ms);
      return read_io();
    }
    if (!parser_) {
      parser_.emplace();
      parser_->header_limit(static_cast<std::uint32_t>(core_.options.max_head_bytes));
      parser_->body_limit(core_.options.max_body_bytes);
      parser_->eager(true);
      head_checked_ = false;
      arm(Phase::kRequest, core_.options.request_timeout_ms);
    }
    if (!parser_->got_some()) {  // the request line is not parsed yet: is it all here?
      const std::string_view seen(static_cast<const char*>(in_.data().data()),
                                  std::min(in_.size(), core_.options.max_head_bytes));
      line_complete_ = seen.find("\r\n") != std::string_view::npos;
    }
    error_code ec;
    const size_t used = parser_->put(in_.data(), ec);
    in_.consume(used);
    if (ec == bhttp::error::need_more) {
      if (eof_) return close_io();  // a partial request and nothing more will come
      return read_io();
    }
    if (ec) {
      core_.bad_requests.fetch_add(1);
      int status = 400;
      std::string reason = "malformed request (" + ec.message() + ")";
      if (ec == bhttp::error::body_limit) {
        status = 413;
        reason = "request body over " + std::to_string(core_.options.max_body_bytes) + " bytes";
      } else if (ec == bhttp::error::header_limit) {
        status = line_complete_ ? 431 : 414;  // the request line alone is over: the target
        reason = "request head over " + std::to_string(core_.options.max_head_bytes) + " bytes";
      } else if (ec == bhttp::error::bad_content_length ||
                 ec == bhttp::error::bad_transfer_encoding) {
        reason =
            "ambiguous message framing: send either one Content-Length or "
            "Transfer-Encoding: chunked (" +
            ec.message() + ")";
      }
      return refuse_io(status, reason, true, nullptr);
    }
    if (parser_->is_header_done() && !head_checked_ && !check_head_io()) return;
    if (parser_->is_done()) return dispatch_io();
    if (used == 0) return read_io();
  }
}

bool Connection::check_head_io() {
  head_checked_ = true;
  const auto& h = parser_->get();
  version_ = h.version() == 10 ? 10 : 11;
  auto refuse = [this](const std::string& reason) {
    core_.bad_requests.fetch_add(1);
    refuse_io(400, reason, true, nullptr);
    return false;
  };
  if (h.version() != 10 && h.version() != 11) return refuse("only HTTP/1.0 and HTTP/1.1");
  const auto cl = h.find(bhttp::field::content_length);
  if (h.count(bhttp::field::content_length) > 1 ||
      (cl != h.end() && cl->value().find(',') != boost::beast::string_view::npos)) {
    return refuse("ambiguous message framing: Content-Length is repeated");
  }
  if (h.count(bhttp::field::transfer_encoding) > 0 && !parser_->chunked()) {
    return refuse("Transfer-Encoding other than chunked is not accepted on requests");
  }
  if (h.count(bhttp::field::host) > 1) return refuse("more than one Host field");
  const auto expect = h.find(bhttp::field::expect);
  if (expect != h.end() && version_ == 11 && !parser_->is_done()) {
    if (!iequals(std::string_view(expect->value().data(), expect->value().size()),
                 "100-continue")) {
      return refuse("Expect other than 100-continue");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      pending_.append(kContinue);
      unsent_ += kContinue.size();
    }
    flush_io();
  }
  return true;
}

void Connection::dispatch_io() {
  busy_ = true;
  core_.requests.fetch_add(1);
  auto msg = parser_->release();
  parser_.reset();
  auto req = std::make_shared<Request>();
  req->method = std::string(msg.method_string());
  req->target = std::string(msg.target());
  split_target(req->target, &req->path, &req->query);
  for (const auto& f : msg) {
    req->headers.add(std::string(f.name_string()), std::string(f.value()));
  }
  req->body = std::move(msg.body());
  req->version = version_;
  req->remote_ip = ip_;
  req->gone = gone_;
  const bool keep_alive = msg.keep_alive();
  disarm();
  phase_ = Phase::kHandling;
  const bool queued = core_.pool->try_submit(
      [self = shared_from_this(), req, keep_alive] { self->run_request(*req, keep_alive); });
  if (!queued) {
    core_.overloaded.fetch_add(1);
    refuse_io(503, "the server is answering as many requests as it can; retry shortly", !keep_alive,
              req.get());
  }
  read_io();  // notices a client that leaves; buffers what it pipelines
}

void Connection::run_request(Request& req, bool keep_alive) {
  Response res;
  core_.handle(req, res);
  const bool streamed = res.stream && req.method != "HEAD" && status_has_body(res.status);
  if (!streamed) res.stream = nullptr;
  // An HTTP/1.0 stream has no chunked encoding: its end is the connection's end.
  const bool close = !keep_alive || (streamed && req.version == 10);
  std::string head = response_head(res, core_.options.default_headers, req.version, !close);
  if (!streamed) {
    if (req.method != "HEAD" && status_has_body(res.status)) head += res.body;
    send(head, false);
    return end_response(close);
  }
  ConnectionSink sink(*this, std::move(head), req.version >= 11);
  try {
    res.stream(sink);
  } catch (...) {
    // Treated like a provider that returned early: the body stays cut.
  }
  sink.flush_head();
  if (!sink.is_done()) return end_response(true);  // cut: no last chunk, the client knows
  if (req.version >= 11) send(kLastChunk, false);
  end_response(close);
}

bool Connection::send(std::string_view bytes, bool fail_on_eof) {
  std::unique_lock<std::mutex> lock(mu_);
  auto failed = [&] { return closed_ || (fail_on_eof && gone_->load()); };
  if (failed()) return false;
  // Nothing queued before these bytes: they go to the socket from this thread, without waking
  // the event loop (non-blocking; the socket cannot close meanwhile, close_io() takes mu_).
  // Only what the kernel does not take now is left to the event loop.
  if (pending_.empty() && !write_in_flight_ && !bytes.empty()) {
    const ssize_t n =
        ::send(socket_.native_handle(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) bytes.remove_prefix(static_cast<size_t>(n));
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      closed_ = true;  // the client is gone; the event loop closes the socket
      gone_->store(true);
      net::post(socket_.get_executor(), [self = shared_from_this()] { self->close_io(); });
      return false;
    }
    if (bytes.empty()) return true;
  }
  unsent_ += bytes.size();
  pending_ += bytes;
  if (!flush_posted_) {
    flush_posted_ = true;
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->flush_io(); });
  }
  // The strand's write timeout closes a connection whose client stopped reading; this wait's
  // own bound only guards against a stopped event loop.
  cv_.wait_for(lock, std::chrono::milliseconds(core_.options.write_timeout_ms + 1000),
               [&] { return closed_ || unsent_ <= kHighWater; });
  return !failed();
}

void Connection::end_response(bool close_after) {
  std::lock_guard<std::mutex> lock(mu_);
  response_ended_ = true;
  close_after_ = close_after;
  if (!flush_posted_) {
    flush_posted_ = true;
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->flush_io(); });
  }
}

void Connection::refuse_io(int status, const std::string& reason, bool close, const Request* req) {
  busy_ = true;
  parser_.reset();
  Request empty;
  empty.version = version_;
  Response res;
  res.status = status;
  res.reason = reason;
  if (status == 503) res.set_header("Retry-After", "1");
  core_.fill_error(req ? *req : empty, res);
  res.stream = nullptr;
  std::string bytes = response_head(res, core_.options.default_headers, version_, !close);
  if (status_has_body(status)) bytes += res.body;
  {
    std::lock_guard<std::mutex> lock(mu_);
    unsent_ += bytes.size();
    pending_ += bytes;
    response_ended_ = true;
    close_after_ = close;
  }
  flush_io();
}

void Connection::flush_io() {
  std::unique_lock<std::mutex> lock(mu_);
  flush_posted_ = false;
  if (closed_io_ || write_in_flight_) return;
  if (pending_.empty()) {
    if (!response_ended_) return;
    response_ended_ = false;
    const bool close = close_after_;
    lock.unlock();
    return after_response_io(close);
  }
  writing_.swap(pending_);
  pending_.clear();
  write_in_flight_ = true;
  lock.unlock();
  if (busy_) arm(Phase::kHandling, core_.options.write_timeout_ms);
  net::async_write(
      socket_, net::buffer(writing_),
      [self = shared_from_this()](const error_code& ec, size_t) { self->on_written(ec); });
}

void Connection::on_written(const error_code& ec) {
  if (ec) {
    mark_gone();
    return close_io();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    unsent_ -= writing_.size();
    writing_.clear();
    write_in_flight_ = false;
  }
  cv_.notify_all();
  if (busy_ && phase_ == Phase::kHandling) disarm();
  flush_io();
}

void Connection::after_response_io(bool close) {
  busy_ = false;
  disarm();
  phase_ = Phase::kNone;  // parse_io arms what comes next
  if (close) return linger_io();
  parse_io();
}

void Connection::linger_io() {
  // Half-close, then drain what the client still sends for a moment: closing a socket with
  // unread input makes the kernel send a reset, which can destroy our answer before the
  // client reads it.
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  in_.consume(in_.size());
  if (eof_) return close_io();
  arm(Phase::kLingering, kLingerMs);
  read_io();
}

void Connection::close_io() {
  if (closed_io_) return;
  closed_io_ = true;
  disarm();
  {
    // Under mu_: a worker writing straight to the socket never sees its descriptor reused.
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }
  cv_.notify_all();
  gone_->store(true);
}

void Connection::mark_gone() {
  eof_ = true;
  gone_->store(true);
}

}  // namespace glm::http
