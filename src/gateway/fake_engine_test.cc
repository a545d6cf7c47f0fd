// FakeEngine (fake_engine.h) and the tests of EngineClient against it.
#include "gateway/fake_engine.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "api/tool_calls.h"
#include "core/utf8.h"
#include "gateway/engine_client.h"
#include "protocol/line_buffer.h"

namespace glm::gateway::testing {

using generation::FinishReason;

struct FakeEngine::Conn {
  int fd = -1;
  std::mutex write_mu;
  std::atomic<bool> closed{false};
  bool write_line(const std::string& line) {
    std::lock_guard<std::mutex> lock(write_mu);
    if (closed) return false;
    std::string data = line + "\n";
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
};

FakeEngine::FakeEngine(std::string socket_path) : path_(std::move(socket_path)) { start(); }

FakeEngine::~FakeEngine() { stop(); }

void FakeEngine::start() {
  ::unlink(path_.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0) {
    ADD_FAILURE() << "fake engine cannot listen on " << path_ << ": " << std::strerror(errno);
    ::close(fd);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  listen_fd_ = fd;
  acceptor_ = std::thread([this, fd] { accept_loop(fd); });
}

void FakeEngine::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    for (auto& c : conns_) {
      c->closed = true;
      ::shutdown(c->fd, SHUT_RDWR);
    }
  }
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : conns_) ::close(c->fd);
  conns_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  ::unlink(path_.c_str());
}

void FakeEngine::accept_loop(int listen_fd) {
  while (true) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    auto conn = std::make_shared<Conn>();
    conn->fd = fd;
    std::lock_guard<std::mutex> lock(mu_);
    conns_.push_back(conn);
    threads_.emplace_back([this, conn] { serve_conn(conn); });
  }
}

std::vector<protocol::Request> FakeEngine::requests() {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::set<std::string> FakeEngine::cancelled() {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

bool FakeEngine::wait_cancelled(const std::string& id, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return cancelled_.count(id) > 0; });
}

void FakeEngine::set_health(generation::Health status, uint64_t load_done, uint64_t load_total) {
  std::lock_guard<std::mutex> lock(mu_);
  health_ = status;
  load_done_ = load_done;
  load_total_ = load_total;
}

void FakeEngine::serve_conn(std::shared_ptr<Conn> conn) {
  protocol::LineBuffer lines(1 << 20);
  // The cancel flags of the generate requests started on this connection (not their ids: a
  // resumed request reuses its id on another connection).
  std::vector<std::shared_ptr<std::atomic<bool>>> mine;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(conn->fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    lines.append(std::string_view(buf, static_cast<size_t>(n)));
    std::string line;
    while (lines.next(&line) == protocol::LineBuffer::Next::kLine) {
      std::string id;
      auto req = protocol::parse_request(line, {}, &id);
      if (!req.ok()) {
        conn->write_line(protocol::serialize_event(protocol::error_event(id, req.status())));
        continue;
      }
      if (req->type == protocol::RequestType::kHealth) {
        protocol::Event e;
        e.type = protocol::EventType::kHealth;
        e.id = req->id;
        {
          std::lock_guard<std::mutex> lock(mu_);
          e.health = health_;
          e.load_done_bytes = load_done_;
          e.load_total_bytes = load_total_;
        }
        e.model = "fake-glm";
        e.n_ctx = 4096;
        conn->write_line(protocol::serialize_event(e));
      } else if (req->type == protocol::RequestType::kTokenize) {
        // One token a space-separated word, numbered from 0 (what [resume] pieces carry).
        protocol::Event e;
        e.type = protocol::EventType::kTokens;
        e.id = req->id;
        bool in_word = false;
        for (char c : req->text) {
          if (c != ' ' && !in_word) e.tokens.push_back(static_cast<int32_t>(e.tokens.size()));
          in_word = c != ' ';
        }
        conn->write_line(protocol::serialize_event(e));
      } else if (req->type == protocol::RequestType::kCancel) {
        std::shared_ptr<std::atomic<bool>> flag;
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = cancel_flags_.find(req->id);
          if (it != cancel_flags_.end()) flag = it->second;
        }
        if (flag) *flag = true;
        protocol::Event e;
        e.type = protocol::EventType::kCancel;
        e.id = req->id;
        e.found = flag != nullptr;
        conn->write_line(protocol::serialize_event(e));
      } else if (req->type == protocol::RequestType::kGenerate) {
        auto flag = std::make_shared<std::atomic<bool>>(false);
        {
          std::lock_guard<std::mutex> lock(mu_);
          requests_.push_back(*req);
          cancel_flags_[req->id] = flag;
        }
        mine.push_back(flag);
        std::lock_guard<std::mutex> lock(mu_);
        threads_.emplace_back([this, conn, r = *req, flag] { generate(conn, r, flag); });
      }
    }
  }
  // The client closed its connection: that cancels everything it started.
  conn->closed = true;
  for (const auto& flag : mine) *flag = true;
}

