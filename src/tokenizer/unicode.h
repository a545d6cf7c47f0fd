// Unicode helpers for the tokenizers: UTF-8 encode/decode of single code points and the general
// categories that GLM-4's pre-tokenizer regex needs (\p{L}, \p{N}, \s). Pure functions over
// static tables built once on first use; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace glm::tok {

// UTF-8 bytes of a code point (U+FFFD for values above U+10FFFF or surrogates).
std::string utf8_encode(uint32_t cp);
// Decodes the character at s[*pos] and advances *pos. An invalid or truncated sequence yields
// its first byte's value | 0x80000000 (an "invalid byte" marker) and advances by one byte.
uint32_t utf8_next(std::string_view s, size_t* pos);
constexpr uint32_t kInvalidByteFlag = 0x80000000u;

// Category classes used by the pre-tokenizer.
bool is_letter(uint32_t cp);      // \p{L}
bool is_number(uint32_t cp);      // \p{N}
bool is_whitespace(uint32_t cp);  // \s (Unicode White_Space, as Rust regex / PCRE2 UCP)

}  // namespace glm::tok
