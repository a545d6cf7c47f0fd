// The HTTP server over loopback with a raw client: routes, keep-alive, pipelining, framing
// refusals, HTTP/1.0, streaming, limits and timeouts, overload.
#include "http/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "http/test_client.h"

namespace glm::http::testing {
namespace {

using Clock = std::chrono::steady_clock;

const char* const kGet = "GET /echo/a HTTP/1.1\r\nHost: x\r\n\r\n";

void install_echo(Server& s) {
  s.get("/echo/([a-z0-9]+)", [](const Request& req, Response& res) {
    res.set_content("echo " + req.matches[1] + " q=" + req.param("q"), "text/plain");
  });
  s.post("/body", [](const Request& req, Response& res) {
    res.set_content("got " + std::to_string(req.body.size()), "text/plain");
  });
  s.get("/stream", [](const Request& req, Response& res) {
    res.set_stream("text/event-stream", [](StreamSink& sink) {
      sink.write("data: one\n\n");
      sink.write("data: two\n\n");
      sink.done();
    });
  });
  s.get("/cut", [](const Request&, Response& res) {
    res.set_stream("text/plain", [](StreamSink& sink) { sink.write("partial"); });
  });
  s.set_error_handler([](const Request& req, Response& res) {
    res.set_content("error " + std::to_string(res.status) + ": " + res.reason, "text/plain");
  });
}

ServerOptions small() {
  ServerOptions o;
  o.workers = 4;
  o.max_queue = 4;
  return o;
}

TEST(HttpServer, RoutesParamsAndNotFound) {
  TestServer t(small(), install_echo);
  RawClient c(t.port());
  c.send("GET /echo/abc?q=x%20y HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  ASSERT_TRUE(c.wait_closed(5000));
  EXPECT_NE(c.received().find("HTTP/1.1 200 OK"), std::string::npos) << c.received();
  EXPECT_NE(c.received().find("Content-Length: 14\r\n"), std::string::npos);
  EXPECT_NE(c.received().find("Connection: close"), std::string::npos);
  EXPECT_NE(c.received().find("echo abc q=x y"), std::string::npos);
  RawClient nf(t.port());
  nf.send("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(nf.read_until("error 404", 5000)) << nf.received();
}

TEST(HttpServer, KeepAliveAndPipeliningAnswerInOrder) {
  TestServer t(small(), install_echo);
  RawClient c(t.port());
  std::string burst;
  for (const char* p : {"1", "2", "3", "4", "5"}) {
    burst += std::string("GET /echo/") + p + " HTTP/1.1\r\nHost: x\r\n\r\n";
  }
  burst += "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
  burst += "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(c.send(burst));
  ASSERT_TRUE(c.read_until("error 404", 5000)) << c.received();
  const std::string& r = c.received();
  size_t last = 0;
  for (const char* want : {"echo 1", "echo 2", "echo 3", "echo 4", "echo 5", "got 3"}) {
    const size_t at = r.find(want);
    ASSERT_NE(at, std::string::npos) << want;
    EXPECT_GT(at, last) << want << " out of order";
    last = at;
  }
  EXPECT_EQ(statuses(r), (std::vector<int>{200, 200, 200, 200, 200, 200, 404}));
  // The connection is still usable.
  c.clear();
  c.send(kGet);
  EXPECT_TRUE(c.read_until("echo a", 5000));
  EXPECT_EQ(t.server().stats().accepted, 1);
}

TEST(HttpServer, AmbiguousFramingIsRefusedAndClosed) {
  TestServer t(small(), install_echo);
  const std::string cases[] = {
      "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n0\r\n\r\n",
      "POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
      "3\r\nabc\r\n0\r\n\r\n",
      "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
      "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde",
      "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc",
      "POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc",
      "GET /echo/a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
      "NOT HTTP AT ALL\r\n\r\n",
  };
  for (const std::string& req : cases) {
    RawClient c(t.port());
    c.send(req);
    const auto t0 = Clock::now();
    EXPECT_TRUE(c.wait_closed(3000)) << req;
    EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2500)) << "closed late: " << req;
    EXPECT_EQ(statuses(c.received()), std::vector<int>{400}) << req << "\n" << c.received();
    EXPECT_NE(c.received().find("Connection: close"), std::string::npos) << req;
    EXPECT_EQ(c.received().find("got "), std::string::npos) << "the body was served: " << req;
  }
  // A chunked body alone is fine.
  RawClient ok(t.port());
  ok.send(
      "POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
      "2\r\nde\r\n0\r\n\r\n");
  EXPECT_TRUE(ok.read_until("got 5", 5000)) << ok.received();
}

TEST(HttpServer, Http10GetsNoChunkedEncoding) {
  TestServer t(small(), install_echo);
  RawClient c(t.port());
  c.send("GET /stream HTTP/1.0\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c.wait_closed(5000));
  const std::string& r = c.received();
  EXPECT_EQ(r.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << r;
  EXPECT_EQ(r.find("Transfer-Encoding"), std::string::npos) << r;
  EXPECT_NE(r.find("\r\n\r\ndata: one\n\ndata: two\n\n"), std::string::npos) << r;
  // HTTP/1.1 gets chunks and the last chunk.
  RawClient c11(t.port());
  c11.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c11.read_until("0\r\n\r\n", 5000)) << c11.received();
  EXPECT_NE(c11.received().find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(c11.received().find("b\r\ndata: one\n\n\r\n"), std::string::npos);
}

TEST(HttpServer, CutStreamEndsWithoutTheLastChunk) {
  TestServer t(small(), install_echo);
  RawClient c(t.port());
  c.send("GET /cut HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c.wait_closed(5000));
  EXPECT_NE(c.received().find("7\r\npartial\r\n"), std::string::npos) << c.received();
  EXPECT_EQ(c.received().find("0\r\n\r\n"), std::string::npos) << c.received();
}

TEST(HttpServer, BodyLimitAndHeadLimit) {
  ServerOptions o = small();
  o.max_body_bytes = 1000;
  o.max_head_bytes = 4096;
  TestServer t(o, install_echo);
  RawClient big(t.port());
  big.send("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" +
           std::string(5000, 'a'));
  ASSERT_TRUE(big.wait_closed(5000));
  EXPECT_EQ(statuses(big.received()), std::vector<int>{413}) << big.received();
  RawClient chunked(t.port());
  chunked.send("POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" +
               std::string(0x800, 'a') + "\r\n0\r\n\r\n");
  ASSERT_TRUE(chunked.wait_closed(5000));
  EXPECT_EQ(statuses(chunked.received()), std::vector<int>{413}) << chunked.received();
  RawClient uri(t.port());
  uri.send("GET /echo/" + std::string(8000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(uri.wait_closed(5000));
  EXPECT_EQ(statuses(uri.received()), std::vector<int>{414}) << uri.received().substr(0, 200);
  RawClient head(t.port());
  head.send("GET /echo/a HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n");
  ASSERT_TRUE(head.wait_closed(5000));
  EXPECT_EQ(statuses(head.received()), std::vector<int>{431}) << head.received().substr(0, 200);
}

TEST(HttpServer, ExpectContinue) {
  TestServer t(small(), install_echo);
  RawClient c(t.port());
  c.send("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_TRUE(c.read_until("HTTP/1.1 100 Continue\r\n\r\n", 3000)) << c.received();
  c.send("abcd");
  EXPECT_TRUE(c.read_until("got 4", 3000)) << c.received();
}

TEST(HttpServer, OneDeadlineForTheWholeRequest) {
  ServerOptions o = small();
  o.request_timeout_ms = 600;
  TestServer t(o, install_echo);
  RawClient c(t.port());
  const std::string req = "GET /echo/a HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa";
  const auto t0 = Clock::now();
  // One byte every 50 ms: each read is quick, the request never completes.
  for (size_t i = 0; i < req.size() && Clock::now() - t0 < std::chrono::seconds(3); ++i) {
    if (!c.send(req.substr(i, 1))) break;
    if (c.read_until("408", 50)) break;
  }
  ASSERT_TRUE(c.wait_closed(3000));
  const auto took = Clock::now() - t0;
  EXPECT_NE(c.received().find("HTTP/1.1 408"), std::string::npos) << c.received();
  EXPECT_LT(took, std::chrono::milliseconds(2500));
  EXPECT_GE(took, std::chrono::milliseconds(500));
  EXPECT_EQ(t.server().stats().timed_out, 1);
}

TEST(HttpServer, IdleKeepAliveConnectionIsClosed) {
  ServerOptions o = small();
  o.idle_timeout_ms = 300;
  TestServer t(o, install_echo);
  RawClient c(t.port());
  c.send(kGet);
  ASSERT_TRUE(c.read_until("echo a", 3000));
  const auto t0 = Clock::now();
  EXPECT_TRUE(c.wait_closed(3000));
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2000));
}

// A handler that blocks until released, to fill the workers.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int entered = 0;
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    ++entered;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
  }
  void wait_entered(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(5), [&] { return entered >= n; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(HttpServer, OverloadIsAnswered503WithRetryAfterAtOnce) {
  ServerOptions o;
  o.workers = 2;
  o.max_queue = 1;
  Gate gate;
  TestServer t(o, [&gate](Server& s) {
    s.get("/block", [&gate](const Request&, Response& res) {
      gate.wait();
      res.set_content("released", "text/plain");
    });
  });
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 3; ++i) {  // two run, one waits in the queue
    held.push_back(std::make_unique<RawClient>(t.port()));
    held.back()->send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  gate.wait_entered(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the third is queued
  RawClient extra(t.port());
  const auto t0 = Clock::now();
  extra.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(extra.read_until("\r\n\r\n", 2000)) << extra.received();
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1000));
  EXPECT_EQ(statuses(extra.received()), std::vector<int>{503});
  EXPECT_NE(extra.received().find("Retry-After: 1"), std::string::npos);
  gate.release();
  for (auto& c : held) EXPECT_TRUE(c->read_until("released", 5000));
  EXPECT_EQ(t.server().stats().overloaded, 1);
}

TEST(HttpServer, ConnectionsPerAddressAreLimited) {
  ServerOptions o = small();
  o.max_connections_per_ip = 3;
  TestServer t(o, install_echo);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<RawClient>(t.port()));
    held.back()->send(kGet);
    ASSERT_TRUE(held.back()->read_until("echo a", 3000));
  }
  RawClient over(t.port());
  ASSERT_TRUE(over.wait_closed(3000));
  EXPECT_EQ(statuses(over.received()), std::vector<int>{503}) << over.received();
  held.pop_back();  // one leaves: a new one is admitted
  for (int i = 0; i < 100 && t.server().stats().connections >= 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  RawClient again(t.port());
  again.send(kGet);
  EXPECT_TRUE(again.read_until("echo a", 3000)) << again.received();
}

TEST(HttpServer, HandlerSeesTheClientLeaveWithoutWriting) {
  std::atomic<bool> saw_gone{false};
  std::atomic<bool> entered{false};
  TestServer t(small(), [&](Server& s) {
    s.get("/wait", [&](const Request& req, Response& res) {
      entered = true;
      const auto t0 = Clock::now();
      while (!req.client_gone() && Clock::now() - t0 < std::chrono::seconds(5)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      saw_gone = req.client_gone();
      res.set_content("late", "text/plain");
    });
  });
  {
    RawClient c(t.port());
    c.send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
    for (int i = 0; i < 300 && !entered; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(entered);
    EXPECT_FALSE(c.read_until("late", 200));  // nothing written meanwhile: no status yet
    EXPECT_EQ(c.received(), "");
  }
  for (int i = 0; i < 200 && !saw_gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(saw_gone);
}

TEST(HttpServer, DefaultHeadersAndHead) {
  ServerOptions o = small();
  o.default_headers.add("X-Frame-Options", "DENY");
  TestServer t(o, install_echo);
  RawClient c(t.port());
  c.send("HEAD /echo/a HTTP/1.1\r\nHost: x\r\n\r\nGET /echo/b HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c.read_until("echo b", 3000)) << c.received();
  EXPECT_EQ(c.received().find("echo a"), std::string::npos);  // HEAD: no body
  EXPECT_NE(c.received().find("X-Frame-Options: DENY"), std::string::npos);
}

}  // namespace
}  // namespace glm::http::testing
