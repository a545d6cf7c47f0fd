#include "daemon/daemon.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/utf8.h"
#include "testing/echo_engine.h"
#include "testing/test_client.h"

namespace glm::daemon {
namespace {

using protocol::EventType;
using testing::EchoEngine;
using testing::EchoOptions;
using testing::joined_text;
using testing::TestClient;

// Wraps an engine and records how each request ended (finish reason or error code name).
class RecordingEngine : public engine::Engine {
 public:
  explicit RecordingEngine(std::unique_ptr<engine::Engine> inner) : inner_(std::move(inner)) {}
  Status submit(engine::Request request, engine::EventSink sink) override {
    const std::string id = request.id;
    return inner_->submit(std::move(request), [this, id, sink](const engine::Event& ev) {
      if (ev.type == engine::EventType::kDone || ev.type == engine::EventType::kError) {
        std::lock_guard<std::mutex> lock(mu_);
        endings_[id] = ev.type == engine::EventType::kDone
                           ? generation::finish_reason_name(ev.finish_reason)
                           : error_code_name(ev.error.code());
        cv_.notify_all();
      }
      sink(ev);
    });
  }
  void cancel(const std::string& id) override { inner_->cancel(id); }
  engine::Stats stats() const override { return inner_->stats(); }
  engine::Health health() const override { return inner_->health(); }
  std::vector<int32_t> tokenize(const std::string& t) const override { return inner_->tokenize(t); }
  std::string detokenize(const std::vector<int32_t>& ids, bool special) const override {
    return inner_->detokenize(ids, special);
  }
  StatusOr<std::vector<int32_t>> prompt_tokens(engine::Request r) const override {
    return inner_->prompt_tokens(std::move(r));
  }
  int n_ctx() const override { return inner_->n_ctx(); }
  std::string model_name() const override { return inner_->model_name(); }
  bool drain(std::chrono::milliseconds bound) override { return inner_->drain(bound); }

  // How the request whose engine id ends with "/<client_id>" ended; "" if not within the wait.
  std::string wait_ending(const std::string& client_id, int timeout_ms = 10000) {
    std::unique_lock<std::mutex> lock(mu_);
    std::string found;
    cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
      // The engine sees the client's id: ids are unique per engine.
      auto it = endings_.find(client_id);
      if (it == endings_.end()) return false;
      found = it->second;
      return true;
    });
    return found;
  }

 private:
  std::unique_ptr<engine::Engine> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> endings_;
};

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-daemon-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.socket_path = dir_ + "/engine.sock";
  }
  void TearDown() override {
    daemon_.reset();
    ::unlink(options_.socket_path.c_str());
    ::rmdir(dir_.c_str());
  }

  // Starts a daemon; with `echo` set, an echo engine behind a recorder is attached at once.
  void start(std::optional<EchoOptions> echo = EchoOptions{}) {
    daemon_ = std::make_unique<Daemon>(options_);
    ASSERT_TRUE(daemon_->listen().ok());
    daemon_->start();
    if (echo) attach(*echo);
  }
  void attach(const EchoOptions& echo) {
    auto rec = std::make_unique<RecordingEngine>(std::make_unique<EchoEngine>(echo));
    recorder_ = rec.get();
    daemon_->set_engine(std::move(rec));
  }

  std::string dir_;
  DaemonOptions options_;
  std::unique_ptr<Daemon> daemon_;
  RecordingEngine* recorder_ = nullptr;
};

std::string chat(const std::string& id, const std::string& content, const std::string& extra = "") {
  return R"({"id":")" + id + R"(","messages":[{"role":"user","content":")" + content + "\"}]" +
         extra + "}";
}

