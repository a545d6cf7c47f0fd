// Test helpers for the GGUF tests (header-only; test binaries only).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/temp_dir.h"

namespace glm::gguf {

// A path in a per-process temporary directory (made on first use, removed with its files when
// the process exits).
inline std::string temp_path(const std::string& name) {
  static const TempDir dir("/tmp/glm_gguf_test.");
  return (dir.path().empty() ? std::string("/tmp") : dir.path()) + "/" + name;
}

inline std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace glm::gguf
