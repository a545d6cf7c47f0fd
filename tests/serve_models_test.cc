// Several models under one `glmserve serve` (docs/operations.md, "Several models"): each request
// is answered by the engine of the model it names (its prompt has that model's own token count,
// computed here by `glmserve template` on each file), an unknown model is a 404 that lists the
// models, an idle model is unloaded after --keep-alive and loaded again by its next request,
// concurrent first requests start its engine once, a killed engine of a loaded model is
// restarted, --max-loaded unloads the least recently used, and a model that cannot load fails its
// requests with a message naming it while the others answer. Tiny random-weight models: ChatGLM3
// and GLM-4 with their real vocabularies.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "gateway/http_test_util.h"
#include "process_util.h"

namespace glm::serve {
namespace {

using glm::gateway::testing::RawHttp;
using glm::testing::children_of;
using glm::testing::cmdline_of;
using glm::testing::Proc;
using glm::testing::ready_port;
using glm::testing::run_cli;
using glm::testing::wait_until;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const json kMessages =
    json::array({{{"role", "user"}, {"content", "你好，请介绍一下北京的天气和历史"}}});

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

struct Reply {
  int status = -1;
  json body;
};

Reply request(int port, const std::string& method, const std::string& path, const json& body) {
  RawHttp raw(port);
  raw.send_request(method, path, body.is_null() ? "" : body.dump());
  Reply r;
  if (!raw.read_until("", 60000)) return r;
  r.status = raw.result().status;
  r.body = json::parse(raw.result().body, nullptr, false);
  return r;
}

Reply chat(int port, const std::string& model) {
  json body = {{"messages", kMessages}, {"max_tokens", 4}, {"temperature", 0}};
  if (!model.empty()) body["model"] = model;
  return request(port, "POST", "/v1/chat/completions", body);
}

// The state /v1/models gives `name` ("" when it is not listed).
std::string state_of(int port, const std::string& name) {
  Reply r = request(port, "GET", "/v1/models", json());
  if (r.status != 200 || !r.body.is_object()) return "";
  for (const json& m : r.body["data"]) {
    if (m.value("id", "") == name) return m.value("state", "");
  }
  return "";
}

// Engine children of serve now (their command lines name their model's file).
int engines_running(pid_t serve, const std::string& file) {
  int n = 0;
  for (pid_t c : children_of(serve)) {
    const std::string cmd = cmdline_of(c);
    n += cmd.find(" engine ") != std::string::npos && cmd.find(file) != std::string::npos;
  }
  return n;
}

class ServeModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-serve-models-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // serve keeps its KV disk cache under the data directory by default: the test's own.
    ::setenv("XDG_DATA_HOME", dir_.c_str(), 1);
    const std::string data = GLM_SHARED_DATA;
    const std::string v3 = data + "/tokenizers/chatglm3.tokenizer.model";
    const std::string v4 = data + "/tokenizers/glm4.tokenizer.model";
    if (::access(v3.c_str(), R_OK) != 0 || ::access(v4.c_str(), R_OK) != 0) {
      GTEST_SKIP() << "no ChatGLM3 / GLM-4 tokenizers in ../shared/data/tokenizers";
    }
    a_ = dir_ + "/a.gguf";
    b_ = dir_ + "/b.gguf";
    ASSERT_EQ(
        run_cli("gen-model --arch chatglm3 --preset tiny --vocab " + v3 + " -o " + a_).exit_code,
        0);
    ASSERT_EQ(run_cli("gen-model --arch glm4 --preset tiny --vocab " + v4 + " -o " + b_).exit_code,
              0);
    std::ofstream(dir_ + "/m.json") << kMessages.dump();
    n_a_ = prompt_tokens(a_);
    n_b_ = prompt_tokens(b_);
    // The models must tell themselves apart by this count for the routing checks to mean it.
    ASSERT_GT(n_a_, 0);
    ASSERT_GT(n_b_, 0);
    ASSERT_NE(n_a_, n_b_);
  }
  void TearDown() override {
    ::unsetenv("XDG_DATA_HOME");
    std::system(("rm -rf " + dir_).c_str());
  }

  // The prompt's token count on `model`, from `glmserve template` (no server involved).
  int prompt_tokens(const std::string& model) {
    auto r = run_cli("template --model " + model + " --messages " + dir_ + "/m.json");
    json ids = json::parse(r.out, nullptr, false);
    return r.exit_code == 0 && ids.is_array() ? static_cast<int>(ids.size()) : -1;
  }

