#include "engine/kv_disk.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kv/disk_store.h"

namespace glm::engine {

namespace {

// Accumulates values into one digest.
class Digest {
 public:
  void add(const void* data, size_t n) { h_ = kv::digest_bytes(data, n, h_ ^ ++n_parts_); }
  void add(uint64_t v) { add(&v, sizeof v); }
  void add(const std::string& s) { add(s.data(), s.size()); }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0x6a09e667f3bcc908ull;
  uint64_t n_parts_ = 0;
};

}  // namespace

uint64_t adapter_fingerprint(const gguf::File& file, float scale) {
  uint32_t bits = 0;
  std::memcpy(&bits, &scale, sizeof(bits));
  return model_fingerprint(file) * 0x100000001b3ull + bits;
}

uint64_t model_fingerprint(const gguf::File& file) {
  constexpr size_t kHead = 4 << 20;
  constexpr size_t kSample = 4096;
  Digest d;
  std::ifstream in(file.path(), std::ios::binary);
  std::vector<char> head(kHead);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  d.add(head.data(), static_cast<size_t>(in.gcount()));
  in.seekg(0, std::ios::end);
  d.add(static_cast<uint64_t>(in.tellg()));
  for (const gguf::TensorInfo& t : file.tensors()) {
    d.add(t.name);
    d.add(static_cast<uint64_t>(t.type));
    for (int64_t s : t.shape) d.add(static_cast<uint64_t>(s));
    d.add(t.offset);
    if (t.data == nullptr) continue;
    const size_t n = std::min(kSample, t.n_bytes);
    d.add(t.data, n);
    d.add(t.data + (t.n_bytes - n) / 2, n);
    d.add(t.data + t.n_bytes - n, n);
  }
  return d.value();
}

uint64_t kv_identity(uint64_t fingerprint, const model::Config& c, DType kv_type, int block_tokens,
                     size_t block_bytes) {
  Digest d;
  d.add(fingerprint);
  d.add(c.arch_name);
  for (int64_t v :
       {int64_t{static_cast<int>(c.arch)}, int64_t{c.n_vocab}, int64_t{c.n_embd},
        int64_t{c.n_layer}, int64_t{c.n_head}, int64_t{c.n_head_kv}, int64_t{c.head_dim},
        int64_t{c.n_rot}, int64_t{c.n_ctx_train}, int64_t{static_cast<int>(kv_type)},
        int64_t{block_tokens}, static_cast<int64_t>(block_bytes)}) {
    d.add(static_cast<uint64_t>(v));
  }
  uint32_t rope_bits;
  static_assert(sizeof rope_bits == sizeof c.rope_base);
  std::memcpy(&rope_bits, &c.rope_base, sizeof rope_bits);
  d.add(uint64_t{rope_bits});
  return d.value();
}

}  // namespace glm::engine
