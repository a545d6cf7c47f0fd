// For the batching tests (model/batch_test.cc, tests/glm4moe_test.cc): a batch of several
// sequences at different positions must give what each sequence gives when run alone (the
// property continuous batching relies on).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/kv_pool.h"
#include "model/model.h"
#include "model/test_util.h"

namespace glm::model::testing {

struct BatchSeq {
  std::vector<int32_t> cached;  // tokens already in the cache before the batched step
  std::vector<int32_t> fresh;   // tokens of the batched step
  bool all_logits;
  std::vector<int32_t> blocks;
};

// Three sequences (one with a cache before the step) in one forward of `m` against each alone
// in its own pool.
inline void check_batch_equals_alone(Model& m, DType kv_type) {
  const int bt = 4;
  // Block tables interleave in the pool so that a wrong table would read another's rows.
  std::vector<BatchSeq> seqs = {
      {{}, {5, 9, 2, 33, 17}, true, {0, 3}},
      {{1, 2, 3, 4, 5, 6, 7}, {8}, false, {1, 4}},
      {{40, 41, 42}, {43, 44, 45, 46}, true, {2, 5}},
  };
  KvPool kv(m.config(), 6, bt, kv_type);
  for (BatchSeq& s : seqs) {
    if (s.cached.empty()) continue;
    std::vector<float> ignore;
    SeqInput in{s.cached.data(), static_cast<int>(s.cached.size()), 0,
                s.blocks.data(), static_cast<int>(s.blocks.size()), false};
    ASSERT_TRUE(m.forward({in}, &kv, &ignore).ok());
  }
  std::vector<SeqInput> batch;
  for (BatchSeq& s : seqs) {
    batch.push_back({s.fresh.data(), static_cast<int>(s.fresh.size()),
                     static_cast<int>(s.cached.size()), s.blocks.data(),
                     static_cast<int>(s.blocks.size()), s.all_logits});
  }
  std::vector<float> batched;
  ASSERT_TRUE(m.forward(batch, &kv, &batched).ok());

  // Each sequence alone, in its own pool, prompt and new tokens as separate steps.
  std::vector<float> alone;
  for (BatchSeq& s : seqs) {
    KvPool own(m.config(), 2, bt, kv_type);
    std::vector<int32_t> blocks = {0, 1};
    std::vector<float> ignore;
    if (!s.cached.empty()) {
      SeqInput in{s.cached.data(), static_cast<int>(s.cached.size()), 0, blocks.data(), 2, false};
      ASSERT_TRUE(m.forward({in}, &own, &ignore).ok());
    }
    SeqInput in{s.fresh.data(),
                static_cast<int>(s.fresh.size()),
                static_cast<int>(s.cached.size()),
                blocks.data(),
                2,
                s.all_logits};
    ASSERT_TRUE(m.forward({in}, &own, &alone).ok());
  }
  const size_t rows = 5 + 1 + 4;
  ASSERT_EQ(batched.size(), rows * m.config().n_vocab);
  ASSERT_EQ(alone.size(), batched.size());
  float max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < alone.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(alone[i] - batched[i]));
    max_abs = std::max(max_abs, std::fabs(alone[i]));
  }
  // Float32 sums over a few hundred terms in possibly different orders: ~1e-6 relative.
  EXPECT_LT(max_diff, 1e-4f * std::max(1.0f, max_abs)) << "max |logit| " << max_abs;
  EXPECT_GT(max_abs, 0.1f);  // the comparison is not between zeros
}

// The same for the model file `path` on `device`.
inline void check_batch_equals_alone(const std::string& path, DType kv_type,
                                     const std::string& device = "cpu") {
  auto model = load(path, 2, true, device);
  ASSERT_TRUE(model.ok()) << model.status().message();
  ASSERT_EQ((*model)->device_name().substr(0, 3), device.substr(0, 3));
  check_batch_equals_alone(**model, kv_type);
}

}  // namespace glm::model::testing
