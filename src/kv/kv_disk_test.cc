// KvCache over a DiskStore: a conversation and the prefix cache outlive the cache (a new
// KvCache, a new store over the same directory: an engine restart), restored blocks hold the
// K/V of their own positions, a missing block only shortens what is restored, and nothing
// leaks. The "K/V" here: MemoryIo keeps, per block, the token written at each position (as the
// fake model does), so a block restored into the wrong place or with the wrong content shows.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kv/disk_store.h"
#include "kv/kv_cache.h"
#include "kv/test_util.h"

namespace glm::kv {
namespace {

using testing::input;
using testing::kBt;
using testing::seq_tokens;

class MemoryIo final : public BlockIo {
 public:
  explicit MemoryIo(int n_blocks) : cells_(n_blocks, std::vector<int32_t>(kBt, -1)) {}
  size_t block_bytes() const override { return sizeof(int32_t) * kBt; }
  void save(int block, uint8_t* data) const override {
    std::memcpy(data, cells_[block].data(), block_bytes());
  }
  void load(int block, const uint8_t* data) override {
    std::memcpy(cells_[block].data(), data, block_bytes());
  }
  // "forward": writes tokens at positions [at, at + n) of seq.
  void write(const SeqKv& seq, int at, const int32_t* tokens, int n) {
    for (int i = 0; i < n; ++i) cells_[seq.blocks[(at + i) / kBt]][(at + i) % kBt] = tokens[i];
  }
  // The tokens the sequence's blocks hold for its first n positions.
  std::vector<int32_t> read(const SeqKv& seq, int n) const {
    std::vector<int32_t> out;
    for (int p = 0; p < n; ++p) out.push_back(cells_[seq.blocks[p / kBt]][p % kBt]);
    return out;
  }

 private:
  std::vector<std::vector<int32_t>> cells_;
};

// One engine's KV state: cache, K/V memory and the store over `dir`.
struct Instance {
  Instance(const std::string& dir, int n_blocks = 32) : cache(n_blocks, kBt), io(n_blocks) {
    DiskOptions o;
    o.dir = dir;
    o.max_bytes = 1 << 20;
    o.identity = 1;
    o.block_tokens = kBt;
    o.block_bytes = io.block_bytes();
    o.n_vocab = 1000;
    store = DiskStore::open(o);
    cache.attach_disk(store.get(), &io);
  }
  // Runs a sequence as the scheduler does: prefill the uncached part, decode `gen` (the last
  // token is never fed).
  void run(Admitted* a, const std::vector<int32_t>& gen) {
    const int n = static_cast<int>(a->prompt.size());
    cache.grow(&a->kv, n);
    io.write(a->kv, a->n_cached, a->prompt.data() + a->n_cached, n - a->n_cached);
    cache.commit(&a->kv, a->prompt.data() + a->n_cached, n - a->n_cached);
    for (size_t i = 0; i + 1 < gen.size(); ++i) {
      const int at = static_cast<int>(a->kv.tokens.size());
      cache.grow(&a->kv, at + 1);
      io.write(a->kv, at, &gen[i], 1);
      cache.commit(&a->kv, &gen[i], 1);
    }
  }
  KvCache cache;
  MemoryIo io;
  std::unique_ptr<DiskStore> store;
};

class KvDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-kvcache-disk-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Turn 1 of conversation "c" (prompt 0..9, answer 70..74, the last never fed), saved.
  void turn1(Instance* e) {
    Admitted t1;
    ASSERT_EQ(e->cache.admit(input(p1_, 8), &t1), AdmitResult::kAdmitted);
    e->run(&t1, gen_);
    e->cache.save_conversation("c", 1234, &t1.kv, {gen_.back()});
  }
  AdmitInput turn2_input() {
    AdmitInput in = input(full_, 4);
    in.conversation = "c";
    in.history_tag = 1234;
    in.tail = &tail_;
    return in;
  }

  std::string dir_;
  const std::vector<int32_t> p1_ = seq_tokens(0, 10);
  const std::vector<int32_t> gen_ = {70, 71, 72, 73, 74};
  const std::vector<int32_t> tail_ = {90, 91};
  const std::vector<int32_t> full_ = seq_tokens(0, 30);  // a re-rendering: not what ran
};

TEST_F(KvDiskTest, AConversationSurvivesARestartAndPrefillsOnlyTheNewTokens) {
  // Without a restart: what turn 2 reuses.
  Admitted same;
  {
    Instance e(dir_ + "/a");
    turn1(&e);
    ASSERT_EQ(e.cache.admit(turn2_input(), &same), AdmitResult::kAdmitted);
    e.cache.release(&same.kv);
  }
  const std::vector<int32_t> ran = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 70, 71, 72, 73};
  ASSERT_EQ(same.n_cached, 14);
  {
    Instance e(dir_ + "/b");
    turn1(&e);
    EXPECT_TRUE(e.cache.has_unwritten());
    EXPECT_TRUE(e.cache.write_next());  // what the engine does when idle
    EXPECT_FALSE(e.cache.has_unwritten());
    EXPECT_EQ(e.store->counters().blocks_written, 4);  // 3 full + the partial last one
  }
  Instance e(dir_ + "/b");  // the restart: nothing in memory
  Admitted t2;
  ASSERT_EQ(e.cache.admit(turn2_input(), &t2), AdmitResult::kAdmitted);
  EXPECT_TRUE(t2.from_conversation);
  EXPECT_EQ(t2.n_cached, same.n_cached);
  EXPECT_EQ(t2.prompt, same.prompt);
  EXPECT_EQ(e.io.read(t2.kv, t2.n_cached), ran);  // each position's K/V where it belongs
  e.run(&t2, {80, 81});
  e.cache.save_conversation("c", 5678, &t2.kv, {81});
  e.cache.clear_conversations();  // written before its blocks could go
  EXPECT_TRUE(e.store->has_conversation("c"));
  EXPECT_EQ(e.cache.allocator().n_used(), 0);
  EXPECT_EQ(e.cache.allocator().n_reserved(), 0);
}

