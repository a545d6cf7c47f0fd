// Test helper (test binaries only) for the float64 references of a model with a P-Tuning v2
// prefix (prefix_forward_test.cc: ChatGLM2/3; chatglm1_prefix_test.cc: ChatGLM-6B): a random f32
// model and a random prefix for it, loaded; the model's tensors for the reference to read; the
// model's logits through evaluate(); the largest difference from the reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/adapter.h"
#include "model/eval.h"
#include "model/kv_pool.h"
#include "model/ptuning.h"
#include "model/ptuning_test_util.h"
#include "model/test_util.h"

namespace glm::model::testing {

// The model of `spec` (written as `name`.gguf, f32) and a prefix of `ps` for it (`name`_adapter).
struct PrefixFixture {
  RandomSpec spec;
  std::unique_ptr<Model> model;
  std::unique_ptr<gguf::File> file;  // the model's tensors, read by the reference
  Adapter adapter;

  PrefixFixture(const RandomSpec& s, const PtuningSpec& ps, const std::string& name) : spec(s) {
    const std::string path = temp_path(name + ".gguf");
    EXPECT_TRUE(write_random_model(spec, path).ok());
    StatusOr<std::unique_ptr<Model>> m = load(path, 2);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    model = std::move(*m);
    StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
    EXPECT_TRUE(f.ok());
    file = std::move(*f);
    const std::string ap = temp_path(name + "_adapter.gguf");
    EXPECT_TRUE(write_ptuning_gguf(ps, random_ptuning(ps), ap).ok());
    // The adapter file is read once and dropped: the prefix lives in the Adapter.
    StatusOr<std::unique_ptr<gguf::File>> af = gguf::File::open(ap);
    EXPECT_TRUE(af.ok());
    const Status st = load_ptuning(**af, model->config(), &adapter.prefix);
    EXPECT_TRUE(st.ok()) << st.to_string();
    adapter.name = "pt";
  }

  // An f32 tensor of the model as doubles.
  std::vector<double> tensor(const std::string& name) const {
    const gguf::TensorInfo* t = file->tensor(name);
    EXPECT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, DType::kF32) << name;
    const float* f = reinterpret_cast<const float*>(t->data);
    return std::vector<double>(f, f + t->n_elements());
  }
};

// y[r] = sum_c w[r, c] x[c] (+ b[r]); w: [rows, cols].
inline std::vector<double> linear(const std::vector<double>& w, const std::vector<double>& x,
                                  const std::vector<double>* b = nullptr) {
  const size_t cols = x.size(), rows = w.size() / cols;
  std::vector<double> y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double acc = b != nullptr ? (*b)[r] : 0.0;
    for (size_t c = 0; c < cols; ++c) acc += w[r * cols + c] * x[c];
    y[r] = acc;
  }
  return y;
}

// evaluate(): the prompt prefilled in one step, then each decode token alone through the KV
// cache (blocks of 4 tokens); one row of logits per position.
inline std::vector<std::vector<float>> run(Model& m, const std::vector<int32_t>& prompt,
                                           const std::vector<int32_t>& decode, const Adapter* a,
                                           DType kv_type = DType::kF32) {
  EvalOptions o;
  o.kv_type = kv_type;
  o.block_tokens = 4;
  o.adapter = a;
  StatusOr<std::vector<EvalRow>> rows = evaluate(m, prompt, decode, o);
  EXPECT_TRUE(rows.ok()) << rows.status().to_string();
  std::vector<std::vector<float>> out;
  if (rows.ok()) {
    for (EvalRow& r : *rows) out.push_back(std::move(r.values));
  }
  return out;
}

inline double max_diff(const std::vector<std::vector<float>>& got,
                       const std::vector<std::vector<double>>& want) {
  if (got.size() != want.size()) return 1e9;
  double m = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    for (size_t i = 0; i < want[r].size(); ++i) m = std::max(m, std::fabs(got[r][i] - want[r][i]));
  }
  return m;
}

