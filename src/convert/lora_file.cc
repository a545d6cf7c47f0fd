#include "convert/lora_file.h"

#include <algorithm>
#include <regex>

#include "convert/model_writer.h"
#include "convert/random.h"

namespace glm::convert {
namespace {

constexpr float kLoraStd = 0.05f;

// Encodes [rows, cols] floats as `type` and appends them to the writer.
Status write_rows(gguf::Writer* w, DType type, const std::vector<float>& x, int64_t rows,
                  int64_t cols) {
  std::vector<uint8_t> bytes(row_bytes(type, cols) * rows);
  encode_rows(type, x.data(), rows, cols, bytes.data());
  return w->write_tensor_data(bytes.data(), bytes.size());
}

}  // namespace

Status write_lora_file(const LoraFile& lora, DType type, const std::string& path) {
  if (type != DType::kF32 && type != DType::kF16 && type != DType::kBF16) {
    return invalid_argument("a LoRA file's type must be f32, f16 or bf16");
  }
  if (lora.tensors.empty()) return invalid_argument("the adapter has no LoRA tensors");
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string(lora.arch));
  w.set("general.type", gguf::Value::string("adapter"));
  w.set("adapter.type", gguf::Value::string("lora"));
  w.set("adapter.lora.alpha", gguf::Value::f32(lora.alpha));
  for (const LoraTensor& t : lora.tensors) {
    w.add_tensor(t.base + ".lora_a", type, {t.n_in, t.rank});
    w.add_tensor(t.base + ".lora_b", type, {t.rank, t.n_out});
  }
  GLM_RETURN_IF_ERROR(w.begin(path));
  for (const LoraTensor& t : lora.tensors) {
    GLM_RETURN_IF_ERROR(write_rows(&w, type, t.a, t.rank, t.n_in));
    GLM_RETURN_IF_ERROR(write_rows(&w, type, t.b, t.n_out, t.rank));
  }
  return w.finish();
}

StatusOr<LoraFile> random_lora(const gguf::File& base, int64_t rank, float alpha, uint64_t seed,
                               const std::vector<std::string>& targets) {
  if (rank < 1 || rank > 4096) return invalid_argument("--rank: expected 1 to 4096");
  StatusOr<std::string> arch = base.get_string("general.architecture");
  if (!arch.ok()) return arch.status();
  LoraFile lora;
  lora.arch = *arch;
  lora.alpha = alpha;
  static const std::regex kMatrix(
      R"(blk\.\d+\.(attn_qkv|attn_q|attn_k|attn_v|attn_output|ffn_up|ffn_gate|ffn_down)\.weight)");
  for (const std::string& t : targets) {
    if (!std::regex_match("blk.0." + t + ".weight", kMatrix)) {
      return invalid_argument("--targets: '" + t + "' is not one of attn_qkv, attn_q, attn_k, " +
                              "attn_v, attn_output, ffn_up, ffn_gate, ffn_down");
    }
  }
  for (const gguf::TensorInfo& ti : base.tensors()) {
    std::smatch m;
    if (ti.shape.size() != 2 || !std::regex_match(ti.name, m, kMatrix)) continue;
    if (!targets.empty() &&
        std::find(targets.begin(), targets.end(), m[1].str()) == targets.end()) {
      continue;
    }
    LoraTensor t;
    t.base = ti.name;
    t.n_in = ti.shape[0];
    t.n_out = ti.shape[1];
    t.rank = std::min({rank, t.n_in, t.n_out});
    t.a.resize(t.rank * t.n_in);
    t.b.resize(t.n_out * t.rank);
    fill_normal(stream_key(seed, t.base + ".lora_a"), 0, t.a.size(), 0.0f, kLoraStd, t.a.data());
    fill_normal(stream_key(seed, t.base + ".lora_b"), 0, t.b.size(), 0.0f, kLoraStd, t.b.data());
    lora.tensors.push_back(std::move(t));
  }
  if (lora.tensors.empty()) {
    return invalid_argument(base.path() + ": has no layer weight matrices to adapt (of --targets)");
  }
  return lora;
}

}  // namespace glm::convert
