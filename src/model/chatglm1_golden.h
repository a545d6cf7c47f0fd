// The HF golden of a tiny ChatGLM-6B (v1) (oracle/chatglm-v1/glm_model.data, FORMAT.md there),
// read and written into glmserve's "chatglm1" GGUF layout (docs/models.md) with the QKV rows
// un-interleaved from HF's per-head [q k v] order. Test-only: the model and scheduler tests
// build their model from it.
#pragma once

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"

namespace glm::model::testing {

constexpr int kH = 32, kHeads = 8, kHd = 4, kFf = 128, kVocab = 5;

struct Golden {
  std::vector<std::vector<float>> w;  // tensors 1..15 of FORMAT.md, in order
  std::vector<std::vector<float>> y;  // 5 rows of 32
};

inline bool read_golden(const std::string& path, Golden* g) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  const std::vector<size_t> sizes = {kVocab * kH, kH,       kH, 3 * kH * kH, 3 * kH,
                                     kH * kH,     kH,       kH, kH,          kFf * kH,
                                     kFf,         kH * kFf, kH, kH,          kH};
  size_t off = 0;
  auto take = [&](size_t n) {
    std::vector<float> v(n);
    if (off + n * 4 <= bytes.size()) std::memcpy(v.data(), bytes.data() + off, n * 4);
    off += n * 4;
    return v;
  };
  for (size_t n : sizes) g->w.push_back(take(n));
  off += 3 * 4;  // x1 = [0, 1, 2]
  std::vector<float> y1 = take(3 * kH);
  for (int r = 0; r < 3; ++r) g->y.emplace_back(y1.begin() + r * kH, y1.begin() + (r + 1) * kH);
  off += 4;  // x2 = [3]
  g->y.push_back(take(kH));
  off += 4;  // x3 = [4]
  g->y.push_back(take(kH));
  return off == bytes.size();
}

// HF rows [head][q k v][head_dim] -> glmserve rows [q k v][head][head_dim]; `cols` per row.
inline std::vector<float> uninterleave(const std::vector<float>& w, int cols) {
  std::vector<float> out(w.size());
  for (int h = 0; h < kHeads; ++h) {
    for (int part = 0; part < 3; ++part) {
      for (int e = 0; e < kHd; ++e) {
        const size_t src = (static_cast<size_t>(h) * 3 * kHd + part * kHd + e) * cols;
        const size_t dst = (static_cast<size_t>(part) * kH + h * kHd + e) * cols;
        std::memcpy(&out[dst], &w[src], cols * sizeof(float));
      }
    }
  }
  return out;
}

inline Status write_gguf(const Golden& g, const std::string& path) {
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("chatglm1"));
  w.set("chatglm1.context_length", gguf::Value::u32(8));
  w.set("chatglm1.embedding_length", gguf::Value::u32(kH));
  w.set("chatglm1.feed_forward_length", gguf::Value::u32(kFf));
  w.set("chatglm1.block_count", gguf::Value::u32(1));
  w.set("chatglm1.attention.head_count", gguf::Value::u32(kHeads));
  w.set("chatglm1.attention.layer_norm_epsilon", gguf::Value::f32(1e-5f));
  w.set("chatglm1.rope.freq_base", gguf::Value::f32(10000.0f));
  w.set("chatglm1.residual_scale", gguf::Value::f32(std::sqrt(56.0f)));
  struct T {
    const char* name;
    std::vector<int64_t> shape;
    std::vector<float> data;
  };
  const std::vector<T> ts = {
      {"token_embd.weight", {kH, kVocab}, g.w[0]},
      {"blk.0.attn_norm.weight", {kH}, g.w[1]},
      {"blk.0.attn_norm.bias", {kH}, g.w[2]},
      {"blk.0.attn_qkv.weight", {kH, 3 * kH}, uninterleave(g.w[3], kH)},
      {"blk.0.attn_qkv.bias", {3 * kH}, uninterleave(g.w[4], 1)},
      {"blk.0.attn_output.weight", {kH, kH}, g.w[5]},
      {"blk.0.attn_output.bias", {kH}, g.w[6]},
      {"blk.0.ffn_norm.weight", {kH}, g.w[7]},
      {"blk.0.ffn_norm.bias", {kH}, g.w[8]},
      {"blk.0.ffn_up.weight", {kH, kFf}, g.w[9]},
      {"blk.0.ffn_up.bias", {kFf}, g.w[10]},
      {"blk.0.ffn_down.weight", {kFf, kH}, g.w[11]},
      {"blk.0.ffn_down.bias", {kH}, g.w[12]},
      {"output_norm.weight", {kH}, g.w[13]},
      {"output_norm.bias", {kH}, g.w[14]},
  };
  for (const T& t : ts) w.add_tensor(t.name, DType::kF32, t.shape);
  GLM_RETURN_IF_ERROR(w.begin(path));
  for (const T& t : ts) {
    GLM_RETURN_IF_ERROR(w.write_tensor_data(t.data.data(), t.data.size() * sizeof(float)));
  }
  return w.finish();
}

}  // namespace glm::model::testing