void FakeEngine::generate(std::shared_ptr<Conn> conn, protocol::Request req,
                          std::shared_ptr<std::atomic<bool>> flag) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::string last = req.messages.empty() ? req.prompt : req.messages.back().content;
  auto has = [&](const char* k) { return last.find(k) != std::string::npos; };
  auto send = [&](protocol::Event e) {
    e.id = req.id;
    return conn->write_line(protocol::serialize_event(e));
  };
  if (has("[busy]")) {
    send(protocol::error_event(
        req.id, Status(ErrorCode::kQueueFull, "the engine is busy; retry in a moment"), 500));
    return;
  }
  protocol::Event q;
  q.type = protocol::EventType::kQueued;
  send(q);
  protocol::Event s;
  s.type = protocol::EventType::kStart;
  s.usage.prompt_tokens = 10 * static_cast<int>(req.messages.size());
  send(s);
  std::vector<std::string> pieces;
  bool cut_by_length = false;
  int delay_ms = 1;
  if (has("[slow]") || has("[medium]")) {
    const int n_pieces = has("[slow]") ? 200 : 40;
    for (int i = 0; i < n_pieces; ++i) pieces.push_back("w" + std::to_string(i) + " ");
    delay_ms = 20;
  } else if (has("[xss]")) {
    pieces = {"Look: ",    "<script>", "window.__pwned=1",
              "</script>", " and ",    "<img src=x onerror=\"window.__pwned=2\">",
              " end"};
  } else if (has("[zh]")) {
    pieces = {"你好", "，", "世界", "！"};
  } else if (has("[tool-pieces]") && !req.tools.empty()) {
    // Text that is no call, with pieces that say it is one (below): what clients receive is
    // the engine's reading, never the gateway's own of the text.
    pieces = {"just ", "words"};
  } else if ((has("[tool]") || has("[tool-py]")) && !req.tools.empty()) {
    // A call of the first tool, as GLM-4 (JSON) or ChatGLM3 (a Python block) writes it.
    const std::string name = (*req.tools)[0]["name"];
    if (has("[tool]")) {
      pieces = {name.substr(0, 3), name.substr(3) + "\n", "{\"city\"", ": \"Paris\"}"};
    } else {
      pieces = {name + "\n", "```python\n", "tool_call(city=", "'Paris')", "\n```"};
    }
    // A piece is a token here: max_tokens cuts the call as the real engine would.
    if (static_cast<size_t>(req.params.max_tokens) < pieces.size()) {
      pieces.resize(static_cast<size_t>(req.params.max_tokens));
      cut_by_length = true;
    }
  } else {
    if (has("[trim]")) {
      protocol::Event n;
      n.type = protocol::EventType::kNotice;
      n.message = "history trimmed to fit the context: dropped the 2 oldest messages";
      n.dropped_messages = 2;
      send(n);
    }
    std::string text = "Echo: " + last;
    while (!text.empty()) {
      size_t cut = utf8_complete_prefix(std::string_view(text).substr(0, 4));
      if (cut == 0) cut = std::min<size_t>(text.size(), 4);
      pieces.push_back(text.substr(0, cut));
      text.erase(0, cut);
    }
  }
  double ttft_ms = -1;
  // [resume]: a piece's token id is its index. A resumed request (also a continued answer,
  // whose text the tokenize above counted) continues after the pieces it names.
  const bool ids = has("[resume]");
  int n = static_cast<int>(std::min(req.resume.size(), pieces.size()));
  const int first = n;
  // With tools, the answer read for a call as the engine reads it: the pieces go out with the
  // events (Event::tool); a resumed request's reader first reads what was sent before.
  std::unique_ptr<api::ToolCallStream> reader;
  if (!req.tools.empty()) {
    reader = std::make_unique<api::ToolCallStream>(generation::tool_names(*req.tools));
    for (int i = 0; i < first; ++i) reader->feed(pieces[static_cast<size_t>(i)]);
  }
  for (size_t i = static_cast<size_t>(first); i < pieces.size(); ++i) {
    const std::string& p = pieces[i];
    if (*flag) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    if (*flag) break;
    if ((has("[crash]") && n == 3) || (has("[crash-once]") && req.resume.empty() && n == 3)) {
      ::shutdown(conn->fd, SHUT_RDWR);
      return;
    }
    const bool lose =
        has("[lost]") || ((has("[lost-once]") || has("[failed-once]")) && req.resume.empty());
    if (lose && n == 3) {
      // What an engine whose GPU was lost sends each request before it exits to be restarted
      // ([failed-once]: the same error as a request's own, without "restart").
      protocol::Event err =
          protocol::error_event(req.id,
                                Status(ErrorCode::kUnavailable,
                                       "the GPU (fake) failed a submission: VK_ERROR_DEVICE_LOST"),
                                has("[failed-once]") ? 0 : 1000);
      err.restart = !has("[failed-once]");
      send(err);
      return;
    }
    if (has("[drained-once]") && req.resume.empty() && n == 3) {
      protocol::Event d;  // what a draining engine sends when its bound cuts the answer
      d.type = protocol::EventType::kDone;
      d.finish_reason = FinishReason::kCancelled;
      d.usage.completion_tokens = n;
      send(d);
      return;
    }
    protocol::Event t;
    t.type = protocol::EventType::kToken;
    t.text = p;
    if (reader) t.tool = reader->feed(p);
    if (has("[tool-pieces]") && reader) {
      t.tool.clear();
      if (n == 0) {
        t.tool = {{generation::ToolDelta::Kind::kCallStart, (*req.tools)[0]["name"]},
                  {generation::ToolDelta::Kind::kArguments, R"({"city": "Rome"})"}};
      }
    }
    if (ids) t.tokens = {n};
    if (!send(t)) break;
    if (ttft_ms < 0) {
      ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    }
    ++n;
  }
  const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (*flag) {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.insert(req.id);
    cv_.notify_all();
  }
  protocol::Event d;
  d.type = protocol::EventType::kDone;
  d.finish_reason = *flag           ? FinishReason::kCancelled
                    : cut_by_length ? FinishReason::kLength
                                    : FinishReason::kStop;
  d.usage.prompt_tokens = s.usage.prompt_tokens;
  d.usage.completion_tokens = n;
  if (reader && !has("[tool-pieces]")) d.tool = reader->finish();
  d.timings.queue_ms = 0.1;
  d.timings.ttft_ms = ttft_ms < 0 ? total_ms : ttft_ms;
  d.timings.tpot_ms = n > 1 ? (total_ms - d.timings.ttft_ms) / (n - 1) : 0;
  d.timings.total_ms = total_ms;
  send(d);
}

