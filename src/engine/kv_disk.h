// The engine's side of the KV disk cache (docs/engine.md#kv-disk): the identity that keeps one
// model's files away from another, and the kv::BlockIo that moves a block's K/V between the
// model's KvPool and bytes.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/model.h"

namespace glm::engine {

// A digest of a GGUF file's content: its size, its first 4 MiB (header, metadata, tokenizer)
// and, for every tensor, its name, type, shape, offset and 4 KiB from the start, middle and
// end of its data. Not a hash of every byte (a 6B file would cost seconds): files that differ
// only outside the sampled bytes look the same. Cost: ~4 MiB + 12 KiB per tensor read.
uint64_t model_fingerprint(const gguf::File& file);

// An adapter's identity for the KV caches (prefix chains, the disk cache): its file's
// fingerprint and the scale it runs at, which both change every K/V it touches.
uint64_t adapter_fingerprint(const gguf::File& file, float scale);

// The KV identity: the model's fingerprint (0 for models without a file: test fakes) with
// everything that shapes its K/V: architecture, layers, KV heads, head size, rotary, context,
// KV dtype, block size and the bytes a block takes.
uint64_t kv_identity(uint64_t fingerprint, const model::Config& config, DType kv_type,
                     int block_tokens, size_t block_bytes);

// Blocks' K/V through the model (which knows where it keeps them: the pool, or a fake's cells).
// Loop thread only; model and pool are not owned.
class ModelBlockIo final : public kv::BlockIo {
 public:
  ModelBlockIo(model::Model* model, model::KvPool* pool) : model_(model), pool_(pool) {}
  size_t block_bytes() const override { return model_->kv_block_bytes(pool_); }
  void save(int block, uint8_t* data) const override { model_->save_kv_block(pool_, block, data); }
  void load(int block, const uint8_t* data) override { model_->load_kv_block(pool_, block, data); }

 private:
  model::Model* model_;
  model::KvPool* pool_;
};

}  // namespace glm::engine
