// Many machines (issue 32): three `glmserve serve` nodes on a tiny random model, HAProxy with
// deploy/haproxy/haproxy.cfg as it is, and PostgreSQL, each on an address of its own (network
// namespaces when the test may make them, else loopback addresses), the test's clients in
// front of HAProxy.
//   - Affinity: each conversation stays on one node, each turn reuses its KV (cached tokens).
//   - Failures under load: one node killed (SIGKILL, its whole process tree), one drained
//     (SIGTERM): every conversation continues elsewhere with its whole history (prefilled once
//     there, reused after), no request fails.
//   - The shared store: the page's conversation and a Responses API chain read and continue
//     on any node.
//   - A rolling restart of the three nodes under steady load: zero failed requests.
// Skipped (with the reason) without haproxy or PostgreSQL's server.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "scaleout_util.h"
#include "store/pg_cluster.h"

namespace glm::scaleout {
namespace {

using json = nlohmann::json;
constexpr int kPort = 8080;

// One client's conversation through HAProxy: its id as X-Conversation-Id and in the body
// (the API's "conversation": the engine's KV key), its whole history sent each turn.
struct Conversation {
  std::string id;
  json messages = json::array();
  struct Turn {
    std::string node;
    int prompt_tokens = 0, cached_tokens = 0;
  };
  std::vector<Turn> turns;
  std::vector<std::string> failures;

  bool turn(const std::string& lb, const std::string& text) {
    messages.push_back({{"role", "user"}, {"content", text}});
    const json body = {{"model", "tiny"},
                       {"messages", messages},
                       {"max_tokens", 12},
                       {"temperature", 0},
                       {"conversation", id}};
    Reply r =
        http(lb, kPort, "POST", "/v1/chat/completions", body.dump(), {{"X-Conversation-Id", id}});
    const json j = r.json();
    if (r.status != 200 || !j.is_object()) {
      failures.push_back(std::to_string(r.status) + " " + r.error + " " + r.body);
      messages.erase(messages.end() - 1);
      return false;
    }
    messages.push_back({{"role", "assistant"},
                        {"content", j["choices"][0]["message"]["content"].get<std::string>()}});
    turns.push_back({r.served_by, j["usage"]["prompt_tokens"].get<int>(),
                     j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>()});
    return true;
  }
};

class Scaleout : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!sh("command -v haproxy >/dev/null"))
      GTEST_SKIP() << "no haproxy (apt-get install haproxy)";
    if (store::testing::PgCluster::bin_dir().empty()) GTEST_SKIP() << "no PostgreSQL server";
    net_ = std::make_unique<Net>();
    if (!net_->netns())
      std::printf("no network namespaces (%s): loopback addresses\n", net_->why_no_netns().c_str());
    char tmpl[] = "/tmp/glm-scaleout-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
    model_ = dir_ + "/tiny.gguf";
    ASSERT_TRUE(sh(std::string(GLMSERVE_BIN) + " gen-model --arch chatglm3 --preset tiny -o " +
                   model_ + " >/dev/null 2>&1"));
    const std::string pg_ip = net_->add_host(20);
    ASSERT_TRUE(pg_.start(pg_ip, net_->prefix(pg_ip))) << pg_.why();
    ASSERT_TRUE(pg_.psql("CREATE DATABASE glm"));
    {
      std::ofstream f(dir_ + "/db-password");
      f << store::testing::PgCluster::kPassword << "\n";
    }
    ::chmod((dir_ + "/db-password").c_str(), 0600);
    db_url_ = pg_.tcp_url("glm");
    for (int i = 0; i < 3; ++i) node_ip_.push_back(net_->add_host(11 + i));
    nodes_.resize(3);
    for (int i = 0; i < 3; ++i) start_node(i);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(wait_ready(i)) << nodes_[i]->log();
    lb_ = net_->add_host(2);
    ::setenv("GLM_BIND", (lb_ + ":" + std::to_string(kPort)).c_str(), 1);
    for (int i = 0; i < 3; ++i) {
      ::setenv(("GLM_NODE" + std::to_string(i + 1)).c_str(),
               (node_ip_[i] + ":" + std::to_string(kPort)).c_str(), 1);
    }
    haproxy_ = std::make_unique<glm::testing::Proc>(
        net_->program(lb_, "/usr/sbin/haproxy"),
        net_->argv(lb_, {"/usr/sbin/haproxy", "-db", "-f",
                         std::string(GLM_SOURCE_DIR) + "/deploy/haproxy/haproxy.cfg"}),
        dir_ + "/haproxy.log");
    // HAProxy up, and every node seen healthy by it (rise 2 x inter 1 s).
    ASSERT_TRUE(glm::testing::wait_until(
        [&] { return http(lb_, kPort, "GET", "/health").status == 200; }, 10000))
        << haproxy_->log();
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  }
  void TearDown() override {
    haproxy_.reset();
    for (auto& n : nodes_) {
      if (n) kill_tree(n->pid());
    }
    nodes_.clear();
    if (!dir_.empty() && std::getenv("GLM_KEEP_SCALEOUT") == nullptr) sh("rm -rf " + dir_);
  }

  void start_node(int i) {
    const std::string ip = node_ip_[i];
    nodes_[i] = std::make_unique<glm::testing::Proc>(
        net_->program(ip, GLMSERVE_BIN),
        net_->argv(ip, {GLMSERVE_BIN,
                        "serve",
                        "--model",
                        model_,
                        "--host",
                        ip,
                        "--port",
                        std::to_string(kPort),
                        "--socket",
                        dir_ + "/n" + std::to_string(i) + ".sock",
                        "--db",
                        db_url_,
                        "--db-password-file",
                        dir_ + "/db-password",
                        "--threads",
                        "1",
                        "--kv-disk",
                        "off",
                        "--drain-timeout",
                        "20",
                        "--ctx-size",
                        "2048"}),
        dir_ + "/node" + std::to_string(i) + ".log");
  }
  bool wait_ready(int i) {
    return glm::testing::wait_until(
        [&] { return http(node_ip_[i], kPort, "GET", "/health").status == 200; }, 30000);
  }
  int node_index(const std::string& served_by) const {
    return served_by.size() == 5 ? served_by[4] - '1' : -1;  // "node2" -> 1
  }

  std::unique_ptr<Net> net_;
  std::string dir_, model_, db_url_, lb_;
  store::testing::PgCluster pg_;
  std::vector<std::string> node_ip_;
  std::vector<std::unique_ptr<glm::testing::Proc>> nodes_;
  std::unique_ptr<glm::testing::Proc> haproxy_;
};