TEST_F(DaemonTest, StreamsWholeCharactersAndDone) {
  start();
  TestClient c(options_.socket_path);
  ASSERT_TRUE(c.connected()) << c.connect_status().to_string();
  const std::string reply = "héllo, 你好 🙂!";
  ASSERT_TRUE(c.send(chat("r1", reply)));
  auto events = c.until_final("r1");
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front().type, EventType::kQueued);
  EXPECT_EQ(events[1].type, EventType::kStart);
  EXPECT_GT(events[1].usage.prompt_tokens, 0);
  int n_tokens = 0;
  for (const auto& e : events) {
    if (e.type != EventType::kToken) continue;
    ++n_tokens;
    EXPECT_TRUE(utf8_valid(e.text)) << "split character";
  }
  EXPECT_EQ(joined_text(events), reply);
  const auto& done = events.back();
  ASSERT_EQ(done.type, EventType::kDone);
  EXPECT_EQ(done.finish_reason, generation::FinishReason::kStop);
  EXPECT_EQ(done.usage.completion_tokens, n_tokens);
  EXPECT_EQ(done.usage.prompt_tokens, events[1].usage.prompt_tokens);
  EXPECT_GE(done.timings.total_ms, done.timings.ttft_ms);
}

TEST_F(DaemonTest, AssignsIdsAndAcceptsLegacyShape) {
  start();
  TestClient c(options_.socket_path);
  ASSERT_TRUE(c.send(R"({"messages":[{"role":"user","content":"hi"}]})"));
  auto first = c.next();
  ASSERT_TRUE(first.has_value());
  ASSERT_FALSE(first->id.empty());
  auto rest = c.until_final(first->id);
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back().type, EventType::kDone);
  EXPECT_EQ(joined_text(rest), "hi");

  ASSERT_TRUE(c.send(R"({"id":"legacy","prompt":"next","history":[["q","a"]],"max_length":3})"));
  auto legacy = c.until_final("legacy");
  ASSERT_FALSE(legacy.empty());
  EXPECT_EQ(legacy.back().finish_reason, generation::FinishReason::kLength);
  EXPECT_EQ(joined_text(legacy), "nex");
}

TEST_F(DaemonTest, SeveralRequestsOnOneConnectionInterleave) {
  EchoOptions echo;
  echo.token_delay_ms = 2;
  start(echo);
  TestClient c(options_.socket_path);
  ASSERT_TRUE(c.send(chat("a", "aaaaaaaaaa") + "\n" + chat("b", "bbbbbbbbbb")));
  std::map<std::string, std::string> text;
  std::map<std::string, bool> done;
  std::vector<std::string> order;
  while (!(done["a"] && done["b"])) {
    auto ev = c.next();
    ASSERT_TRUE(ev.has_value()) << "stream ended before both requests finished";
    if (ev->type == EventType::kToken) {
      text[ev->id] += ev->text;
      order.push_back(ev->id);
    }
    if (ev->type == EventType::kDone) done[ev->id] = true;
  }
  EXPECT_EQ(text["a"], "aaaaaaaaaa");
  EXPECT_EQ(text["b"], "bbbbbbbbbb");
  // Batched: b's tokens started before a finished.
  auto first_b = std::find(order.begin(), order.end(), "b");
  auto last_a = std::find(order.rbegin(), order.rend(), "a").base();
  EXPECT_LT(first_b - order.begin(), last_a - order.begin());
}

