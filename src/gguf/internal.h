// Helpers shared by the GGUF reader, writer and Value (not part of the public API).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/gguf.h"

namespace glm::gguf {

// Bytes of one scalar of type t in the file; 0 for kString and kArray.
size_t scalar_size(ValueType t);
// True for the 13 value type ids of GGUF v2/v3.
bool is_valid_value_type(uint32_t t);
// Little-endian load/store of the low n bytes (n <= 8).
uint64_t read_le(const uint8_t* p, size_t n);
void append_le(std::vector<uint8_t>* out, uint64_t v, size_t n);

// Private access to Value for the reader and writer.
struct ValueAccess {
  static Value scalar(ValueType t, uint64_t bits);
  static uint64_t bits(const Value& v) { return v.bits_; }
  static const std::vector<uint8_t>& raw(const Value& v) { return v.raw_; }
};

}  // namespace glm::gguf
