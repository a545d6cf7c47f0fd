// The P-Tuning v2 prefix encoder of ChatGLM-6B, ChatGLM2/3 and GLM-4 (modeling_chatglm.py's
// PrefixEncoder and get_prompt), run once at load. For prefix token p (0 .. pre_seq_len - 1):
//   e_p = embedding[p]                                   [E]
//   o_p = e_p                                            without projection (E = W)
//   o_p = trans.2 (tanh(trans.0 e_p + b0)) + b2          with it (trans.0: E -> H, trans.2: H -> W)
// o_p [W = n_layer * 2 * kv_dim] viewed as [n_layer * 2, n_head_kv, head_dim] (get_prompt's
// view, permute, split(2)): layer l's key row is o_p[2l kv_dim, (2l + 1) kv_dim), its value row
// the next kv_dim values, each [n_head_kv, head_dim] as our KV rows are. Inference has no dropout.
// ChatGLM-6B (v1) is the same with n_head_kv = n_head and kv_dim = n_embd; its projection's
// embedding and hidden width are both n_embd (E = H = hidden_size), read from the file here.
#include "model/ptuning.h"

#include <cmath>
#include <string>
#include <vector>

#include "arch/ptuning_names.h"
#include "kernels/matmul.h"
#include "model/ops.h"

