#include "model/lora.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

#include "core/dtype.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "model/ptuning.h"

namespace glm::model {
namespace {

constexpr arch::Slot kLoraSlots[] = {arch::Slot::kAttnQkv, arch::Slot::kAttnQ,   arch::Slot::kAttnK,
                                     arch::Slot::kAttnV,   arch::Slot::kAttnOut, arch::Slot::kFfnUp,
                                     arch::Slot::kFfnGate, arch::Slot::kFfnDown};

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "{";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "}";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A 2-D tensor of `rows` x `cols` (ggml shape {cols, rows}) read into f32 [rows, cols].
Status read_matrix(const gguf::File& file, const gguf::TensorInfo& t, int64_t rows, int64_t cols,
                   std::vector<float>* out) {
  const std::string where = file.path() + ": tensor " + t.name;
  if (t.shape.size() != 2 || t.shape[0] != cols || t.shape[1] != rows) {
    return bad_file(where + " has shape " + shape_str(t.shape) + ", the base model needs " +
                    shape_str({cols, rows}) + " (an adapter for another model?)");
  }
  const DTypeInfo& info = dtype_info(t.type);
  if (!info.supported || !kernels::can_dequantize(t.type) || cols % info.block_size != 0) {
    return unsupported(where + " has type " + info.name + ", which glmserve cannot read " +
                       "(write the adapter as f32, f16, bf16 or q8_0)");
  }
  if (t.data == nullptr) return bad_file(where + " has no data");
  out->resize(static_cast<size_t>(rows) * cols);
  const size_t rb = row_bytes(t.type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::dequantize_row_ref(t.type, t.data + r * rb, out->data() + r * cols, cols);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<LoraSpec> parse_lora_spec(const std::string& arg) {
  LoraSpec spec;
  spec.path = arg;
  const size_t colon = arg.rfind(':');
  if (colon != std::string::npos && colon + 1 < arg.size()) {
    const std::string tail = arg.substr(colon + 1);
    char* end = nullptr;
    const float v = std::strtof(tail.c_str(), &end);
    if (end != nullptr && *end == '\0') {
      if (!std::isfinite(v))
        return invalid_argument("--lora: the scale of '" + arg + "' is not finite");
      spec.path = arg.substr(0, colon);
      spec.scale = v;
    }
  }
  if (spec.path.empty())
    return invalid_argument("--lora: expected A.gguf[:scale], got '" + arg + "'");
  return spec;
}

LoraPair* lora_pair(LoraLayer* l, arch::Slot slot) {
  using arch::Slot;
  switch (slot) {
    case Slot::kAttnQkv:
      return &l->qkv;
    case Slot::kAttnQ:
      return &l->wq;
    case Slot::kAttnK:
      return &l->wk;
    case Slot::kAttnV:
      return &l->wv;
    case Slot::kAttnOut:
      return &l->wo;
    case Slot::kFfnUp:
      return &l->ffn_up;
    case Slot::kFfnGate:
      return &l->ffn_gate;
    case Slot::kFfnDown:
      return &l->ffn_down;
    default:
      return nullptr;
  }
}

Status load_lora(const gguf::File& file, const Config& config, float scale,
                 std::vector<LoraLayer>* out) {
  const std::string& path = file.path();
  StatusOr<std::string> type = file.get_string("general.type");
  if (!type.ok() || *type != "adapter") {
    return bad_file(path + ": not an adapter (general.type is not \"adapter\")");
  }
  StatusOr<std::string> kind = file.get_string("adapter.type");
  if (!kind.ok() || *kind != "lora") return bad_file(path + ": adapter.type is not \"lora\"");
  StatusOr<std::string> arch = file.get_string("general.architecture");
  if (!arch.ok()) return bad_file(path + ": general.architecture is missing");
  if (*arch != config.arch_name) {
    return invalid_argument(path + ": a LoRA for architecture '" + *arch +
                            "', the base model is '" + config.arch_name + "'");
  }
  StatusOr<double> alpha = file.get_float_or("adapter.lora.alpha", 0.0);
  if (!alpha.ok()) return alpha.status();
  if (!std::isfinite(*alpha)) return bad_file(path + ": adapter.lora.alpha is not finite");
  if (config.arch == Arch::kChatGLM1) {
    return unsupported(path + ": LoRA on ChatGLM-6B (v1) is not supported");
  }

  std::unordered_map<std::string, const arch::TensorSpec*> by_name;
  const std::vector<arch::TensorSpec> table = arch::tensor_table(config.arch, config.dims());
  for (const arch::TensorSpec& t : table) by_name[t.name] = &t;

  struct Halves {
    const gguf::TensorInfo* a = nullptr;
    const gguf::TensorInfo* b = nullptr;
  };
  std::map<std::string, Halves> pairs;  // base tensor name -> its lora_a and lora_b
  for (const gguf::TensorInfo& t : file.tensors()) {
    const bool is_a = ends_with(t.name, ".lora_a"), is_b = ends_with(t.name, ".lora_b");
    if (!is_a && !is_b) {
      return unsupported(path + ": tensor " + t.name +
                         " is not a lora_a or lora_b (only LoRA pairs are supported)");
    }
    Halves& h = pairs[t.name.substr(0, t.name.size() - 7)];
    (is_a ? h.a : h.b) = &t;
  }
  if (pairs.empty()) return bad_file(path + ": has no LoRA tensors");

  std::vector<LoraLayer> layers(config.n_layer);
  for (const auto& [base, h] : pairs) {
    auto it = by_name.find(base);
    if (it == by_name.end()) {
      return bad_file(path + ": tensor " + base + ".lora_" + (h.a ? "a" : "b") +
                      ": the base model has no tensor " + base +
                      " (an adapter for another model?)");
    }
    const arch::TensorSpec& spec = *it->second;
    // Not the MTP block (after the trunk's layers): it drafts, the trunk decides.
    LoraPair* pair = spec.layer >= 0 && spec.layer < config.n_layer
                         ? lora_pair(&layers[spec.layer], spec.slot)
                         : nullptr;
    if (pair == nullptr) {
      return unsupported(path + ": a LoRA on " + base +
                         " is not supported (only the layers' weight matrices)");
    }
    if (h.a == nullptr || h.b == nullptr) {
      return bad_file(path + ": the LoRA pair of " + base + " has no " +
                      (h.a == nullptr ? "lora_a" : "lora_b"));
    }
    const int64_t n_in = spec.shape[0], n_out = spec.shape[1];
    if (h.b->shape.size() != 2 || h.b->shape[0] < 1 || h.b->shape[0] > std::min(n_in, n_out)) {
      return bad_file(path + ": tensor " + h.b->name + " has shape " + shape_str(h.b->shape) +
                      ", expected {rank, " + std::to_string(n_out) +
                      "} with 1 <= rank <= " + std::to_string(std::min(n_in, n_out)));
    }
    const int64_t rank = h.b->shape[0];
    LoraPair p;
    p.rank = static_cast<int>(rank);
    p.n_in = static_cast<int>(n_in);
    p.n_out = static_cast<int>(n_out);
    p.scale = *alpha != 0.0 ? static_cast<float>(scale * *alpha / rank) : scale;
    GLM_RETURN_IF_ERROR(read_matrix(file, *h.a, rank, n_in, &p.a));   // [rank, n_in]
    GLM_RETURN_IF_ERROR(read_matrix(file, *h.b, n_out, rank, &p.b));  // [n_out, rank]
    *pair = std::move(p);
  }
  *out = std::move(layers);
  return Status::Ok();
}

StatusOr<std::shared_ptr<const Adapter>> load_adapter(const gguf::File& file, const Config& config,
                                                      float scale, const std::string& name) {
  StatusOr<std::string> type = file.get_string("general.type");
  if (!type.ok() || *type != "adapter") {
    return bad_file(file.path() + ": not an adapter file (general.type is not \"adapter\")");
  }
  StatusOr<std::string> kind = file.get_string("adapter.type");
  if (!kind.ok()) return bad_file(file.path() + ": adapter.type is missing");
  auto adapter = std::make_shared<Adapter>();
  adapter->name = name;
  if (*kind == "lora") {
    GLM_RETURN_IF_ERROR(load_lora(file, config, scale, &adapter->lora));
  } else if (*kind == "ptuning") {
    GLM_RETURN_IF_ERROR(load_ptuning(file, config, &adapter->prefix));
  } else {
    return unsupported(file.path() + ": adapter.type '" + *kind +
                       "' is not supported (expected lora or ptuning)");
  }
  return std::shared_ptr<const Adapter>(std::move(adapter));
}

StatusOr<std::shared_ptr<const Adapter>> load_adapter(const std::string& path, const Config& config,
                                                      float scale, const std::string& name) {
  StatusOr<std::unique_ptr<gguf::File>> file = gguf::File::open(path);
  if (!file.ok()) return file.status();
  return load_adapter(**file, config, scale, name);
}

void lora_apply_ref(const LoraPair& p, const float* x, float* y, int n) {
  std::vector<double> t(p.rank);
  for (int i = 0; i < n; ++i) {
    const float* xi = x + static_cast<size_t>(i) * p.n_in;
    for (int k = 0; k < p.rank; ++k) {
      double s = 0;
      for (int c = 0; c < p.n_in; ++c)
        s += double{p.a[static_cast<size_t>(k) * p.n_in + c]} * xi[c];
      t[k] = s;
    }
    float* yi = y + static_cast<size_t>(i) * p.n_out;
    for (int r = 0; r < p.n_out; ++r) {
      double s = 0;
      for (int k = 0; k < p.rank; ++k) s += double{p.b[static_cast<size_t>(r) * p.rank + k]} * t[k];
      yi[r] += static_cast<float>(p.scale * s);
    }
  }
}

void lora_apply_rows(const LoraPair& p, const float* x, int x_stride, float* y, int y_stride,
                     const std::vector<int>& rows, std::vector<float>* scratch,
                     kernels::ThreadPool* pool) {
  const size_t m = rows.size();
  if (m == 0 || p.empty()) return;
  const size_t need = m * (p.n_in + p.rank + p.n_out);
  if (scratch->size() < need) scratch->resize(need);
  float* xg = scratch->data();  // [m, n_in] the rows gathered
  float* t = xg + m * p.n_in;   // [m, rank] A x
  float* u = t + m * p.rank;    // [m, n_out] B (A x)
  for (size_t i = 0; i < m; ++i) {
    std::memcpy(xg + i * p.n_in, x + static_cast<size_t>(rows[i]) * x_stride,
                p.n_in * sizeof(float));
  }
  kernels::WeightView a;  // [rank, n_in]
  a.type = DType::kF32;
  a.data = p.a.data();
  a.n_rows = p.rank;
  a.n_cols = p.n_in;
  kernels::WeightView b;  // [n_out, rank]
  b.type = DType::kF32;
  b.data = p.b.data();
  b.n_rows = p.n_out;
  b.n_cols = p.rank;
  // Small products (a decode step: ~20K multiply-adds) run on the calling thread: waking the
  // pool would cost more than the work.
  const int64_t work = static_cast<int64_t>(m) * p.rank * (p.n_in + p.n_out);
  kernels::ThreadPool* use = work >= (int64_t{1} << 20) ? pool : nullptr;
  kernels::matmul(a, xg, t, static_cast<int64_t>(m), use);
  kernels::matmul(b, t, u, static_cast<int64_t>(m), use);
  for (size_t i = 0; i < m; ++i) {
    float* yr = y + static_cast<size_t>(rows[i]) * y_stride;
    const float* ur = u + i * p.n_out;
    for (int r = 0; r < p.n_out; ++r) yr[r] += p.scale * ur[r];
  }
}

Status merge_lora(const Adapter& adapter, Weights* weights, kernels::ThreadPool* pool) {
  if (adapter.lora.empty()) return Status::Ok();
  if (adapter.lora.size() != weights->layers.size()) {
    return invalid_argument("--lora " + adapter.name + ": made for " +
                            std::to_string(adapter.lora.size()) + " layers, the model has " +
                            std::to_string(weights->layers.size()));
  }
  struct Job {
    kernels::WeightView* view;
    const LoraPair* pair;
  };
  std::vector<Job> jobs;
  for (size_t l = 0; l < adapter.lora.size(); ++l) {
    for (arch::Slot slot : kLoraSlots) {
      const LoraPair* p = lora_pair(&adapter.lora[l], slot);
      if (p->empty()) continue;
      kernels::WeightView* v = matrix_slot(weights, slot, static_cast<int>(l));
      const std::string where = "--lora " + adapter.name + ": layer " + std::to_string(l);
      if (v == nullptr || v->data == nullptr || v->n_rows != p->n_out || v->n_cols != p->n_in) {
        return invalid_argument(where + ": a LoRA pair on a matrix the model lacks or shapes " +
                                "differently");
      }
      if (v->packed != nullptr) return invalid_argument(where + ": merge before repacking");
      if (!kernels::can_quantize(v->type) || !kernels::can_dequantize(v->type)) {
        return unsupported(where + ": weights of type " + dtype_info(v->type).name +
                           " cannot be re-quantized for merging (serve the adapter per " +
                           "request with --adapter, or requantize the model)");
      }
      jobs.push_back({v, p});
    }
  }
  std::vector<std::unique_ptr<std::vector<uint8_t>>> merged;
  for (const Job& j : jobs) {
    const kernels::WeightView& w = *j.view;
    const LoraPair& p = *j.pair;
    const size_t rb = row_bytes(w.type, w.n_cols);
    auto bytes = std::make_unique<std::vector<uint8_t>>(rb * w.n_rows);  // [n_rows, rb]
    uint8_t* dst = bytes->data();
    const uint8_t* src = static_cast<const uint8_t*>(w.data);
    auto rows = [&](int64_t begin, int64_t end, int) {
      std::vector<float> row(w.n_cols);  // [n_in]
      for (int64_t r = begin; r < end; ++r) {
        kernels::dequantize_row_ref(w.type, src + r * rb, row.data(), w.n_cols);
        const float* br = p.b.data() + static_cast<size_t>(r) * p.rank;  // [rank]
        for (int k = 0; k < p.rank; ++k) {
          const float s = p.scale * br[k];
          const float* ak = p.a.data() + static_cast<size_t>(k) * p.n_in;  // [n_in]
          for (int64_t c = 0; c < w.n_cols; ++c) row[c] += s * ak[c];
        }
        kernels::quantize_row_ref(w.type, row.data(), dst + r * rb, w.n_cols);
      }
    };
    if (pool != nullptr) {
      pool->parallel_for(w.n_rows, rows);
    } else {
      rows(0, w.n_rows, 0);
    }
    merged.push_back(std::move(bytes));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].view->data = merged[i]->data();
    weights->merged.push_back(std::move(merged[i]));
  }
  return Status::Ok();
}

}  // namespace glm::model
