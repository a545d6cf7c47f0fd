// Helpers for the model tests (header-only; test binaries only): temporary paths, golden JSONL
// files, random-weight model files written with gguf::Writer, requantized copies of a model.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "arch/arch.h"
#include "core/dtype.h"
#include "core/temp_dir.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "model/model.h"

namespace glm::model::testing {

inline std::string data_path(const std::string& rel) {
  return std::string(GLM_SHARED_DATA) + "/" + rel;
}
inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

// A path in a per-process temporary directory (made on first use, removed with its files when
// the process exits).
inline std::string temp_path(const std::string& name) {
  static const TempDir dir("/tmp/glm_model_test.");
  return (dir.path().empty() ? std::string("/tmp") : dir.path()) + "/" + name;
}

struct JsonRow {
  int pos = 0;
  int token = 0;
  std::vector<float> values;
};

// Reads an eval-format JSONL file ({"pos","token","values"} per line).
inline std::vector<JsonRow> read_jsonl(const std::string& path) {
  std::vector<JsonRow> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    rows.push_back(
        {j["pos"].get<int>(), j["token"].get<int>(), j["values"].get<std::vector<float>>()});
  }
  return rows;
}

// device: LoadOptions::device ("cpu", "vulkan", ...).
inline StatusOr<std::unique_ptr<Model>> load(const std::string& path, int n_threads = 1,
                                             bool repack = true,
                                             const std::string& device = "cpu") {
  StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
  if (!f.ok()) return f.status();
  LoadOptions o;
  o.n_threads = n_threads;
  o.repack = repack;
  o.device = device;
  return load_model(std::shared_ptr<const gguf::File>(std::move(*f)), o);
}

// Shape of a random-weight model file. Matrices are N(0, std) (type `type`), norms 1 + N(0, 0.1),
// biases N(0, 0.02), all vectors f32.
struct RandomSpec {
  std::string arch = "chatglm";  // "chatglm", "llama" or "chatglm1" (general.architecture)
  int n_vocab = 64;
  int n_embd = 64;
  int n_ff = 96;
  int n_layer = 2;
  int n_head = 4;
  int n_head_kv = 2;
  int n_rot = -1;  // -1: the architecture's default (chatglm head_dim/2, llama head_dim)
  // The head width where it is not n_embd / n_head (written as attention.key_length and
  // value_length: GLM-4.5-Air's 96 heads of 128 over 4096); 0: n_embd / n_head.
  int head_dim = 0;
  float rope_base = 10000.0f;
  DType type = DType::kF32;
  // Types other than `type` for the matrices whose names end so ({"attn_v.weight", kQ6_K}: a
  // Q4_K_M file's mix).
  std::vector<std::pair<std::string, DType>> types_by_suffix;
  bool tied = false;
  float std = 0.1f;
  uint32_t seed = 1;
  // Fault injection for the error tests: tensor names to leave out, and a hook that may change
  // a tensor's shape before it is written ({name, shape}).
  std::vector<std::string> skip;
  std::function<void(const std::string&, std::vector<int64_t>*)> reshape;
  std::function<void(gguf::Writer*)> extra_metadata;
};

