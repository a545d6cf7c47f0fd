// Streaming file digests through OpenSSL's EVP: SHA-256 (the hub's LFS files) and the git blob
// SHA-1 (small files the tree lists by their git object id: sha1("blob <size>\0" + bytes)).
// Not thread-safe per object. Cost: one pass over the bytes (~1-2 GB/s with SHA-NI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace glm::hub {

class Digest {
 public:
  enum class Kind { kSha256, kGitBlobSha1 };
  // `size` is the whole file's length (part of a git blob's header; unused for SHA-256).
  Digest(Kind kind, uint64_t size);
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(const void* data, size_t n);
  // Lowercase hex of the digest; the object is spent afterwards.
  std::string finish_hex();
  // Starts over (a download that restarts from byte 0).
  void reset();
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
  uint64_t size_;
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// Feeds the first `n_bytes` of the file at `path` into `d`.
Status digest_file_prefix(const std::string& path, uint64_t n_bytes, Digest* d);

}  // namespace glm::hub