TEST_F(KvDiskTest, ThePrefixCacheSavedOnStopServesAnyPromptAfterARestart) {
  const std::vector<int32_t> prompt = seq_tokens(100, 10);  // no conversation
  {
    Instance e(dir_);
    Admitted a;
    ASSERT_EQ(e.cache.admit(input(prompt, 2), &a), AdmitResult::kAdmitted);
    e.run(&a, {5, 6});
    e.cache.release(&a.kv);
    EXPECT_FALSE(e.cache.has_unwritten());
    EXPECT_EQ(e.cache.write_all(), 2);  // the graceful stop: its 2 full blocks
  }
  Instance e(dir_);
  std::vector<int32_t> longer = prompt;
  longer.push_back(200);
  Admitted b;
  ASSERT_EQ(e.cache.admit(input(longer, 2), &b), AdmitResult::kAdmitted);
  EXPECT_FALSE(b.from_conversation);
  EXPECT_EQ(b.n_cached, 8);
  EXPECT_EQ(e.io.read(b.kv, 8), seq_tokens(100, 8));
  // Restored blocks join the prefix cache: a second prompt shares them in memory.
  Admitted c;
  ASSERT_EQ(e.cache.admit(input(longer, 2), &c), AdmitResult::kAdmitted);
  EXPECT_EQ(c.kv.blocks[0], b.kv.blocks[0]);
  EXPECT_EQ(e.store->counters().blocks_read, 2);
  e.cache.release(&b.kv);
  e.cache.release(&c.kv);
  EXPECT_EQ(e.cache.allocator().n_used(), 0);
  EXPECT_EQ(e.cache.allocator().n_reserved(), 0);
}

TEST_F(KvDiskTest, AMissingOrCorruptBlockEndsTheRestoreAndTheRestIsPrefilled) {
  uint64_t second = 0;
  {
    Instance e(dir_);
    turn1(&e);
    e.cache.write_all();
    const uint64_t first = BlockAllocator::hash_block(BlockAllocator::kRootHash, p1_.data(), kBt);
    second = BlockAllocator::hash_block(first, p1_.data() + kBt, kBt);
    ASSERT_TRUE(e.store->has_block(second));
    FILE* f = std::fopen(e.store->block_path(second).c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, -2, SEEK_END);
    std::fputc('!', f);
    std::fclose(f);
  }
  Instance e(dir_);
  ::testing::internal::CaptureStderr();
  Admitted t2;
  ASSERT_EQ(e.cache.admit(turn2_input(), &t2), AdmitResult::kAdmitted);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("refused"), std::string::npos) << log;
  EXPECT_TRUE(t2.from_conversation);  // the tokens that ran are still known
  EXPECT_EQ(t2.n_cached, kBt);        // block 0 only; the rest prefills
  EXPECT_EQ(t2.prompt.size(), 17u);
  EXPECT_FALSE(e.store->has_block(second));
  e.run(&t2, {80});
  EXPECT_EQ(e.io.read(t2.kv, 17), t2.prompt);
  e.cache.release(&t2.kv);
  EXPECT_EQ(e.cache.allocator().n_used(), 0);
  EXPECT_EQ(e.cache.allocator().n_reserved(), 0);
}

TEST_F(KvDiskTest, AConversationOnDiskWithAnotherHistoryIsDroppedForTheFullPrompt) {
  {
    Instance e(dir_);
    turn1(&e);
    e.cache.write_all();
  }
  Instance e(dir_);
  AdmitInput in = turn2_input();
  in.history_tag = 999;  // the client edited its history
  Admitted t2;
  ASSERT_EQ(e.cache.admit(in, &t2), AdmitResult::kAdmitted);
  EXPECT_FALSE(t2.from_conversation);
  EXPECT_EQ(t2.prompt, full_);
  EXPECT_EQ(t2.n_cached, 8);  // the prompt's first two blocks, through the disk prefix cache
  EXPECT_FALSE(e.store->has_conversation("c"));
  e.cache.release(&t2.kv);
  EXPECT_EQ(e.cache.allocator().n_used(), 0);
}

TEST_F(KvDiskTest, MemoryPressureWritesAConversationBeforeEvictingIt) {
  Instance e(dir_, /*n_blocks=*/6);
  turn1(&e);  // 4 blocks
  ASSERT_FALSE(e.store->has_conversation("c"));
  const std::vector<int32_t> other = seq_tokens(500, 12);
  Admitted a;
  ASSERT_EQ(e.cache.admit(input(other, 8), &a), AdmitResult::kAdmitted);  // needs 5 blocks
  EXPECT_FALSE(e.cache.has_conversation("c"));
  EXPECT_TRUE(e.store->has_conversation("c"));
  e.run(&a, {1, 2});
  e.cache.release(&a.kv);
  // Its blocks were reused; turn 2 comes back from disk.
  Admitted t2;
  ASSERT_EQ(e.cache.admit(turn2_input(), &t2), AdmitResult::kAdmitted);
  EXPECT_TRUE(t2.from_conversation);
  EXPECT_EQ(t2.n_cached, 14);
  EXPECT_EQ(e.io.read(t2.kv, 14), std::vector<int32_t>(t2.prompt.begin(), t2.prompt.begin() + 14));
  e.cache.release(&t2.kv);
  EXPECT_EQ(e.cache.allocator().n_used(), 0);
  EXPECT_EQ(e.cache.allocator().n_reserved(), 0);
}

}  // namespace
}  // namespace glm::kv
