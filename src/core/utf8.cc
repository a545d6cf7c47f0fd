#include "core/utf8.h"

#include <cstdint>

namespace glm {
namespace {

// Length of the valid sequence starting at s[i], or 0 if invalid / truncated.
size_t valid_seq_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  if (n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) return 0;
  if (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) return 0;
  return n;
}

}  // namespace

bool utf8_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = valid_seq_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the last lead byte.
  size_t i = s.size();
  size_t back = 0;
  while (i > 0 && back < 4 && (static_cast<uint8_t>(s[i - 1]) & 0xc0) == 0x80) {
    --i;
    ++back;
  }
  if (i == 0) return back == 0 ? 0 : s.size();  // only continuation bytes: not ours to hold
  const uint8_t lead = static_cast<uint8_t>(s[i - 1]);
  size_t need = 1;
  if (lead >= 0xf0) {
    need = 4;
  } else if (lead >= 0xe0) {
    need = 3;
  } else if (lead >= 0xc0) {
    need = 2;
  }
  if (need == 1) return s.size();
  const size_t have = back + 1;
  return have >= need ? s.size() : i - 1;
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = valid_seq_len(s, i);
    if (n == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace glm
