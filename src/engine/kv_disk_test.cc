// The engine with a KV disk cache (docs/engine.md#kv-disk), over the fake model: after a
// restart (a new engine, a new model with empty K/V cells, the same directory) a
// conversation's next turn reuses as many tokens as without the restart and streams the same
// text (the fake model computes its logits from the context it reads back through the block
// table, so a block restored wrong changes the text or fails the request); conversations are
// on disk once the engine is idle, before any stop; another model never reads them.
#include <dirent.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "engine/fake_parts.h"
#include "scheduler/fake_model.h"

namespace glm::engine {
namespace {

using glm::testing::FakeModel;
using glm::testing::FakeTemplate;
using glm::testing::FakeTokenizer;
using glm::testing::kVocab;

std::unique_ptr<Engine> engine_over(const std::string& dir, int block_tokens = 16) {
  Options o;
  o.kv_disk = dir;
  o.n_ctx = 512;
  o.block_tokens = block_tokens;
  auto tok = std::make_unique<FakeTokenizer>();
  auto tmpl = std::make_unique<FakeTemplate>(*tok);
  return create_engine(std::make_unique<FakeModel>(kVocab, o.block_tokens), std::move(tok),
                       std::move(tmpl), o);
}

struct Turn {
  Event start, done;
  std::string text;
};

// Runs one request to its end (60 s at most, so that a bug fails instead of hanging).
Turn run(Engine* e, const std::string& id, const std::vector<tok::Message>& m) {
  Request r;
  r.id = id;
  r.conversation = "conv";
  r.messages = m;
  r.params.temperature = 0.0f;
  r.params.max_tokens = 24;
  std::mutex mu;
  std::condition_variable cv;
  Turn t;
  bool ended = false;
  const Status st = e->submit(r, [&](const Event& ev) {
    std::lock_guard<std::mutex> lock(mu);
    if (ev.type == EventType::kStart) t.start = ev;
    if (ev.type == EventType::kToken) t.text += ev.text;
    if (ev.type == EventType::kDone || ev.type == EventType::kError) {
      t.done = ev;
      ended = true;
      cv.notify_all();
    }
  });
  EXPECT_TRUE(st.ok()) << st.to_string();
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(!st.ok() || cv.wait_for(lock, std::chrono::seconds(60), [&] { return ended; }));
  return t;
}

int count_files(const std::string& dir, const std::string& part) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      n += std::string(e->d_name).find(part) != std::string::npos;
    ::closedir(d);
  }
  return n;
}

class EngineKvDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-engine-kvdisk-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Turn 1 and the messages of turn 2.
  std::vector<tok::Message> turn1(Engine* e) {
    std::vector<tok::Message> m = {{"system", "sys"}, {"user", "first question"}};
    const Turn t1 = run(e, "t1", m);
    EXPECT_EQ(t1.done.type, EventType::kDone) << t1.done.error.to_string();
    m.push_back({"assistant", t1.text});
    m.push_back({"user", "and the next one"});
    return m;
  }

  std::string dir_;
};

TEST_F(EngineKvDiskTest, TheNextTurnAfterARestartReusesWhatItWouldHaveWithout) {
  Turn same;
  {
    auto e = engine_over(dir_ + "/no-restart");
    const auto m = turn1(e.get());
    same = run(e.get(), "t2", m);
  }
  ASSERT_EQ(same.done.type, EventType::kDone);
  ASSERT_GT(same.start.usage.cached_tokens, 10);
  std::vector<tok::Message> m;
  {
    auto e = engine_over(dir_ + "/kv");
    m = turn1(e.get());
  }  // drain: a graceful stop
  auto e = engine_over(dir_ + "/kv");
  const Turn t2 = run(e.get(), "t2", m);
  ASSERT_EQ(t2.done.type, EventType::kDone) << t2.done.error.to_string();
  EXPECT_EQ(t2.start.usage.cached_tokens, same.start.usage.cached_tokens);
  EXPECT_EQ(t2.start.usage.prompt_tokens, same.start.usage.prompt_tokens);
  EXPECT_EQ(t2.text, same.text);
}

TEST_F(EngineKvDiskTest, AConversationIsOnDiskOnceTheEngineIsIdleBeforeAnyStop) {
  auto e = engine_over(dir_);
  const auto m = turn1(e.get());
  bool written = false;
  for (int i = 0; i < 3000 && !written; ++i) {  // the loop writes it when idle
    written = count_files(dir_, "-c") == 1;
    if (!written) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(written);
  EXPECT_GT(count_files(dir_, "-b"), 0);
  // What a kill -9 now would leave: the files as they are. A copy of them serves a new engine.
  ASSERT_EQ(std::system(("cp -r " + dir_ + " " + dir_ + "-copy").c_str()), 0);
  auto fresh = engine_over(dir_ + "-copy");
  const Turn t2 = run(fresh.get(), "t2", m);
  std::system(("rm -rf " + dir_ + "-copy").c_str());
  EXPECT_EQ(t2.done.type, EventType::kDone);
  EXPECT_GT(t2.start.usage.cached_tokens, 10);
}

TEST_F(EngineKvDiskTest, AnotherModelNeverReadsTheFilesAndAnUnusableDirectoryIsNoDiskCache) {
  std::vector<tok::Message> m;
  {
    auto e = engine_over(dir_);
    m = turn1(e.get());
  }
  auto other = engine_over(dir_, /*block_tokens=*/8);  // another KV layout: another identity
  const Turn t2 = run(other.get(), "t2", m);
  EXPECT_EQ(t2.done.type, EventType::kDone);
  EXPECT_EQ(t2.start.usage.cached_tokens, 0);
  // A directory that cannot be: the engine serves without it.
  ASSERT_EQ(std::system(("touch " + dir_ + "/plain").c_str()), 0);
  auto none = engine_over(dir_ + "/plain/kv");
  const Turn t = run(none.get(), "t", m);
  EXPECT_EQ(t.done.type, EventType::kDone);
}

}  // namespace
}  // namespace glm::engine
