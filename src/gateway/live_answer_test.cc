// LiveAnswer and LiveAnswers without HTTP: ids, merged token runs, waiting readers, the
// detached clock, one answer per conversation, threads joined.
#include "gateway/live_answer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace glm::gateway {
namespace {

using json = nlohmann::json;

TEST(LiveAnswer, ReadsFromAnyIdWithTokenRunsMerged) {
  LiveAnswer a("c1", "r1", 7);
  a.publish({{"type", "start"}});
  a.publish({{"type", "token"}, {"text", "he"}});
  a.publish({{"type", "token"}, {"text", "llo"}});
  a.publish({{"type", "notice"}, {"message", "m"}});
  a.publish({{"type", "token"}, {"text", "!"}});
  LiveAnswer::Read r = a.read_from(0, 0);
  EXPECT_EQ(r.frames,
            "id: 0\ndata: {\"type\":\"start\"}\n\n"
            "id: 2\ndata: {\"text\":\"hello\",\"type\":\"token\"}\n\n"
            "id: 3\ndata: {\"message\":\"m\",\"type\":\"notice\"}\n\n"
            "id: 4\ndata: {\"text\":\"!\",\"type\":\"token\"}\n\n");
  EXPECT_EQ(r.next, 5u);
  EXPECT_FALSE(r.ended);
  // After the last id a reader had: only what came since.
  r = a.read_from(3, 0);
  EXPECT_EQ(r.frames.rfind("id: 3\n", 0), 0u) << r.frames;
  // Nothing new: the reader waits, then gets nothing.
  r = a.read_from(5, 10);
  EXPECT_TRUE(r.frames.empty());
  EXPECT_EQ(r.next, 5u);
  // A waiting reader wakes for the end, which carries the last payload.
  std::thread end([&] { a.end({{"type", "done"}}); });
  r = a.read_from(5, 5000);
  end.join();
  EXPECT_TRUE(r.ended);  // woken by the end (which came with its event), not the timeout
  EXPECT_EQ(r.frames, "id: 5\ndata: {\"type\":\"done\"}\n\n");
}

TEST(LiveAnswer, CountsHowLongNobodyFollowed) {
  LiveAnswer a("c1", "r1", 7);
  a.attach();
  EXPECT_EQ(a.detached_ms(), 0);
  a.attach();
  a.detach();
  EXPECT_EQ(a.detached_ms(), 0);  // one still follows
  a.detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(a.detached_ms(), 15);
}

TEST(LiveAnswers, OneLiveAnswerPerConversationAndThreadsJoined) {
  LiveAnswers reg;
  std::atomic<bool> go{false};
  auto first = std::make_shared<LiveAnswer>("c1", "r1", 1);
  ASSERT_TRUE(reg.start(first,
                        [&] {
                          while (!go) std::this_thread::yield();
                          first->end({{"type", "done"}});
                        })
                  .ok());
  EXPECT_EQ(reg.find("c1"), first);
  auto second = std::make_shared<LiveAnswer>("c1", "r2", 2);
  EXPECT_EQ(reg.start(second, [] {}).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(reg.wait_idle(10));
  go = true;
  EXPECT_TRUE(reg.wait_idle(5000));
  EXPECT_EQ(reg.find("c1"), nullptr);
  // The next turn of the conversation starts at once, even while the last one's thread ends.
  auto third = std::make_shared<LiveAnswer>("c1", "r3", 3);
  ASSERT_TRUE(reg.start(third, [&] { third->end({{"type", "done"}}); }).ok());
  reg.join_all();
  EXPECT_EQ(reg.size(), 0u);
  // Closed (the gateway stops): nothing starts any more.
  reg.close();
  EXPECT_EQ(reg.start(std::make_shared<LiveAnswer>("c2", "r4", 4), [] {}).code(),
            ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace glm::gateway
