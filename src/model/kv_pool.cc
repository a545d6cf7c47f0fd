#include "model/kv_pool.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace glm::model {

bool kv_type_from_name(const std::string& name, DType* out) {
  if (name == "f16") {
    *out = DType::kF16;
  } else if (name == "f32") {
    *out = DType::kF32;
  } else if (name == "q8_0") {
    *out = DType::kQ8_0;
  } else {
    return false;
  }
  return true;
}

std::string kv_type_unsupported(const Config& config, DType type) {
  if (type == DType::kF16 || type == DType::kF32) return "";
  if (type != DType::kQ8_0) {
    return std::string("the KV cache cannot be ") + dtype_name(type) + ": use " + kKvTypeNames;
  }
  const int row = config.n_head_kv * config.head_dim;
  if (row % kQK == 0) return "";
  return "--kv q8_0 needs n_head_kv * head_dim to be a multiple of 32 (this model's is " +
         std::to_string(row) + "): use --kv f16";
}

KvPool::KvPool(const Config& config, int n_blocks, int block_tokens, DType kv_type, int host_layers)
    : n_layer_(config.n_layer),
      host_layers_(host_layers < 0 ? config.n_layer : std::min(host_layers, config.n_layer)),
      n_blocks_(n_blocks),
      block_tokens_(block_tokens),
      row_elems_(config.n_head_kv * config.head_dim),
      parts_(parts_of(config)),
      kv_type_(kv_type) {
  GLM_CHECK(kv_type_unsupported(config, kv_type).empty());
  row_bytes_ = glm::row_bytes(kv_type, row_elems_);
  GLM_CHECK(n_blocks >= 0 && block_tokens > 0 && n_layer_ > 0 && row_elems_ > 0);
  storage_.resize(bytes_for(config, n_blocks, block_tokens, kv_type, host_layers));
}

size_t KvPool::bytes_for(const Config& config, int n_blocks, int block_tokens, DType kv_type,
                         int host_layers) {
  const int layers = host_layers < 0 ? config.n_layer : std::min(host_layers, config.n_layer);
  return static_cast<size_t>(layers) * parts_of(config) * static_cast<size_t>(n_blocks) *
         static_cast<size_t>(block_tokens) *
         glm::row_bytes(kv_type, static_cast<int64_t>(config.n_head_kv) * config.head_dim);
}

size_t KvPool::block_bytes_per_layer_kv() const {
  return static_cast<size_t>(block_tokens_) * row_bytes_;
}

size_t KvPool::block_bytes() const {
  return static_cast<size_t>(n_layer_) * parts_ * block_bytes_per_layer_kv();
}

size_t KvPool::offset(int layer, int kv, int block) const {
  GLM_CHECK(layer >= 0 && layer < host_layers_ && block >= 0 && block < n_blocks_);
  // V of a latent-attention model (one part): its K rows.
  const int part = parts_ == 1 ? 0 : kv;
  return ((static_cast<size_t>(layer) * parts_ + part) * n_blocks_ + block) *
         block_bytes_per_layer_kv();
}

void* KvPool::k(int layer, int block) { return storage_.data() + offset(layer, 0, block); }
void* KvPool::v(int layer, int block) { return storage_.data() + offset(layer, 1, block); }
const void* KvPool::k(int layer, int block) const {
  return storage_.data() + offset(layer, 0, block);
}
const void* KvPool::v(int layer, int block) const {
  return storage_.data() + offset(layer, 1, block);
}

void KvPool::copy_block(int src, int dst) {
  GLM_CHECK(src != dst);
  const size_t n = block_bytes_per_layer_kv();
  for (int layer = 0; layer < host_layers_; ++layer) {
    for (int kv = 0; kv < parts_; ++kv) {
      std::memcpy(storage_.data() + offset(layer, kv, dst),
                  storage_.data() + offset(layer, kv, src), n);
    }
  }
}

void KvPool::save_block(int block, uint8_t* data) const {
  const size_t n = block_bytes_per_layer_kv();
  for (int layer = 0; layer < host_layers_; ++layer) {
    for (int kv = 0; kv < parts_; ++kv, data += n) {
      std::memcpy(data, storage_.data() + offset(layer, kv, block), n);
    }
  }
}

void KvPool::load_block(int block, const uint8_t* data) {
  const size_t n = block_bytes_per_layer_kv();
  for (int layer = 0; layer < host_layers_; ++layer) {
    for (int kv = 0; kv < parts_; ++kv, data += n) {
      std::memcpy(storage_.data() + offset(layer, kv, block), data, n);
    }
  }
}

}  // namespace glm::model
