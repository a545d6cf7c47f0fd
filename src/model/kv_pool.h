// KvPool: the memory of the KV cache, cut into fixed-size blocks of `block_tokens` positions.
// A sequence's cache is a list of block ids (its block table); which blocks belong to whom is
// decided outside (kv/ for the server, a simple contiguous table for the CLI). The model reads
// and writes blocks through k()/v() during forward().
// Owns its memory (allocated once at construction, zero-filled: cost n_layer * 2 * n_blocks *
// block_tokens * row_elems * sizeof(kv_type) bytes). Not thread-safe by itself: forward() writes
// only the blocks of the sequences in its batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace glm::model {

class KvPool {
 public:
  // kv_type: kF16 (default) or kF32.
  KvPool(const Config& config, int n_blocks, int block_tokens, DType kv_type);

  int n_blocks() const { return n_blocks_; }
  int block_tokens() const { return block_tokens_; }
  DType kv_type() const { return kv_type_; }
  int row_elems() const { return row_elems_; }  // n_head_kv * head_dim
  size_t bytes() const { return storage_.size(); }
  // Bytes one block holds for all layers (K and V).
  size_t block_bytes() const;

  // K rows of `block` in `layer`: [block_tokens, n_head_kv * head_dim] of kv_type.
  void* k(int layer, int block);
  void* v(int layer, int block);
  const void* k(int layer, int block) const;
  const void* v(int layer, int block) const;
  int n_layer() const { return n_layer_; }
  // Copies block src's K and V rows, every layer, into block dst (copy-on-write of a shared
  // partial block: kv::KvCache::fork).
  void copy_block(int src, int dst);
  // Block `block`'s K and V rows, every layer, as block_bytes() bytes ([n_layer, 2 (K,V),
  // block_tokens, row_elems] of kv_type) to and from `data` (the KV disk cache: kv::DiskStore).
  void save_block(int block, uint8_t* data) const;
  void load_block(int block, const uint8_t* data);

 private:
  size_t block_bytes_per_layer_kv() const;  // one block of K (or V) in one layer
  size_t offset(int layer, int kv, int block) const;

  int n_layer_ = 0;
  int n_blocks_ = 0;
  int block_tokens_ = 0;
  int row_elems_ = 0;
  DType kv_type_ = DType::kF16;
  size_t elem_bytes_ = 2;
  std::vector<uint8_t> storage_;  // [n_layer, 2 (K,V), n_blocks, block_tokens, row_elems]
};

}  // namespace glm::model
