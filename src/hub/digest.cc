#include "hub/digest.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace glm::hub {

struct Digest::Ctx {
  EVP_MD_CTX* md = nullptr;
};

Digest::Digest(Kind kind, uint64_t size) : kind_(kind), size_(size), ctx_(new Ctx) {
  ctx_->md = EVP_MD_CTX_new();
  GLM_CHECK(ctx_->md != nullptr);
  reset();
}

Digest::~Digest() { EVP_MD_CTX_free(ctx_->md); }

void Digest::reset() {
  const EVP_MD* md = kind_ == Kind::kSha256 ? EVP_sha256() : EVP_sha1();
  GLM_CHECK(EVP_DigestInit_ex(ctx_->md, md, nullptr) == 1);
  if (kind_ == Kind::kGitBlobSha1) {
    const std::string header = "blob " + std::to_string(size_);
    update(header.data(), header.size() + 1);  // with its terminating NUL
  }
}

void Digest::update(const void* data, size_t n) {
  GLM_CHECK(EVP_DigestUpdate(ctx_->md, data, n) == 1);
}

std::string Digest::finish_hex() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  GLM_CHECK(EVP_DigestFinal_ex(ctx_->md, out, &n) == 1);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) {
    hex += kHex[out[i] >> 4];
    hex += kHex[out[i] & 15];
  }
  return hex;
}

Status digest_file_prefix(const std::string& path, uint64_t n_bytes, Digest* d) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return not_found("cannot open '" + path + "': " + std::strerror(errno));
  }
  std::vector<char> buf(1 << 20);
  uint64_t left = n_bytes;
  while (left > 0) {
    const size_t want = left < buf.size() ? static_cast<size_t>(left) : buf.size();
    const size_t got = std::fread(buf.data(), 1, want, f);
    if (got == 0) break;
    d->update(buf.data(), got);
    left -= got;
  }
  std::fclose(f);
  if (left != 0) return bad_file("'" + path + "' is shorter than " + std::to_string(n_bytes));
  return Status::Ok();
}

}  // namespace glm::hub