TEST_F(DaemonTest, EveryBadInputGetsItsErrorAndTheConnectionKeepsServing) {
  options_.max_line_bytes = 4096;
  start();
  TestClient c(options_.socket_path);
  struct Case {
    std::string line;
    const char* code;
    std::string id;  // expected id on the error ("" = null)
  };
  const std::vector<Case> cases = {
      {"this is not json", "invalid_argument", ""},
      {"[1,2,3]", "invalid_argument", ""},
      {std::string("{\"id\":\"u\",\"prompt\":\"\xff\"}"), "invalid_argument", ""},
      {std::string(50, '[') + std::string(50, ']'), "invalid_argument", ""},
      {R"({"id":"t1","messages":"hi"})", "invalid_argument", "t1"},
      {R"({"id":"t2","messages":[{"role":"robot","content":"x"}]})", "invalid_argument", "t2"},
      {R"({"id":"t3","messages":[{"role":"user","content":"x"}],"params":{"temperature":7}})",
       "invalid_argument", "t3"},
      {R"({"id":"t4","messages":[{"role":"user","content":"x"}],"params":{"top_k":"5"}})",
       "invalid_argument", "t4"},
      {R"({"id":"t5","type":"explode"})", "invalid_argument", "t5"},
      {R"({"id":"t6","v":9,"prompt":"x"})", "unsupported", "t6"},
      {R"({"id":"t7","messages":[{"role":"user","content":"x"}],"extra":1})", "invalid_argument",
       "t7"},
      {R"({"id":"t8","type":"cancel","id":""})", "invalid_argument", ""},
  };
  for (const Case& k : cases) {
    ASSERT_TRUE(c.send(k.line));
    auto ev = c.next();
    ASSERT_TRUE(ev.has_value()) << "no reply to: " << k.line;
    EXPECT_EQ(ev->type, EventType::kError) << k.line;
    EXPECT_EQ(error_code_name(ev->code), std::string(k.code)) << k.line;
    EXPECT_EQ(ev->id, k.id) << k.line;
    EXPECT_FALSE(ev->message.empty());
    auto health = c.query(R"({"type":"health","id":"h"})");
    ASSERT_TRUE(health.has_value()) << "connection dead after: " << k.line;
    EXPECT_EQ(health->health, generation::Health::kReady);
  }
  // A line over the limit, sent in pieces, is one error; the next line is served.
  ASSERT_TRUE(c.send_raw(chat("big", std::string(3000, 'x'))));
  ASSERT_TRUE(c.send(std::string(3000, 'y')));
  auto big = c.next();
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->type, EventType::kError);
  EXPECT_NE(big->message.find("exceeds 4096 bytes"), std::string::npos) << big->message;
  ASSERT_TRUE(c.send(chat("after", "ok")));
  auto after = c.until_final("after");
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(joined_text(after), "ok");
}

TEST_F(DaemonTest, DuplicateIdInFlightIsRefused) {
  EchoOptions echo;
  echo.token_delay_ms = 5;
  echo.n_ctx = 1 << 30;
  start(echo);
  TestClient c(options_.socket_path);
  ASSERT_TRUE(c.send(chat("same", std::string(200, 'z'))));
  ASSERT_TRUE(c.send(chat("same", "again")));
  bool refused = false;
  for (;;) {
    auto ev = c.next();
    ASSERT_TRUE(ev.has_value());
    if (ev->type == EventType::kError) {
      EXPECT_EQ(ev->code, ErrorCode::kInvalidArgument);
      EXPECT_NE(ev->message.find("already in flight"), std::string::npos);
      refused = true;
    }
    if (ev->type == EventType::kDone) break;
  }
  EXPECT_TRUE(refused);
}

TEST_F(DaemonTest, IdsAreUniquePerEngineNotPerConnection) {
  EchoOptions echo;
  echo.token_delay_ms = 5;
  echo.n_ctx = 1 << 30;
  start(echo);
  TestClient a(options_.socket_path);
  TestClient b(options_.socket_path);
  ASSERT_TRUE(a.send(chat("shared", std::string(200, 'z'))));
  auto first = a.next();  // queued: the id is in flight now
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(b.send(chat("shared", "mine")));
  auto refused = b.next();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->type, EventType::kError);
  EXPECT_NE(refused->message.find("already in flight on this engine"), std::string::npos)
      << refused->message;
  // A's request is untouched and still completes.
  auto rest = a.until_final("shared");
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back().type, EventType::kDone);
  EXPECT_EQ(rest.back().finish_reason, generation::FinishReason::kStop);
}

TEST_F(DaemonTest, OneRequestFailureDoesNotHurtOthers) {
  start();
  TestClient c(options_.socket_path);
  ASSERT_TRUE(c.send(chat("bad", "__fail__ please")));
  auto bad = c.until_final("bad");
  ASSERT_FALSE(bad.empty());
  EXPECT_EQ(bad.back().type, EventType::kError);
  EXPECT_EQ(bad.back().code, ErrorCode::kInternal);
  ASSERT_TRUE(c.send(chat("good", "fine")));
  auto good = c.until_final("good");
  ASSERT_FALSE(good.empty());
  EXPECT_EQ(good.back().type, EventType::kDone);
}

