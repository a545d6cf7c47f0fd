// LiveAnswer: one page answer being generated, owned by the gateway rather than by the HTTP
// connection that asked for it (docs/gateway.md, "Live answers"). Its generation thread
// publishes the page's SSE payloads (start, queued, prefill, token..., done | error); each gets
// an event id, its index. Any number of subscribers (the POST that started it, a reload's GET
// .../live) read from any id on, wait for more, and leave when they like: leaving never stops
// the answer. A read hands over consecutive token events as one (a reload replays a long answer
// in a few frames, not one per token).
//
// LiveAnswers: the registry, at most one live answer per conversation, each generated on a
// thread of its own that the registry joins.
//
// Thread-safety: every method of both may be called from any thread. Cost: the payloads of one
// answer stay in memory until it ends (~40 bytes a token); a read copies what it returns.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"

namespace glm::gateway {

class LiveAnswer {
 public:
  LiveAnswer(std::string conversation_id, std::string request_id, int64_t answer_id);

  const std::string& conversation_id() const { return conversation_id_; }
  const std::string& request_id() const { return request_id_; }
  int64_t answer_id() const { return answer_id_; }

  // The generation thread: one payload ({"type": ...}) at a time, then, once, the last one
  // (done or error, the answer already stored), which ends the answer.
  void publish(const nlohmann::json& payload);
  void end(const nlohmann::json& last);

  // What a subscriber got: SSE frames ("id: N\ndata: {...}\n\n"), tokens merged, and the id to
  // read from next.
  struct Read {
    std::string frames;
    size_t next = 0;
    bool ended = false;  // and nothing after `next` is left
  };
  // The events from id `from` on; waits up to `timeout_ms` when there is none yet.
  Read read_from(size_t from, int timeout_ms);
  size_t published() const;
  bool ended() const;

  // Subscribers count themselves in and out; detached_ms() is how long the answer has had none
  // (0 while one reads; a new answer counts from its creation).
  void attach();
  void detach();
  int followers() const;
  double detached_ms() const;

  // Set before cancelling an answer because the gateway stops: it is stored as interrupted.
  void mark_shutdown() { shutdown_ = true; }
  bool shutdown() const { return shutdown_; }

 private:
  struct Event {
    std::string payload;     // the JSON text
    bool token = false;      // a token event (merged with its neighbours on reads)
    std::string token_text;  // its text
  };
  static Event make_event(const nlohmann::json& payload);

  const std::string conversation_id_, request_id_;
  const int64_t answer_id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  bool ended_ = false;
  int subscribers_ = 0;
  std::chrono::steady_clock::time_point detached_at_ = std::chrono::steady_clock::now();
  std::atomic<bool> shutdown_{false};
};

class LiveAnswers {
 public:
  LiveAnswers() = default;
  ~LiveAnswers();  // joins every thread (their answers must have been ended or cancelled)
  LiveAnswers(const LiveAnswers&) = delete;
  LiveAnswers& operator=(const LiveAnswers&) = delete;

  // Registers `answer` and runs `generate` on a thread of its own; the answer leaves the
  // registry when `generate` returns (it must have called end()). kInvalidArgument if its
  // conversation already has a live answer that has not ended, kUnavailable after close().
  Status start(const std::shared_ptr<LiveAnswer>& answer, std::function<void()> generate);
  // The live answer of a conversation (possibly just ended), or null.
  std::shared_ptr<LiveAnswer> find(const std::string& conversation_id) const;
  std::vector<std::shared_ptr<LiveAnswer>> all() const;
  size_t size() const;
  // No answer starts after this (the gateway stops): all() then lists every one still running.
  void close();
  // Waits until no answer is live, at most `timeout_ms`; true if none is.
  bool wait_idle(int timeout_ms);
  // Joins the threads of answers that ended (all of them: waits for every one).
  void join_all();

 private:
  struct Runner {
    std::thread thread;
    bool done = false;  // guarded by mu_
  };
  void reap_locked(std::vector<std::thread>* finished);
  Status add_locked(const std::shared_ptr<LiveAnswer>& answer, std::function<void()> generate);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<LiveAnswer>> by_conversation_;
  std::list<Runner> runners_;
  bool closed_ = false;
};

}  // namespace glm::gateway
