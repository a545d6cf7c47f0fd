#include "engine/memory_plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "engine/test_util.h"
#include "gguf/gguf.h"
#include "model/kv_pool.h"

namespace glm::engine {
namespace {

using testing::kChatglm3;

class MemoryPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/glm_mem_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string dir_;
};

TEST_F(MemoryPlanTest, AvailableIsMemAvailableOrTheCgroupsRoomIfLess) {
  write("meminfo", "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    8000000 kB\n");
  EXPECT_EQ(available_memory(dir_ + "/meminfo", dir_ + "/none"), size_t{8000000} * 1024);
  write("memory.max", "max\n");
  write("memory.current", "123\n");
  EXPECT_EQ(available_memory(dir_ + "/meminfo", dir_), size_t{8000000} * 1024);  // no limit
  write("memory.max", "4000000000\n");
  write("memory.current", "1000000000\n");
  EXPECT_EQ(available_memory(dir_ + "/meminfo", dir_), size_t{3000000000});
  EXPECT_EQ(available_memory(dir_ + "/absent", dir_ + "/none"), 0u);  // unknown
}

// The plan's KV bytes (KvPool::bytes_for) are what the pool allocates, for each element type.
TEST_F(MemoryPlanTest, KvBytesAreThePoolsOwn) {
  model::Config c;
  c.n_layer = 3;
  c.n_head_kv = 2;
  c.head_dim = 32;
  for (DType t : {DType::kF16, DType::kF32, DType::kQ8_0}) {
    const model::KvPool pool(c, 5, 16, t);
    EXPECT_EQ(model::KvPool::bytes_for(c, 5, 16, t), pool.bytes()) << dtype_name(t);
  }
}

// --spec mtp on a model with an MTP block adds the block's own pool: one layer for max_batch
// full contexts (as the engine makes it); nothing for a model without one.
TEST_F(MemoryPlanTest, MtpDraftsAddTheBlocksOneLayerPool) {
  auto f = gguf::File::open(kChatglm3);
  ASSERT_TRUE(f.ok());
  auto c = model::read_config(**f);
  ASSERT_TRUE(c.ok());
  Options o;
  o.n_ctx = 1024;
  o.max_batch = 4;
  const MemoryPlan off = plan_memory(**f, *c, o);
  o.spec = generation::SpecMode::kMtp;
  EXPECT_EQ(plan_memory(**f, *c, o).kv, off.kv);  // chatglm3 has no MTP block
  model::Config with = *c;
  with.moe.n_layer_nextn = 1;
  model::Config one = *c;
  one.n_layer = 1;
  const size_t pool = model::KvPool::bytes_for(one, draft_kv_block_count(o, off.n_ctx),
                                               std::max(o.block_tokens, 1), o.kv_type);
  EXPECT_GT(pool, 0u);
  EXPECT_EQ(plan_memory(**f, with, o).kv, off.kv + pool);
}

TEST_F(MemoryPlanTest, APlanThatDoesNotFitIsRefusedWithTheNumbers) {
  MemoryPlan p;
  p.weights = size_t{4} << 30;
  p.kv = size_t{8} << 30;
  p.available = size_t{10} << 30;
  p.n_ctx = 32768;
  Options o;
  o.max_batch = 8;
  const Status st = check_memory(p, o);
  EXPECT_EQ(st.code(), ErrorCode::kOutOfMemory);
  EXPECT_NE(st.message().find("weights 4.0 GiB + KV cache 8.0 GiB (8 x 32768 positions of f16) "
                              "= 12.0 GiB of 10.0 GiB available"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("--kv q8_0"), std::string::npos);
  p.available = size_t{12} << 30;
  EXPECT_TRUE(check_memory(p, o).ok());
  p.available = 0;  // unknown: not refused
  EXPECT_TRUE(check_memory(p, o).ok());
}

// A context no machine holds is refused before anything is allocated, with the numbers.
TEST_F(MemoryPlanTest, TheEngineRefusesAContextThatCannotFitBeforeLoading) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  Options o;
  o.model_path = kChatglm3;
  o.n_threads = 1;
  o.n_ctx = 1 << 22;
  o.max_batch = 1024;
  auto e = load_engine(o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kOutOfMemory);
  EXPECT_NE(e.status().message().find("1024 x 4194304 positions of f16"), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("lower --ctx-size or --max-batch"), std::string::npos);
}

}  // namespace
}  // namespace glm::engine
