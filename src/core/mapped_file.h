// MappedFile: a read-only memory map of a whole file. Owns the mapping (and keeps the file open,
// for copy_out); move-only. The bytes stay valid until the object is destroyed. Thread-safe for
// concurrent reads.
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
  // Copies the n bytes at p into out. Bytes of this mapping are read from the file (pread: the
  // kernel copies them out of its page cache without mapping them into this process, whose page
  // faults are most of the cost of reading a mapping once, above all in a virtual machine:
  // docs/gpu.md "Uploads"); other bytes (not of this mapping, or where the read fails), memcpy.
  void copy_out(const void* p, size_t n, void* out) const;
  // Drops the pages wholly inside [p, p + n) of a mapping from this process's resident set
  // (MADV_DONTNEED); they are read back from the file if touched again. For data that was
  // copied elsewhere (e.g. repacked weights).
  static void release(const void* p, size_t n);

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  std::string path_;
};

}  // namespace glm
