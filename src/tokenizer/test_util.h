// Helpers shared by the tokenizer tests: paths to ../shared/data and temp files.
#pragma once

#include <unistd.h>

#include <string>

namespace glm::tok::testing {

inline std::string shared(const std::string& rel) {
  return std::string(GLM_SHARED_DATA) + "/" + rel;
}
inline bool exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }
inline std::string temp_path(const std::string& name) {
  const char* dir = getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/glm_tok_" + std::to_string(getpid()) + "_" + name;
}

}  // namespace glm::tok::testing

#define GLM_SKIP_IF_ABSENT(path)          \
  if (!::glm::tok::testing::exists(path)) \
  GTEST_SKIP() << (path) << " is absent (see ../shared/data/README.md)"
