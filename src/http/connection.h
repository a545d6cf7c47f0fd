// One client connection: reads requests with Beast's parser on its strand, hands complete ones
// to the worker pool one at a time (pipelined requests wait in the buffer, so answers go out in
// order), and writes what the worker queues. Internal to the http module.
//
// Threads: everything named on_* / *_io runs on the connection's strand (an event-loop
// thread). Worker threads call only send() and end_response(), under `mu_`: send() writes to
// the socket's descriptor itself when nothing is queued (no event-loop hop per SSE event) and
// queues the rest for the strand; the strand closes the socket under `mu_`.
//
// Phases and their one timer: idle (waiting for a request: idle timeout), request (first byte
// seen: one deadline for head and body), handling (a worker owns the request: no read
// deadline; each write has the write timeout), lingering (closing: the client's last bytes
// are drained for a moment so it reads our answer instead of a reset).
#pragma once

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"
#include "http/server_core.h"

namespace glm::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `socket` must have been admitted (ServerCore::admit) for `ip`; the destructor releases it.
  Connection(ServerCore& core, tcp::socket socket, std::string ip);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start();  // any thread
  void stop();   // any thread: closes now; workers' writes fail from here on

  // Worker side. send() queues bytes and waits while more than kHighWater are unsent; false
  // once the connection is gone (or the client closed its side, when `fail_on_eof`).
  bool send(std::string_view bytes, bool fail_on_eof);
  // The response is complete: after its bytes are written the next request is read, or the
  // connection closes when `close_after`.
  void end_response(bool close_after);

 private:
  enum class Phase { kNone, kIdle, kRequest, kHandling, kLingering };

  void arm(Phase phase, int ms);
  void disarm();
  void on_timer();
  void read_io();
  void on_read(const boost::system::error_code& ec, size_t n);
  void parse_io();
  bool check_head_io();
  void dispatch_io();
  void run_request(Request& req, bool keep_alive);  // worker thread
  // Answers `status` itself (the error handler writes the body), then reads on or closes.
  void refuse_io(int status, const std::string& reason, bool close, const Request* req);
  void flush_io();
  void on_written(const boost::system::error_code& ec);
  void after_response_io(bool close);
  void linger_io();
  void close_io();
  void mark_gone();

  ServerCore& core_;
  tcp::socket socket_;
  const std::string ip_;
  net::steady_timer timer_;
  unsigned timer_gen_ = 0;
  Phase phase_ = Phase::kNone;

  // Strand-only state. Reads land in read_buf_ and are appended to in_, so that the parser
  // may consume in_ while a read is pending.
  std::array<char, 16 << 10> read_buf_{};
  boost::beast::flat_buffer in_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool head_checked_ = false;
  bool line_complete_ = false;  // the request line fits the head limit
  bool reading_ = false;
  bool busy_ = false;  // a request is being answered
  bool eof_ = false;   // the client closed its sending side (or failed)
  bool closed_io_ = false;
  int version_ = 11;
  std::shared_ptr<std::atomic<bool>> gone_ = std::make_shared<std::atomic<bool>>(false);

  // Shared with workers, under mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;  // queued, not yet handed to the socket
  std::string writing_;  // being written
  size_t unsent_ = 0;    // pending_ + writing_
  bool write_in_flight_ = false;
  bool flush_posted_ = false;
  bool response_ended_ = false;
  bool close_after_ = false;
  bool closed_ = false;
};

}  // namespace glm::http
