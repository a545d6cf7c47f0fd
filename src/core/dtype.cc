#include "core/dtype.h"

#include <algorithm>
#include <cctype>

#include "core/check.h"

namespace glm {
namespace {

constexpr DTypeInfo kTypes[] = {
    {DType::kF32, "f32", 1, 4, true},
    {DType::kF16, "f16", 1, 2, true},
    {DType::kQ4_0, "q4_0", kQK, 2 + kQK / 2, true},
    {DType::kQ4_1, "q4_1", kQK, 4 + kQK / 2, true},
    {DType::kQ5_0, "q5_0", kQK, 2 + 4 + kQK / 2, true},
    {DType::kQ5_1, "q5_1", kQK, 4 + 4 + kQK / 2, true},
    {DType::kQ8_0, "q8_0", kQK, 2 + kQK, true},
    {DType::kQ8_1, "q8_1", kQK, 4 + kQK, false},
    {DType::kQ2_K, "q2_k", kQK_K, 2 * 2 + kQK_K / 16 + kQK_K / 4, false},
    {DType::kQ3_K, "q3_k", kQK_K, 2 + kQK_K / 4 + kQK_K / 8 + 12, false},
    {DType::kQ4_K, "q4_k", kQK_K, 2 * 2 + 12 + kQK_K / 2, true},
    {DType::kQ5_K, "q5_k", kQK_K, 2 * 2 + 12 + kQK_K / 8 + kQK_K / 2, true},
    {DType::kQ6_K, "q6_k", kQK_K, 2 + kQK_K / 16 + 3 * kQK_K / 4, true},
    {DType::kQ8_K, "q8_k", kQK_K, 4 + kQK_K + kQK_K / 16 * 2, false},
    {DType::kI8, "i8", 1, 1, false},
    {DType::kI16, "i16", 1, 2, false},
    {DType::kI32, "i32", 1, 4, false},
    {DType::kI64, "i64", 1, 8, false},
    {DType::kF64, "f64", 1, 8, false},
    {DType::kBF16, "bf16", 1, 2, true},
};

}  // namespace

const DTypeInfo* dtype_info(uint32_t id) {
  for (const DTypeInfo& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  const DTypeInfo* i = dtype_info(static_cast<uint32_t>(t));
  GLM_CHECK(i != nullptr);
  return *i;
}

bool dtype_from_name(const std::string& name, DType* out) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const DTypeInfo& t : kTypes) {
    if (lower == t.name) {
      *out = t.type;
      return true;
    }
  }
  return false;
}

}  // namespace glm
