// EchoEngine's own behaviour where other tests lean on it: the running count it reports.
#include "testing/echo_engine.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

namespace glm::testing {
namespace {

// stats().running counts a request from its kStart to its final event, also while the loop
// calls its sink with the lock released (a /metrics scrape between two tokens of a stream saw
// 0 running once, failing GatewayReal.EchoEngineDaemon in CI).
TEST(EchoEngine, AStreamingRequestCountsAsRunningInsideItsSinks) {
  EchoOptions options;
  options.reply = "abcdef";
  EchoEngine echo(options);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::vector<int> running_at_start, running_at_token, running_after;
  engine::Request request;
  request.id = "r1";
  request.messages.push_back({"user", "hi"});
  ASSERT_TRUE(echo.submit(std::move(request),
                          [&](const engine::Event& e) {
                            const int running = echo.stats().running;
                            std::lock_guard<std::mutex> lock(mu);
                            if (e.type == engine::EventType::kStart)
                              running_at_start.push_back(running);
                            if (e.type == engine::EventType::kToken)
                              running_at_token.push_back(running);
                            if (e.type == engine::EventType::kDone) {
                              running_after.push_back(running);
                              done = true;
                              cv.notify_all();
                            }
                          })
                  .ok());
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; }));
  EXPECT_EQ(running_at_start, std::vector<int>({1}));
  EXPECT_EQ(running_at_token, std::vector<int>(6, 1));
  EXPECT_EQ(running_after, std::vector<int>({0}));
  EXPECT_EQ(echo.stats().queued, 0);
}

}  // namespace
}  // namespace glm::testing