TEST_F(DaemonTest, DisconnectCancelsItsRequests) {
  EchoOptions echo;
  echo.token_delay_ms = 5;
  echo.n_ctx = 1 << 30;
  start(echo);
  {
    TestClient c(options_.socket_path);
    ASSERT_TRUE(c.send(chat("gone", std::string(100000, 'g'))));
    for (;;) {  // wait until it streams
      auto ev = c.next();
      ASSERT_TRUE(ev.has_value());
      if (ev->type == EventType::kToken) break;
    }
  }  // closes the socket
  EXPECT_EQ(recorder_->wait_ending("gone"), "cancelled");
  TestClient d(options_.socket_path);
  auto stats = d.query(R"({"type":"stats"})");
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->stats.running, 0);
  EXPECT_EQ(stats->stats.connections, 1);
}

TEST_F(DaemonTest, CancelRequest) {
  EchoOptions echo;
  echo.token_delay_ms = 5;
  echo.n_ctx = 1 << 30;
  start(echo);
  TestClient c(options_.socket_path);
  ASSERT_TRUE(c.send(chat("long", std::string(100000, 'l'))));
  for (;;) {
    auto ev = c.next();
    ASSERT_TRUE(ev.has_value());
    if (ev->type == EventType::kToken) break;
  }
  // From another connection, by id.
  TestClient other(options_.socket_path);
  auto ack = other.query(R"({"type":"cancel","id":"long"})");
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->type, EventType::kCancel);
  EXPECT_TRUE(ack->found);
  auto rest = c.until_final("long");
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.back().finish_reason, generation::FinishReason::kCancelled);
  auto unknown = other.query(R"({"type":"cancel","id":"nobody"})");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_FALSE(unknown->found);
}

TEST_F(DaemonTest, HalfClosedClientGetsItsReplyThenEof) {
  start();
  TestClient c(options_.socket_path);
  ASSERT_TRUE(c.send(chat("h", "half")));
  c.shutdown_write();
  auto events = c.until_final("h");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(joined_text(events), "half");
  EXPECT_FALSE(c.read_line(5000).has_value());
  EXPECT_TRUE(c.eof());
}

TEST_F(DaemonTest, LoadingThenReady) {
  start(std::nullopt);
  TestClient c(options_.socket_path);
  auto health = c.query(R"({"type":"health","id":"h1"})");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->type, EventType::kHealth);
  EXPECT_EQ(health->id, "h1");
  EXPECT_EQ(health->health, generation::Health::kLoading);
  EXPECT_EQ(health->load_total_bytes, 0u);  // the loader reported nothing yet
  daemon_->set_load_progress(300, 1200);    // what cmd_engine's load_progress calls
  health = c.query(R"({"type":"health","id":"h2"})");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->load_done_bytes, 300u);
  EXPECT_EQ(health->load_total_bytes, 1200u);
  auto refused = c.query(chat("early", "hi"));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, ErrorCode::kUnavailable);
  EXPECT_GT(refused->retry_after_ms, 0);
  auto tok = c.query(R"({"type":"tokenize","text":"ab"})");
  ASSERT_TRUE(tok.has_value());
  EXPECT_EQ(tok->code, ErrorCode::kUnavailable);
  attach(EchoOptions{});
  health = c.query(R"({"type":"health"})");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->health, generation::Health::kReady);
  EXPECT_EQ(health->model, "echo");
  EXPECT_EQ(health->load_total_bytes, 0u);  // loaded: no progress any more
  tok = c.query(R"({"type":"tokenize","text":"ab"})");
  ASSERT_TRUE(tok.has_value());
  EXPECT_EQ(tok->tokens, (std::vector<int32_t>{'a', 'b'}));
}

TEST_F(DaemonTest, HundredConcurrentClientsAllAnsweredOrRefused) {
  EchoOptions echo;
  echo.token_delay_ms = 1;
  echo.max_running = 8;
  echo.max_queue = 40;
  start(echo);
  constexpr int kClients = 100;
  std::atomic<int> done{0}, busy{0}, other{0}, wrong_text{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      TestClient c(options_.socket_path);
      const std::string id = "c" + std::to_string(i);
      const std::string text = "client " + std::to_string(i) + " says hello";
      if (!c.send(chat(id, text))) {
        other++;
        return;
      }
      auto events = c.until_final(id, 60000);
      if (events.empty()) {
        other++;
      } else if (events.back().type == EventType::kDone) {
        done++;
        if (joined_text(events) != text) wrong_text++;
      } else if (events.back().code == ErrorCode::kQueueFull) {
        busy++;
        if (events.back().retry_after_ms <= 0) other++;
      } else {
        other++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done + busy, kClients) << "done " << done << " busy " << busy << " other " << other;
  EXPECT_EQ(other, 0);
  EXPECT_EQ(wrong_text, 0);
  EXPECT_GE(done, echo.max_queue);  // the queue's worth is always served
  TestClient c(options_.socket_path);
  auto health = c.query(R"({"type":"health"})");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->health, generation::Health::kReady);
}

