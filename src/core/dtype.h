// Tensor element types as numbered in GGUF/ggml, with their block geometry.
// A quantized row of n elements is n / block_size blocks of type_size bytes each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace glm {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

constexpr int kQK = 32;     // block size of the legacy quants (Q4_0 ... Q8_1)
constexpr int kQK_K = 256;  // super-block size of the k-quants

struct DTypeInfo {
  DType type;
  const char* name;  // "q4_0", as in GGUF tools
  int block_size;    // elements per block
  size_t type_size;  // bytes per block
  bool supported;    // glmserve can compute with it
};

// nullptr for a type id glmserve does not know (e.g. a newer ggml type).
const DTypeInfo* dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType t);
inline const char* dtype_name(DType t) { return dtype_info(t).name; }
// Parses "q4_0", "F16", ... ; false if unknown.
bool dtype_from_name(const std::string& name, DType* out);
// Bytes of a row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  return static_cast<size_t>(n / i.block_size) * i.type_size;
}

}  // namespace glm