TEST_F(Scaleout, AffinityThenAKilledAndADrainedNodeLoseNoConversation) {
  constexpr int kClients = 6, kTurnsBefore = 3, kTurnsAfter = 3;
  std::vector<Conversation> convs(kClients);
  for (int c = 0; c < kClients; ++c) convs[c].id = "conv-" + std::to_string(c) + "-scaleout";
  auto run_turns = [&](int c, int from, int to) {
    for (int t = from; t < to; ++t) {
      convs[c].turn(lb_, "client " + std::to_string(c) + " turn " + std::to_string(t) +
                             ": tell me about node failover " + std::to_string(c * 7 + t));
    }
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) threads.emplace_back(run_turns, c, 0, kTurnsBefore);
  for (auto& t : threads) t.join();
  threads.clear();
  // Affinity: a conversation stays on its node, and each turn after the first finds the whole
  // previous turn (prompt and answer) in that node's KV cache.
  std::set<int> used;
  for (const Conversation& conv : convs) {
    ASSERT_TRUE(conv.failures.empty()) << conv.failures[0];
    ASSERT_EQ(conv.turns.size(), static_cast<size_t>(kTurnsBefore));
    for (int t = 0; t < kTurnsBefore; ++t) {
      EXPECT_EQ(conv.turns[t].node, conv.turns[0].node) << conv.id << " turn " << t;
      if (t > 0) {
        EXPECT_GE(conv.turns[t].cached_tokens, conv.turns[t - 1].prompt_tokens)
            << conv.id << " turn " << t << " on " << conv.turns[t].node;
      }
    }
    used.insert(node_index(conv.turns[0].node));
  }
  EXPECT_GE(used.size(), 2u) << "the hash put every conversation on one node";

  // Under load: the node of conversation 0 dies (SIGKILL, engine and gateway with it); the
  // node of another conversation, a different one, drains (SIGTERM).
  const int killed = node_index(convs[0].turns[0].node);
  int drained = -1;
  for (const Conversation& conv : convs) {
    const int n = node_index(conv.turns[0].node);
    if (n != killed) drained = n;
  }
  ASSERT_GE(killed, 0);
  ASSERT_GE(drained, 0);
  std::atomic<bool> stop{false};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      for (int t = kTurnsBefore; !stop || t < kTurnsBefore + kTurnsAfter; ++t) {
        run_turns(c, t, t + 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill_tree(nodes_[killed]->pid());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_EQ(::kill(nodes_[drained]->pid(), SIGTERM), 0);
  EXPECT_TRUE(nodes_[drained]->wait(25000).has_value()) << "the drained node never stopped";
  stop = true;
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) {  // one more turn each, on the node left
    const int t = static_cast<int>(convs[c].turns.size() + convs[c].failures.size());
    run_turns(c, t, t + 1);
  }
  {
    std::ifstream log(dir_ + "/haproxy.log");
    int retried = 0, answered = 0;
    for (std::string line; std::getline(log, line);) {
      if (line.find("POST /v1/chat/completions") == std::string::npos) continue;
      ++answered;
      if (line.find("/+") != std::string::npos) ++retried;  // HAProxy's retries field: +N
    }
    std::printf("HAProxy: %d chat requests, %d of them retried on another node\n", answered,
                retried);
  }

  const int survivor = 3 - killed - drained;
  const std::string survivor_name = "node" + std::to_string(survivor + 1);
  for (const Conversation& conv : convs) {
    ASSERT_TRUE(conv.failures.empty()) << conv.id << ": " << conv.failures[0];
    ASSERT_GE(conv.turns.size(), static_cast<size_t>(kTurnsBefore + kTurnsAfter + 1)) << conv.id;
    // Every answer has its whole history: the prompt grows each turn.
    for (size_t t = 1; t < conv.turns.size(); ++t) {
      EXPECT_GT(conv.turns[t].prompt_tokens, conv.turns[t - 1].prompt_tokens) << conv.id;
    }
    // Its last turns ran on the one node left; a conversation that moved there prefilled its
    // history once (no KV of it there), then reused it.
    const Conversation::Turn& last = conv.turns.back();
    EXPECT_EQ(last.node, survivor_name) << conv.id;
    if (conv.turns[0].node != survivor_name) {
      size_t first_there = kTurnsBefore;
      while (conv.turns[first_there].node != survivor_name) ++first_there;
      const Conversation::Turn& moved = conv.turns[first_there];
      EXPECT_LT(moved.cached_tokens, moved.prompt_tokens / 2)
          << conv.id << ": the new node had its KV?";
      for (size_t t = first_there + 1; t < conv.turns.size(); ++t) {
        EXPECT_GE(conv.turns[t].cached_tokens, conv.turns[t - 1].prompt_tokens) << conv.id;
      }
      std::printf("%s moved %s -> %s: first turn %d tokens, %d cached\n", conv.id.c_str(),
                  conv.turns[0].node.c_str(), survivor_name.c_str(), moved.prompt_tokens,
                  moved.cached_tokens);
    }
  }

  // The shared store: the page's conversation, written through HAProxy, reads the same from
  // the node left and continues there; a Responses chain continues on another node.
  Reply created = http(lb_, kPort, "POST", "/api/conversations", "{}");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string page_id = created.json()["id"];
  Reply chat = http(lb_, kPort, "POST", "/api/conversations/" + page_id + "/chat",
                    R"({"content":"hello","params":{"max_tokens":3,"temperature":0}})");
  ASSERT_EQ(chat.status, 200) << chat.body;
  json seen = http(node_ip_[survivor], kPort, "GET", "/api/conversations/" + page_id).json();
  ASSERT_EQ(seen["messages"].size(), 2u) << seen.dump();
  EXPECT_EQ(seen["messages"][1]["status"], "complete");
  start_node(killed);  // back: a second node for the Responses chain
  ASSERT_TRUE(wait_ready(killed)) << nodes_[killed]->log();
  Reply r1 = http(node_ip_[survivor], kPort, "POST", "/v1/responses",
                  R"({"model":"tiny","input":"first","max_output_tokens":3,"store":true})");
  ASSERT_EQ(r1.status, 200) << r1.body;
  const json follow = {{"model", "tiny"},
                       {"input", "second"},
                       {"max_output_tokens", 3},
                       {"previous_response_id", r1.json()["id"]}};
  Reply r2 = http(node_ip_[killed], kPort, "POST", "/v1/responses", follow.dump());
  ASSERT_EQ(r2.status, 200) << r2.body;
  EXPECT_GT(r2.json()["usage"]["input_tokens"].get<int>(),
            r1.json()["usage"]["input_tokens"].get<int>());
  // The page's conversation continues on that other node, from the stored history.
  Reply chat2 = http(node_ip_[killed], kPort, "POST", "/api/conversations/" + page_id + "/chat",
                     R"({"content":"and again","params":{"max_tokens":3,"temperature":0}})");
  ASSERT_EQ(chat2.status, 200) << chat2.body;
  EXPECT_NE(chat2.body.find("\"type\":\"done\""), std::string::npos) << chat2.body;
  json page_there = http(node_ip_[survivor], kPort, "GET", "/api/conversations/" + page_id).json();
  ASSERT_EQ(page_there["messages"].size(), 4u) << page_there.dump();
  EXPECT_EQ(page_there["messages"][2]["content"], "and again");
  EXPECT_EQ(page_there["messages"][3]["status"], "complete");
}

// PostgreSQL goes away: what needs the store fails with a clear 503, what does not (the /v1
// API, which carries its history) still answers, no node dies, and all recover with it.
TEST_F(Scaleout, ADatabaseOutageFailsStoreRequestsClearlyAndNodesRecover) {
  pg_.stop();
  Reply listed = http(lb_, kPort, "POST", "/api/conversations", "{}");
  EXPECT_EQ(listed.status, 503) << listed.body;
  EXPECT_NE(listed.body.find("conversation database unreachable"), std::string::npos)
      << listed.body;
  Conversation conv;
  conv.id = "outage";
  EXPECT_TRUE(conv.turn(lb_, "still there?")) << conv.failures[0];
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(nodes_[i]->wait(50).has_value()) << "node " << i;
  ASSERT_TRUE(pg_.restart()) << pg_.why();
  Reply created = http(lb_, kPort, "POST", "/api/conversations", "{}");
  EXPECT_EQ(created.status, 201) << created.body;
}

TEST_F(Scaleout, RollingRestartUnderSteadyLoadFailsNothing) {
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      int round = 0;
      while (!stop) {
        Conversation conv;  // short conversations, one after another
        conv.id = "roll-" + std::to_string(c) + "-" + std::to_string(round++);
        for (int t = 0; t < 2 && !stop; ++t) {
          if (conv.turn(lb_, "turn " + std::to_string(t) + " of " + conv.id)) ++answered;
        }
        std::lock_guard<std::mutex> lock(mu);
        failures.insert(failures.end(), conv.failures.begin(), conv.failures.end());
      }
    });
  }
  for (int i = 0; i < 3; ++i) {
    const int before = answered;
    ASSERT_EQ(::kill(nodes_[i]->pid(), SIGTERM), 0);
    ASSERT_TRUE(nodes_[i]->wait(25000).has_value()) << "node " << i << " did not stop";
    start_node(i);
    ASSERT_TRUE(wait_ready(i)) << nodes_[i]->log();
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // HAProxy: rise 2 x 1 s
    EXPECT_GT(answered.load(), before) << "no answer while node " << i << " restarted";
  }
  stop = true;
  for (auto& t : clients) t.join();
  std::printf("rolling restart: %d answers, %zu failed\n", answered.load(), failures.size());
  EXPECT_GT(answered.load(), 12);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures[0];
}

}  // namespace
}  // namespace glm::scaleout
