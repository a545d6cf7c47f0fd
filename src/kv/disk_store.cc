#include "kv/disk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/log.h"
#include "kv/block_allocator.h"

namespace glm::kv {

namespace {

// File layout (little-endian, as the host: x86-64 and arm64 both are):
//   header  [48 bytes] magic "GLMKVDSK", u32 version, u32 kind, u64 identity,
//           u64 payload bytes, u64 payload digest, u64 digest of the 40 bytes before it
//   block payload         u64 parent, u32 n, i32 tokens[n], u64 data bytes, data
//   conversation payload  u64 tag, u32 key bytes, key, u32 n, i32 tokens[n], u32 m, i32 pending[m]
constexpr char kMagic[8] = {'G', 'L', 'M', 'K', 'V', 'D', 'S', 'K'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kKindBlock = DiskStore::kBlockFile;
constexpr uint32_t kKindConversation = DiskStore::kConversationFile;
constexpr size_t kHeaderBytes = 48;
constexpr size_t kMaxKeyBytes = 4096;
constexpr uint32_t kMaxPending = 16;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t kind;
  uint64_t identity;
  uint64_t payload_bytes;
  uint64_t payload_digest;
  uint64_t header_digest;
};
static_assert(sizeof(Header) == kHeaderBytes);

void put_u32(std::vector<uint8_t>* out, uint32_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof v);
}
void put_u64(std::vector<uint8_t>* out, uint64_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof v);
}
void put_tokens(std::vector<uint8_t>* out, const std::vector<int32_t>& t) {
  put_u32(out, static_cast<uint32_t>(t.size()));
  const auto* p = reinterpret_cast<const uint8_t*>(t.data());
  out->insert(out->end(), p, p + sizeof(int32_t) * t.size());
}

// Bounds-checked reading of a payload; every read fails once one has.
class Cursor {
 public:
  explicit Cursor(const std::vector<uint8_t>& b) : b_(b) {}
  bool ok() const { return ok_; }
  bool at_end() const { return ok_ && at_ == b_.size(); }
  bool bytes(void* out, size_t n) {
    if (!ok_ || n > b_.size() - at_) return ok_ = false;
    if (n == 0) return true;  // out may be null (an empty vector's data())
    std::memcpy(out, b_.data() + at_, n);
    at_ += n;
    return true;
  }
  uint32_t u32() {
    uint32_t v = 0;
    bytes(&v, sizeof v);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    bytes(&v, sizeof v);
    return v;
  }
  // n tokens, each in [0, n_vocab); false (and *out empty) otherwise.
  bool tokens(uint32_t n, int n_vocab, std::vector<int32_t>* out) {
    if (!ok_ || n > (b_.size() - at_) / sizeof(int32_t)) return ok_ = false;
    out->resize(n);
    bytes(out->data(), sizeof(int32_t) * n);
    for (int32_t t : *out) {
      if (t < 0 || t >= n_vocab) return ok_ = false;
    }
    return ok_;
  }

 private:
  const std::vector<uint8_t>& b_;
  size_t at_ = 0;
  bool ok_ = true;
};

std::string hex16(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

uint64_t digest_bytes(const void* data, size_t n, uint64_t seed) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h[4] = {seed ^ 0x243f6a8885a308d3ull, seed ^ 0x13198a2e03707344ull,
                   seed ^ 0xa4093822299f31d0ull, seed ^ 0x082efa98ec4e6c89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * j, 8);
      h[j] = (h[j] ^ w) * kMul;
      h[j] ^= h[j] >> 32;
    }
  }
  for (; i < n; ++i) {
    h[0] = (h[0] ^ p[i]) * kMul;
    h[0] ^= h[0] >> 32;
  }
  uint64_t r = n;
  for (uint64_t x : h) {
    r = (r ^ x) * 0xff51afd7ed558ccdull;
    r ^= r >> 33;
  }
  return r;
}

