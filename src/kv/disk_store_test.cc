// DiskStore: files round-trip across a reopen, the bound removes the least recently used, and
// hostile files (truncated, corrupt, another version or model, malformed) are refused with a
// log line, removed and read as absent; an unwritable directory or a full disk means no store.
#include "kv/disk_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kv/block_allocator.h"
#include "kv/test_util.h"

namespace glm::kv {
namespace {

using testing::kBt;

constexpr size_t kBytes = 64;

class DiskStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm-kvdisk-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  DiskOptions options(uint64_t identity = 7, int n_vocab = 100) const {
    DiskOptions o;
    o.dir = dir_ + "/kv";
    o.max_bytes = 1 << 20;
    o.identity = identity;
    o.block_tokens = kBt;
    o.block_bytes = kBytes;
    o.n_vocab = n_vocab;
    o.max_tokens = 1000;
    return o;
  }
  // A block of `tokens` after `parent`, its bytes a function of both; returns its hash.
  static uint64_t make_block(uint64_t parent, std::vector<int32_t> tokens, DiskBlock* b,
                             size_t bytes = kBytes) {
    b->parent = parent;
    b->tokens = std::move(tokens);
    b->data.resize(bytes);
    for (size_t i = 0; i < bytes; ++i) b->data[i] = static_cast<uint8_t>(i * 3 + b->tokens[0]);
    return BlockAllocator::hash_block(parent, b->tokens.data(), static_cast<int>(b->tokens.size()));
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }

  std::string dir_;
};

TEST_F(DiskStoreTest, BlocksAndConversationsRoundTripAcrossAReopen) {
  DiskBlock b, partial;
  const uint64_t h1 = make_block(BlockAllocator::kRootHash, {1, 2, 3, 4}, &b);
  const uint64_t h2 = make_block(h1, {5, 6}, &partial);
  DiskConversation c{"conv-1", 42, {1, 2, 3, 4, 5, 6}, {9}};
  {
    auto store = DiskStore::open(options());
    ASSERT_NE(store, nullptr);
    EXPECT_FALSE(store->has_block(h1));
    ASSERT_TRUE(store->put_block(h1, b));
    ASSERT_TRUE(store->put_block(h2, partial));
    ASSERT_TRUE(store->put_conversation(c));
  }
  auto store = DiskStore::open(options());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->n_files(), 3);
  std::optional<DiskBlock> got = store->get_block(h1);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->parent, b.parent);
  EXPECT_EQ(got->tokens, b.tokens);
  EXPECT_EQ(got->data, b.data);
  got = store->get_block(h2);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens, partial.tokens);
  std::optional<DiskConversation> conv = store->get_conversation("conv-1");
  ASSERT_TRUE(conv.has_value());
  EXPECT_EQ(conv->tag, 42u);
  EXPECT_EQ(conv->tokens, c.tokens);
  EXPECT_EQ(conv->pending, c.pending);
  EXPECT_FALSE(store->get_conversation("conv-2").has_value());
  store->remove_conversation("conv-1");
  EXPECT_FALSE(store->has_conversation("conv-1"));
  EXPECT_EQ(store->counters().refused, 0);
}

TEST_F(DiskStoreTest, TheBoundRemovesTheLeastRecentlyUsedFirstAlsoAfterAReopen) {
  DiskOptions o = options();
  std::vector<uint64_t> h(4);
  std::vector<DiskBlock> b(4);
  for (int i = 0; i < 4; ++i) h[i] = make_block(i + 1, {i, i, i, i}, &b[i]);
  uint64_t file_bytes = 0;
  {
    auto store = DiskStore::open(o);
    ASSERT_TRUE(store->put_block(h[0], b[0]));
    file_bytes = store->bytes();
  }
  o.max_bytes = 3 * file_bytes;  // room for three
  {
    auto store = DiskStore::open(o);
    ASSERT_TRUE(store->put_block(h[1], b[1]));
    ASSERT_TRUE(store->put_block(h[2], b[2]));
    ASSERT_TRUE(store->get_block(h[0]).has_value());  // used: now the newest
  }
  auto store = DiskStore::open(o);  // the order comes back from the files' times
  ASSERT_TRUE(store->put_block(h[3], b[3]));
  EXPECT_LE(store->bytes(), o.max_bytes);
  EXPECT_TRUE(store->has_block(h[0]));
  EXPECT_FALSE(store->has_block(h[1]));  // least recently used
  EXPECT_TRUE(store->has_block(h[2]));
  EXPECT_TRUE(store->has_block(h[3]));
  EXPECT_EQ(store->counters().evicted, 1);
}