TEST_F(DaemonTest, TooManyConnectionsAreRefusedCleanly) {
  options_.max_connections = 2;
  start();
  TestClient a(options_.socket_path), b(options_.socket_path);
  ASSERT_TRUE(a.query(R"({"type":"health"})").has_value());
  ASSERT_TRUE(b.query(R"({"type":"health"})").has_value());
  TestClient c(options_.socket_path);
  auto ev = c.next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->code, ErrorCode::kQueueFull);
  EXPECT_FALSE(c.read_line(5000).has_value());
  EXPECT_TRUE(c.eof());
  a.close();
  // A slot frees up once the daemon has seen the close.
  bool served = false;
  for (int attempt = 0; attempt < 100 && !served; ++attempt) {
    TestClient d(options_.socket_path);
    auto h = d.query(R"({"type":"health"})");
    served = h.has_value() && h->type == EventType::kHealth;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(served);
}

TEST_F(DaemonTest, ClientThatStopsReadingIsDropped) {
  options_.max_pending_bytes = 64 << 10;
  EchoOptions echo;
  echo.n_ctx = 1 << 30;
  start(echo);
  TestClient slow(options_.socket_path);
  // A reply far larger than the socket buffers plus the pending limit, never read.
  ASSERT_TRUE(
      slow.send(chat("flood", std::string(500000, 'f'), R"(,"params":{"max_tokens":1000000})")));
  EXPECT_EQ(recorder_->wait_ending("flood", 30000), "cancelled");
  TestClient c(options_.socket_path);
  ASSERT_TRUE(c.send(chat("ok", "still here")));
  auto events = c.until_final("ok");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(joined_text(events), "still here");
}

TEST_F(DaemonTest, StopDrainsInFlightRequestsAndRemovesTheSocket) {
  EchoOptions echo;
  echo.token_delay_ms = 5;
  echo.n_ctx = 1 << 30;
  start(echo);
  TestClient c(options_.socket_path);
  const std::string text(60, 'd');
  ASSERT_TRUE(c.send(chat("inflight", text)));
  for (;;) {
    auto ev = c.next();
    ASSERT_TRUE(ev.has_value());
    if (ev->type == EventType::kToken) break;
  }
  daemon_->request_stop();
  std::string got = text.substr(0, 1);
  std::optional<protocol::Event> last;
  for (;;) {
    auto ev = c.next();
    ASSERT_TRUE(ev.has_value());
    if (ev->type == EventType::kToken) got += ev->text;
    if (ev->type == EventType::kDone || ev->type == EventType::kError) {
      last = ev;
      break;
    }
  }
  EXPECT_EQ(last->finish_reason, generation::FinishReason::kStop);
  EXPECT_EQ(got, text);
  EXPECT_EQ(daemon_->wait(), 0);
  struct stat st;
  EXPECT_NE(::stat(options_.socket_path.c_str(), &st), 0) << "socket file left behind";
  TestClient late(options_.socket_path);
  EXPECT_FALSE(late.connected());
}

TEST_F(DaemonTest, DrainBoundCancelsWhatIsLeft) {
  options_.drain_timeout = std::chrono::milliseconds(100);
  EchoOptions echo;
  echo.token_delay_ms = 5;
  echo.n_ctx = 1 << 30;
  start(echo);
  TestClient c(options_.socket_path);
  // 100000 tokens at 5 ms and no max_tokens cap: only the drain bound can end it, however long
  // a loaded machine delays the bound's timer.
  ASSERT_TRUE(c.send(chat("endless", std::string(100000, 'e'), R"(,"max_tokens":1000000)")));
  ASSERT_TRUE(c.next().has_value());
  daemon_->request_stop();
  auto events = c.until_final("endless");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().finish_reason, generation::FinishReason::kCancelled);
  EXPECT_EQ(daemon_->wait(), 0);
}

