// EngineClient: the gateway's side of the engine socket (docs/protocol.md, protocol v1).
// One Unix-socket connection per generation request: a request that dies with its connection
// never takes another one down, and a restarted engine is picked up by the next connect with no
// reconnection state to repair. A connect costs ~20 us on loopback, far below one token.
//
//   EngineClient client("/run/glmserve.sock");
//   auto stream = client.start(request);               // connects, sends one request line
//   while (true) {
//     auto ev = stream->next(500);                     // waits up to 500 ms for an event
//     if (!ev.ok()) ...                                // the engine went away: ev.status()
//     if (!ev->has_value()) ...                        // timeout: check the HTTP client
//   }
//
// Thread-safety: EngineClient is immutable and may be shared. An EngineStream is used by one
// thread at a time, except cancel(), which any thread may call while another reads.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "protocol/protocol.h"

namespace glm::gateway {

class EngineStream {
 public:
  // Takes ownership of the connected socket `fd`, on which `request` was sent.
  EngineStream(int fd, protocol::Request request);
  ~EngineStream();
  EngineStream(const EngineStream&) = delete;
  EngineStream& operator=(const EngineStream&) = delete;

  const std::string& id() const { return request_.id; }
  // The request this stream answers, as sent (a resume sends it again: EngineClient::resume).
  const protocol::Request& request() const { return request_; }
  // The engine socket it was sent to (a resume goes there again).
  const std::string& socket_path() const { return socket_path_; }
  // The next event line of this connection, nullopt after `timeout_ms` without one (-1 = wait
  // forever). kUnavailable if the engine closed the connection or sent an unreadable line.
  StatusOr<std::optional<protocol::Event>> next(int timeout_ms);
  // Sends a cancel for this request (once; later calls do nothing). The stream then ends with a
  // done event whose finish_reason is "cancelled". Safe from any thread; never blocks long.
  void cancel();
  bool cancel_sent() const;

 private:
  friend class EngineClient;
  // Replaces the connection with `fd` (a resumed request was sent on it); a cancel sent
  // meanwhile is sent again on it. The reading thread only.
  void adopt(int fd);

  int fd_;  // written by the reading thread, under write_mutex_
  protocol::Request request_;
  std::string socket_path_;  // set by EngineClient::start
  std::string buffer_;       // bytes read but not yet returned as lines
  mutable std::mutex write_mutex_;
  bool cancel_sent_ = false;  // guarded by write_mutex_
};

class EngineClient {
 public:
  explicit EngineClient(std::string socket_path) : socket_path_(std::move(socket_path)) {}

  const std::string& socket_path() const { return socket_path_; }

  // Connects and sends `request` (serialized with protocol::serialize_request). kUnavailable,
  // with a message that says how to start the engine, if nothing listens on the socket.
  StatusOr<std::unique_ptr<EngineStream>> start(const protocol::Request& request) const;

  // After the engine went away mid-answer: connects again and sends the stream's request with
  // `generated` (the token ids its token events carried) appended to its own "resume"
  // (docs/protocol.md), on a
  // connection `stream` then reads. kUnavailable if nothing listens yet.
  Status resume(EngineStream* stream, const std::vector<int32_t>& generated) const;

  // One request with a one-line reply (health, stats, tokenize), on its own connection, within
  // `timeout_ms`. kUnavailable if the engine cannot be reached or does not answer in time.
  StatusOr<protocol::Event> query(const protocol::Request& request, int timeout_ms) const;

 private:
  StatusOr<int> connect_socket() const;

  std::string socket_path_;
};

}  // namespace glm::gateway