namespace {

std::string temp_socket(const char* tag) {
  return "/tmp/glm-gw-" + std::to_string(::getpid()) + "-" + tag + ".sock";
}

protocol::Request gen_request(const std::string& id, const std::string& content) {
  protocol::Request r;
  r.type = protocol::RequestType::kGenerate;
  r.id = id;
  r.messages.push_back({"user", content, ""});
  return r;
}

// Collects a stream's token text until done/error; returns the final event.
protocol::Event drain(EngineStream& s, std::string* text) {
  while (true) {
    auto ev = s.next(5000);
    EXPECT_TRUE(ev.ok()) << ev.status().to_string();
    if (!ev.ok() || !ev->has_value()) return {};
    const protocol::Event& e = **ev;
    if (e.type == protocol::EventType::kToken) *text += e.text;
    if (e.type == protocol::EventType::kDone || e.type == protocol::EventType::kError) return e;
  }
}

TEST(EngineClient, StreamsTokensOfOneRequest) {
  FakeEngine fake(temp_socket("stream"));
  EngineClient client(fake.socket_path());
  auto s = client.start(gen_request("r1", "[zh]"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::string text;
  protocol::Event last = drain(**s, &text);
  EXPECT_EQ(last.type, protocol::EventType::kDone);
  EXPECT_EQ(last.finish_reason, FinishReason::kStop);
  EXPECT_EQ(text, "你好，世界！");
  EXPECT_EQ(last.usage.completion_tokens, 4);
}

TEST(EngineClient, UnreachableEngineSaysHowToStartIt) {
  EngineClient client("/tmp/glm-gw-no-such-engine.sock");
  auto s = client.start(gen_request("r1", "hi"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(s.status().message().find("glmserve engine"), std::string::npos);
}

TEST(EngineClient, CancelEndsTheStreamWithCancelled) {
  FakeEngine fake(temp_socket("cancel"));
  EngineClient client(fake.socket_path());
  auto s = client.start(gen_request("r2", "[slow]"));
  ASSERT_TRUE(s.ok());
  std::string text;
  auto first = (*s)->next(5000);  // queued
  ASSERT_TRUE(first.ok() && first->has_value());
  (*s)->cancel();
  (*s)->cancel();  // idempotent
  protocol::Event last = drain(**s, &text);
  EXPECT_EQ(last.type, protocol::EventType::kDone);
  EXPECT_EQ(last.finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(fake.wait_cancelled("r2", 5000));
  EXPECT_LT(text.size(), 200u * 3);  // far from the full answer
}

TEST(EngineClient, EngineCrashMidStreamIsAClearError) {
  FakeEngine fake(temp_socket("crash"));
  EngineClient client(fake.socket_path());
  auto s = client.start(gen_request("r3", "[crash] tell me"));
  ASSERT_TRUE(s.ok());
  std::string text;
  Status error;
  while (true) {
    auto ev = (*s)->next(5000);
    if (!ev.ok()) {
      error = ev.status();
      break;
    }
    ASSERT_TRUE(ev->has_value()) << "no event within 5 s";
    if ((**ev).type == protocol::EventType::kToken) text += (**ev).text;
  }
  EXPECT_EQ(error.code(), ErrorCode::kUnavailable);
  EXPECT_NE(error.message().find("crashed or restarted"), std::string::npos);
  EXPECT_FALSE(text.empty());
}

TEST(EngineClient, ReconnectsAfterEngineRestart) {
  FakeEngine fake(temp_socket("restart"));
  EngineClient client(fake.socket_path());
  fake.stop();
  EXPECT_FALSE(client.start(gen_request("a", "hi")).ok());
  fake.start();
  auto s = client.start(gen_request("b", "hi"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::string text;
  EXPECT_EQ(drain(**s, &text).finish_reason, FinishReason::kStop);
  EXPECT_EQ(text, "Echo: hi");
}

TEST(EngineClient, QueryHealth) {
  FakeEngine fake(temp_socket("health"));
  EngineClient client(fake.socket_path());
  protocol::Request r;
  r.type = protocol::RequestType::kHealth;
  r.id = "h1";
  auto ev = client.query(r, 2000);
  ASSERT_TRUE(ev.ok()) << ev.status().to_string();
  EXPECT_EQ(ev->type, protocol::EventType::kHealth);
  EXPECT_EQ(ev->health, generation::Health::kReady);
  EXPECT_EQ(ev->model, "fake-glm");
}

}  // namespace
}  // namespace glm::gateway::testing