  // serve --model a --model b with `flags`; waits for its ready line; returns its port.
  int start(std::unique_ptr<Proc>* serve, const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"serve",       "--model", a_,         "--model",        b_,
                                     "--port",      "0",       "--socket", dir_ + "/e.sock", "--db",
                                     dir_ + "/c.db"};
    args.insert(args.end(), flags.begin(), flags.end());
    *serve = std::make_unique<Proc>(args, dir_ + "/serve.log");
    Proc& p = **serve;
    if (!wait_until([&] { return ready_port(p.log()) > 0; }, 30000)) {
      ADD_FAILURE() << "serve not ready\n" << p.log();
      return -1;
    }
    return ready_port(p.log());
  }

  std::string dir_, a_, b_;
  int n_a_ = 0, n_b_ = 0;
};

TEST_F(ServeModelsTest, EachRequestIsAnsweredByItsModelAndAnUnknownOneIs404) {
  std::unique_ptr<Proc> serve;
  const int port = start(&serve, {"--keep-alive", "-1"});
  ASSERT_GT(port, 0);
  EXPECT_EQ(state_of(port, "a"), "unloaded");
  EXPECT_EQ(state_of(port, "b"), "unloaded");

  Reply rb = chat(port, "b");
  ASSERT_EQ(rb.status, 200) << rb.body.dump() << serve->log();
  EXPECT_EQ(rb.body["model"], "b");
  EXPECT_EQ(rb.body["usage"]["prompt_tokens"], n_b_);
  EXPECT_EQ(state_of(port, "b"), "loaded");
  EXPECT_EQ(state_of(port, "a"), "unloaded");

  Reply ra = chat(port, "a");
  ASSERT_EQ(ra.status, 200) << ra.body.dump();
  EXPECT_EQ(ra.body["model"], "a");
  EXPECT_EQ(ra.body["usage"]["prompt_tokens"], n_a_);
  // No model: the first one.
  Reply rd = chat(port, "");
  ASSERT_EQ(rd.status, 200) << rd.body.dump();
  EXPECT_EQ(rd.body["model"], "a");
  EXPECT_EQ(rd.body["usage"]["prompt_tokens"], n_a_);
  // The Anthropic route goes by the model too.
  Reply rm = request(port, "POST", "/v1/messages",
                     {{"model", "b"}, {"messages", kMessages}, {"max_tokens", 4}});
  ASSERT_EQ(rm.status, 200) << rm.body.dump();
  // The same messages as b's first request: the prompt is all read from the cache (Anthropic's
  // input_tokens count the tokens not read from it).
  EXPECT_EQ(rm.body["usage"]["input_tokens"].get<int>() +
                rm.body["usage"]["cache_read_input_tokens"].get<int>(),
            n_b_);

  Reply unknown = chat(port, "zz");
  EXPECT_EQ(unknown.status, 404);
  const std::string message = unknown.body["error"].value("message", "");
  EXPECT_NE(message.find("'zz'"), std::string::npos) << message;
  EXPECT_NE(message.find("'a', 'b'"), std::string::npos) << message;
  Reply model_b = request(port, "GET", "/v1/models/b", json());
  EXPECT_EQ(model_b.status, 200);
  EXPECT_EQ(model_b.body.value("state", ""), "loaded");
  EXPECT_EQ(request(port, "GET", "/v1/models/zz", json()).status, 404);
  Reply health = request(port, "GET", "/health", json());
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body["models"].size(), 2u) << health.body.dump();
  EXPECT_EQ(count(serve->log(), "serve: loading model"), 2) << serve->log();
}

TEST_F(ServeModelsTest, AnIdleModelIsUnloadedAfterKeepAliveAndLoadedByItsNextRequest) {
  std::unique_ptr<Proc> serve;
  const int port = start(&serve, {"--keep-alive", "2s"});
  ASSERT_GT(port, 0);
  ASSERT_EQ(chat(port, "a").status, 200) << serve->log();
  EXPECT_EQ(engines_running(serve->pid(), a_), 1);
  const auto used = Clock::now();
  ASSERT_TRUE(wait_until([&] { return state_of(port, "a") == "unloaded"; }, 20000)) << serve->log();
  const double idle_s = std::chrono::duration<double>(Clock::now() - used).count();
  EXPECT_GE(idle_s, 1.8);  // not before its keep-alive
  EXPECT_TRUE(wait_until([&] { return engines_running(serve->pid(), a_) == 0; }, 5000));
  Reply again = chat(port, "a");
  ASSERT_EQ(again.status, 200) << again.body.dump() << serve->log();
  EXPECT_EQ(again.body["usage"]["prompt_tokens"], n_a_);
  EXPECT_EQ(count(serve->log(), "serve: loading model a"), 2) << serve->log();
  EXPECT_EQ(count(serve->log(), "serve: loading model b"), 0) << serve->log();
}

