// Test helpers for the GGUF tests (header-only; test binaries only).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace glm::gguf {

// A path in a per-process temporary directory (created on first use).
inline std::string temp_path(const std::string& name) {
  static const std::string dir = [] {
    std::string tmpl = "/tmp/glm_gguf_test.XXXXXX";
    char* d = mkdtemp(tmpl.data());
    return std::string(d != nullptr ? d : "/tmp");
  }();
  return dir + "/" + name;
}

inline std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace glm::gguf
