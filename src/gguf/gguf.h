// GGUF model files (v2, v3): reading by mmap with full validation, and streaming writing.
// Layout reference: ggml's docs/gguf.md. Tensor shapes use ggml's order: shape[0] is the
// contiguous (row) dimension, so a [n_out, n_in] matrix has shape {n_in, n_out}.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace glm::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

const char* value_type_name(ValueType t);

// One metadata value: a scalar, a string, or an array (of scalars, strings or arrays).
// Owns its data (copied out of the file at parse time). Cheap to move; copying is deep.
class Value {
 public:
  Value() = default;
  static Value u8(uint8_t v);
  static Value i8(int8_t v);
  static Value u16(uint16_t v);
  static Value i16(int16_t v);
  static Value u32(uint32_t v);
  static Value i32(int32_t v);
  static Value u64(uint64_t v);
  static Value i64(int64_t v);
  static Value f32(float v);
  static Value f64(double v);
  static Value boolean(bool v);
  static Value string(std::string v);
  static Value string_array(std::vector<std::string> v);
  static Value f32_array(const std::vector<float>& v);
  static Value i32_array(const std::vector<int32_t>& v);
  // Array of scalars of one type given as Values (all must have type `elem`), or of arrays.
  // Arrays of arrays are valid GGUF and read back here, but llama.cpp's reader (b10309)
  // rejects them ("invalid GGUF type 9"): keep them out of files meant for llama.cpp.
  static Value array(ValueType elem, std::vector<Value> items);

  ValueType type() const { return type_; }
  bool is_integer() const;  // any of the 8 integer types
  bool is_number() const;   // integer or float
  // Scalar accessors. as_int/as_uint/as_double convert between numeric types; calling them on
  // a non-number is a bug (check is_number first, or use File's typed getters).
  int64_t as_int() const;
  uint64_t as_uint() const;
  double as_double() const;
  bool as_bool() const;
  const std::string& as_string() const;

  // Arrays.
  ValueType array_type() const { return elem_type_; }
  size_t array_size() const;
  const std::vector<std::string>& strings() const { return strs_; }  // array of string
  const std::vector<Value>& items() const { return items_; }         // array of array
  // Numeric array converted to the requested element type (empty if not numeric).
  std::vector<int64_t> ints() const;
  std::vector<float> floats() const;

 private:
  friend class Parser;
  friend class Writer;
  friend struct ValueAccess;
  ValueType type_ = ValueType::kUint8;
  ValueType elem_type_ = ValueType::kUint8;
  uint64_t bits_ = 0;              // scalar payload (integer, float bits, bool)
  std::string str_;                // kString
  std::vector<uint8_t> raw_;       // numeric array payload, little-endian as in the file
  std::vector<std::string> strs_;  // string array
  std::vector<Value> items_;       // array of arrays
};

struct TensorInfo {
  std::string name;
  DType type = DType::kF32;
  std::vector<int64_t> shape;     // ggml order: shape[0] is the row length
  uint64_t offset = 0;            // from the start of the data section
  const uint8_t* data = nullptr;  // into the mapping (null for files parsed without data)
  size_t n_bytes = 0;
  int64_t n_elements() const;
  int64_t n_rows() const { return shape.empty() ? 0 : n_elements() / shape[0]; }
};

// A parsed GGUF file. Owns the mapping; tensor data pointers stay valid while it lives.
// Immutable after open(): thread-safe for concurrent readers.
class File {
 public:
  // Maps and validates the file. Every failure is a one-line Status (never a crash):
  // "model.gguf: truncated in tensor info 12 (name)". Cost: parses metadata (copies strings);
  // tensor data is not touched.
  static StatusOr<std::unique_ptr<File>> open(const std::string& path);
  // Validates a GGUF image held in memory (not owned; must outlive the File). Used by tests and
  // the fuzz target.
  static StatusOr<std::unique_ptr<File>> parse(const uint8_t* data, size_t size,
                                               const std::string& label = "buffer");

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  const std::string& path() const { return label_; }

  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;  // nullptr if absent

  // Typed getters: not_found if absent, bad_file on a wrong type, with the key in the message.
  StatusOr<std::string> get_string(const std::string& key) const;
  StatusOr<int64_t> get_int(const std::string& key) const;   // any integer type
  StatusOr<double> get_float(const std::string& key) const;  // any number
  StatusOr<bool> get_bool(const std::string& key) const;
  // Same with a default when the key is absent (a wrong type is still an error).
  StatusOr<int64_t> get_int_or(const std::string& key, int64_t def) const;
  StatusOr<double> get_float_or(const std::string& key, double def) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(const std::string& name) const;  // nullptr if absent
  // The file's mapping, which the tensors' data lie in (empty for a parsed buffer): its copy_out
  // reads them from the file.
  const MappedFile& mapping() const { return map_; }

 private:
  friend class Parser;
  MappedFile map_;
  std::string label_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
};

// Writes a GGUF v3 file in a streaming fashion: declare metadata and tensor infos, call begin()
// (writes the header), then write_tensor_data() for each tensor in declaration order. Tensor data
// is never held in memory as a whole, so multi-GB files stream. The file is written to
// "<path>.tmp" and renamed to <path> by a successful finish(), so a crash or an error never leaves
// a half-written model under the final name (the destructor removes an unfinished .tmp).
// Invalid declarations (bad shape, duplicate name, bad alignment) are reported by begin().
// Not thread-safe.
class Writer {
 public:
  Writer() = default;
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void set(const std::string& key, Value v);  // replaces an existing key
  void set_alignment(size_t alignment);       // also writes general.alignment
  // shape in ggml order (row length first); bytes follow from type and shape.
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> shape);

  Status begin(const std::string& path);
  // Appends the next tensor's bytes (may be called several times per tensor with parts; a
  // tensor is complete when its byte count is reached).
  Status write_tensor_data(const void* data, size_t n_bytes);
  // Checks every tensor was written in full, flushes and closes.
  Status finish();

 private:
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> infos_;
  size_t alignment_ = 32;
  std::FILE* out_ = nullptr;
  std::string path_;
  size_t cur_tensor_ = 0;
  size_t cur_written_ = 0;
  std::string tmp_path_;  // written here, renamed to path_ by finish()
  Status error_;          // first invalid declaration, reported by begin()
};

}  // namespace glm::gguf