TEST_F(ServeModelsTest, ConcurrentFirstRequestsStartTheEngineOnce) {
  std::unique_ptr<Proc> serve;
  const int port = start(&serve, {"--keep-alive", "-1"});
  ASSERT_GT(port, 0);
  constexpr int kClients = 6;
  std::vector<Reply> replies(kClients);
  std::vector<std::thread> threads;
  std::atomic<int> go{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      go.fetch_add(1);
      while (go.load() < kClients) std::this_thread::yield();
      replies[i] = chat(port, "b");
    });
  }
  for (auto& t : threads) t.join();
  for (const Reply& r : replies) {
    EXPECT_EQ(r.status, 200) << r.body.dump();
    EXPECT_EQ(r.body["usage"]["prompt_tokens"], n_b_);
  }
  EXPECT_EQ(count(serve->log(), "serve: loading model b"), 1) << serve->log();
  EXPECT_EQ(count(serve->log(), "serve: started engine b"), 1) << serve->log();
  EXPECT_EQ(engines_running(serve->pid(), b_), 1);
}

// A loaded model's engine is supervised as the one engine of `serve --model M` is: killed, it is
// restarted (with backoff) and answers again, without a request having to load it.
TEST_F(ServeModelsTest, AKilledEngineOfALoadedModelIsRestarted) {
  std::unique_ptr<Proc> serve;
  const int port = start(&serve, {"--keep-alive", "-1"});
  ASSERT_GT(port, 0);
  ASSERT_EQ(chat(port, "b").status, 200);
  pid_t engine = -1;
  for (pid_t c : children_of(serve->pid())) {
    if (cmdline_of(c).find(b_) != std::string::npos) engine = c;
  }
  ASSERT_GT(engine, 0);
  ::kill(engine, SIGKILL);
  ASSERT_TRUE(wait_until(
      [&] {
        for (pid_t c : children_of(serve->pid())) {
          if (c != engine && cmdline_of(c).find(b_) != std::string::npos) return true;
        }
        return false;
      },
      10000))
      << serve->log();
  EXPECT_TRUE(wait_until([&] { return state_of(port, "b") == "loaded"; }, 10000)) << serve->log();
  Reply again = chat(port, "b");
  EXPECT_EQ(again.status, 200) << again.body.dump();
  EXPECT_EQ(again.body["usage"]["prompt_tokens"], n_b_);
  EXPECT_EQ(count(serve->log(), "serve: loading model b"), 1) << serve->log();  // not a new load
  EXPECT_NE(serve->log().find("restarting in"), std::string::npos) << serve->log();
}

TEST_F(ServeModelsTest, MaxLoadedUnloadsTheLeastRecentlyUsedIdleModel) {
  std::unique_ptr<Proc> serve;
  const int port = start(&serve, {"--keep-alive", "-1", "--max-loaded", "1"});
  ASSERT_GT(port, 0);
  ASSERT_EQ(chat(port, "a").status, 200);
  // b needs a's room: a is idle (past the 2 s during which a model just asked for is kept).
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  Reply rb = chat(port, "b");
  ASSERT_EQ(rb.status, 200) << rb.body.dump() << serve->log();
  EXPECT_EQ(rb.body["usage"]["prompt_tokens"], n_b_);
  EXPECT_EQ(state_of(port, "a"), "unloaded");
  EXPECT_EQ(state_of(port, "b"), "loaded");
  EXPECT_EQ(engines_running(serve->pid(), a_), 0);
  EXPECT_NE(serve->log().find("unloading a (least recently used) to make room for b"),
            std::string::npos)
      << serve->log();
}

// --models-dir D without --model: every model of the store, by its store name.
TEST_F(ServeModelsTest, ModelsDirServesTheWholeStoreByName) {
  const std::string store = dir_ + "/store";
  ASSERT_EQ(std::system(("mkdir -p " + store + "/tiny-a " + store + "/tiny-b && cp " + a_ + " " +
                         store + "/tiny-a/f16.gguf && cp " + b_ + " " + store + "/tiny-b/f16.gguf")
                            .c_str()),
            0);
  Proc serve({"serve", "--models-dir", store, "--port", "0", "--socket", dir_ + "/e.sock", "--db",
              dir_ + "/c.db"},
             dir_ + "/serve.log");
  ASSERT_TRUE(wait_until([&] { return ready_port(serve.log()) > 0; }, 30000)) << serve.log();
  const int port = ready_port(serve.log());
  EXPECT_EQ(state_of(port, "tiny-a:f16"), "unloaded");
  EXPECT_EQ(state_of(port, "tiny-b:f16"), "unloaded");
  Reply rb = chat(port, "tiny-b:f16");
  ASSERT_EQ(rb.status, 200) << rb.body.dump() << serve.log();
  EXPECT_EQ(rb.body["usage"]["prompt_tokens"], n_b_);
  Reply ra = chat(port, "");  // the store's first name
  ASSERT_EQ(ra.status, 200) << ra.body.dump();
  EXPECT_EQ(ra.body["model"], "tiny-a:f16");
  EXPECT_EQ(ra.body["usage"]["prompt_tokens"], n_a_);
}

