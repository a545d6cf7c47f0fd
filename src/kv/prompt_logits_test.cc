#include "kv/prompt_logits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace glm::kv {
namespace {

std::vector<float> row_of(float v, int n) { return std::vector<float>(n, v); }

TEST(PromptLogits, FindsTheRowOfExactlyTheTokensAndAdapter) {
  PromptLogits kept(1 << 20);
  const std::vector<int32_t> a = {1, 2, 3}, b = {1, 2, 3, 4}, c = {1, 2};
  const std::vector<float> ra = row_of(1.5f, 16);
  std::vector<float> scratch = ra;
  kept.put(0, a, scratch.data(), 16);
  scratch.assign(16, 9.0f);  // the row was copied: the caller's buffer is free to change
  const float* got = kept.find(0, a);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(std::vector<float>(got, got + 16), ra);
  EXPECT_EQ(kept.find(0, b), nullptr);  // longer
  EXPECT_EQ(kept.find(0, c), nullptr);  // a prefix
  EXPECT_EQ(kept.find(7, a), nullptr);  // another adapter's
  EXPECT_EQ(kept.find(0, {}), nullptr);
  // The same tokens again: replaced, not kept twice.
  const std::vector<float> ra2 = row_of(-2.0f, 16);
  kept.put(0, a, ra2.data(), 16);
  EXPECT_EQ(kept.size(), 1);
  EXPECT_EQ(kept.find(0, a)[5], -2.0f);
  // An adapter's row beside the bare model's.
  kept.put(7, a, ra.data(), 16);
  EXPECT_EQ(kept.size(), 2);
  EXPECT_EQ(kept.find(7, a)[0], 1.5f);
  EXPECT_EQ(kept.find(0, a)[0], -2.0f);
}

TEST(PromptLogits, KeepsWithinItsBytesLeastRecentlyUsedOut) {
  const int n_vocab = 100;
  const size_t entry = 2 * sizeof(int32_t) + n_vocab * sizeof(float);  // 2 tokens + a row
  PromptLogits kept(3 * entry);
  const std::vector<float> row = row_of(0.25f, n_vocab);
  for (int32_t t = 0; t < 3; ++t) kept.put(0, {t, t}, row.data(), n_vocab);
  EXPECT_EQ(kept.size(), 3);
  EXPECT_EQ(kept.bytes(), 3 * entry);
  ASSERT_NE(kept.find(0, {0, 0}), nullptr);  // used: now the most recent
  kept.put(0, {3, 3}, row.data(), n_vocab);  // evicts {1, 1}, the least recently used
  EXPECT_EQ(kept.size(), 3);
  EXPECT_EQ(kept.bytes(), 3 * entry);
  EXPECT_EQ(kept.find(0, {1, 1}), nullptr);
  EXPECT_NE(kept.find(0, {0, 0}), nullptr);
  EXPECT_NE(kept.find(0, {2, 2}), nullptr);
  EXPECT_NE(kept.find(0, {3, 3}), nullptr);
  // A row over the whole budget is not kept (and evicts nothing).
  const std::vector<float> big = row_of(1.0f, 4 * n_vocab);
  kept.put(0, {9}, big.data(), 4 * n_vocab);
  EXPECT_EQ(kept.find(0, {9}), nullptr);
  EXPECT_EQ(kept.size(), 3);
}

// A full cache copies each new row into the memory of the one it drops: every row kept is the
// one put for its tokens, whatever rows (of whatever lengths) were dropped before it.
TEST(PromptLogits, RowsPutIntoDroppedRowsMemoryAreTheirOwn) {
  const int n_vocab = 64;
  const size_t entry = sizeof(int32_t) + n_vocab * sizeof(float);
  PromptLogits kept(2 * entry);
  auto row_for = [](int32_t t, int n) {
    std::vector<float> r(n);
    for (int i = 0; i < n; ++i) r[i] = static_cast<float>(t * 1000 + i);
    return r;
  };
  for (int32_t t = 0; t < 12; ++t) {
    const int n = t % 3 == 2 ? n_vocab / 2 : n_vocab;  // a shorter row now and then
    kept.put(0, {t}, row_for(t, n).data(), n);
    for (int32_t back = std::max(0, t - 1); back <= t; ++back) {
      const int nb = back % 3 == 2 ? n_vocab / 2 : n_vocab;
      const float* got = kept.find(0, {back});
      ASSERT_NE(got, nullptr) << t << " " << back;
      EXPECT_EQ(std::vector<float>(got, got + nb), row_for(back, nb)) << t << " " << back;
    }
    if (t >= 2) {
      EXPECT_EQ(kept.find(0, {t - 2}), nullptr) << t;
    }
  }
  // Replacing a row reuses its own memory for the new values.
  kept.put(0, {11}, row_for(50, n_vocab).data(), n_vocab);
  const float* got = kept.find(0, {11});
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(std::vector<float>(got, got + n_vocab), row_for(50, n_vocab));
}

TEST(PromptLogits, ZeroBytesKeepsNothing) {
  PromptLogits kept(0);
  const std::vector<float> row = row_of(1.0f, 8);
  kept.put(0, {1}, row.data(), 8);
  EXPECT_EQ(kept.find(0, {1}), nullptr);
  EXPECT_EQ(kept.size(), 0);
  EXPECT_EQ(kept.bytes(), 0u);
}

}  // namespace
}  // namespace glm::kv
