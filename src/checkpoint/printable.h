// Names that come from a file (tensor names, zip entry names, pickle globals) as they may appear
// in a one-line error message: control bytes escaped as \xNN, at most 120 bytes kept.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace glm::checkpoint {

inline std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < 120; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (out.size() >= 120) out += "...";
  return out;
}

}  // namespace glm::checkpoint
