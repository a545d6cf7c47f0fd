// A batch of several sequences at different positions must give what each sequence gives when
// run alone (the property continuous batching relies on).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "kernels/packed.h"
#include "model/batch_test_util.h"
#include "model/test_util.h"

namespace glm::model {
namespace {

void check_batch_equals_alone(const testing::RandomSpec& spec, DType kv_type,
                              const std::string& device = "cpu") {
  const std::string path = testing::temp_path("batch_" + spec.arch + ".gguf");
  ASSERT_TRUE(testing::write_random_model(spec, path).ok());
  testing::check_batch_equals_alone(path, kv_type, device);
}

TEST(Batch, ChatglmBatchEqualsAlone) {
  testing::RandomSpec s;
  check_batch_equals_alone(s, DType::kF32);
}

TEST(Batch, ChatglmBatchEqualsAloneF16Kv) {
  testing::RandomSpec s;
  check_batch_equals_alone(s, DType::kF16);
}

TEST(Batch, ChatglmBatchEqualsAloneQ8_0Kv) {
  testing::RandomSpec s;  // 2 KV heads of 16: a Q8_0 block per row
  check_batch_equals_alone(s, DType::kQ8_0);
}

TEST(Batch, LlamaBatchEqualsAlone) {
  testing::RandomSpec s;
  s.arch = "llama";
  s.tied = true;
  check_batch_equals_alone(s, DType::kF32);
}

TEST(Batch, QuantizedBatchEqualsAlone) {
  testing::RandomSpec s;
  s.type = DType::kQ8_0;
  check_batch_equals_alone(s, DType::kF16);
}

// The same property on the Vulkan path (lavapipe in CI).
TEST(BatchGpu, ChatglmBatchEqualsAloneF16Kv) {
  testing::RandomSpec s;
  check_batch_equals_alone(s, DType::kF16, "vulkan");
}

TEST(BatchGpu, ChatglmQ4_0BatchEqualsAloneQ8_0Kv) {
  testing::RandomSpec s;
  s.type = DType::kQ4_0;
  check_batch_equals_alone(s, DType::kQ8_0, "vulkan");
}

TEST(BatchGpu, LlamaBatchEqualsAlone) {
  testing::RandomSpec s;
  s.arch = "llama";
  s.tied = true;
  check_batch_equals_alone(s, DType::kF32, "vulkan");
}

}  // namespace
}  // namespace glm::model

namespace glm::model {
namespace {

// Chunked prefill (the scheduler's way to keep long prompts from freezing others) gives the
// logits of a one-shot prefill.
TEST(Batch, ChunkedPrefillEqualsOneShot) {
  testing::RandomSpec spec;
  const std::string path = testing::temp_path("chunked.gguf");
  ASSERT_TRUE(testing::write_random_model(spec, path).ok());
  auto model = testing::load(path, 2);
  ASSERT_TRUE(model.ok());
  Model& m = **model;
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 58};
  std::vector<int32_t> blocks = {2, 0, 1};  // 3 blocks of 4, out of order
  std::vector<float> once, chunked;
  {
    KvPool kv(m.config(), 3, 4, DType::kF32);
    SeqInput in{prompt.data(), 11, 0, blocks.data(), 3, true};
    ASSERT_TRUE(m.forward({in}, &kv, &once).ok());
  }
  KvPool kv(m.config(), 3, 4, DType::kF32);
  for (int start : {0, 4, 8}) {
    const int n = std::min(4, 11 - start);
    SeqInput in{prompt.data() + start, n, start, blocks.data(), 3, true};
    ASSERT_TRUE(m.forward({in}, &kv, &chunked).ok());
  }
  ASSERT_EQ(once.size(), chunked.size());
  float max_diff = 0;
  for (size_t i = 0; i < once.size(); ++i)
    max_diff = std::max(max_diff, std::fabs(once[i] - chunked[i]));
  EXPECT_LT(max_diff, 1e-4f);
}

// Weights repacked at load (kernels/packed.h) give the logits of the same weights computed from
// the file's mapping: both quantize activations per 32 values, so only the order of the f32
// sums differs.
TEST(Batch, RepackedWeightsGiveTheMappedLogits) {
  if (kernels::packed_layout_for(DType::kQ4_0) == kernels::PackedLayout::kNone) {
    GTEST_SKIP() << "no packed kernel on this CPU";
  }
  for (const char* arch : {"chatglm", "llama"}) {
    for (DType type : {DType::kQ4_0, DType::kQ8_0}) {
      SCOPED_TRACE(std::string(arch) + " " + dtype_name(type));
      testing::RandomSpec spec;
      spec.arch = arch;
      spec.type = type;
      spec.n_vocab = 70;  // 4 groups of 16 rows and a tail of 6
      const std::string path = testing::temp_path(std::string("repack_") + arch + ".gguf");
      ASSERT_TRUE(testing::write_random_model(spec, path).ok());
      auto packed = testing::load(path, 2, true);
      auto mapped = testing::load(path, 2, false);
      ASSERT_TRUE(packed.ok() && mapped.ok());
      EXPECT_GT((*packed)->repacked_bytes(), 0u);
      EXPECT_EQ((*mapped)->repacked_bytes(), 0u);
      const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 58, 69};
      std::vector<int32_t> blocks = {0, 1, 2, 3};
      std::vector<float> a, b;
      for (auto [m, out] : {std::pair{packed->get(), &a}, std::pair{mapped->get(), &b}}) {
        KvPool kv(m->config(), 4, 4, DType::kF32);
        SeqInput in{prompt.data(), 11, 0, blocks.data(), 4, true};  // prefill
        ASSERT_TRUE(m->forward({in}, &kv, out).ok());
        SeqInput step{prompt.data() + 11, 1, 11, blocks.data(), 4, false};  // decode
        ASSERT_TRUE(m->forward({step}, &kv, out).ok());
      }
      ASSERT_EQ(a.size(), b.size());
      float max_diff = 0, max_abs = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
        max_abs = std::max(max_abs, std::fabs(b[i]));
      }
      EXPECT_LT(max_diff, 1e-4f * std::max(1.0f, max_abs)) << "max |logit| " << max_abs;
    }
  }
}

}  // namespace
}  // namespace glm::model
