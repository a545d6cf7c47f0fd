// KvPool: the memory of the KV cache, cut into fixed-size blocks of `block_tokens` positions.
// A sequence's cache is a list of block ids (its block table); which blocks belong to whom is
// decided outside (kv/ for the server, a simple contiguous table for the CLI). The model reads
// and writes blocks through k()/v() during forward().
// Owns its memory (allocated once at construction, zero-filled: cost n_layer * 2 * n_blocks *
// block_tokens * row_bytes(kv_type, row_elems) bytes: 4, 2 or 34/32 = 1.0625 bytes a value for
// f32, f16, q8_0). A latent-attention model (Config::is_mla: GLM-4.7-Flash) keeps K rows only,
// half that: its values are the K rows' first kv_lora values, and v() is k(). Not thread-safe by
// itself: forward() writes only the blocks of the sequences in its batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace glm::model {

// The KV cache element types, by the names the flags use ("f16", "f32", "q8_0"): kF16, kF32 or
// kQ8_0 (each row GGUF Q8_0 blocks: 32 values as int8 with one fp16 scale). False if unknown.
bool kv_type_from_name(const std::string& name, DType* out);
inline constexpr const char* kKvTypeNames = "f16, f32 or q8_0";
// Empty if `config` can hold its KV rows in `type`, else why not, said to the user (q8_0 needs
// n_head_kv * head_dim to be a multiple of 32).
std::string kv_type_unsupported(const Config& config, DType type);

class KvPool {
 public:
  // kv_type: kF16, kF32 or kQ8_0 (kv_type_unsupported(config, kv_type) must be empty).
  // host_layers: the leading layers whose K/V live in this pool's memory (-1 = all;
  // Model::kv_host_layers: a model on a GPU keeps its layers' K/V in device memory, and the
  // pool then only keeps the accounting of its blocks).
  KvPool(const Config& config, int n_blocks, int block_tokens, DType kv_type, int host_layers = -1);
  // The bytes such a pool allocates (what bytes() will say), without allocating them.
  static size_t bytes_for(const Config& config, int n_blocks, int block_tokens, DType kv_type,
                          int host_layers = -1);

  int n_blocks() const { return n_blocks_; }
  int block_tokens() const { return block_tokens_; }
  DType kv_type() const { return kv_type_; }
  int row_elems() const { return row_elems_; }  // n_head_kv * head_dim
  size_t bytes() const { return storage_.size(); }
  // Bytes one block holds for all layers (K and V; K only for a latent-attention model).
  size_t block_bytes() const;
  // 2 (K and V rows), or 1 where the V rows are the K rows (Config::is_mla).
  int parts() const { return parts_; }
  static int parts_of(const Config& config) { return config.is_mla() ? 1 : 2; }

  // Bytes of one K (or V) row: row_bytes(kv_type, row_elems).
  size_t row_bytes() const { return row_bytes_; }
  // K rows of `block` in `layer` (< host_layers()): [block_tokens, n_head_kv * head_dim] of
  // kv_type, rows
  // row_bytes() apart (Q8_0: row_elems / 32 blocks of 34 bytes).
  void* k(int layer, int block);
  void* v(int layer, int block);
  const void* k(int layer, int block) const;
  const void* v(int layer, int block) const;
  int n_layer() const { return n_layer_; }
  int host_layers() const { return host_layers_; }
  // Copies block src's K and V rows, every host layer, into block dst (copy-on-write of a shared
  // partial block: kv::KvCache::fork).
  void copy_block(int src, int dst);
  // Block `block`'s K and V rows, every layer, as block_bytes() bytes ([n_layer, parts() (K,V),
  // block_tokens, row_elems] of kv_type) to and from `data` (the KV disk cache: kv::DiskStore).
  // Only the host layers' part of `data` is written or read (the model fills in the rest).
  void save_block(int block, uint8_t* data) const;
  void load_block(int block, const uint8_t* data);

 private:
  size_t block_bytes_per_layer_kv() const;  // one block of K (or V) in one layer
  size_t offset(int layer, int kv, int block) const;

  int n_layer_ = 0;
  int host_layers_ = 0;
  int n_blocks_ = 0;
  int block_tokens_ = 0;
  int row_elems_ = 0;
  int parts_ = 2;
  DType kv_type_ = DType::kF16;
  size_t row_bytes_ = 0;
  std::vector<uint8_t> storage_;  // [host_layers, parts (K,V), n_blocks, block_tokens, row_elems]
};

}  // namespace glm::model
