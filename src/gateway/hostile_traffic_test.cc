// Hostile and heavy traffic against the gateway on loopback (issue 19): slow senders, a
// thousand idle connections, pipelining, ambiguous framing, HTTP/1.0, a burst of streams.
// Each test is bounded to a few seconds. The nested-JSON bodies are in hostile_body_test.cc.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "gateway/http_test_util.h"

namespace glm::gateway::testing {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Lifts the soft limit on open files to at least `want` (within the hard limit); returns
// the soft limit in force.
rlim_t raise_fd_limit(rlim_t want) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < want) {
    lim.rlim_cur = std::min(want, lim.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur;
}

std::string stream_body(const std::string& content) {
  return json{{"model", "m"},
              {"messages", json::array({{{"role", "user"}, {"content", content}}})},
              {"stream", true}}
      .dump();
}

// One GET /health on a fresh connection: its time in ms, or -1 without a 200.
double health_ms(int port) {
  const auto t0 = Clock::now();
  RawHttp raw(port);
  raw.send_request("GET", "/health", "");
  if (!raw.read_until("", 5000) || raw.result().status != 200) return -1;
  return ms_since(t0);
}

// The status codes of the responses in `raw`, in order.
std::vector<int> statuses(const std::string& raw) {
  std::vector<int> out;
  for (size_t pos = 0; (pos = raw.find("HTTP/1.1 ", pos)) != std::string::npos; pos += 9) {
    if (pos == 0 || raw.compare(pos - 2, 2, "\r\n") == 0 || raw[pos - 1] == '}') {
      out.push_back(std::atoi(raw.substr(pos + 9, 3).c_str()));
    }
  }
  return out;
}

TEST(HostileTraffic, SlowlorisConnectionsDoNotStarveHealth) {
  raise_fd_limit(2048);
  TestGateway t("slowloris");
  constexpr int kSlow = 256;
  std::vector<std::unique_ptr<RawHttp>> slow;
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(std::make_unique<RawHttp>(t.port()));
    slow.back()->send_raw(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n");
  }
  // Each slow client sends one more header byte every 200 ms, never finishing its head.
  std::atomic<bool> stop{false};
  std::thread dribble([&] {
    while (!stop) {
      for (auto& c : slow) c->send_raw("x");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  for (int i = 0; i < 200 && t.gateway().http_stats().connections < kSlow; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(t.gateway().http_stats().connections, kSlow);
  for (int i = 0; i < 10; ++i) {
    const double ms = health_ms(t.port());
    EXPECT_GE(ms, 0) << "probe " << i << " got no 200";
    EXPECT_LT(ms, 1000) << "probe " << i;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
  stop = true;
  dribble.join();
  // They were held all along, not refused.
  EXPECT_GE(t.gateway().http_stats().connections, kSlow);
  EXPECT_EQ(t.gateway().http_stats().refused, 0);
}

TEST(HostileTraffic, ThousandIdleKeepAliveConnections) {
  constexpr int kIdle = 1000;
  if (raise_fd_limit(2 * kIdle + 256) < 2 * kIdle + 256) {
    GTEST_SKIP() << "the hard limit on open files is under " << 2 * kIdle + 256
                 << " (raise it with ulimit -Hn)";
  }
  TestGateway t("idle");
  std::vector<std::unique_ptr<RawHttp>> idle;
  int answered = 0;
  // One request on each, in batches the 16 threads and their queue take without refusing.
  for (int batch = 0; batch < kIdle; batch += 50) {
    for (int i = batch; i < batch + 50; ++i) {
      idle.push_back(std::make_unique<RawHttp>(t.port()));
      idle.back()->send_request("GET", "/v1/models", "", {{"Connection", "keep-alive"}});
    }
    for (int i = batch; i < batch + 50; ++i) answered += idle[i]->read_until("fake-glm", 5000);
  }
  EXPECT_EQ(answered, kIdle);
  EXPECT_GE(t.gateway().http_stats().connections, kIdle);
  for (int i = 0; i < 5; ++i) {
    const double ms = health_ms(t.port());
    EXPECT_GE(ms, 0) << "probe " << i << " got no 200";
    EXPECT_LT(ms, 1000) << "probe " << i;
  }
  // Still open and still served: the first, a middle and the last.
  for (int i : {0, kIdle / 2, kIdle - 1}) {
    idle[i]->send_request("GET", "/health", "", {{"Connection", "keep-alive"}});
    EXPECT_TRUE(idle[i]->read_until("\"ready\"", 3000)) << "connection " << i;
  }
}

TEST(HostileTraffic, PipelinedRequestsAreAllAnsweredInOrder) {
  TestGateway t("pipeline");
  RawHttp raw(t.port());
  const std::string body = R"({"title":"piped"})";
  std::string burst = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  burst += "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  burst +=
      "POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  burst += "GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  burst += "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ASSERT_TRUE(raw.send_raw(burst));
  ASSERT_TRUE(raw.read_until("", 5000)) << raw.received();
  const std::string& r = raw.received();
  EXPECT_EQ(statuses(r), (std::vector<int>{200, 200, 201, 404, 200})) << r;
  const size_t models = r.find("fake-glm\"");
  const size_t created = r.find("\"piped\"");
  const size_t missing = r.find("no route GET /nothing");
  EXPECT_LT(models, created);
  EXPECT_LT(created, missing);
  EXPECT_NE(missing, std::string::npos);
}

TEST(HostileTraffic, AmbiguousFramingIsRefused) {
  TestGateway t("framing");
  const std::string body = stream_body("smuggled");
  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\n";
  const std::string len = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  const std::string te = "Transfer-Encoding: chunked\r\n";
  char size[16];
  std::snprintf(size, sizeof(size), "%zx\r\n", body.size());
  const std::string chunked = size + body + "\r\n0\r\n\r\n";
  const std::string cases[] = {
      head + len + te + "\r\n" + chunked,               // CL then TE
      head + te + len + "\r\n" + chunked,               // TE then CL
      head + len + len + "\r\n" + body,                 // the same Content-Length twice
      head + len + "Content-Length: 5\r\n\r\n" + body,  // two different ones
  };
  for (const std::string& req : cases) {
    RawHttp raw(t.port());
    raw.send_raw(req);
    const auto t0 = Clock::now();
    ASSERT_TRUE(raw.read_until("", 3000)) << req;
    EXPECT_LT(ms_since(t0), 2500) << "the connection stayed open: " << req;
    EXPECT_EQ(raw.result().status, 400) << req << "\n" << raw.received();
    EXPECT_EQ(raw.result().header("Connection"), "close");
  }
  EXPECT_TRUE(t.fake().requests().empty()) << "a refused request reached the engine";
}

TEST(HostileTraffic, MalformedRequestsGetAnswerAndClose) {
  TestGateway t("malformed");
  const std::string cases[] = {
      "GARBAGE\r\n\r\n",
      "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
      "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
  };
  for (const std::string& req : cases) {
    RawHttp raw(t.port());
    raw.send_raw(req);
    const auto t0 = Clock::now();
    ASSERT_TRUE(raw.read_until("", 3000));
    EXPECT_LT(ms_since(t0), 2500);
    const int status = raw.result().status;
    EXPECT_TRUE(status == 400 || status == 414) << status << " for " << req.substr(0, 40);
    EXPECT_EQ(raw.result().header("Connection"), "close");
    EXPECT_TRUE(json::parse(raw.result().body, nullptr, false).contains("error"))
        << raw.result().body;
  }
}

TEST(HostileTraffic, Http10StreamHasNoChunkedEncoding) {
  TestGateway t("http10");
  const std::string body = stream_body("hi");
  RawHttp raw(t.port());
  raw.send_raw(
      "POST /v1/chat/completions HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_TRUE(raw.read_until("", 5000));
  const std::string& r = raw.received();
  EXPECT_EQ(r.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << r;
  EXPECT_EQ(raw.result().header("Transfer-Encoding"), "");
  EXPECT_NE(r.find("\r\n\r\ndata: {"), std::string::npos) << r;  // no chunk size line
  EXPECT_NE(r.find("data: [DONE]\n\n"), std::string::npos) << r;
}

TEST(HostileTraffic, BurstOfStreamsIsAnsweredOrRefusedNeverDropped) {
  raise_fd_limit(2048);
  GatewayOptions o;
  o.threads = 48;
  o.queue = 0;
  TestGateway t("burst", o);
  constexpr int kClients = 300;
  const std::string body = stream_body("[slow] burst");
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nConnection: close\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  std::vector<std::unique_ptr<RawHttp>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawHttp>(t.port()));
    clients.back()->send_raw(req);
  }
  // Every client reads until its connection ends (Connection: close), all at once.
  std::vector<pollfd> fds;
  std::vector<std::string> got(kClients);
  std::vector<bool> done(kClients, false);
  const auto t0 = Clock::now();
  int open = kClients;
  while (open > 0 && ms_since(t0) < 20000) {
    fds.clear();
    std::vector<int> index;
    for (int i = 0; i < kClients; ++i) {
      if (done[i]) continue;
      fds.push_back(pollfd{clients[i]->fd(), POLLIN, 0});
      index.push_back(i);
    }
    if (::poll(fds.data(), fds.size(), 200) <= 0) continue;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[8192];
      const ssize_t n = ::recv(fds[k].fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        done[index[k]] = true;
        --open;
      } else {
        got[index[k]].append(buf, static_cast<size_t>(n));
      }
    }
  }
  EXPECT_EQ(open, 0) << "clients still waiting after 20 s";
  int ok = 0, refused = 0;
  for (int i = 0; i < kClients; ++i) {
    const std::string& r = got[i];
    const int status = r.size() > 12 ? std::atoi(r.substr(9, 3).c_str()) : 0;
    if (status == 200) {
      ++ok;
      EXPECT_NE(r.find("data: [DONE]"), std::string::npos) << "client " << i << ": cut stream";
    } else if (status == 429 || status == 503) {
      ++refused;
      EXPECT_NE(r.find("Retry-After: "), std::string::npos) << r;
    } else {
      ADD_FAILURE() << "client " << i << " got no answer or another status: " << r.substr(0, 120);
    }
  }
  EXPECT_EQ(ok + refused, kClients);
  EXPECT_GE(ok, 1);
  EXPECT_GE(refused, 1) << "300 streams on 48 threads with no queue: some must be refused";
  std::printf("burst: %d streamed, %d refused, %.0f ms\n", ok, refused, ms_since(t0));
}

}  // namespace
}  // namespace glm::gateway::testing