// Adapters with several models (serve --adapter NAME=PATH): each goes onto every served model it
// fits (la, a random LoRA of a's shapes, fits a and b, which share them; lc, of a GLM-4-0414 model,
// fits only c), is listed with its parent by the name that selects it ("MODEL:NAME" where several
// models serve it, else "NAME"), and a request naming it is answered by that model's engine with
// the adapter (its prompt has that model's token count; its answer is not the bare model's).
// An adapter that fits no model stops serve before it starts, naming each model's reason.
TEST_F(ServeModelsTest, AdaptersAreServedOnEachModelTheyFit) {
  const std::string c = dir_ + "/c.gguf", la = dir_ + "/la.gguf", lc = dir_ + "/lc.gguf";
  ASSERT_EQ(run_cli("gen-model --arch glm4-0414 --preset tiny -o " + c).exit_code, 0);
  ASSERT_EQ(run_cli("gen-model --lora-of " + a_ + " --rank 4 -o " + la).exit_code, 0);
  ASSERT_EQ(run_cli("gen-model --lora-of " + c + " --rank 4 -o " + lc).exit_code, 0);
  const int n_c = prompt_tokens(c);
  ASSERT_GT(n_c, 0);

  auto refused = run_cli("serve --model " + a_ + " --model " + b_ + " --adapter lx=" + lc +
                         " --port 0 --socket " + dir_ + "/x.sock --db " + dir_ + "/x.db");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.out.find("--adapter lx fits none of the served models (a: "), std::string::npos)
      << refused.out;
  EXPECT_NE(refused.out.find("; b: "), std::string::npos) << refused.out;

  std::unique_ptr<Proc> serve;
  const int port = start(&serve, {"--model", c, "--adapter", "la=" + la, "--adapter", "lc=" + lc,
                                  "--keep-alive", "-1"});
  ASSERT_GT(port, 0);
  Reply models = request(port, "GET", "/v1/models", json());
  ASSERT_EQ(models.status, 200);
  std::map<std::string, std::string> parent;  // listed id -> its parent ("" for a model)
  for (const json& m : models.body["data"]) parent[m.value("id", "")] = m.value("parent", "");
  const std::map<std::string, std::string> want = {{"a", ""},     {"a:la", "a"}, {"b", ""},
                                                   {"b:la", "b"}, {"c", ""},     {"lc", "c"}};
  EXPECT_EQ(parent, want) << models.body.dump();
  EXPECT_EQ(request(port, "GET", "/v1/models/lc", json()).body.value("parent", ""), "c");

  auto answer = [&](const std::string& model, int prompt_tokens) {
    json body = {{"messages", kMessages}, {"max_tokens", 8}, {"temperature", 0}};
    body["model"] = model;
    Reply r = request(port, "POST", "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << model << ": " << r.body.dump() << serve->log();
    if (r.status != 200) return std::string();
    EXPECT_EQ(r.body["usage"]["prompt_tokens"], prompt_tokens) << model;
    return r.body["choices"][0]["message"].value("content", "");
  };
  const std::string a_la = answer("a:la", n_a_);
  EXPECT_NE(a_la, answer("a", n_a_));
  EXPECT_EQ(answer("la", n_a_), a_la);  // NAME alone: the first model serving it
  EXPECT_NE(answer("b:la", n_b_), answer("b", n_b_));
  EXPECT_NE(answer("lc", n_c), answer("c", n_c));
  Reply unknown = chat(port, "c:la");
  EXPECT_EQ(unknown.status, 404) << unknown.body.dump();
  // The page's picker: each model, then its adapters with their parent.
  Reply health = request(port, "GET", "/health", json());
  std::vector<std::string> picker;
  for (const json& m : health.body["models"]) {
    picker.push_back(m.value("name", "") + "<" + m.value("parent", ""));
  }
  EXPECT_EQ(picker, (std::vector<std::string>{"a<", "a:la<a", "b<", "b:la<b", "c<", "lc<c"}))
      << health.body.dump();
}

TEST_F(ServeModelsTest, AModelThatCannotLoadFailsItsRequestsByNameAndTheOthersAnswer) {
  const std::string bad = dir_ + "/broken.gguf";
  std::ofstream(bad) << "not a gguf file";
  std::unique_ptr<Proc> serve;
  const int port = start(&serve, {"--model", bad});
  ASSERT_GT(port, 0);
  Reply r = chat(port, "broken");
  EXPECT_EQ(r.status, 500) << r.body.dump();
  const std::string message = r.body["error"].value("message", "");
  EXPECT_NE(message.find("model 'broken' failed to load"), std::string::npos) << message;
  EXPECT_EQ(chat(port, "a").status, 200) << serve->log();
  EXPECT_FALSE(serve->wait(0).has_value()) << serve->log();
}

}  // namespace
}  // namespace glm::serve