// ChatGLM-6B (v1) in glmserve's "chatglm1" layout, every tensor of arch::tensor_table (norms
// with biases, biases on every projection, a GELU ffn_up of n_ff rows); n_head_kv and n_rot
// are the architecture's (n_head, head_dim / 2); the default residual scale.
inline Status write_random_chatglm1(const RandomSpec& s, const std::string& path) {
  arch::Dims d;
  d.n_vocab = s.n_vocab;
  d.n_embd = s.n_embd;
  d.n_ff = s.n_ff;
  d.n_layer = s.n_layer;
  d.n_head = s.n_head;
  d.n_head_kv = s.n_head;
  d.qkv_bias = true;
  d.tied_output = s.tied;
  const std::vector<arch::TensorSpec> ts = arch::tensor_table(arch::Arch::kChatGLM1, d);
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("chatglm1"));
  w.set("chatglm1.context_length", gguf::Value::u32(512));
  w.set("chatglm1.embedding_length", gguf::Value::u32(s.n_embd));
  w.set("chatglm1.feed_forward_length", gguf::Value::u32(s.n_ff));
  w.set("chatglm1.block_count", gguf::Value::u32(s.n_layer));
  w.set("chatglm1.attention.head_count", gguf::Value::u32(s.n_head));
  w.set("chatglm1.attention.head_count_kv", gguf::Value::u32(s.n_head));
  w.set("chatglm1.attention.layer_norm_epsilon", gguf::Value::f32(1e-5f));
  w.set("chatglm1.rope.freq_base", gguf::Value::f32(s.rope_base));
  w.set("chatglm1.rope.dimension_count", gguf::Value::u32(s.n_embd / s.n_head / 2));
  auto is_vector = [](const arch::TensorSpec& t) { return t.shape.size() == 1; };
  for (const arch::TensorSpec& t : ts) {
    w.add_tensor(t.name, is_vector(t) ? DType::kF32 : s.type, t.shape);
  }
  GLM_RETURN_IF_ERROR(w.begin(path));
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const arch::TensorSpec& t : ts) {
    int64_t n = 1;
    for (int64_t x : t.shape) n *= x;
    const bool norm = t.role == arch::Role::kNorm;
    const float scale = is_vector(t) ? (norm ? 0.1f : 0.02f) : s.std;
    std::vector<float> v(n);
    for (float& x : v) x = (norm ? 1.0f : 0.0f) + scale * normal(rng);
    if (is_vector(t) || s.type == DType::kF32) {
      GLM_RETURN_IF_ERROR(w.write_tensor_data(v.data(), v.size() * sizeof(float)));
    } else {
      std::vector<uint8_t> bytes(row_bytes(s.type, n));
      kernels::quantize_row_ref(s.type, v.data(), bytes.data(), n);
      GLM_RETURN_IF_ERROR(w.write_tensor_data(bytes.data(), bytes.size()));
    }
  }
  return w.finish();
}

