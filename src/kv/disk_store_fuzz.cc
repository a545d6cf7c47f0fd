// libFuzzer target: a KV disk file (docs/engine.md#kv-disk) is read back as a block or a
// conversation within the store's bounds, or refused (and removed); never a crash. The first
// input byte picks what the rest is: the raw bytes of a file (the header checks), or a payload
// that the harness frames with a right header and checksums (the payload parser, which a file
// with a corrupt checksum never reaches).
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DGLM_FUZZ=ON
//        cmake --build build-fuzz --target disk_store_fuzz && build-fuzz/src/kv/disk_store_fuzz
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/log.h"
#include "kv/block_allocator.h"
#include "kv/disk_store.h"

namespace {

constexpr int kBt = 4;
constexpr size_t kBytes = 32;
constexpr int kVocab = 100;

glm::kv::DiskOptions options() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/glm-kv-fuzz-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    static std::string made = tmpl;
    std::atexit([] { ::rmdir(made.c_str()); });  // each input's file is removed after it
    return made;
  }();
  glm::kv::DiskOptions o;
  o.dir = dir;
  o.max_bytes = 1 << 20;
  o.identity = 7;
  o.block_tokens = kBt;
  o.block_bytes = kBytes;
  o.n_vocab = kVocab;
  o.max_tokens = 64;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  glm::set_log_level(glm::LogLevel::kOff);
  const uint8_t mode = data[0];
  std::vector<uint8_t> rest(data + 1, data + size);
  const bool block = (mode & 1) != 0;
  const uint32_t kind =
      block ? glm::kv::DiskStore::kBlockFile : glm::kv::DiskStore::kConversationFile;
  std::vector<uint8_t> file = (mode & 2) != 0 ? glm::kv::DiskStore::encode(7, kind, rest) : rest;
  const uint64_t hash = 12345;
  const std::string key = "conversation";
  std::string path;
  {
    auto store = glm::kv::DiskStore::open(options());
    if (!store) std::abort();
    path = block ? store->block_path(hash) : store->conversation_path(key);
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!file.empty()) std::fwrite(file.data(), 1, file.size(), f);
  std::fclose(f);
  auto store = glm::kv::DiskStore::open(options());
  if (!store) std::abort();
  if (block) {
    auto b = store->get_block(hash);
    if (b) {
      if (b->tokens.empty() || b->tokens.size() > kBt || b->data.size() != kBytes) std::abort();
      for (int32_t t : b->tokens) {
        if (t < 0 || t >= kVocab) std::abort();
      }
      if (glm::kv::BlockAllocator::hash_block(b->parent, b->tokens.data(),
                                              static_cast<int>(b->tokens.size())) != hash) {
        std::abort();
      }
    }
  } else {
    auto c = store->get_conversation(key);
    if (c) {
      if (c->key != key || c->tokens.size() > 64) std::abort();
      for (int32_t t : c->tokens) {
        if (t < 0 || t >= kVocab) std::abort();
      }
      for (int32_t t : c->pending) {
        if (t < 0 || t >= kVocab) std::abort();
      }
    }
  }
  ::unlink(path.c_str());  // read or refused (and removed): the next input starts clean
  return 0;
}
