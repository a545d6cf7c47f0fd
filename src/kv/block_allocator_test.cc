#include "kv/block_allocator.h"

#include <gtest/gtest.h>

#include <vector>

namespace glm::kv {
namespace {

std::vector<int32_t> block_of(int32_t first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

TEST(BlockAllocator, ReserveAllocateRelease) {
  BlockAllocator a(4, 2);
  EXPECT_EQ(a.n_free(), 4);
  EXPECT_TRUE(a.reserve(3));
  EXPECT_EQ(a.n_available(), 1);
  EXPECT_FALSE(a.reserve(2));
  EXPECT_EQ(a.n_reserved(), 3);  // a failed reserve changes nothing
  const int b0 = a.allocate_reserved();
  const int b1 = a.allocate_reserved();
  EXPECT_NE(b0, b1);
  EXPECT_EQ(a.refcount(b0), 1);
  EXPECT_EQ(a.n_used(), 2);
  EXPECT_EQ(a.n_reserved(), 1);
  a.retain(b0);
  EXPECT_EQ(a.refcount(b0), 2);
  a.release(b0);
  EXPECT_EQ(a.n_used(), 2);
  a.release(b0);
  a.release(b1);
  a.unreserve(1);
  EXPECT_EQ(a.n_used(), 0);
  EXPECT_EQ(a.n_free(), 4);
  EXPECT_EQ(a.n_reserved(), 0);
}

TEST(BlockAllocator, PublishedBlockIsFoundAgainAfterRelease) {
  BlockAllocator a(3, 4);
  auto t = block_of(10, 4);
  const uint64_t h = BlockAllocator::hash_block(BlockAllocator::kRootHash, t.data(), 4);
  ASSERT_TRUE(a.reserve(1));
  const int b = a.allocate_reserved();
  a.publish(b, BlockAllocator::kRootHash, h, t.data());
  a.release(b);
  EXPECT_EQ(a.n_used(), 0);
  EXPECT_EQ(a.n_idle(), 1);  // free, but still holding the prefix
  EXPECT_EQ(a.lookup(BlockAllocator::kRootHash, h, t.data()), b);
  EXPECT_EQ(a.refcount(b), 1);
  EXPECT_EQ(a.n_idle(), 0);
  // Same tokens after a different parent: a different chain, not found.
  const uint64_t h2 = BlockAllocator::hash_block(h, t.data(), 4);
  EXPECT_EQ(a.lookup(h, h2, t.data()), -1);
  // A colliding hash with other tokens is rejected by the token comparison.
  auto other = block_of(50, 4);
  EXPECT_EQ(a.lookup(BlockAllocator::kRootHash, h, other.data()), -1);
  a.release(b);
}

TEST(BlockAllocator, IdleCachedBlocksAreEvictedLeastRecentlyReleasedFirst) {
  BlockAllocator a(3, 1);
  std::vector<int> blocks;
  std::vector<uint64_t> hashes;
  ASSERT_TRUE(a.reserve(3));
  for (int i = 0; i < 3; ++i) {
    const int32_t tok = 100 + i;
    blocks.push_back(a.allocate_reserved());
    hashes.push_back(BlockAllocator::hash_block(BlockAllocator::kRootHash, &tok, 1));
    a.publish(blocks[i], BlockAllocator::kRootHash, hashes[i], &tok);
  }
  // Release order 1, 0, 2: eviction must follow it.
  a.release(blocks[1]);
  a.release(blocks[0]);
  a.release(blocks[2]);
  EXPECT_EQ(a.n_idle(), 3);
  ASSERT_TRUE(a.reserve(2));
  EXPECT_EQ(a.allocate_reserved(), blocks[1]);
  EXPECT_FALSE(a.is_cached(blocks[1]));
  EXPECT_EQ(a.allocate_reserved(), blocks[0]);
  const int32_t tok1 = 101, tok2 = 102;
  EXPECT_EQ(a.lookup(BlockAllocator::kRootHash, hashes[1], &tok1), -1);         // evicted
  EXPECT_EQ(a.lookup(BlockAllocator::kRootHash, hashes[2], &tok2), blocks[2]);  // survived
}

TEST(BlockAllocator, LookupNeverBreaksAReservation) {
  BlockAllocator a(2, 1);
  const int32_t tok = 7;
  const uint64_t h = BlockAllocator::hash_block(BlockAllocator::kRootHash, &tok, 1);
  ASSERT_TRUE(a.reserve(1));
  const int b = a.allocate_reserved();
  a.publish(b, BlockAllocator::kRootHash, h, &tok);
  a.release(b);
  ASSERT_TRUE(a.reserve(2));  // promises both free blocks, the idle one included
  EXPECT_EQ(a.lookup(BlockAllocator::kRootHash, h, &tok), -1);
  a.unreserve(2);
}

TEST(BlockAllocator, PublishKeepsTheFirstCopyOfAContent) {
  BlockAllocator a(2, 1);
  const int32_t tok = 3;
  const uint64_t h = BlockAllocator::hash_block(BlockAllocator::kRootHash, &tok, 1);
  ASSERT_TRUE(a.reserve(2));
  const int b0 = a.allocate_reserved();
  const int b1 = a.allocate_reserved();
  a.publish(b0, BlockAllocator::kRootHash, h, &tok);
  a.publish(b1, BlockAllocator::kRootHash, h, &tok);
  EXPECT_TRUE(a.is_cached(b0));
  EXPECT_FALSE(a.is_cached(b1));
  a.release(b1);
  a.release(b0);
  EXPECT_EQ(a.n_idle(), 1);
  EXPECT_EQ(a.n_free(), 2);
}

TEST(BlockAllocator, LongestPrefixFindsPartialAndFullBlocksUntilEvicted) {
  BlockAllocator a(3, 4);
  const uint64_t root = BlockAllocator::kRootHash;
  const int32_t full[4] = {1, 2, 3, 4};
  const int32_t part[4] = {1, 2, 9, 0};
  ASSERT_TRUE(a.reserve(2));
  const int f = a.allocate_reserved();
  const int p = a.allocate_reserved();
  a.publish(f, root, BlockAllocator::hash_block(root, full, 4), full);
  a.publish_partial(p, root, part, 2);  // {1, 2} so far
  const int32_t want[4] = {1, 2, 9, 9};
  BlockAllocator::Match m = a.longest_prefix(root, want, 4);
  EXPECT_EQ(m.n, 2);  // both share {1, 2}: the partial entry knows only two tokens yet
  a.release(m.block);
  a.publish_partial(p, root, part, 3);  // its holder wrote on: {1, 2, 9}
  m = a.longest_prefix(root, want, 4);
  EXPECT_EQ(m.block, p);
  EXPECT_EQ(m.n, 3);
  a.release(m.block);
  m = a.longest_prefix(root, want, 1);  // never more than asked for
  EXPECT_EQ(m.n, 1);
  a.release(m.block);
  EXPECT_EQ(a.longest_prefix(BlockAllocator::hash_block(root, full, 4), want, 4).block, -1);
  EXPECT_TRUE(a.is_partial(p));
  EXPECT_FALSE(a.is_cached(p));  // not a full block: not in the full-block cache
  // Idle, then evicted by allocations: gone from the index.
  a.release(f);
  a.release(p);
  EXPECT_EQ(a.n_idle(), 2);
  ASSERT_TRUE(a.reserve(3));
  for (int i = 0; i < 3; ++i) (void)a.allocate_reserved();
  for (int b = 0; b < 3; ++b) a.release(b);
  EXPECT_EQ(a.longest_prefix(root, want, 4).block, -1);
}

TEST(BlockAllocator, APartialBlockFilledUpBecomesAFullCachedBlock) {
  BlockAllocator a(2, 2);
  const uint64_t root = BlockAllocator::kRootHash;
  const int32_t t[2] = {5, 6};
  ASSERT_TRUE(a.reserve(1));
  const int b = a.allocate_reserved();
  a.publish_partial(b, root, t, 1);
  const uint64_t h = BlockAllocator::hash_block(root, t, 2);
  EXPECT_EQ(a.lookup(root, h, t), -1);
  a.publish(b, root, h, t);
  EXPECT_TRUE(a.is_cached(b));
  EXPECT_EQ(a.lookup(root, h, t), b);
  a.release(b);
  const BlockAllocator::Match m = a.longest_prefix(root, t, 2);  // indexed once, as full
  EXPECT_EQ(m.block, b);
  EXPECT_EQ(m.n, 2);
  a.release(b);
  a.release(b);
  EXPECT_EQ(a.n_idle(), 1);
}

TEST(BlockAllocator, LongestPrefixNeverBreaksAReservation) {
  BlockAllocator a(2, 2);
  const int32_t t[2] = {7, 8};
  ASSERT_TRUE(a.reserve(1));
  const int b = a.allocate_reserved();
  a.publish_partial(b, BlockAllocator::kRootHash, t, 1);
  a.release(b);
  ASSERT_TRUE(a.reserve(2));  // promises both free blocks, the idle one included
  EXPECT_EQ(a.longest_prefix(BlockAllocator::kRootHash, t, 2).block, -1);
  a.unreserve(2);
}

}  // namespace
}  // namespace glm::kv
