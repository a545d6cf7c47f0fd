// Test helper (test binaries only): random P-Tuning v2 adapter files in our GGUF layout
// (docs/adapters.md#p-tuning-v2), written with gguf::Writer from weights the test keeps, so a
// test can recompute the prefix encoder itself.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "arch/ptuning_names.h"
#include "core/status.h"
#include "gguf/gguf.h"

namespace glm::model::testing {

struct PtuningSpec {
  std::string arch = "chatglm";
  int n_layer = 2;
  int kv_dim = 32;
  int pre_seq_len = 3;
  bool projection = false;
  int emb_dim = -1;  // E; -1 = W = n_layer * 2 * kv_dim (ChatGLM2/3's, with or without projection)
  int hidden = 24;   // H of the projection
  float std = 0.5f;
  uint32_t seed = 7;
  // Fault injection: a hook that may change a tensor's shape ({name, shape}) and extra metadata
  // written last (overrides).
  std::function<void(const std::string&, std::vector<int64_t>*)> reshape;
  std::function<void(gguf::Writer*)> extra_metadata;
};

// The weights, PyTorch layout (Linear weight [out, in] row-major).
struct PtuningWeights {
  int e = 0, h = 0, w = 0;
  std::vector<float> emb;  // [pre_seq_len, E]
  std::vector<float> w0;   // [H, E]
  std::vector<float> b0;   // [H]
  std::vector<float> w2;   // [W, H]
  std::vector<float> b2;   // [W]
};

inline PtuningWeights random_ptuning(const PtuningSpec& s) {
  PtuningWeights p;
  p.w = s.n_layer * 2 * s.kv_dim;
  p.e = s.emb_dim < 0 ? p.w : s.emb_dim;
  p.h = s.hidden;
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, s.std);
  auto fill = [&](std::vector<float>* v, size_t n) {
    v->resize(n);
    for (float& x : *v) x = normal(rng);
  };
  fill(&p.emb, static_cast<size_t>(s.pre_seq_len) * p.e);
  if (s.projection) {
    fill(&p.w0, static_cast<size_t>(p.h) * p.e);
    fill(&p.b0, p.h);
    fill(&p.w2, static_cast<size_t>(p.w) * p.h);
    fill(&p.b2, p.w);
  }
  return p;
}

inline Status write_ptuning_gguf(const PtuningSpec& s, const PtuningWeights& p,
                                 const std::string& path) {
  namespace pt = arch::ptuning;
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string(s.arch));
  w.set("general.type", gguf::Value::string("adapter"));
  w.set(pt::kKeyType, gguf::Value::string(pt::kAdapterType));
  w.set(pt::kKeyPreSeqLen, gguf::Value::u32(s.pre_seq_len));
  w.set(pt::kKeyProjection, gguf::Value::boolean(s.projection));
  w.set(pt::kKeyBlockCount, gguf::Value::u32(s.n_layer));
  w.set(pt::kKeyKvDim, gguf::Value::u32(s.kv_dim));
  if (s.extra_metadata) s.extra_metadata(&w);
  struct T {
    const char* name;
    std::vector<int64_t> shape;
    const std::vector<float>* data;
  };
  std::vector<T> ts = {{pt::kEmbedding, {p.e, s.pre_seq_len}, &p.emb}};
  if (s.projection) {
    ts.push_back({pt::kTrans0Weight, {p.e, p.h}, &p.w0});
    ts.push_back({pt::kTrans0Bias, {p.h}, &p.b0});
    ts.push_back({pt::kTrans2Weight, {p.h, p.w}, &p.w2});
    ts.push_back({pt::kTrans2Bias, {p.w}, &p.b2});
  }
  std::vector<std::vector<float>> bytes;
  for (T& t : ts) {
    if (s.reshape) s.reshape(t.name, &t.shape);
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<float> v(*t.data);
    v.resize(n, 0.25f);  // a reshaped tensor keeps its values, padded
    bytes.push_back(std::move(v));
    w.add_tensor(t.name, DType::kF32, t.shape);
  }
  GLM_RETURN_IF_ERROR(w.begin(path));
  for (const std::vector<float>& v : bytes) {
    GLM_RETURN_IF_ERROR(w.write_tensor_data(v.data(), v.size() * sizeof(float)));
  }
  return w.finish();
}

}  // namespace glm::model::testing
