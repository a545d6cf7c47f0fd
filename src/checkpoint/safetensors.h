// Reading (and, for tests and tools, writing) HuggingFace safetensors files:
//   [u64 little-endian N][N bytes of JSON header][raw tensor data]
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the data section) plus an optional "__metadata__" object. Shapes are in PyTorch
// order (row-major, last dimension contiguous): an [out, in] Linear weight has shape [out, in].
// Validation: header size, JSON, known dtype, offsets inside the file and consistent with the
// shape; every failure is a one-line bad_file Status.
// SafetensorsFile owns its mapping; immutable after open: thread-safe for readers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace glm::checkpoint {

struct StTensor {
  std::string name;
  std::string dtype;           // "F32", "F16", "BF16", ... as in the header
  std::vector<int64_t> shape;  // PyTorch order
  const uint8_t* data = nullptr;
  size_t n_bytes = 0;
  int64_t n_elements() const;
};

// Element size of a safetensors dtype, 0 if unknown.
size_t st_dtype_size(const std::string& dtype);

class SafetensorsFile {
 public:
  static StatusOr<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Parses an image held in memory (not owned; must outlive the object).
  static StatusOr<std::unique_ptr<SafetensorsFile>> parse(const uint8_t* data, size_t size,
                                                          const std::string& label);
  const std::vector<StTensor>& tensors() const { return tensors_; }
  const StTensor* find(const std::string& name) const;  // nullptr if absent
  const std::string& path() const { return label_; }

 private:
  MappedFile map_;
  std::string label_;
  std::vector<StTensor> tensors_;
};

// One tensor to write: data holds shape's elements of `dtype` (F32, F16 or BF16).
struct StTensorOut {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
// Writes a safetensors file (header padded with spaces to a multiple of 8, as the reference
// implementation does). Cost: holds nothing beyond `tensors`.
Status write_safetensors(const std::string& path, const std::vector<StTensorOut>& tensors);

}  // namespace glm::checkpoint
