// MappedFile: a read-only memory map of a whole file. Owns the mapping; move-only.
// The bytes stay valid until the object is destroyed. Thread-safe for concurrent reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace glm {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path` read-only (MAP_SHARED: pages are shared with the page cache, never copied).
  static StatusOr<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Advises the kernel that the whole file will be read soon (async readahead).
  void prefetch() const;
  // Drops the pages wholly inside [p, p + n) of a mapping from this process's resident set
  // (MADV_DONTNEED); they are read back from the file if touched again. For data that was
  // copied elsewhere (e.g. repacked weights).
  static void release(const void* p, size_t n);

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace glm
