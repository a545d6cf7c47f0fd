// FakeEngine: a scripted engine on a Unix socket for the gateway's tests. It speaks the real
// protocol (protocol.h) and answers by keywords in the last message:
//   [slow]  200 tokens, 20 ms apart (stop and disconnect tests); [medium] 40 of them
//           ("w0 " ... "w39 ": re-attach, drain and continue tests)
//   [xss]   an answer with <script> and <img onerror> in it
//   [zh]    Chinese text
//   [tool]  a call of the request's first tool as GLM-4 writes it ("NAME\n{json}"), with
//           arguments {"city": "Paris"}; [tool-py] the same as ChatGLM3 writes it (a Python
//           tool_call block); without tools an echo. Each piece counts as a token: a
//           max_tokens below the pieces cuts the call there, finish_reason length
//   [tool-pieces]  with tools: the text "just words" whose pieces (Event::tool) are a call of the
//           first tool with {"city": "Rome"}: what the gateway sends is the engine's reading
//   [busy]  refused at once with code busy
//   [crash] three tokens, then the connection is dropped (an engine crash)
//   [crash-once]  the same, on a request that is not a resume
//   [drained-once]  three tokens, then done cancelled unasked (a drain bound), when not a resume
//   [lost-once]  three tokens, then the error an engine whose GPU was lost sends (unavailable,
//           "restart"), when not a resume; [lost] every time; [failed-once] the same error
//           without "restart"
//   [resume]  token events carry ids (a piece's index); a resumed request goes on after its
//           resume ids, whatever the keyword (tokenize gives one id a word, from 0)
//   [trim]  a notice that history was trimmed, then an answer
//   else    "Echo: <the message>" in small pieces
// It records every request, and every request that ended by a cancel line or by its client's
// connection closing. Test-only (built into gateway_test).
// Thread-safety: all public methods may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "protocol/protocol.h"

namespace glm::gateway::testing {

class FakeEngine {
 public:
  explicit FakeEngine(std::string socket_path);
  ~FakeEngine();

  // Listening starts in the constructor; stop() closes the socket and every connection (like a
  // crash); start() listens again (like a restart).
  void start();
  void stop();

  const std::string& socket_path() const { return path_; }
  std::vector<protocol::Request> requests();
  // Ids of generate requests that ended because of a cancel line / a closed connection.
  std::set<std::string> cancelled();
  // Waits up to `timeout_ms` for `id` to be cancelled; true if it was.
  bool wait_cancelled(const std::string& id, int timeout_ms);
  // `load_done` / `load_total`: the loading bytes its health reports (0, 0: none).
  void set_health(generation::Health status, uint64_t load_done = 0, uint64_t load_total = 0);

 private:
  struct Conn;
  void accept_loop(int listen_fd);
  void serve_conn(std::shared_ptr<Conn> conn);
  // `flag`: set when the request is cancelled (a cancel line, or its connection closing).
  void generate(std::shared_ptr<Conn> conn, protocol::Request req,
                std::shared_ptr<std::atomic<bool>> flag);

  std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::vector<std::shared_ptr<Conn>> conns_;
  std::vector<std::thread> threads_;
  std::vector<protocol::Request> requests_;
  std::set<std::string> cancelled_;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> cancel_flags_;
  generation::Health health_ = generation::Health::kReady;
  uint64_t load_done_ = 0, load_total_ = 0;
};

}  // namespace glm::gateway::testing