inline Status write_random_model(const RandomSpec& s, const std::string& path) {
  if (s.arch == "chatglm1") return write_random_chatglm1(s, path);
  const bool glm = s.arch != "llama";
  const int hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  struct T {
    std::string name;
    std::vector<int64_t> shape;
    bool vector_f32;  // norms/biases
    bool norm;
  };
  std::vector<T> ts;
  ts.push_back({"token_embd.weight", {s.n_embd, s.n_vocab}, false, false});
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t qd = int64_t{s.n_head} * hd, kd = int64_t{s.n_head_kv} * hd;
    ts.push_back({p + "attn_norm.weight", {s.n_embd}, true, true});
    if (glm) {
      ts.push_back({p + "attn_qkv.weight", {s.n_embd, qd + 2 * kd}, false, false});
      ts.push_back({p + "attn_qkv.bias", {qd + 2 * kd}, true, false});
    } else {
      ts.push_back({p + "attn_q.weight", {s.n_embd, qd}, false, false});
      ts.push_back({p + "attn_k.weight", {s.n_embd, kd}, false, false});
      ts.push_back({p + "attn_v.weight", {s.n_embd, kd}, false, false});
    }
    ts.push_back({p + "attn_output.weight", {qd, s.n_embd}, false, false});
    ts.push_back({p + "ffn_norm.weight", {s.n_embd}, true, true});
    if (glm) {
      ts.push_back({p + "ffn_up.weight", {s.n_embd, 2 * int64_t{s.n_ff}}, false, false});
    } else {
      ts.push_back({p + "ffn_gate.weight", {s.n_embd, s.n_ff}, false, false});
      ts.push_back({p + "ffn_up.weight", {s.n_embd, s.n_ff}, false, false});
    }
    ts.push_back({p + "ffn_down.weight", {s.n_ff, s.n_embd}, false, false});
  }
  ts.push_back({"output_norm.weight", {s.n_embd}, true, true});
  if (!s.tied) ts.push_back({"output.weight", {s.n_embd, s.n_vocab}, false, false});

  gguf::Writer w;
  const std::string a = s.arch;
  w.set("general.architecture", gguf::Value::string(a));
  w.set(a + ".context_length", gguf::Value::u32(512));
  w.set(a + ".embedding_length", gguf::Value::u32(s.n_embd));
  w.set(a + ".feed_forward_length", gguf::Value::u32(s.n_ff));
  w.set(a + ".block_count", gguf::Value::u32(s.n_layer));
  w.set(a + ".attention.head_count", gguf::Value::u32(s.n_head));
  w.set(a + ".attention.head_count_kv", gguf::Value::u32(s.n_head_kv));
  w.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f));
  w.set(a + ".rope.freq_base", gguf::Value::f32(s.rope_base));
  w.set(a + ".rope.dimension_count",
        gguf::Value::u32(s.n_rot >= 0 ? s.n_rot : (glm ? hd / 2 : hd)));
  if (s.head_dim > 0) {
    w.set(a + ".attention.key_length", gguf::Value::u32(s.head_dim));
    w.set(a + ".attention.value_length", gguf::Value::u32(s.head_dim));
  }
  if (s.extra_metadata) s.extra_metadata(&w);

  const auto type_of = [&](const T& t) {
    if (t.vector_f32) return DType::kF32;
    for (const auto& [suffix, type] : s.types_by_suffix) {
      if (t.name.size() >= suffix.size() &&
          t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        return type;
      }
    }
    return s.type;
  };
  std::vector<T> kept;
  for (T t : ts) {
    bool skip = false;
    for (const std::string& n : s.skip) skip = skip || n == t.name;
    if (skip) continue;
    if (s.reshape) s.reshape(t.name, &t.shape);
    kept.push_back(t);
    w.add_tensor(t.name, type_of(t), t.shape);
  }
  GLM_RETURN_IF_ERROR(w.begin(path));
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const T& t : kept) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<float> v(n);
    const float scale = t.vector_f32 ? (t.norm ? 0.1f : 0.02f) : s.std;
    for (float& x : v) x = (t.norm ? 1.0f : 0.0f) + scale * normal(rng);
    const DType type = type_of(t);
    if (type == DType::kF32) {
      GLM_RETURN_IF_ERROR(w.write_tensor_data(v.data(), v.size() * sizeof(float)));
    } else {
      std::vector<uint8_t> bytes(row_bytes(type, n));
      kernels::quantize_row_ref(type, v.data(), bytes.data(), n);
      GLM_RETURN_IF_ERROR(w.write_tensor_data(bytes.data(), bytes.size()));
    }
  }
  return w.finish();
}

// Copies a model file, converting every weight matrix (2-D, or 3-D: a MoE layer's stacked
// experts) whose row length allows it to `type` (dequantized to f32, then quantize_row_ref);
// metadata and 1-D tensors unchanged. The token
// embedding is converted too (as llama.cpp's quantize does for these types).
inline Status requantize(const std::string& in, const std::string& out, DType type) {
  StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(in);
  if (!f.ok()) return f.status();
  const gguf::File& file = **f;
  gguf::Writer w;
  for (const auto& [key, value] : file.metadata()) {
    if (key != "general.alignment") w.set(key, value);
  }
  const int block = dtype_info(type).block_size;
  std::vector<DType> types;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const bool convert = t.shape.size() >= 2 && t.shape[0] % block == 0;
    types.push_back(convert ? type : t.type);
    w.add_tensor(t.name, types.back(), t.shape);
  }
  GLM_RETURN_IF_ERROR(w.begin(out));
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const gguf::TensorInfo& t = file.tensors()[i];
    if (types[i] == t.type) {
      GLM_RETURN_IF_ERROR(w.write_tensor_data(t.data, t.n_bytes));
      continue;
    }
    const int64_t cols = t.shape[0];
    std::vector<float> row(cols);
    std::vector<uint8_t> q(row_bytes(type, cols));
    for (int64_t r = 0; r < t.n_rows(); ++r) {
      kernels::dequantize_row_ref(t.type, t.data + r * row_bytes(t.type, cols), row.data(), cols);
      kernels::quantize_row_ref(type, row.data(), q.data(), cols);
      GLM_RETURN_IF_ERROR(w.write_tensor_data(q.data(), q.size()));
    }
  }
  return w.finish();
}

}  // namespace glm::model::testing
