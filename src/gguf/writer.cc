// GGUF v3 writer: header and tensor infos in one buffer, then tensor data streamed through.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "gguf/gguf.h"
#include "gguf/internal.h"

namespace glm::gguf {

namespace {

constexpr uint32_t kVersion = 3;

void put_u32(std::vector<uint8_t>* out, uint32_t v) { append_le(out, v, 4); }
void put_u64(std::vector<uint8_t>* out, uint64_t v) { append_le(out, v, 8); }
void put_string(std::vector<uint8_t>* out, const std::string& s) {
  put_u64(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

// Serializes a value's payload (without its type tag, which the caller writes).
class WriterAccess {
 public:
  static void put_value(std::vector<uint8_t>* out, const Value& v) {
    switch (v.type()) {
      case ValueType::kString:
        put_string(out, v.as_string());
        return;
      case ValueType::kArray:
        put_array(out, v);
        return;
      default:
        append_le(out, ValueAccess::bits(v), scalar_size(v.type()));
        return;
    }
  }
  static void put_array(std::vector<uint8_t>* out, const Value& v) {
    put_u32(out, static_cast<uint32_t>(v.array_type()));
    put_u64(out, v.array_size());
    if (v.array_type() == ValueType::kString) {
      for (const std::string& s : v.strings()) put_string(out, s);
    } else if (v.array_type() == ValueType::kArray) {
      for (const Value& item : v.items()) put_array(out, item);
    } else {
      const std::vector<uint8_t>& raw = ValueAccess::raw(v);
      out->insert(out->end(), raw.begin(), raw.end());
    }
  }
};

Writer::~Writer() {
  if (out_ != nullptr) {
    std::fclose(out_);
    std::remove(tmp_path_.c_str());
  }
}

void Writer::set(const std::string& key, Value v) {
  for (auto& [k, old] : kv_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  kv_.emplace_back(key, std::move(v));
}

void Writer::set_alignment(size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > (1u << 30)) {
    if (error_.ok()) {
      error_ = invalid_argument("GGUF alignment " + std::to_string(alignment) +
                                " is not a power of two up to 2^30");
    }
    return;
  }
  alignment_ = alignment;
  set("general.alignment", Value::u32(static_cast<uint32_t>(alignment)));
}

void Writer::add_tensor(const std::string& name, DType type, std::vector<int64_t> shape) {
  TensorInfo ti;
  ti.name = name;
  ti.type = type;
  ti.shape = std::move(shape);
  std::string problem;
  int64_t n = 1;
  const DTypeInfo& info = dtype_info(type);
  if (ti.shape.empty() || ti.shape.size() > 4) {
    problem = "needs 1 to 4 dimensions, got " + std::to_string(ti.shape.size());
  }
  for (int64_t d : ti.shape) {
    if (!problem.empty()) break;
    if (d <= 0) {
      problem = "has a dimension " + std::to_string(d) + " (must be positive)";
    } else if (__builtin_mul_overflow(n, d, &n)) {
      problem = "has too many elements";
    }
  }
  if (problem.empty() && ti.shape[0] % info.block_size != 0) {
    problem = "row length " + std::to_string(ti.shape[0]) + " is not a multiple of the " +
              info.name + " block size " + std::to_string(info.block_size);
  }
  for (const TensorInfo& other : infos_) {
    if (problem.empty() && other.name == name) problem = "is declared twice";
  }
  if (!problem.empty()) {
    if (error_.ok()) error_ = invalid_argument("GGUF tensor " + name + " " + problem);
    return;
  }
  ti.n_bytes = row_bytes(type, n);
  infos_.push_back(std::move(ti));
}

Status Writer::begin(const std::string& path) {
  if (!error_.ok()) return error_;
  if (out_ != nullptr) return invalid_argument("GGUF writer: begin() called twice");
  for (const auto& [k, v] : kv_) {  // an alignment given through set() counts too
    if (k == "general.alignment" && v.is_integer()) alignment_ = static_cast<size_t>(v.as_uint());
  }
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0) {
    return invalid_argument("general.alignment must be a power of two");
  }
  size_t offset = 0;
  for (TensorInfo& ti : infos_) {
    ti.offset = offset;
    offset = align_up(offset + ti.n_bytes, alignment_);
  }

  std::vector<uint8_t> head;
  put_u32(&head, 0x46554747);  // "GGUF"
  put_u32(&head, kVersion);
  put_u64(&head, infos_.size());
  put_u64(&head, kv_.size());
  for (const auto& [key, value] : kv_) {
    put_string(&head, key);
    put_u32(&head, static_cast<uint32_t>(value.type()));
    WriterAccess::put_value(&head, value);
  }
  for (const TensorInfo& ti : infos_) {
    put_string(&head, ti.name);
    put_u32(&head, static_cast<uint32_t>(ti.shape.size()));
    for (int64_t d : ti.shape) put_u64(&head, static_cast<uint64_t>(d));
    put_u32(&head, static_cast<uint32_t>(ti.type));
    put_u64(&head, ti.offset);
  }
  if (!infos_.empty()) head.resize(align_up(head.size(), alignment_), 0);

  path_ = path;
  tmp_path_ = path + ".tmp";
  out_ = std::fopen(tmp_path_.c_str(), "wb");
  if (out_ == nullptr) {
    return Status(ErrorCode::kInvalidArgument,
                  "cannot create " + tmp_path_ + ": " + std::strerror(errno) +
                      " (check the output directory exists and is writable)");
  }
  if (std::fwrite(head.data(), 1, head.size(), out_) != head.size()) {
    return Status(ErrorCode::kInternal,
                  "write to " + tmp_path_ + " failed: " + std::strerror(errno) + " (disk full?)");
  }
  cur_tensor_ = 0;
  cur_written_ = 0;
  return Status::Ok();
}

Status Writer::write_tensor_data(const void* data, size_t n_bytes) {
  if (out_ == nullptr) return invalid_argument("GGUF writer: write_tensor_data() before begin()");
  if (cur_tensor_ >= infos_.size()) {
    return invalid_argument("GGUF writer: all " + std::to_string(infos_.size()) +
                            " tensors are already written");
  }
  const TensorInfo& ti = infos_[cur_tensor_];
  if (n_bytes > ti.n_bytes - cur_written_) {
    return invalid_argument("GGUF writer: " + std::to_string(n_bytes) + " bytes given for tensor " +
                            ti.name + ", which has only " +
                            std::to_string(ti.n_bytes - cur_written_) + " bytes left");
  }
  if (n_bytes > 0 && std::fwrite(data, 1, n_bytes, out_) != n_bytes) {
    return Status(ErrorCode::kInternal,
                  "write to " + tmp_path_ + " failed: " + std::strerror(errno) + " (disk full?)");
  }
  cur_written_ += n_bytes;
  if (cur_written_ == ti.n_bytes) {
    const size_t pad = align_up(ti.n_bytes, alignment_) - ti.n_bytes;
    static const uint8_t kZeros[256] = {};
    for (size_t left = pad; left > 0;) {
      const size_t k = left < sizeof(kZeros) ? left : sizeof(kZeros);
      if (std::fwrite(kZeros, 1, k, out_) != k) {
        return Status(ErrorCode::kInternal, "write to " + tmp_path_ + " failed (disk full?)");
      }
      left -= k;
    }
    ++cur_tensor_;
    cur_written_ = 0;
  }
  return Status::Ok();
}

Status Writer::finish() {
  if (out_ == nullptr) return invalid_argument("GGUF writer: finish() before begin()");
  if (cur_tensor_ < infos_.size()) {
    const TensorInfo& ti = infos_[cur_tensor_];
    return invalid_argument("GGUF writer: tensor " + ti.name + " has " +
                            std::to_string(cur_written_) + " of its " + std::to_string(ti.n_bytes) +
                            " bytes written");
  }
  const bool flushed = std::fflush(out_) == 0;
  const bool closed = std::fclose(out_) == 0;
  out_ = nullptr;
  if (!flushed || !closed) {
    std::remove(tmp_path_.c_str());
    return Status(ErrorCode::kInternal, "write to " + tmp_path_ + " failed (disk full?)");
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_path_.c_str());
    return Status(ErrorCode::kInternal,
                  "cannot rename " + tmp_path_ + " to " + path_ + ": " + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace glm::gguf