// A batch of a prefixed 5-token sequence (fx's adapter) and a plain 3-token one gives each one's
// logits alone, in both orders: the prefix belongs to its sequence, not to a batch slot.
// `prompt_prefix`: each sequence's tokens are its prompt's bidirectional prefix (ChatGLM-6B's
// SeqInput::prefix_len).
inline void expect_batch_equals_each_alone(const PrefixFixture& fx, bool prompt_prefix) {
  Model& m = *fx.model;
  const Config& c = m.config();
  const std::vector<int32_t> a = {4, 8, 15, 16, 23}, b = {42, 7, 7};
  const auto alone_a = run(m, a, {}, &fx.adapter);
  const auto alone_b = run(m, b, {}, nullptr);
  KvPool kv(c, 4, 4, DType::kF32);
  const std::vector<int32_t> blocks_a = {2, 0}, blocks_b = {3};
  std::vector<SeqInput> batch(2);
  batch[0].tokens = a.data();
  batch[0].n_tokens = 5;
  batch[0].blocks = blocks_a.data();
  batch[0].n_blocks = 2;
  batch[0].all_logits = true;
  batch[0].adapter = &fx.adapter;
  batch[1].tokens = b.data();
  batch[1].n_tokens = 3;
  batch[1].blocks = blocks_b.data();
  batch[1].n_blocks = 1;
  batch[1].all_logits = true;
  if (prompt_prefix) {
    batch[0].prefix_len = 5;
    batch[1].prefix_len = 3;
  }
  for (bool swap : {false, true}) {
    std::vector<SeqInput> bb = batch;
    if (swap) std::swap(bb[0], bb[1]);
    std::vector<float> out;
    ASSERT_TRUE(m.forward(bb, &kv, &out).ok());
    const size_t V = c.n_vocab;
    const size_t a0 = swap ? 3 * V : 0, b0 = swap ? 0 : 5 * V;
    for (int t = 0; t < 5; ++t) {
      for (size_t i = 0; i < V; ++i) ASSERT_NEAR(out[a0 + t * V + i], alone_a[t][i], 1e-5);
    }
    for (int t = 0; t < 3; ++t) {
      for (size_t i = 0; i < V; ++i) ASSERT_NEAR(out[b0 + t * V + i], alone_b[t][i], 1e-5);
    }
  }
}

// The prefix was computed once, at load (the adapter file is closed). A prefixed sequence runs
// its own tokens only: the KV blocks of its own positions suffice (one block of 4 slots for 3
// tokens and fx's prefix of 5), one output row per own token, and its rows land where an
// unprefixed sequence writes them: layer 0's K of a token does not depend on what attention
// saw, so it is bit-identical with and without the prefix, which also shows the positions
// (rotary) are not shifted by the prefix. Layer 1's K sees the prefix through layer 0.
inline void expect_prefix_costs_no_prefill(const PrefixFixture& fx, bool prompt_prefix) {
  Model& m = *fx.model;
  const Config& c = m.config();
  ASSERT_EQ(fx.adapter.prefix.n_tokens, 5);
  const std::vector<int32_t> toks = {5, 6, 7};
  auto run_one = [&](const Adapter* a, KvPool* kv, std::vector<float>* out) {
    const int32_t block = 0;
    SeqInput in;
    in.tokens = toks.data();
    in.n_tokens = 3;
    in.blocks = &block;
    in.n_blocks = 1;
    in.all_logits = true;
    if (prompt_prefix) in.prefix_len = 3;
    in.adapter = a;
    return m.forward({in}, kv, out);
  };
  KvPool with(c, 1, 4, DType::kF32), without(c, 1, 4, DType::kF32);
  std::vector<float> out_with, out_without;
  ASSERT_TRUE(run_one(&fx.adapter, &with, &out_with).ok());  // 3 own + 5 prefix > 4 slots
  ASSERT_TRUE(run_one(nullptr, &without, &out_without).ok());
  EXPECT_EQ(out_with.size(), 3u * c.n_vocab);
  EXPECT_NE(out_with, out_without);
  const size_t row = static_cast<size_t>(c.kv_dim()) * sizeof(float);
  for (int t = 0; t < 3; ++t) {
    const auto* k0w = static_cast<const uint8_t*>(with.k(0, 0)) + t * row;
    const auto* k0o = static_cast<const uint8_t*>(without.k(0, 0)) + t * row;
    EXPECT_EQ(std::memcmp(k0w, k0o, row), 0) << "layer 0 K of position " << t;
    const auto* k1w = static_cast<const uint8_t*>(with.k(1, 0)) + t * row;
    const auto* k1o = static_cast<const uint8_t*>(without.k(1, 0)) + t * row;
    EXPECT_NE(std::memcmp(k1w, k1o, row), 0) << "layer 1 K of position " << t;
  }
}

}  // namespace glm::model::testing