namespace glm::model {
namespace {

namespace pt = arch::ptuning;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "{";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

// The tensor `name` of `f`, F32, F16 or BF16, of ggml shape {n_cols, n_rows} (a matrix) or
// {n_cols} (n_rows = 0: a vector, as one row). n_cols or n_rows < 0: any (read from the file).
StatusOr<kernels::WeightView> tensor(const gguf::File& f, const char* name, int64_t n_cols,
                                     int64_t n_rows, const std::string& why) {
  const gguf::TensorInfo* t = f.tensor(name);
  if (t == nullptr) return bad_file(f.path() + ": the P-Tuning adapter has no tensor " + name);
  const size_t n_dims = n_rows == 0 ? 1 : 2;
  const bool fits = t->shape.size() == n_dims && (n_cols < 0 || t->shape[0] == n_cols) &&
                    (n_dims == 1 || n_rows < 0 || t->shape[1] == n_rows);
  if (!fits) {
    std::vector<int64_t> want{n_cols < 0 && !t->shape.empty() ? t->shape[0] : n_cols};
    if (n_dims == 2) want.push_back(n_rows < 0 && t->shape.size() > 1 ? t->shape[1] : n_rows);
    return bad_file(f.path() + ": " + name + " is " + shape_str(t->shape) + ", " + why + " needs " +
                    shape_str(want));
  }
  if (t->type != DType::kF32 && t->type != DType::kF16 && t->type != DType::kBF16) {
    return bad_file(f.path() + ": " + name + " is " + dtype_name(t->type) +
                    "; a P-Tuning prefix encoder is F32, F16 or BF16 (convert it again)");
  }
  kernels::WeightView w;
  w.type = t->type;
  w.data = t->data;
  w.n_cols = t->shape[0];
  w.n_rows = n_dims == 1 ? 1 : t->shape[1];
  return w;
}

// A vector tensor as f32: [n].
std::vector<float> as_floats(const kernels::WeightView& w) {
  std::vector<float> v(static_cast<size_t>(w.n_cols));
  ops::get_row(w.type, w.data, 0, w.n_cols, v.data());
  return v;
}

StatusOr<int64_t> get_count(const gguf::File& f, const char* key) {
  StatusOr<int64_t> v = f.get_int(key);
  if (!v.ok()) return bad_file(f.path() + ": " + v.status().message());
  return v;
}

}  // namespace

Status load_ptuning(const gguf::File& file, const Config& config, PrefixKv* out) {
  const std::string& path = file.path();
  StatusOr<std::string> gtype = file.get_string("general.type");
  if (!gtype.ok() || *gtype != "adapter") {
    return bad_file(path + ": not an adapter file (general.type must be \"adapter\")");
  }
  StatusOr<std::string> atype = file.get_string(pt::kKeyType);
  if (!atype.ok() || *atype != pt::kAdapterType) {
    return bad_file(path + ": not a P-Tuning adapter (adapter.type must be \"ptuning\")");
  }
  StatusOr<std::string> arch = file.get_string("general.architecture");
  if (!arch.ok()) return bad_file(path + ": " + arch.status().message());
  if (*arch != config.arch_name) {
    return invalid_argument(path + ": the P-Tuning adapter was made for a '" + *arch +
                            "' model; the base model is '" + config.arch_name + "'");
  }
  if (config.arch != Arch::kChatGLM && config.arch != Arch::kChatGLM1) {
    return unsupported(path +
                       ": P-Tuning v2 prefixes are ChatGLM-6B's (chatglm1) and ChatGLM2/3 and "
                       "GLM-4's (chatglm); not " +
                       config.arch_name);
  }
  StatusOr<int64_t> n_layer = get_count(file, pt::kKeyBlockCount);
  if (!n_layer.ok()) return n_layer.status();
  StatusOr<int64_t> kv_dim = get_count(file, pt::kKeyKvDim);
  if (!kv_dim.ok()) return kv_dim.status();
  if (*n_layer != config.n_layer || *kv_dim != config.kv_dim()) {
    return invalid_argument(
        path + ": the P-Tuning adapter is for a base of " + std::to_string(*n_layer) +
        " layers and K/V rows of " + std::to_string(*kv_dim) + " values (" + pt::kKeyBlockCount +
        ", " + pt::kKeyKvDim + "); the base model has " + std::to_string(config.n_layer) + " and " +
        std::to_string(config.kv_dim()));
  }
  StatusOr<int64_t> pre_seq_len = get_count(file, pt::kKeyPreSeqLen);
  if (!pre_seq_len.ok()) return pre_seq_len.status();
  if (*pre_seq_len < 1 || *pre_seq_len > 65536) {
    return bad_file(path + ": " + pt::kKeyPreSeqLen + " = " + std::to_string(*pre_seq_len) +
                    " (expected 1 to 65536)");
  }
  StatusOr<bool> projection = file.get_bool(pt::kKeyProjection);
  if (!projection.ok()) return bad_file(path + ": " + projection.status().message());

  const int64_t n_pre = *pre_seq_len;
  const int kd = config.kv_dim();
  const int64_t w_out = static_cast<int64_t>(config.n_layer) * 2 * kd;  // W
  const std::string base = "the base model (" + std::to_string(config.n_layer) + " layers, " +
                           "kv_dim " + std::to_string(kd) + ") with pre_seq_len " +
                           std::to_string(n_pre);
  StatusOr<kernels::WeightView> emb =
      tensor(file, pt::kEmbedding, *projection ? -1 : w_out, n_pre, base);
  if (!emb.ok()) return emb.status();
  const int64_t e_dim = emb->n_cols;  // E

  std::vector<float> x(static_cast<size_t>(n_pre * e_dim));  // [pre_seq_len, E] embedding rows
  for (int64_t p = 0; p < n_pre; ++p) {
    ops::get_row(emb->type, emb->data, p, e_dim, x.data() + p * e_dim);
  }
  std::vector<float> o;  // [pre_seq_len, W] the encoder's output
  if (!*projection) {
    o = std::move(x);
  } else {
    // The hidden width H is the file's (ChatGLM's is hidden_size).
    StatusOr<kernels::WeightView> w0 = tensor(file, pt::kTrans0Weight, e_dim, -1, base);
    if (!w0.ok()) return w0.status();
    const int64_t h_dim = w0->n_rows;  // H
    StatusOr<kernels::WeightView> b0 = tensor(file, pt::kTrans0Bias, h_dim, 0, base);
    if (!b0.ok()) return b0.status();
    StatusOr<kernels::WeightView> w2 = tensor(file, pt::kTrans2Weight, h_dim, w_out, base);
    if (!w2.ok()) return w2.status();
    StatusOr<kernels::WeightView> b2 = tensor(file, pt::kTrans2Bias, w_out, 0, base);
    if (!b2.ok()) return b2.status();
    std::vector<float> h(static_cast<size_t>(n_pre * h_dim));  // [pre_seq_len, H]
    kernels::matmul(*w0, x.data(), h.data(), n_pre, nullptr);
    const std::vector<float> bias0 = as_floats(*b0);
    for (int64_t p = 0; p < n_pre; ++p) {
      float* row = h.data() + p * h_dim;
      for (int64_t i = 0; i < h_dim; ++i) row[i] = std::tanh(row[i] + bias0[i]);
    }
    o.resize(static_cast<size_t>(n_pre * w_out));
    kernels::matmul(*w2, h.data(), o.data(), n_pre, nullptr);
    const std::vector<float> bias2 = as_floats(*b2);
    for (int64_t p = 0; p < n_pre; ++p) ops::add(bias2.data(), o.data() + p * w_out, w_out);
  }
  for (float v : o) {
    if (!std::isfinite(v)) {
      return bad_file(path + ": the prefix encoder gives non-finite values (a damaged adapter?)");
    }
  }

  PrefixKv r;
  r.n_tokens = static_cast<int>(n_pre);
  r.kv_dim = kd;
  r.k.resize(static_cast<size_t>(config.n_layer) * n_pre * kd);
  r.v.resize(r.k.size());
  for (int l = 0; l < config.n_layer; ++l) {
    for (int64_t p = 0; p < n_pre; ++p) {
      const float* row = o.data() + p * w_out + static_cast<int64_t>(2 * l) * kd;
      const size_t at = (static_cast<size_t>(l) * n_pre + p) * kd;
      std::copy(row, row + kd, r.k.begin() + at);
      std::copy(row + kd, row + 2 * kd, r.v.begin() + at);
    }
  }
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace glm::model
