// A directory of its own under /tmp, removed with everything in it when the object is destroyed.
// The tests' temp_path helpers keep one for their process, so that a run of a few thousand test
// processes leaves nothing behind (left, they filled this machine's disk).
// Thread-safety: const methods only after construction.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace glm {

class TempDir {
 public:
  // prefix: the directory's name before mkdtemp's 6 random characters ("/tmp/glm_x.").
  explicit TempDir(const std::string& prefix) {
    std::string tmpl = prefix + "XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;  // a failure to clean up leaves the directory, nothing worse
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The directory, or "" where it could not be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace glm
