// UTF-8 helpers for streaming text: validation and whole-character boundaries.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace glm {

// True if `s` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool utf8_valid(std::string_view s);
// Length of the longest prefix of `s` that ends on a character boundary, assuming `s` is a
// valid UTF-8 stream cut at an arbitrary byte. Bytes after it belong to an unfinished character.
size_t utf8_complete_prefix(std::string_view s);
// Replaces each invalid sequence with U+FFFD.
std::string utf8_sanitize(std::string_view s);

}  // namespace glm
