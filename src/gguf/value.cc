// gguf::Value: construction and typed access of GGUF metadata values.
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/check.h"
#include "gguf/gguf.h"
#include "gguf/internal.h"

namespace glm::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
      return "uint8";
    case ValueType::kInt8:
      return "int8";
    case ValueType::kUint16:
      return "uint16";
    case ValueType::kInt16:
      return "int16";
    case ValueType::kUint32:
      return "uint32";
    case ValueType::kInt32:
      return "int32";
    case ValueType::kFloat32:
      return "float32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "uint64";
    case ValueType::kInt64:
      return "int64";
    case ValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

bool is_valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kFloat64); }

namespace {

bool integer_type(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

bool signed_type(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 || t == ValueType::kInt32 ||
         t == ValueType::kInt64;
}

// Sign-extends the low `size` bytes of `bits` when the type is signed.
int64_t bits_to_int(ValueType t, uint64_t bits) {
  switch (t) {
    case ValueType::kInt8:
      return static_cast<int8_t>(bits);
    case ValueType::kInt16:
      return static_cast<int16_t>(bits);
    case ValueType::kInt32:
      return static_cast<int32_t>(bits);
    default:
      return static_cast<int64_t>(bits);
  }
}

double bits_to_double(ValueType t, uint64_t bits) {
  if (t == ValueType::kFloat32) {
    float f;
    const uint32_t u = static_cast<uint32_t>(bits);
    std::memcpy(&f, &u, 4);
    return f;
  }
  if (t == ValueType::kFloat64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  if (t == ValueType::kUint64) return static_cast<double>(bits);
  return static_cast<double>(bits_to_int(t, bits));
}

// Float -> integer conversions saturate (NaN gives 0): a plain cast of an out-of-range value
// is undefined behaviour, and metadata comes from untrusted files.
int64_t saturate_i64(double v) {
  if (!(v == v)) return 0;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  return static_cast<int64_t>(v);
}
uint64_t saturate_u64(double v) {
  if (!(v > 0)) return 0;
  if (v >= 18446744073709551616.0) return UINT64_MAX;
  return static_cast<uint64_t>(v);
}

template <typename T>
Value make_scalar(ValueType t, T v) {
  uint64_t bits = 0;
  using U = std::make_unsigned_t<std::conditional_t<std::is_floating_point_v<T>, int, T>>;
  if constexpr (std::is_floating_point_v<T>) {
    std::memcpy(&bits, &v, sizeof(T));
  } else {
    bits = static_cast<U>(v);
  }
  return ValueAccess::scalar(t, bits);
}

}  // namespace

// Builds scalars without exposing the private members in the header.
Value ValueAccess::scalar(ValueType t, uint64_t bits) {
  Value v;
  v.type_ = t;
  v.bits_ = bits;
  return v;
}

uint64_t read_le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void append_le(std::vector<uint8_t>* out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

Value Value::u8(uint8_t v) { return make_scalar(ValueType::kUint8, v); }
Value Value::i8(int8_t v) { return make_scalar(ValueType::kInt8, v); }
Value Value::u16(uint16_t v) { return make_scalar(ValueType::kUint16, v); }
Value Value::i16(int16_t v) { return make_scalar(ValueType::kInt16, v); }
Value Value::u32(uint32_t v) { return make_scalar(ValueType::kUint32, v); }
Value Value::i32(int32_t v) { return make_scalar(ValueType::kInt32, v); }
Value Value::u64(uint64_t v) { return make_scalar(ValueType::kUint64, v); }
Value Value::i64(int64_t v) { return make_scalar(ValueType::kInt64, v); }
Value Value::f32(float v) { return make_scalar(ValueType::kFloat32, v); }
Value Value::f64(double v) { return make_scalar(ValueType::kFloat64, v); }
Value Value::boolean(bool v) { return ValueAccess::scalar(ValueType::kBool, v ? 1 : 0); }

Value Value::string(std::string v) {
  Value r;
  r.type_ = ValueType::kString;
  r.str_ = std::move(v);
  return r;
}

Value Value::string_array(std::vector<std::string> v) {
  Value r;
  r.type_ = ValueType::kArray;
  r.elem_type_ = ValueType::kString;
  r.strs_ = std::move(v);
  return r;
}

Value Value::f32_array(const std::vector<float>& v) {
  Value r;
  r.type_ = ValueType::kArray;
  r.elem_type_ = ValueType::kFloat32;
  r.raw_.resize(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (size_t b = 0; b < 4; ++b) r.raw_[i * 4 + b] = static_cast<uint8_t>(u >> (8 * b));
  }
  return r;
}

Value Value::i32_array(const std::vector<int32_t>& v) {
  Value r;
  r.type_ = ValueType::kArray;
  r.elem_type_ = ValueType::kInt32;
  r.raw_.reserve(v.size() * 4);
  for (int32_t x : v) append_le(&r.raw_, static_cast<uint32_t>(x), 4);
  return r;
}

Value Value::array(ValueType elem, std::vector<Value> items) {
  Value r;
  r.type_ = ValueType::kArray;
  r.elem_type_ = elem;
  for (const Value& it : items) GLM_CHECK(it.type_ == elem);  // caller bug otherwise
  if (elem == ValueType::kString) {
    r.strs_.reserve(items.size());
    for (Value& it : items) r.strs_.push_back(std::move(it.str_));
  } else if (elem == ValueType::kArray) {
    r.items_ = std::move(items);
  } else {
    const size_t n = scalar_size(elem);
    r.raw_.reserve(items.size() * n);
    for (const Value& it : items) append_le(&r.raw_, it.bits_, n);
  }
  return r;
}

bool Value::is_integer() const { return integer_type(type_); }
bool Value::is_number() const {
  return integer_type(type_) || type_ == ValueType::kFloat32 || type_ == ValueType::kFloat64;
}

int64_t Value::as_int() const {
  GLM_CHECK(is_number());
  if (type_ == ValueType::kFloat32 || type_ == ValueType::kFloat64) {
    return saturate_i64(bits_to_double(type_, bits_));
  }
  return bits_to_int(type_, bits_);
}

uint64_t Value::as_uint() const {
  GLM_CHECK(is_number());
  if (type_ == ValueType::kFloat32 || type_ == ValueType::kFloat64) {
    return saturate_u64(bits_to_double(type_, bits_));
  }
  return signed_type(type_) ? static_cast<uint64_t>(bits_to_int(type_, bits_)) : bits_;
}

double Value::as_double() const {
  GLM_CHECK(is_number());
  return bits_to_double(type_, bits_);
}

bool Value::as_bool() const {
  GLM_CHECK(type_ == ValueType::kBool);
  return bits_ != 0;
}

const std::string& Value::as_string() const {
  GLM_CHECK(type_ == ValueType::kString);
  return str_;
}

size_t Value::array_size() const {
  if (type_ != ValueType::kArray) return 0;
  if (elem_type_ == ValueType::kString) return strs_.size();
  if (elem_type_ == ValueType::kArray) return items_.size();
  const size_t n = scalar_size(elem_type_);
  return n == 0 ? 0 : raw_.size() / n;
}

std::vector<int64_t> Value::ints() const {
  std::vector<int64_t> out;
  if (type_ != ValueType::kArray || scalar_size(elem_type_) == 0) return out;
  const size_t n = scalar_size(elem_type_);
  const size_t count = raw_.size() / n;
  out.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = read_le(raw_.data() + i * n, n);
    if (elem_type_ == ValueType::kFloat32 || elem_type_ == ValueType::kFloat64) {
      out[i] = saturate_i64(bits_to_double(elem_type_, bits));
    } else {
      out[i] = bits_to_int(elem_type_, bits);
    }
  }
  return out;
}

std::vector<float> Value::floats() const {
  std::vector<float> out;
  if (type_ != ValueType::kArray || scalar_size(elem_type_) == 0) return out;
  const size_t n = scalar_size(elem_type_);
  const size_t count = raw_.size() / n;
  out.resize(count);
  if (elem_type_ == ValueType::kFloat32) {
    for (size_t i = 0; i < count; ++i) {
      const uint32_t u = static_cast<uint32_t>(read_le(raw_.data() + i * 4, 4));
      std::memcpy(&out[i], &u, 4);
    }
    return out;
  }
  for (size_t i = 0; i < count; ++i) {
    const double v = bits_to_double(elem_type_, read_le(raw_.data() + i * n, n));
    constexpr double kMax = std::numeric_limits<float>::max();
    out[i] = v > kMax    ? std::numeric_limits<float>::infinity()
             : v < -kMax ? -std::numeric_limits<float>::infinity()
                         : static_cast<float>(v);
  }
  return out;
}

}  // namespace glm::gguf