std::unique_ptr<DiskStore> DiskStore::open(const DiskOptions& options) {
  const std::string& dir = options.dir;
  if (dir.empty() || options.block_bytes == 0 || options.block_tokens <= 0) return nullptr;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    GLM_LOG_ERROR("kv-disk: cannot create %s (%s): running without a disk cache", dir.c_str(),
                  std::strerror(errno));
    return nullptr;
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    GLM_LOG_ERROR("kv-disk: %s is not a directory: running without a disk cache", dir.c_str());
    return nullptr;
  }
  const std::string probe = dir + "/.tmp-probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const bool writable = fd >= 0 && write_all(fd, reinterpret_cast<const uint8_t*>(kMagic), 8);
  const int err = errno;
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  if (!writable) {
    GLM_LOG_ERROR("kv-disk: cannot write in %s (%s): running without a disk cache", dir.c_str(),
                  std::strerror(err));
    return nullptr;
  }
  std::unique_ptr<DiskStore> store(new DiskStore(options));
  store->scan();
  GLM_LOG_INFO("kv-disk: %s holds %d files (%.1f MiB of at most %.0f MiB)", dir.c_str(),
               store->n_files(), store->bytes() / 1048576.0, options.max_bytes / 1048576.0);
  return store;
}

std::string DiskStore::name_prefix() const { return hex16(options_.identity) + "-"; }
std::string DiskStore::block_name(uint64_t hash) const {
  return name_prefix() + "b" + hex16(hash) + ".kv";
}
std::string DiskStore::conversation_name(const std::string& key) const {
  return name_prefix() + "c" + hex16(digest_bytes(key.data(), key.size())) + ".kv";
}
std::string DiskStore::block_path(uint64_t hash) const {
  return options_.dir + "/" + block_name(hash);
}
std::string DiskStore::conversation_path(const std::string& key) const {
  return options_.dir + "/" + conversation_name(key);
}

void DiskStore::scan() {
  struct Found {
    std::string name;
    uint64_t bytes;
    struct timespec mtime;
  };
  std::vector<Found> found;
  DIR* d = ::opendir(options_.dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const std::string path = options_.dir + "/" + name;
    if (name.rfind(".tmp-", 0) == 0) {
      // An interrupted write (".tmp-PID-N"), unless its writer still runs (another engine).
      const long pid = std::strtol(name.c_str() + 5, nullptr, 10);
      if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
        ::unlink(path.c_str());
      }
      continue;
    }
    struct stat st;
    if (!ends_with(name, ".kv") || ::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    found.push_back({name, static_cast<uint64_t>(st.st_size), st.st_mtim});
  }
  ::closedir(d);
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec
                                            : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  for (const Found& f : found) {
    last_stamp_ns_ = std::max(last_stamp_ns_,
                              static_cast<int64_t>(f.mtime.tv_sec) * 1000000000 + f.mtime.tv_nsec);
    lru_.push_back(f.name);
    index_[f.name] = Entry{f.bytes, std::prev(lru_.end())};
    bytes_ += f.bytes;
  }
  evict_to_bound();
}

void DiskStore::touch(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  lru_.splice(lru_.end(), lru_, it->second.lru);
  stamp(name);
}

void DiskStore::stamp(const std::string& name) {
  // The order outlives the process: the next open sorts by modification time. The kernel's
  // file times move in clock ticks (several ms); these are distinct and increasing.
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  last_stamp_ns_ =
      std::max(last_stamp_ns_ + 1, static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec);
  timespec t[2];
  t[0].tv_sec = t[1].tv_sec = last_stamp_ns_ / 1000000000;
  t[0].tv_nsec = t[1].tv_nsec = last_stamp_ns_ % 1000000000;
  ::utimensat(AT_FDCWD, (options_.dir + "/" + name).c_str(), t, 0);
}

void DiskStore::forget(const std::string& name) {
  ::unlink((options_.dir + "/" + name).c_str());
  auto it = index_.find(name);
  if (it == index_.end()) return;
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
}

void DiskStore::evict_to_bound() {
  while (bytes_ > options_.max_bytes && !lru_.empty()) {
    forget(lru_.front());
    ++counters_.evicted;
  }
}

void DiskStore::disable(const std::string& why) {
  if (!enabled_) return;
  enabled_ = false;
  GLM_LOG_ERROR(
      "kv-disk: cannot write in %s (%s): the disk cache is off until the engine restarts "
      "(serving goes on without it; free space or fix the directory)",
      options_.dir.c_str(), why.c_str());
}

void DiskStore::refuse(const std::string& name, const std::string& why) {
  ++counters_.refused;
  GLM_LOG_WARN("kv-disk: refused %s/%s: %s; removed (the turn prefills instead)",
               options_.dir.c_str(), name.c_str(), why.c_str());
  forget(name);
}

