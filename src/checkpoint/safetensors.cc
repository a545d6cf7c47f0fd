#include "checkpoint/safetensors.h"

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/json.h"

namespace glm::checkpoint {

namespace {
constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // the format's own limit is 100 MB
}  // namespace

int64_t StTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t st_dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  StatusOr<MappedFile> m = MappedFile::open(path);
  if (!m.ok()) return m.status();
  StatusOr<std::unique_ptr<SafetensorsFile>> f = parse(m->data(), m->size(), path);
  if (!f.ok()) return f.status();
  (*f)->map_ = std::move(*m);
  return f;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(const uint8_t* data, size_t size,
                                                                  const std::string& label) {
  auto bad = [&](const std::string& m) { return bad_file(label + ": " + m); };
  if (size < 8) return bad("truncated (no header length): not a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kMaxHeader || n > size - 8) {
    return bad("header length " + std::to_string(n) +
               " exceeds the file (truncated or not a "
               "safetensors file)");
  }
  auto parsed = parse_json(std::string_view(reinterpret_cast<const char*>(data) + 8, n),
                           "the safetensors header", JsonLimits{kMaxHeader, 64});
  if (!parsed.ok()) return bad(parsed.status().message());
  const nlohmann::json& header = *parsed;
  if (!header.is_object()) return bad("header is not a JSON object");
  const uint8_t* base = data + 8 + n;
  const uint64_t data_size = size - 8 - n;
  auto out = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  out->label_ = label;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const nlohmann::json& v = it.value();
    const std::string what = "tensor " + it.key();
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2) {
      return bad(what + ": entry needs dtype, shape and data_offsets [begin, end]");
    }
    StTensor t;
    t.name = it.key();
    t.dtype = v["dtype"].get<std::string>();
    const size_t esize = st_dtype_size(t.dtype);
    if (esize == 0) return bad(what + ": unknown dtype " + t.dtype);
    uint64_t count = 1;
    for (const nlohmann::json& d : v["shape"]) {
      if (!d.is_number_unsigned()) return bad(what + ": shape must hold non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > (uint64_t{1} << 40) || (dim != 0 && count > (uint64_t{1} << 40) / dim)) {
        return bad(what + ": shape is absurdly large");
      }
      count *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const nlohmann::json& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return bad(what + ": data_offsets must be non-negative integers");
    }
    const uint64_t b = off[0].get<uint64_t>();
    const uint64_t e = off[1].get<uint64_t>();
    if (b > e || e > data_size) return bad(what + ": data_offsets out of the file (truncated?)");
    if (e - b != count * esize) {
      return bad(what + ": " + std::to_string(e - b) + " bytes of data for " +
                 std::to_string(count) + " elements of " + t.dtype);
    }
    t.data = base + b;
    t.n_bytes = static_cast<size_t>(e - b);
    out->tensors_.push_back(std::move(t));
  }
  return out;
}

const StTensor* SafetensorsFile::find(const std::string& name) const {
  for (const StTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Status write_safetensors(const std::string& path, const std::vector<StTensorOut>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const StTensorOut& t : tensors) {
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return not_found(path + ": cannot create (check the directory)");
  uint8_t len[8];
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(h.data(), 1, h.size(), f) == h.size();
  for (const StTensorOut& t : tensors) {
    ok = ok && std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return Status(ErrorCode::kInternal, path + ": write failed (disk full?)");
  return Status::Ok();
}

}  // namespace glm::checkpoint