TEST_F(DiskStoreTest, HostileFilesAreRefusedWithALogLineRemovedAndReadAsAbsent) {
  DiskBlock b;
  const uint64_t h = make_block(BlockAllocator::kRootHash, {1, 2, 3, 4}, &b);
  std::string good;
  {
    auto store = DiskStore::open(options());
    ASSERT_TRUE(store->put_block(h, b));
    good = read(store->block_path(h));
  }
  ASSERT_GT(good.size(), 48u);
  struct Case {
    const char* what;
    std::string bytes;
    const char* log;
  };
  std::string flipped = good;
  flipped[good.size() - 5] ^= 0x10;  // in the K/V bytes
  std::string header = good;
  header[20] ^= 1;  // the identity field, header checksum left as it was
  std::string version = good;
  version[8] = 2;
  const std::vector<Case> cases = {
      {"empty", "", "truncated"},
      {"truncated header", good.substr(0, 30), "truncated"},
      {"truncated payload", good.substr(0, good.size() - 10), "truncated"},
      {"flipped payload byte", flipped, "corrupt (checksum mismatch)"},
      {"flipped header byte", header, "corrupt header"},
      {"version 2", version, "format version 2"},
      {"not ours", std::string(100, 'x'), "not a glmserve KV file"},
      {"too large", good + std::string(1 << 16, '\0'), "too large"},
  };
  for (const Case& c : cases) {
    auto store = DiskStore::open(options());
    write(store->block_path(h), c.bytes);
    ::testing::internal::CaptureStderr();
    auto store2 = DiskStore::open(options());  // sees the file as it is now
    ASSERT_TRUE(store2->has_block(h)) << c.what;
    EXPECT_FALSE(store2->get_block(h).has_value()) << c.what;
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("refused"), std::string::npos) << c.what << ": " << log;
    EXPECT_NE(log.find(c.log), std::string::npos) << c.what << ": " << log;
    EXPECT_FALSE(store2->has_block(h)) << c.what;  // removed: refused once, not every turn
    EXPECT_NE(::access(store2->block_path(h).c_str(), F_OK), 0) << c.what;
    EXPECT_EQ(store2->counters().refused, 1) << c.what;
    EXPECT_TRUE(store2->enabled());
  }
  // Another model's file under this model's name.
  {
    auto other = DiskStore::open(options(/*identity=*/8));
    ASSERT_TRUE(other->put_block(h, b));
    auto store = DiskStore::open(options(7));
    EXPECT_FALSE(store->has_block(h));  // its names carry its identity: never even read
    ASSERT_EQ(std::rename(other->block_path(h).c_str(), store->block_path(h).c_str()), 0);
    auto again = DiskStore::open(options(7));
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(again->get_block(h).has_value());
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("another model"), std::string::npos) << log;
  }
  // Checksums right, content not for this model: token ids outside its vocabulary.
  {
    DiskBlock wide;
    const uint64_t hw = make_block(BlockAllocator::kRootHash, {1, 2, 3, 99}, &wide);
    ASSERT_TRUE(DiskStore::open(options(7, 100))->put_block(hw, wide));
    auto narrow = DiskStore::open(options(7, 50));
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(narrow->get_block(hw).has_value());
    EXPECT_NE(::testing::internal::GetCapturedStderr().find("malformed"), std::string::npos);
    // A conversation whose tokens are out of range is refused the same way.
    ASSERT_TRUE(DiskStore::open(options(7, 100))->put_conversation({"c", 1, {5, 99}, {}}));
    auto narrow2 = DiskStore::open(options(7, 50));
    EXPECT_FALSE(narrow2->get_conversation("c").has_value());
    EXPECT_EQ(narrow2->counters().refused, 1);
  }
  // A block file renamed to another block's name: the content's hash does not match.
  {
    DiskBlock b2;
    const uint64_t h2 = make_block(BlockAllocator::kRootHash, {5, 6, 7, 8}, &b2);
    auto store = DiskStore::open(options());
    ASSERT_TRUE(store->put_block(h2, b2));
    ASSERT_TRUE(store->put_block(h, b));
    ASSERT_EQ(std::rename(store->block_path(h2).c_str(), store->block_path(h).c_str()), 0);
    auto again = DiskStore::open(options());
    EXPECT_FALSE(again->get_block(h).has_value());
    EXPECT_EQ(again->counters().refused, 1);
  }
}

TEST_F(DiskStoreTest, AnUnwritableDirectoryMeansNoStoreWithALogLine) {
  write(dir_ + "/file", "x");
  DiskOptions o = options();
  o.dir = dir_ + "/file/kv";  // under a regular file: cannot exist (root or not)
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(DiskStore::open(o), nullptr);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("running without a disk cache"), std::string::npos) << log;
  o.dir = dir_ + "/file";  // a file, not a directory
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(DiskStore::open(o), nullptr);
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("not a directory"), std::string::npos) << log;
  if (::geteuid() != 0) {  // root writes anywhere
    ASSERT_EQ(::mkdir((dir_ + "/ro").c_str(), 0500), 0);
    o.dir = dir_ + "/ro";
    EXPECT_EQ(DiskStore::open(o), nullptr);
  }
}

// A full disk, as the kernel reports it to a writer: RLIMIT_FSIZE makes write() fail (EFBIG;
// SIGXFSZ ignored) past a size, like ENOSPC does on a full file system.
TEST_F(DiskStoreTest, AFullDiskTurnsTheStoreOffWithALogLine) {
  DiskOptions o = options();
  o.block_bytes = 8192;  // a file is larger than the limit below, the log line is not
  auto store = DiskStore::open(o);
  ASSERT_NE(store, nullptr);
  DiskBlock b;
  const uint64_t h = make_block(BlockAllocator::kRootHash, {1, 2, 3, 4}, &b, o.block_bytes);
  ASSERT_TRUE(store->put_block(h, b));
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 4096;  // less than one file
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  DiskBlock b2;
  const uint64_t h2 = make_block(h, {5, 6, 7, 8}, &b2, o.block_bytes);
  ::testing::internal::CaptureStderr();
  const bool put = store->put_block(h2, b2);
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(put);
  EXPECT_FALSE(store->enabled());
  EXPECT_NE(log.find("the disk cache is off"), std::string::npos) << log;
  // Off for good: nothing is read or written, no temporary file is left.
  EXPECT_FALSE(store->has_block(h));
  EXPECT_FALSE(store->get_block(h).has_value());
  EXPECT_FALSE(store->put_conversation({"c", 1, {1}, {}}));
  auto reopened = DiskStore::open(o);
  EXPECT_EQ(reopened->n_files(), 1);
}

}  // namespace
}  // namespace glm::kv
