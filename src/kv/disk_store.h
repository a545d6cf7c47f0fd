// DiskStore: the KV cache's files on disk, so that it outlives the engine (docs/engine.md#kv-disk).
// A bounded directory of two kinds of file, each written whole (temporary name, then rename):
//   - a block: the K/V of one block of positions, content-addressed by its hash-chain hash
//     (BlockAllocator::hash_block over the parent hash and its 1..block_tokens tokens, as the
//     prefix cache keys full blocks), with the parent hash and the tokens to confirm a hit;
//   - a conversation: its key, history tag and actual token sequence (KvCache's saved
//     conversation); its K/V are the blocks of that sequence's chain.
// Every file starts with a header: magic, format version, kind, the KV identity (a digest of
// the model file's fingerprint, the KV dtype, the block size and the layer/head shape), sizes
// and checksums of header and payload. A file that is truncated, corrupt, of another format
// version or another identity is refused with a log line, removed, and reads as absent; a
// file is never trusted further than its checksum and bounds checks (token ids are checked
// against the vocabulary, sizes against the block shape).
// Bounded: at most max_bytes of files, the least recently used (read or written; file times
// carry the order across restarts) removed first. Files of other identities in the directory
// count towards the bound and age out; they are never read (their names carry the identity).
// Failure to write (a full disk, a directory that became unwritable) logs once and turns the
// store off for good (enabled() false: every call a no-op), so the engine serves on without it.
//
// Thread-safety: none; used by the engine's loop thread (and by drain after the loop stopped).
// Cost: lookups are in-memory (an index built by listing the directory at open); a read or a
// write is one file of ~block_bytes (or the conversation's tokens) plus a checksum pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace glm::kv {

struct DiskOptions {
  std::string dir;           // created (0700) if missing
  uint64_t max_bytes = 0;    // the bound on the directory's files
  uint64_t identity = 0;     // the KV identity: files of any other are never read
  int block_tokens = 16;     // positions per block
  size_t block_bytes = 0;    // K/V bytes per block (model::Model::kv_block_bytes)
  int n_vocab = 0;           // token ids in files must be below it
  int max_tokens = 1 << 20;  // longest conversation a file may hold
};

struct DiskBlock {
  uint64_t parent = 0;          // hash of the chain before this block
  std::vector<int32_t> tokens;  // [1, block_tokens] tokens whose K/V it holds
  std::vector<uint8_t> data;    // [block_bytes] their K/V
};

struct DiskConversation {
  std::string key;
  uint64_t tag = 0;
  std::vector<int32_t> tokens;   // tokens whose K/V were written (the blocks' chain)
  std::vector<int32_t> pending;  // the conversation's tokens after them, never fed
};

struct DiskCounters {
  int64_t blocks_read = 0, blocks_written = 0;
  int64_t conversations_read = 0, conversations_written = 0;
  int64_t refused = 0, evicted = 0;
};

class DiskStore {
 public:
  // Creates the directory, proves it writable (a probe file), lists what is there (removing
  // temporary files of interrupted writes). nullptr, with a log line, if it cannot: the
  // engine then runs without a disk cache.
  static std::unique_ptr<DiskStore> open(const DiskOptions& options);

  bool enabled() const { return enabled_; }
  const DiskOptions& options() const { return options_; }
  uint64_t bytes() const { return bytes_; }
  int n_files() const { return static_cast<int>(index_.size()); }
  const DiskCounters& counters() const { return counters_; }

  bool has_block(uint64_t hash) const;
  // has_block, and marks it used now (a block that a newly written conversation shares).
  bool keep_block(uint64_t hash);
  // Writes (or replaces) a file; false if the store is (now) off.
  bool put_block(uint64_t hash, const DiskBlock& block);
  // The block, or nullopt if absent or refused.
  std::optional<DiskBlock> get_block(uint64_t hash);

  bool has_conversation(const std::string& key) const;
  bool put_conversation(const DiskConversation& conversation);
  std::optional<DiskConversation> get_conversation(const std::string& key);
  void remove_conversation(const std::string& key);

  // A whole file of `kind` around `payload`, header and checksums as written (the fuzz target
  // builds files with right checksums around its input this way).
  enum : uint32_t { kBlockFile = 1, kConversationFile = 2 };
  static std::vector<uint8_t> encode(uint64_t identity, uint32_t kind,
                                     const std::vector<uint8_t>& payload);
  // File names (tests corrupt them on purpose).
  std::string block_path(uint64_t hash) const;
  std::string conversation_path(const std::string& key) const;

 private:
  explicit DiskStore(const DiskOptions& options) : options_(options) {}
  struct Entry {
    uint64_t bytes = 0;
    std::list<std::string>::iterator lru;  // position in lru_
  };
  std::string name_prefix() const;
  std::string block_name(uint64_t hash) const;
  std::string conversation_name(const std::string& key) const;
  void scan();
  bool write_file(const std::string& name, uint32_t kind, const std::vector<uint8_t>& payload);
  // The payload of file `name` if it is whole, of this identity and version; else logs why,
  // removes the file and returns nullopt.
  std::optional<std::vector<uint8_t>> read_file(const std::string& name, uint32_t kind);
  void refuse(const std::string& name, const std::string& why);
  void touch(const std::string& name);   // most recently used now
  void stamp(const std::string& name);   // sets its file time to a new, later one
  void forget(const std::string& name);  // removes the file and its index entry
  void disable(const std::string& why);
  void evict_to_bound();

  DiskOptions options_;
  bool enabled_ = true;
  uint64_t bytes_ = 0;
  uint64_t n_tmp_ = 0;
  int64_t last_stamp_ns_ = 0;                     // the latest file time set or seen
  std::unordered_map<std::string, Entry> index_;  // file name -> entry
  std::list<std::string> lru_;                    // front = least recently used
  DiskCounters counters_;
};

// 64-bit digest of bytes (four interleaved multiply-xorshift lanes; not cryptographic: it
// detects corruption, the identity is in the header). Also used for the KV identity.
uint64_t digest_bytes(const void* data, size_t n, uint64_t seed = 0);

}  // namespace glm::kv
