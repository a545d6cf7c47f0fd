// ModelManager against a fake engine socket (health answers set by the test) and a real
// Supervisor whose on-demand child is /bin/sleep: one start for many ensures, replies when the
// health says ready, load progress in the list while loading, a failed load answered by name.
#include "serve/model_manager.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "protocol/protocol.h"

namespace glm::serve {
namespace {

using json = nlohmann::json;

// Answers every connection's first line with the health event set by the test.
class FakeHealth {
 public:
  explicit FakeHealth(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[256];
        if (::read(c, buf, sizeof(buf)) > 0) {
          std::lock_guard<std::mutex> lock(mu_);
          const std::string line = protocol::serialize_event(event_) + "\n";
          (void)!::write(c, line.data(), line.size());
        }
        ::close(c);
      }
    });
  }
  ~FakeHealth() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  void set(generation::Health h, uint64_t done, uint64_t total) {
    std::lock_guard<std::mutex> lock(mu_);
    event_.type = protocol::EventType::kHealth;
    event_.health = h;
    event_.instance = "tok";
    event_.load_done_bytes = done;
    event_.load_total_bytes = total;
  }

 private:
  int fd_ = -1;
  std::mutex mu_;
  protocol::Event event_;
  std::thread thread_;
};

class ModelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-manager-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ChildSpec sleeper{"engine m", "/bin/sleep", {"sleep", "60"}};
    sleeper.on_demand = true;
    supervisor_ =
        std::make_unique<Supervisor>(std::vector<ChildSpec>{sleeper}, SupervisorOptions{});
    ManagerOptions o;
    o.instance = "tok";
    manager_ = std::make_unique<ModelManager>(
        std::vector<ManagedModel>{{"m", "/models/m.gguf", dir_ + "/m.sock", 1000, 0}}, o,
        supervisor_.get());
    supervisor_->on_start = [this](size_t i, pid_t) { manager_->on_start(i); };
  }
  void TearDown() override {
    if (supervisor_->pid(0) > 0) {
      ::kill(supervisor_->pid(0), SIGKILL);
      ::waitpid(supervisor_->pid(0), nullptr, 0);
    }
    std::system(("rm -rf " + dir_).c_str());
  }
  json model_entry() const { return json::parse(manager_->list_json())["models"][0]; }

  std::string dir_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ModelManagerTest, ManyEnsuresOneStartRepliedWhenReadyWithProgressMeanwhile) {
  FakeHealth engine(dir_ + "/m.sock");
  engine.set(generation::Health::kLoading, 250, 1000);
  std::vector<json> replies;
  for (int i = 0; i < 3; ++i) {
    manager_->ensure("m", [&](const std::string& line) { replies.push_back(json::parse(line)); });
  }
  EXPECT_EQ(manager_->starts(), 1);
  EXPECT_GT(supervisor_->pid(0), 0);
  EXPECT_TRUE(replies.empty());
  manager_->on_tick();
  EXPECT_TRUE(replies.empty());
  json m = model_entry();
  EXPECT_EQ(m["state"], "loading");
  EXPECT_EQ(m["load"]["percent"], 25);
  engine.set(generation::Health::kReady, 0, 0);
  manager_->on_tick();
  ASSERT_EQ(replies.size(), 3u);
  for (const json& r : replies) {
    EXPECT_TRUE(r["ok"].get<bool>());
    EXPECT_EQ(r["socket"], dir_ + "/m.sock");
  }
  EXPECT_EQ(model_entry()["state"], "loaded");
  // Loaded: answered at once, no new start.
  manager_->ensure("", [&](const std::string& line) { replies.push_back(json::parse(line)); });
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies.back()["model"], "m");
  EXPECT_EQ(manager_->starts(), 1);
}

TEST_F(ModelManagerTest, UnknownNamesAndFailedLoadsAreAnsweredByName) {
  std::string reply;
  manager_->ensure("zz", [&](const std::string& line) { reply = line; });
  json r = json::parse(reply);
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_EQ(r["code"], "not_found");
  EXPECT_NE(r["message"].get<std::string>().find("'zz' is not served here"), std::string::npos);
  EXPECT_NE(r["message"].get<std::string>().find("'m'"), std::string::npos);

  reply.clear();
  manager_->ensure("m", [&](const std::string& line) { reply = line; });
  EXPECT_TRUE(reply.empty());
  manager_->on_exit(0, "exited with code 1");  // what the supervisor reports for a failed load
  r = json::parse(reply);
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_NE(r["message"].get<std::string>().find("model 'm' failed to load: its engine exited "
                                                 "with code 1"),
            std::string::npos)
      << reply;
  EXPECT_EQ(model_entry()["state"], "unloaded");
}

// Adapters served on a model (serve --adapter): "NAME" and "MODEL:NAME" start that model's engine
// and each waiter's reply carries the adapter it asked for (the model's own name none); the list
// names each adapter by what selects it; an adapter the model does not serve is not_found.
TEST_F(ModelManagerTest, AdapterNamesSelectTheirModelAndComeBackInTheReply) {
  ManagedModel spec{"m", "/models/m.gguf", dir_ + "/m.sock", 1000, 0};
  spec.adapters = {"ad", "pt"};
  ManagerOptions o;
  o.instance = "tok";
  manager_ = std::make_unique<ModelManager>(std::vector<ManagedModel>{spec}, o, supervisor_.get());
  FakeHealth engine(dir_ + "/m.sock");
  engine.set(generation::Health::kLoading, 0, 1000);
  std::vector<json> replies;
  for (const char* name : {"ad", "m:pt", "m"}) {
    manager_->ensure(name, [&](const std::string& line) { replies.push_back(json::parse(line)); });
  }
  EXPECT_EQ(manager_->starts(), 1);
  engine.set(generation::Health::kReady, 0, 0);
  manager_->on_tick();
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0].value("adapter", ""), "ad");
  EXPECT_EQ(replies[1].value("adapter", ""), "pt");
  EXPECT_FALSE(replies[2].contains("adapter"));
  for (const json& r : replies) EXPECT_EQ(r["socket"], dir_ + "/m.sock");
  EXPECT_EQ(model_entry()["adapters"],
            json::parse(R"([{"name":"ad","adapter":"ad"},{"name":"pt","adapter":"pt"}])"));
  std::string reply;
  manager_->ensure("m:zz", [&](const std::string& line) { reply = line; });
  EXPECT_EQ(json::parse(reply)["code"], "not_found");
}

}  // namespace
}  // namespace glm::serve
