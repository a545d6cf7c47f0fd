// GGUF reader: parses and validates a whole file image (header, metadata, tensor infos, data
// layout) before anything else sees it. Every bound is checked against the bytes that remain,
// so a corrupt or hostile file yields a one-line Status and never a crash or a huge allocation.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>
#include <unordered_set>

#include "gguf/gguf.h"
#include "gguf/internal.h"

namespace glm::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 16;       // nested arrays deeper than this are rejected
// Smallest encodings, used to bound counts by the bytes that remain.
constexpr size_t kMinKvBytes = 8 + 4 + 1;                  // empty key, type, 1-byte value
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset
constexpr size_t kMinArrayBytes = 4 + 8;                   // element type, count

std::string printable_magic(const uint8_t* p) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f) {
      s += static_cast<char>(p[i]);
    } else {
      static const char* kHex = "0123456789abcdef";
      s += "\\x";
      s += kHex[p[i] >> 4];
      s += kHex[p[i] & 15];
    }
  }
  return s;
}

// A name from the file as it may appear in a one-line message: control bytes escaped,
// at most 80 bytes kept.
std::string printable(const std::string& name) {
  std::string s;
  for (size_t i = 0; i < name.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char* kHex = "0123456789abcdef";
      s += "\\x";
      s += kHex[c >> 4];
      s += kHex[c & 15];
    } else {
      s += static_cast<char>(c);
    }
  }
  if (name.size() > 80) s += "...";
  return s;
}

}  // namespace

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

class Parser {
 public:
  Parser(const uint8_t* data, size_t size, std::string label)
      : data_(data), size_(size), label_(std::move(label)) {}

  Status run(File* f);

 private:
  Status fail(const std::string& what) const {
    std::string m = label_ + ": " + what;
    if (!ctx_.empty()) m += " in " + ctx_;
    return bad_file(std::move(m));
  }
  Status truncated() const {
    return fail("file truncated at byte " + std::to_string(size_) + " (reading byte " +
                std::to_string(pos_) + ")");
  }
  size_t remaining() const { return size_ - pos_; }

  Status read_bytes(size_t n, uint64_t* out) {
    if (remaining() < n) return truncated();
    *out = read_le(data_ + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  Status read_u32(uint32_t* out) {
    uint64_t v = 0;
    GLM_RETURN_IF_ERROR(read_bytes(4, &v));
    *out = static_cast<uint32_t>(v);
    return Status::Ok();
  }
  Status read_u64(uint64_t* out) { return read_bytes(8, out); }

  Status read_string(std::string* out, const char* what) {
    uint64_t len = 0;
    GLM_RETURN_IF_ERROR(read_u64(&len));
    if (len > remaining()) {
      return fail(std::string(what) + " length " + std::to_string(len) + " exceeds the " +
                  std::to_string(remaining()) + " bytes left in the file");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return Status::Ok();
  }

  Status read_value_type(ValueType* out) {
    uint32_t t = 0;
    GLM_RETURN_IF_ERROR(read_u32(&t));
    if (!is_valid_value_type(t)) return fail("unknown metadata value type " + std::to_string(t));
    *out = static_cast<ValueType>(t);
    return Status::Ok();
  }

  Status read_value(ValueType t, int depth, Value* out);
  Status read_array(int depth, Value* out);
  Status read_tensor_info(size_t index, TensorInfo* ti);

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string label_;
  std::string ctx_;  // where we are, for error messages: "metadata 3 (general.name)"
};

Status Parser::read_value(ValueType t, int depth, Value* out) {
  if (t == ValueType::kString) {
    out->type_ = ValueType::kString;
    return read_string(&out->str_, "string");
  }
  if (t == ValueType::kArray) return read_array(depth + 1, out);
  uint64_t bits = 0;
  GLM_RETURN_IF_ERROR(read_bytes(scalar_size(t), &bits));
  *out = ValueAccess::scalar(t, bits);
  return Status::Ok();
}

Status Parser::read_array(int depth, Value* out) {
  if (depth > kMaxArrayDepth) {
    return fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
  }
  ValueType elem;
  GLM_RETURN_IF_ERROR(read_value_type(&elem));
  uint64_t count = 0;
  GLM_RETURN_IF_ERROR(read_u64(&count));
  out->type_ = ValueType::kArray;
  out->elem_type_ = elem;
  const size_t min_elem = elem == ValueType::kString  ? 8
                          : elem == ValueType::kArray ? kMinArrayBytes
                                                      : scalar_size(elem);
  if (count > remaining() / min_elem) {
    return fail("array of " + std::to_string(count) + " " + value_type_name(elem) +
                " elements cannot fit in the " + std::to_string(remaining()) +
                " bytes left in the file");
  }
  const size_t n = static_cast<size_t>(count);
  if (elem == ValueType::kString) {
    out->strs_.resize(n);
    for (size_t i = 0; i < n; ++i) GLM_RETURN_IF_ERROR(read_string(&out->strs_[i], "string"));
  } else if (elem == ValueType::kArray) {
    out->items_.resize(n);
    for (size_t i = 0; i < n; ++i) GLM_RETURN_IF_ERROR(read_array(depth + 1, &out->items_[i]));
  } else {
    const size_t n_bytes = n * min_elem;
    out->raw_.assign(data_ + pos_, data_ + pos_ + n_bytes);
    pos_ += n_bytes;
  }
  return Status::Ok();
}

Status Parser::read_tensor_info(size_t index, TensorInfo* ti) {
  ctx_ = "tensor info " + std::to_string(index);
  GLM_RETURN_IF_ERROR(read_string(&ti->name, "tensor name"));
  ctx_ += " (" + printable(ti->name) + ")";
  uint32_t n_dims = 0;
  GLM_RETURN_IF_ERROR(read_u32(&n_dims));
  if (n_dims < 1 || n_dims > kMaxDims) {
    return fail("tensor has " + std::to_string(n_dims) + " dimensions (expected 1 to " +
                std::to_string(kMaxDims) + ")");
  }
  ti->shape.resize(n_dims);
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t v = 0;
    GLM_RETURN_IF_ERROR(read_u64(&v));
    if (v == 0 || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return fail("dimension " + std::to_string(d) + " is " +
                  std::to_string(static_cast<int64_t>(v)) + " (must be positive)");
    }
    ti->shape[d] = static_cast<int64_t>(v);
    if (__builtin_mul_overflow(n_elements, ti->shape[d], &n_elements)) {
      return fail("element count overflows 64 bits");
    }
  }
  uint32_t type = 0;
  GLM_RETURN_IF_ERROR(read_u32(&type));
  const DTypeInfo* info = dtype_info(type);
  if (info == nullptr) {
    return fail("unknown tensor type id " + std::to_string(type) +
                " (written by a newer ggml? re-quantize to a supported type)");
  }
  ti->type = info->type;
  if (ti->shape[0] % info->block_size != 0) {
    return fail("row length " + std::to_string(ti->shape[0]) + " is not a multiple of the " +
                info->name + " block size " + std::to_string(info->block_size));
  }
  uint64_t n_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n_elements / info->block_size),
                             static_cast<uint64_t>(info->type_size), &n_bytes) ||
      n_bytes > size_) {
    return fail("tensor needs more bytes than the whole file holds");
  }
  ti->n_bytes = static_cast<size_t>(n_bytes);
  GLM_RETURN_IF_ERROR(read_u64(&ti->offset));
  return Status::Ok();
}

