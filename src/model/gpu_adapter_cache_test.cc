// GpuAdapterCache (gpu_adapter_cache.h): found by key, made once, at most kMax kept with the least
// recently used dropped first, never an entry of the current step, nothing kept from a failed
// make, and entries that stay where they are while others come and go.
#include "model/gpu_adapter_cache.h"

#include <gtest/gtest.h>

namespace glm::model {
namespace {

struct Entry {
  int made_for = -1;
};

TEST(GpuAdapterCache, KeepsTheMostRecentlyUsedAndNeverThisStepsEntries) {
  GpuAdapterCache<Entry> cache;
  int makes = 0;
  auto get = [&](uint64_t key) {
    StatusOr<Entry*> e = cache.get(key, [&](Entry* out) {
      ++makes;
      out->made_for = static_cast<int>(key);
      return Status::Ok();
    });
    EXPECT_TRUE(e.ok());
    return e.ok() ? *e : nullptr;
  };
  constexpr size_t kMax = GpuAdapterCache<Entry>::kMax;
  std::vector<Entry*> first;
  for (uint64_t k = 0; k < kMax; ++k) {  // one step each
    cache.next_step();
    first.push_back(get(k));
  }
  EXPECT_EQ(makes, static_cast<int>(kMax));
  cache.next_step();
  EXPECT_EQ(get(0), first[0]);  // found, not made again; now the most recent
  EXPECT_EQ(makes, static_cast<int>(kMax));
  cache.next_step();
  Entry* extra = get(100);  // full: key 1, the least recently used, goes
  EXPECT_EQ(extra->made_for, 100);
  EXPECT_EQ(cache.size(), kMax);
  EXPECT_EQ(first[2]->made_for, 2);  // the others stayed where they were
  get(1);
  EXPECT_EQ(makes, static_cast<int>(kMax) + 2);  // key 1 made again
  // One step using more adapters than kMax keeps them all (none of this step's is dropped).
  cache.next_step();
  std::vector<Entry*> step;
  for (uint64_t k = 200; k < 200 + kMax + 2; ++k) step.push_back(get(k));
  EXPECT_EQ(cache.size(), kMax + 2);
  for (size_t i = 0; i < step.size(); ++i) EXPECT_EQ(step[i]->made_for, 200 + static_cast<int>(i));
}

TEST(GpuAdapterCache, AFailedMakeKeepsNothing) {
  GpuAdapterCache<Entry> cache;
  cache.next_step();
  StatusOr<Entry*> e =
      cache.get(7, [](Entry*) { return Status(ErrorCode::kOutOfMemory, "no room"); });
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kOutOfMemory);
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace glm::model