TEST_F(DaemonTest, NewRequestsDuringDrainAreRefused) {
  options_.drain_timeout = std::chrono::milliseconds(3000);
  EchoOptions echo;
  echo.token_delay_ms = 5;
  echo.n_ctx = 1 << 30;
  start(echo);
  TestClient c(options_.socket_path);
  ASSERT_TRUE(c.send(chat("x", std::string(100, 'x'))));
  ASSERT_TRUE(c.next().has_value());
  daemon_->request_stop();
  ASSERT_TRUE(c.send(chat("y", "late")));
  auto events = c.until_final("y");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().code, ErrorCode::kUnavailable);
  EXPECT_NE(events.back().message.find("draining"), std::string::npos);
  EXPECT_EQ(daemon_->wait(), 0);
}

TEST_F(DaemonTest, RefusesWhenALiveDaemonOwnsTheSocketAndReplacesAStaleOne) {
  start();
  Daemon second(options_);
  Status st = second.listen();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("already serving"), std::string::npos) << st.message();
  daemon_->request_stop();
  daemon_->wait();
  daemon_.reset();
  // A stale socket file: bound, then its process went away without unlinking.
  auto fd = listen_unix(options_.socket_path, 0600);
  ASSERT_TRUE(fd.ok());
  ::close(*fd);
  struct stat st_before;
  ASSERT_EQ(::stat(options_.socket_path.c_str(), &st_before), 0);
  start();
  TestClient c(options_.socket_path);
  EXPECT_TRUE(c.query(R"({"type":"health"})").has_value());
}

TEST_F(DaemonTest, SocketPermissions) {
  start();
  struct stat st;
  ASSERT_EQ(::stat(options_.socket_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  daemon_.reset();
  options_.socket_mode = 0660;
  start();
  ASSERT_EQ(::stat(options_.socket_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

// An error the engine stops for (a lost GPU) goes on the wire with "restart" and the retry
// hint; a request's own error with neither.
TEST(ToProtocolEvent, AnErrorTheEngineStopsForSaysRestartAndWhen) {
  engine::Event lost;
  lost.type = EventType::kError;
  lost.error = Status(ErrorCode::kUnavailable, "the GPU (X) was lost");
  lost.restart = true;
  const protocol::Event out = to_protocol_event(lost, "c1", 1500);
  EXPECT_EQ(out.id, "c1");
  EXPECT_EQ(out.code, ErrorCode::kUnavailable);
  EXPECT_EQ(out.message, "the GPU (X) was lost");
  EXPECT_TRUE(out.restart);
  EXPECT_EQ(out.retry_after_ms, 1500);
  engine::Event own = lost;
  own.restart = false;
  own.error = Status(ErrorCode::kInvalidArgument, "bad resume");
  const protocol::Event plain = to_protocol_event(own, "c2", 1500);
  EXPECT_FALSE(plain.restart);
  EXPECT_EQ(plain.retry_after_ms, 0);
  EXPECT_EQ(plain.code, ErrorCode::kInvalidArgument);
}

TEST(SocketMode, Validation) {
  EXPECT_EQ(*parse_socket_mode("0600"), 0600u);
  EXPECT_EQ(*parse_socket_mode("660"), 0660u);
  EXPECT_FALSE(parse_socket_mode("0666").ok());
  EXPECT_FALSE(parse_socket_mode("0602").ok());
  EXPECT_FALSE(parse_socket_mode("0400").ok());
  EXPECT_FALSE(parse_socket_mode("rw").ok());
  EXPECT_FALSE(parse_socket_mode("0999").ok());
}

TEST(ListenUnix, RejectsBadPaths) {
  EXPECT_FALSE(listen_unix("", 0600).ok());
  EXPECT_FALSE(listen_unix("/tmp/" + std::string(200, 'p'), 0600).ok());
  EXPECT_FALSE(listen_unix("/nonexistent-dir-glm/x.sock", 0600).ok());
  EXPECT_FALSE(listen_unix("/etc/passwd", 0600).ok());  // exists, not a socket
}

}  // namespace
}  // namespace glm::daemon
