#include "convert/quantize.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "convert/model_spec.h"
#include "convert/model_writer.h"
#include "gguf/gguf.h"

namespace glm::convert {

namespace {

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::exists(b, ec) && std::filesystem::equivalent(a, b, ec);
}

}  // namespace

Status quantize_file(const std::string& in_path, const std::string& out_path, DType target,
                     QuantizeReport* report, const ProgressFn& progress) {
  if (in_path == out_path || same_file(in_path, out_path)) {
    return invalid_argument("output " + out_path + " is the input file (choose another name)");
  }
  if (!can_encode(target)) {
    return unsupported(std::string("cannot write weight type ") + dtype_name(target));
  }
  StatusOr<std::unique_ptr<gguf::File>> opened = gguf::File::open(in_path);
  if (!opened.ok()) return opened.status();
  const gguf::File& in = **opened;
  QuantizeReport local;
  QuantizeReport& rep = report != nullptr ? *report : local;

  gguf::Writer w;
  if (in.alignment() != 32) w.set_alignment(in.alignment());
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.alignment") continue;
    if (key == "general.quantization_version" && is_float_type(target)) continue;
    w.set(key, value);
  }
  w.set("general.file_type", gguf::Value::u32(file_type_of(target)));
  if (!is_float_type(target)) w.set("general.quantization_version", gguf::Value::u32(2));

  // Tied LM head: llama.cpp gives token_embd the output head's type then.
  const bool tied = in.tensor("output.weight") == nullptr;
  std::vector<DType> types;
  for (const gguf::TensorInfo& t : in.tensors()) {
    Role role = role_from_name(t.name, t.shape.size());
    if (tied && role == Role::kTokenEmbd) role = Role::kOutput;
    DType type = t.type;
    if (t.shape.size() < 2 || role == Role::kNorm || role == Role::kBias) {
      type = DType::kF32;
    } else {
      std::string note;
      type = choose_type(target, role, t.shape[0], &note);
      if (!note.empty()) rep.notes.push_back(t.name + ": " + note);
    }
    if (type != t.type && !can_decode(t.type)) {
      return unsupported(in_path + ": tensor " + t.name + " has type " + dtype_name(t.type) +
                         ", which glmserve cannot decode");
    }
    types.push_back(type);
    w.add_tensor(t.name, type, t.shape);
  }
  GLM_RETURN_IF_ERROR(w.begin(out_path));

  uint64_t in_total = 0, in_done = 0;  // input tensor bytes, for `progress`
  for (const gguf::TensorInfo& t : in.tensors()) in_total += t.n_bytes;
  std::vector<float> rows;
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const gguf::TensorInfo& t = in.tensors()[i];
    rep.bytes_in += t.n_bytes;
    if (types[i] == t.type) {
      GLM_RETURN_IF_ERROR(w.write_tensor_data(t.data, t.n_bytes));
      rep.bytes_out += t.n_bytes;
      ++rep.n_copied;
      in_done += t.n_bytes;
      if (progress) progress(in_done, in_total);
      continue;
    }
    const int64_t len = t.shape.empty() ? 1 : t.shape[0];
    const int64_t total = t.n_rows();
    const int64_t step = chunk_rows(len);
    const size_t in_row = row_bytes(t.type, len);
    for (int64_t r0 = 0; r0 < total; r0 += step) {
      const int64_t n = std::min(step, total - r0);
      rows.resize(static_cast<size_t>(n * len));
      decode_rows(t.type, t.data + static_cast<size_t>(r0) * in_row, n, len, rows.data());
      bytes.resize(static_cast<size_t>(n) * row_bytes(types[i], len));
      encode_rows(types[i], rows.data(), n, len, bytes.data());
      GLM_RETURN_IF_ERROR(w.write_tensor_data(bytes.data(), bytes.size()));
      rep.bytes_out += bytes.size();
      in_done += static_cast<uint64_t>(n) * in_row;
      if (progress) progress(in_done, in_total);
    }
    ++rep.n_converted;
  }
  return w.finish();
}

}  // namespace glm::convert