std::vector<uint8_t> DiskStore::encode(uint64_t identity, uint32_t kind,
                                       const std::vector<uint8_t>& payload) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.kind = kind;
  h.identity = identity;
  h.payload_bytes = payload.size();
  h.payload_digest = digest_bytes(payload.data(), payload.size());
  h.header_digest = digest_bytes(&h, offsetof(Header, header_digest));
  std::vector<uint8_t> file(sizeof h + payload.size());
  std::memcpy(file.data(), &h, sizeof h);
  if (!payload.empty()) std::memcpy(file.data() + sizeof h, payload.data(), payload.size());
  return file;
}

bool DiskStore::write_file(const std::string& name, uint32_t kind,
                           const std::vector<uint8_t>& payload) {
  if (!enabled_) return false;
  const std::vector<uint8_t> file = encode(options_.identity, kind, payload);
  const std::string tmp =
      options_.dir + "/.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(n_tmp_++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    disable(std::strerror(errno));
    return false;
  }
  bool ok = write_all(fd, file.data(), file.size());
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  const std::string path = options_.dir + "/" + name;
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    disable(std::strerror(err != 0 ? err : EIO));
    return false;
  }
  auto it = index_.find(name);
  if (it != index_.end()) {
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    index_.erase(it);
  }
  lru_.push_back(name);
  index_[name] = Entry{file.size(), std::prev(lru_.end())};
  stamp(name);
  bytes_ += file.size();
  evict_to_bound();
  return true;
}

