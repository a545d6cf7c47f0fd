// Test helper (test binaries only) for the float64 references of a model with a P-Tuning v2
// prefix (prefix_forward_test.cc: ChatGLM2/3; chatglm1_prefix_test.cc: ChatGLM-6B): a random f32
// model and a random prefix for it, loaded; the model's tensors for the reference to read; the
// model's logits through evaluate(); the largest difference from the reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/adapter.h"
#include "model/eval.h"
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

}  // namespace glm::model::testing