Status Parser::run(File* f) {
  f->label_ = label_;
  if (size_ < 4) return fail("too small to be a GGUF file (" + std::to_string(size_) + " bytes)");
  if (read_le(data_, 4) != kMagic) {
    return fail("not a GGUF file (starts with '" + printable_magic(data_) + "', expected 'GGUF')");
  }
  pos_ = 4;
  ctx_ = "header";
  uint32_t version = 0;
  GLM_RETURN_IF_ERROR(read_u32(&version));
  if (version == 1) {
    return fail("GGUF version 1 is not supported (re-convert the model with a current llama.cpp)");
  }
  if (version != 2 && version != 3) {
    if (version != 0 && (version & 0xffffu) == 0) {
      return fail("big-endian GGUF files are not supported (version field reads " +
                  std::to_string(version) + "; convert the model on a little-endian machine)");
    }
    return fail("unsupported GGUF version " + std::to_string(version) + " (supported: 2, 3)");
  }
  f->version_ = version;
  uint64_t n_tensors = 0, n_kv = 0;
  GLM_RETURN_IF_ERROR(read_u64(&n_tensors));
  GLM_RETURN_IF_ERROR(read_u64(&n_kv));
  if (n_kv > remaining() / kMinKvBytes) {
    return fail("metadata count " + std::to_string(n_kv) + " cannot fit in the file");
  }
  if (n_tensors > remaining() / kMinTensorInfoBytes) {
    return fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the file");
  }

  std::unordered_set<std::string_view> seen;
  f->kv_.resize(static_cast<size_t>(n_kv));
  for (size_t i = 0; i < f->kv_.size(); ++i) {
    auto& [key, value] = f->kv_[i];
    ctx_ = "metadata " + std::to_string(i);
    GLM_RETURN_IF_ERROR(read_string(&key, "key"));
    ctx_ += " (" + printable(key) + ")";
    ValueType t;
    GLM_RETURN_IF_ERROR(read_value_type(&t));
    GLM_RETURN_IF_ERROR(read_value(t, 0, &value));
  }
  for (size_t i = 0; i < f->kv_.size(); ++i) {
    if (!seen.insert(f->kv_[i].first).second) {
      ctx_.clear();
      return fail("duplicate metadata key '" + printable(f->kv_[i].first) + "'");
    }
  }

  ctx_ = "metadata (general.alignment)";
  if (const Value* a = f->find("general.alignment")) {
    if (!a->is_integer()) {
      return fail(std::string("general.alignment has type ") + value_type_name(a->type()) +
                  " (expected an integer)");
    }
    const uint64_t v = a->as_uint();
    if (v == 0 || (v & (v - 1)) != 0 || v > (1u << 30)) {
      return fail("general.alignment " + std::to_string(a->as_int()) +
                  " is not a power of two up to 2^30");
    }
    f->alignment_ = static_cast<size_t>(v);
  }

  f->tensors_.resize(static_cast<size_t>(n_tensors));
  for (size_t i = 0; i < f->tensors_.size(); ++i) {
    GLM_RETURN_IF_ERROR(read_tensor_info(i, &f->tensors_[i]));
  }
  seen.clear();
  for (const TensorInfo& ti : f->tensors_) {
    if (!seen.insert(ti.name).second) {
      ctx_.clear();
      return fail("duplicate tensor name '" + printable(ti.name) + "'");
    }
  }
  if (f->tensors_.empty()) return Status::Ok();  // vocab-only files may end without padding

  const size_t align = f->alignment_;
  const size_t data_start = (pos_ + align - 1) / align * align;
  if (data_start > size_) {
    ctx_.clear();
    return fail("file ends before its tensor data section (truncated?)");
  }
  const uint64_t data_size = size_ - data_start;
  std::vector<size_t> order(f->tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) {
    TensorInfo& ti = f->tensors_[i];
    ctx_ = "tensor " + printable(ti.name);
    if (ti.offset % align != 0) {
      return fail("data offset " + std::to_string(ti.offset) + " is not a multiple of the " +
                  "alignment " + std::to_string(align));
    }
    if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset) {
      return fail("data [" + std::to_string(ti.offset) + ", +" + std::to_string(ti.n_bytes) +
                  ") is outside the " + std::to_string(data_size) +
                  "-byte data section (file truncated?)");
    }
    ti.data = data_ + data_start + ti.offset;
    order[i] = i;
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return f->tensors_[a].offset < f->tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = f->tensors_[order[k - 1]];
    const TensorInfo& cur = f->tensors_[order[k]];
    if (prev.offset + prev.n_bytes > cur.offset) {
      ctx_.clear();
      return fail("tensors " + printable(prev.name) + " and " + printable(cur.name) +
                  " overlap in the data section");
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<File>> File::parse(const uint8_t* data, size_t size,
                                            const std::string& label) {
  std::unique_ptr<File> f(new File());
  Parser p(data, size, label);
  Status s = p.run(f.get());
  if (!s.ok()) return s;
  return f;
}

StatusOr<std::unique_ptr<File>> File::open(const std::string& path) {
  StatusOr<MappedFile> map = MappedFile::open(path);
  if (!map.ok()) return map.status();
  StatusOr<std::unique_ptr<File>> f = parse(map->data(), map->size(), path);
  if (!f.ok()) return f.status();
  (*f)->map_ = std::move(map.value());  // the mapping's address is unchanged by the move
  return f;
}

const Value* File::find(const std::string& key) const {
  for (const auto& [k, v] : kv_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const TensorInfo* File::tensor(const std::string& name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

StatusOr<std::string> File::get_string(const std::string& key) const {
  const Value* v = find(key);
  if (v == nullptr) return not_found(label_ + ": metadata key " + key + " is missing");
  if (v->type() != ValueType::kString) {
    return bad_file(label_ + ": metadata " + key + " has type " + value_type_name(v->type()) +
                    " (expected string)");
  }
  return v->as_string();
}

namespace {
Status wrong_type(const std::string& label, const std::string& key, const Value& v,
                  const char* expected) {
  return bad_file(label + ": metadata " + key + " has type " + value_type_name(v.type()) +
                  " (expected " + expected + ")");
}
}  // namespace

StatusOr<int64_t> File::get_int(const std::string& key) const {
  const Value* v = find(key);
  if (v == nullptr) return not_found(label_ + ": metadata key " + key + " is missing");
  if (!v->is_integer()) return wrong_type(label_, key, *v, "an integer");
  if (v->type() == ValueType::kUint64 &&
      v->as_uint() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return bad_file(label_ + ": metadata " + key + " is out of range");
  }
  return v->as_int();
}

StatusOr<double> File::get_float(const std::string& key) const {
  const Value* v = find(key);
  if (v == nullptr) return not_found(label_ + ": metadata key " + key + " is missing");
  if (!v->is_number()) return wrong_type(label_, key, *v, "a number");
  return v->as_double();
}

StatusOr<bool> File::get_bool(const std::string& key) const {
  const Value* v = find(key);
  if (v == nullptr) return not_found(label_ + ": metadata key " + key + " is missing");
  if (v->type() != ValueType::kBool) return wrong_type(label_, key, *v, "bool");
  return v->as_bool();
}

StatusOr<int64_t> File::get_int_or(const std::string& key, int64_t def) const {
  if (find(key) == nullptr) return def;
  return get_int(key);
}

StatusOr<double> File::get_float_or(const std::string& key, double def) const {
  if (find(key) == nullptr) return def;
  return get_float(key);
}

}  // namespace glm::gguf
