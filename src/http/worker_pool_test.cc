// The handlers' thread pool: the thread that went idle last takes the next task, the queue's
// bound, what shutdown runs, and many submitters at once.
#include "http/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace glm::http {
namespace {

// Waits (bounded) until `pool` runs `busy` tasks.
bool wait_busy(const WorkerPool& pool, int busy) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.busy() != busy) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// A gate tasks wait at until the test opens it.
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Runs `n` tasks at once on `pool`, each held until all have started; returns the threads
// they ran on (empty if they did not all start and end).
std::set<std::thread::id> run_together(WorkerPool& pool, int n) {
  struct Held {  // shared with the tasks: they may outlive a failed call
    Gate gate;
    std::mutex mu;
    std::set<std::thread::id> threads;
  };
  auto held = std::make_shared<Held>();
  bool all_queued = true;
  for (int i = 0; i < n && all_queued; ++i) {
    all_queued = pool.try_submit([held] {
      {
        std::lock_guard<std::mutex> lock(held->mu);
        held->threads.insert(std::this_thread::get_id());
      }
      held->gate.wait();
    });
  }
  const bool all_started = all_queued && wait_busy(pool, n);
  held->gate.open();
  if (!wait_busy(pool, 0) || !all_started) return {};
  std::lock_guard<std::mutex> lock(held->mu);
  return held->threads;
}

TEST(WorkerPool, TheThreadThatWentIdleLastTakesTheNextTask) {
  WorkerPool pool(16, 4);
  // Every thread has run once, so all are idle in some order, none untouched.
  EXPECT_EQ(run_together(pool, 16).size(), 16u);

  // One request at a time, as from a lone client: each runs where the one before it ran.
  std::vector<std::thread::id> ran(40);
  for (size_t i = 0; i < ran.size(); ++i) {
    std::atomic<bool> done{false};
    ASSERT_TRUE(pool.try_submit([&, i] {
      ran[i] = std::this_thread::get_id();
      done = true;
    }));
    ASSERT_TRUE(wait_busy(pool, 0));
    ASSERT_TRUE(done.load());
  }
  for (size_t i = 1; i < ran.size(); ++i) EXPECT_EQ(ran[i], ran[0]) << "task " << i;

  // Two at once take the two threads that went idle last.
  const std::set<std::thread::id> pair = run_together(pool, 2);
  EXPECT_EQ(pair.size(), 2u);
  EXPECT_EQ(pair.count(ran[0]), 1u);
}

TEST(WorkerPool, RefusesWhenEveryThreadIsBusyAndTheQueueIsFull) {
  WorkerPool pool(2, 1);
  Gate gate;
  std::atomic<int> ran{0};
  auto task = [&] {
    gate.wait();
    ++ran;
  };
  ASSERT_TRUE(pool.try_submit(task));
  ASSERT_TRUE(pool.try_submit(task));
  ASSERT_TRUE(wait_busy(pool, 2));
  EXPECT_TRUE(pool.try_submit(task));  // waits in the queue
  EXPECT_EQ(pool.queued(), 1);
  EXPECT_FALSE(pool.try_submit(task));  // two running, one waiting: full
  gate.open();
  ASSERT_TRUE(wait_busy(pool, 0));
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(pool.queued(), 0);
  EXPECT_TRUE(pool.try_submit(task));  // room again
  ASSERT_TRUE(wait_busy(pool, 0));
  EXPECT_EQ(ran.load(), 4);
}

TEST(WorkerPool, ShutdownRunsWhatIsQueuedThenRefuses) {
  WorkerPool pool(1, 8);
  Gate gate;
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.try_submit([&] { gate.wait(); }));
  ASSERT_TRUE(wait_busy(pool, 1));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool.try_submit([&] { ++ran; }));
  std::thread stopper([&] { pool.shutdown(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  gate.open();
  stopper.join();
  EXPECT_EQ(ran.load(), 5);
  EXPECT_FALSE(pool.try_submit([&] { ++ran; }));
  EXPECT_EQ(ran.load(), 5);
}

TEST(WorkerPool, ManySubmittersEveryAcceptedTaskRunsOnce) {
  std::atomic<int> ran{0};
  std::atomic<int> accepted{0};
  {
    WorkerPool pool(4, 64);
    std::vector<std::thread> submitters;
    for (int s = 0; s < 4; ++s) {
      submitters.emplace_back([&] {
        for (int i = 0; i < 500; ++i) {
          if (pool.try_submit([&] { ++ran; })) ++accepted;
        }
      });
    }
    for (std::thread& t : submitters) t.join();
  }  // the destructor runs what was queued
  EXPECT_GT(accepted.load(), 0);
  EXPECT_EQ(ran.load(), accepted.load());
}

}  // namespace
}  // namespace glm::http
