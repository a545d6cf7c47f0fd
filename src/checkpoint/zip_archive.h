// Read-only view of a ZIP archive held in memory (a mapped file), on top of Debian's minizip
// (libminizip, zlib's contrib/minizip): minizip finds the end-of-central-directory record (ZIP64
// included), walks the central directory and checks each local header; we keep, per entry, its
// name, method, sizes and, for stored entries, where its bytes lie in the image, so that a
// 2 GB storage of a PyTorch checkpoint is read in place without a copy (docs/model-files.md says
// why minizip and not libzip). Deflated entries are inflated on demand by zlib, CRC checked.
// Encrypted entries and methods other than stored (0) and deflate (8) are refused.
// Ownership: the image is not owned and must outlive the archive. Immutable after parse():
// thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace glm::checkpoint {

struct ZipEntry {
  std::string name;
  uint32_t method = 0;  // 0 stored, 8 deflate
  uint64_t size = 0;    // uncompressed bytes
  uint64_t compressed_size = 0;
  uint32_t crc32 = 0;
  uint64_t data_offset = 0;  // of the (compressed) bytes in the image
  bool zip64 = false;        // sizes or offset came from the ZIP64 extra field
  // Stored entries: the bytes, inside the image. nullptr for deflated entries.
  const uint8_t* data = nullptr;
};

class ZipArchive {
 public:
  ~ZipArchive();
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  // Reads the central directory of `data[0, size)`. bad_file (naming `label`) for anything that
  // is not a readable archive; unsupported for encryption or other compression methods.
  // Cost: O(number of entries); no entry data is read.
  static StatusOr<std::unique_ptr<ZipArchive>> parse(const uint8_t* data, size_t size,
                                                     const std::string& label);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& name) const;  // nullptr if absent

  // The contents of `e`: stored entries point into the image (no copy, *buf untouched);
  // deflated ones are inflated into *buf (CRC checked) and point there. Cost: O(e.size) for
  // deflated entries, O(1) for stored ones.
  Status read(const ZipEntry& e, std::vector<uint8_t>* buf, const uint8_t** out) const;

 private:
  ZipArchive() = default;
  const uint8_t* image_ = nullptr;
  std::string label_;
  std::vector<ZipEntry> entries_;
};

}  // namespace glm::checkpoint