std::optional<std::vector<uint8_t>> DiskStore::read_file(const std::string& name, uint32_t kind) {
  if (!enabled_ || !index_.count(name)) return std::nullopt;
  const std::string path = options_.dir + "/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    forget(name);  // removed behind our back
    return std::nullopt;
  }
  struct stat st;
  const uint64_t max_payload =
      kind == kKindBlock
          ? 8 + 4 + sizeof(int32_t) * options_.block_tokens + 8 + options_.block_bytes
          : 8 + 4 + kMaxKeyBytes + 4 +
                sizeof(int32_t) * (static_cast<uint64_t>(options_.max_tokens) + kMaxPending) + 4;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse(name, "not a regular file");
    return std::nullopt;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderBytes || size > kHeaderBytes + max_payload) {
    ::close(fd);
    refuse(name, size < kHeaderBytes
                     ? "truncated (" + std::to_string(size) + " bytes, shorter than the header)"
                     : "too large (" + std::to_string(size) + " bytes)");
    return std::nullopt;
  }
  std::vector<uint8_t> buf(size);
  size_t got = 0;
  while (got < size) {
    const ssize_t r = ::read(fd, buf.data() + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  if (got != size) {
    refuse(name, "short read (" + std::to_string(got) + " of " + std::to_string(size) + " bytes)");
    return std::nullopt;
  }
  Header h;
  std::memcpy(&h, buf.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    refuse(name, "not a glmserve KV file");
    return std::nullopt;
  }
  if (h.version != kVersion) {
    refuse(name, "format version " + std::to_string(h.version) + " (this glmserve reads " +
                     std::to_string(kVersion) + ")");
    return std::nullopt;
  }
  if (h.header_digest != digest_bytes(&h, offsetof(Header, header_digest))) {
    refuse(name, "corrupt header (checksum mismatch)");
    return std::nullopt;
  }
  if (h.identity != options_.identity) {
    refuse(name, "written for another model or KV layout (identity " + hex16(h.identity) +
                     ", this engine's is " + hex16(options_.identity) + ")");
    return std::nullopt;
  }
  if (h.kind != kind) {
    refuse(name, "wrong kind of file");
    return std::nullopt;
  }
  if (h.payload_bytes != size - kHeaderBytes) {
    refuse(name, "truncated (" + std::to_string(size - kHeaderBytes) + " of " +
                     std::to_string(h.payload_bytes) + " payload bytes)");
    return std::nullopt;
  }
  std::vector<uint8_t> payload(buf.begin() + kHeaderBytes, buf.end());
  if (h.payload_digest != digest_bytes(payload.data(), payload.size())) {
    refuse(name, "corrupt (checksum mismatch)");
    return std::nullopt;
  }
  touch(name);
  return payload;
}

bool DiskStore::has_block(uint64_t hash) const {
  return enabled_ && index_.count(block_name(hash));
}

bool DiskStore::keep_block(uint64_t hash) {
  if (!has_block(hash)) return false;
  touch(block_name(hash));
  return true;
}

bool DiskStore::put_block(uint64_t hash, const DiskBlock& block) {
  if (block.tokens.empty() || static_cast<int>(block.tokens.size()) > options_.block_tokens ||
      block.data.size() != options_.block_bytes) {
    return false;  // a caller's bug; never written
  }
  std::vector<uint8_t> p;
  p.reserve(24 + sizeof(int32_t) * block.tokens.size() + block.data.size());
  put_u64(&p, block.parent);
  put_tokens(&p, block.tokens);
  put_u64(&p, block.data.size());
  p.insert(p.end(), block.data.begin(), block.data.end());
  if (!write_file(block_name(hash), kKindBlock, p)) return false;
  ++counters_.blocks_written;
  return true;
}

std::optional<DiskBlock> DiskStore::get_block(uint64_t hash) {
  const std::string name = block_name(hash);
  std::optional<std::vector<uint8_t>> payload = read_file(name, kKindBlock);
  if (!payload) return std::nullopt;
  Cursor c(*payload);
  DiskBlock b;
  b.parent = c.u64();
  const uint32_t n = c.u32();
  const bool tokens_ok = c.ok() && n >= 1 && n <= static_cast<uint32_t>(options_.block_tokens) &&
                         c.tokens(n, options_.n_vocab, &b.tokens);
  const uint64_t n_data = c.u64();
  if (!tokens_ok || n_data != options_.block_bytes) {
    refuse(name, "malformed block (tokens or K/V size do not fit this model)");
    return std::nullopt;
  }
  b.data.resize(n_data);
  c.bytes(b.data.data(), n_data);
  if (!c.at_end()) {
    refuse(name, "malformed block (length)");
    return std::nullopt;
  }
  if (BlockAllocator::hash_block(b.parent, b.tokens.data(), static_cast<int>(n)) != hash) {
    refuse(name, "holds another block than its name says");
    return std::nullopt;
  }
  ++counters_.blocks_read;
  return b;
}

bool DiskStore::has_conversation(const std::string& key) const {
  return enabled_ && index_.count(conversation_name(key));
}

bool DiskStore::put_conversation(const DiskConversation& conv) {
  if (conv.key.size() > kMaxKeyBytes || conv.pending.size() > kMaxPending ||
      conv.tokens.size() > static_cast<size_t>(options_.max_tokens)) {
    return false;  // not kept on disk (an absurd key); the memory copy still serves
  }
  std::vector<uint8_t> p;
  put_u64(&p, conv.tag);
  put_u32(&p, static_cast<uint32_t>(conv.key.size()));
  p.insert(p.end(), conv.key.begin(), conv.key.end());
  put_tokens(&p, conv.tokens);
  put_tokens(&p, conv.pending);
  if (!write_file(conversation_name(conv.key), kKindConversation, p)) return false;
  ++counters_.conversations_written;
  return true;
}

std::optional<DiskConversation> DiskStore::get_conversation(const std::string& key) {
  const std::string name = conversation_name(key);
  std::optional<std::vector<uint8_t>> payload = read_file(name, kKindConversation);
  if (!payload) return std::nullopt;
  Cursor c(*payload);
  DiskConversation conv;
  conv.tag = c.u64();
  const uint32_t key_bytes = c.u32();
  if (c.ok() && key_bytes <= kMaxKeyBytes) {
    conv.key.resize(key_bytes);
    c.bytes(conv.key.data(), key_bytes);
  }
  const uint32_t n = c.u32();
  const bool tokens_ok = c.ok() && n <= static_cast<uint32_t>(options_.max_tokens) &&
                         c.tokens(n, options_.n_vocab, &conv.tokens);
  const uint32_t m = c.u32();
  const bool pending_ok =
      tokens_ok && c.ok() && m <= kMaxPending && c.tokens(m, options_.n_vocab, &conv.pending);
  if (key_bytes > kMaxKeyBytes || !pending_ok || !c.at_end()) {
    refuse(name, "malformed conversation (key, tokens or length do not fit this model)");
    return std::nullopt;
  }
  if (conv.key != key) {
    refuse(name, "holds another conversation (a digest collision)");
    return std::nullopt;
  }
  ++counters_.conversations_read;
  return conv;
}

void DiskStore::remove_conversation(const std::string& key) {
  if (enabled_) forget(conversation_name(key));
}

}  // namespace glm::kv
