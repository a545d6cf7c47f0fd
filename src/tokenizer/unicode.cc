#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <vector>

#include "tokenizer/unicode_tables.h"

namespace glm::tok {

std::string utf8_encode(uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

uint32_t utf8_next(std::string_view s, size_t* pos) {
  const size_t i = *pos;
  const uint8_t b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  }
  int n;
  uint32_t cp, min;
  if ((b0 & 0xE0) == 0xC0) {
    n = 1, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 2, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 3, cp = b0 & 0x07, min = 0x10000;
  } else {
    *pos = i + 1;
    return kInvalidByteFlag | b0;
  }
  for (int k = 1; k <= n; ++k) {
    if (i + k >= s.size()) {
      *pos = i + 1;
      return kInvalidByteFlag | b0;
    }
    const uint8_t b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      *pos = i + 1;
      return kInvalidByteFlag | b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *pos = i + 1;
    return kInvalidByteFlag | b0;
  }
  *pos = i + n + 1;
  return cp;
}

namespace {

bool in_ranges(const CodeRange* r, size_t n, uint32_t cp) {
  const CodeRange* end = r + n;
  const CodeRange* it =
      std::upper_bound(r, end, cp, [](uint32_t c, const CodeRange& x) { return c < x.first; });
  return it != r && cp <= (it - 1)->last;
}

// Flags for the Basic Multilingual Plane, looked up directly (the hot path).
constexpr uint8_t kLetter = 1, kNumber = 2, kSpace = 4;

struct BmpTable {
  std::vector<uint8_t> flags;
  BmpTable() : flags(0x10000, 0) {
    for (size_t i = 0; i < kLetterRanges_size; ++i) {
      for (uint32_t c = kLetterRanges[i].first; c <= kLetterRanges[i].last && c < 0x10000; ++c) {
        flags[c] |= kLetter;
      }
    }
    for (size_t i = 0; i < kNumberRanges_size; ++i) {
      for (uint32_t c = kNumberRanges[i].first; c <= kNumberRanges[i].last && c < 0x10000; ++c) {
        flags[c] |= kNumber;
      }
    }
    // Unicode White_Space.
    const uint32_t spaces[] = {0x09, 0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                               0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    for (uint32_t c : spaces) flags[c] |= kSpace;
    for (uint32_t c = 0x2000; c <= 0x200A; ++c) flags[c] |= kSpace;
  }
};

const BmpTable& bmp() {
  static const BmpTable t;
  return t;
}

}  // namespace

bool is_letter(uint32_t cp) {
  if (cp < 0x10000) return bmp().flags[cp] & kLetter;
  if (cp > 0x10FFFF) return false;
  return in_ranges(kLetterRanges, kLetterRanges_size, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x10000) return bmp().flags[cp] & kNumber;
  if (cp > 0x10FFFF) return false;
  return in_ranges(kNumberRanges, kNumberRanges_size, cp);
}

bool is_whitespace(uint32_t cp) { return cp < 0x10000 && (bmp().flags[cp] & kSpace); }

}  // namespace glm::tok
