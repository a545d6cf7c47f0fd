#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace glm::kernels {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int n_threads : {1, 2, 3, 5}) {
    ThreadPool pool(n_threads);
    EXPECT_EQ(pool.n_threads(), n_threads);
    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{1000}}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](int64_t b, int64_t e, int ti) {
        EXPECT_LE(b, e);
        EXPECT_GE(ti, 0);
        EXPECT_LT(ti, n_threads);
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(ThreadPoolTest, ZeroWorkCallsNothing) {
  ThreadPool pool(2);
  int calls = 0;
  pool.parallel_for(0, [&](int64_t, int64_t, int) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPoolTest, ChunksAreBalancedAndIndexedByChunk) {
  ThreadPool pool(2);
  std::mutex mu;
  std::set<int> indices;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(11, [&](int64_t b, int64_t e, int ti) {
    std::lock_guard<std::mutex> lock(mu);
    indices.insert(ti);
    ranges.emplace_back(b, e);
  });
  EXPECT_EQ(indices, (std::set<int>{0, 1}));
  ASSERT_EQ(ranges.size(), 2u);
  std::sort(ranges.begin(), ranges.end());
  EXPECT_EQ(ranges[0], (std::pair<int64_t, int64_t>{0, 6}));
  EXPECT_EQ(ranges[1], (std::pair<int64_t, int64_t>{6, 11}));
}

TEST(ThreadPoolTest, WorkersRunChunksConcurrently) {
  // Chunk 0 waits until chunk 1 has started: only possible if another thread runs chunk 1
  // while the first is inside chunk 0 (the caller alone would deadlock here; the test would
  // then time out instead of passing).
  ThreadPool pool(2);
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> started{false};
    std::set<std::thread::id> ids;
    std::mutex mu;
    pool.parallel_for(2, [&](int64_t b, int64_t, int) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      if (b == 1) started = true;
      while (b == 0 && !started) std::this_thread::yield();
    });
    EXPECT_EQ(ids.size(), 2u);
  }
}

TEST(ThreadPoolTest, ManyBackToBackCallsSeeAllPriorWrites) {
  // Each call reads what the previous call wrote on other threads: checks the barrier's
  // memory ordering, not just completion.
  ThreadPool pool(3);
  std::vector<int64_t> v(300, 0);
  for (int round = 1; round <= 2000; ++round) {
    pool.parallel_for(300, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t other = v[(i + 150) % 300];
        ASSERT_EQ(other, round - 1);
      }
    });
    pool.parallel_for(300, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) v[i] = round;
    });
  }
}

TEST(ThreadPoolTest, DefaultSizeIsPhysicalCores) {
  ThreadPool pool;
  EXPECT_EQ(pool.n_threads(), physical_cores());
  EXPECT_GE(physical_cores(), 1);
}

}  // namespace
}  // namespace glm::kernels
