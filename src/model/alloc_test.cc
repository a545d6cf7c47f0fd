// The decode path allocates nothing after warm-up: a counting global operator new (this test
// binary only) watches single-token decode steps of a batch of two sequences. Only the calling
// thread is counted: the kernels' worker threads grow their own scratch once each, at a moment
// that depends on how the thread pool happens to split work (not deterministic under load).
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "model/test_util.h"

namespace {
thread_local long g_allocs = 0;
}  // namespace

void* operator new(std::size_t n) {
  ++g_allocs;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// GCC cannot see that these pair with the malloc in operator new above.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace glm::model {
namespace {

void check_no_alloc(const testing::RandomSpec& spec) {
  const std::string path = testing::temp_path("alloc_" + spec.arch + ".gguf");
  ASSERT_TRUE(testing::write_random_model(spec, path).ok());
  auto m = testing::load(path, 2);
  ASSERT_TRUE(m.ok());
  KvPool kv((*m)->config(), 8, 4, DType::kF16);
  std::vector<int32_t> blocks_a = {0, 1, 2, 3}, blocks_b = {4, 5, 6, 7};
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  std::vector<float> out;
  out.reserve(2 * (*m)->config().n_vocab * 8);
  std::vector<SeqInput> batch(2);
  batch[0] = SeqInput{prompt.data(), 5, 0, blocks_a.data(), 4, false};
  batch[1] = SeqInput{prompt.data(), 3, 0, blocks_b.data(), 4, false};
  ASSERT_TRUE((*m)->forward(batch, &kv, &out).ok());
  int32_t ta = 7, tb = 9;
  for (int step = 0; step < 6; ++step) {
    batch[0] = SeqInput{&ta, 1, 5 + step, blocks_a.data(), 4, false};
    batch[1] = SeqInput{&tb, 1, 3 + step, blocks_b.data(), 4, false};
    out.clear();
    const long before = g_allocs;
    ASSERT_TRUE((*m)->forward(batch, &kv, &out).ok());
    const long during = g_allocs - before;
    // Step 0 may still grow scratch (first 2-token batch); later steps must not allocate.
    if (step > 0) {
      EXPECT_EQ(during, 0) << "decode step " << step;
    }
  }
}

TEST(Alloc, ChatglmDecodeStepsDoNotAllocate) { check_no_alloc(testing::RandomSpec{}); }

TEST(Alloc, LlamaDecodeStepsDoNotAllocate) {
  testing::RandomSpec s;
  s.arch = "llama";
  check_no_alloc(s);
}

}  // namespace
}  // namespace glm::model
