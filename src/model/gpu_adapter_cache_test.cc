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

// An adapter of `n_layer` layers whose wo pair has rank r (n_in 64, n_out 32) and, when
// prefix_tokens > 0, P-Tuning rows of kv_dim 32.
Adapter adapter_of(int n_layer, int r, int prefix_tokens) {
  Adapter a;
  if (r > 0) {
    a.lora.resize(n_layer);
    for (LoraLayer& l : a.lora) {
      l.wo.rank = r;
      l.wo.n_in = 64;
      l.wo.n_out = 32;
      l.wo.a.assign(static_cast<size_t>(r) * 64, 0.5f);
      l.wo.b.assign(static_cast<size_t>(32) * r, 0.5f);
    }
  }
  if (prefix_tokens > 0) {
    a.prefix.n_tokens = prefix_tokens;
    a.prefix.kv_dim = 32;
    a.prefix.k.assign(static_cast<size_t>(n_layer) * prefix_tokens * 32, 0.0f);
    a.prefix.v = a.prefix.k;
  }
  return a;
}

// What the memory plan sets aside for adapters served per request: A and B in f32, the prefix
// rows in the cache's type, and at most kMax copies of each kind (the largest).
TEST(GpuAdapterCache, DeviceBytesAreThePairsInF32AndThePrefixRowsInTheCachesType) {
  const Adapter lora = adapter_of(3, 4, 0), prefix = adapter_of(3, 0, 10);
  EXPECT_EQ(lora_device_bytes(lora), 3u * (4 * 64 + 32 * 4) * 4);
  EXPECT_EQ(prefix_device_bytes(lora, DType::kF16), 0u);
  EXPECT_EQ(prefix_device_bytes(prefix, DType::kF16), 3u * 10 * 2 * 32 * 2);
  EXPECT_EQ(prefix_device_bytes(prefix, DType::kQ8_0), 3u * 10 * 2 * 34);  // one Q8_0 block a row
  EXPECT_EQ(lora_device_bytes(prefix), 0u);
  // Ten LoRAs of ranks 1..10 and ten prefixes of 1..10 tokens: the eight largest of each.
  std::vector<Adapter> many;
  for (int i = 1; i <= 10; ++i) many.push_back(adapter_of(1, i, 0));
  for (int i = 1; i <= 10; ++i) many.push_back(adapter_of(1, 0, i));
  std::vector<const Adapter*> all;
  for (const Adapter& a : many) all.push_back(&a);
  size_t want = 0;
  for (int i = 3; i <= 10; ++i) want += static_cast<size_t>(i) * (64 + 32) * 4 + i * 2 * 32 * 2;
  static_assert(GpuAdapterCache<int>::kMax == 8);
  EXPECT_EQ(adapters_device_bytes(all, DType::kF16), want);
  EXPECT_EQ(adapters_device_bytes({}, DType::kF16), 0u);
}

}  // namespace
}  // namespace glm::model
