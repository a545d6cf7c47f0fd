// Sizes in messages and log lines: "0.20 GiB" (a budget, a model's part), "2368.0 MiB" (a buffer
// or a matrix near a device's largest buffer, where GiB would round the two sizes compared
// alike). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace glm {

inline std::string format_gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return buf;
}

inline std::string format_mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1u << 20));
  return buf;
}

}  // namespace glm
