// GpuModel's KV cache in device memory (gpu_model.h): binding a KvPool's blocks to one device
// buffer a GPU layer (and the MTP block's), a fork's block copy, and a block's K/V to and from
// the host for the KV disk cache (the CPU layers' rows stay in the pool's host memory).
#include <cstring>

#include "core/check.h"
#include "core/log.h"
#include "model/gpu_model.h"

namespace glm::model {

uint32_t GpuModel::BoundKv::v_base() const {
  if (parts == 1) return 0;
  return static_cast<uint32_t>(static_cast<size_t>(n_blocks) * block_bytes());
}

size_t GpuModel::BoundKv::block_bytes() const {
  return static_cast<size_t>(block_tokens) * row_bytes;
}

GpuModel::CacheRef GpuModel::BoundKv::ref(gpu::Addr kv) const {
  return {kv, v_base(), static_cast<uint32_t>(row_bytes), block_tokens, type, parts};
}

bool GpuModel::BoundKv::is(const KvPool* kv) const {
  return kv == pool && kv->n_blocks() == n_blocks && kv->block_tokens() == block_tokens &&
         kv->kv_type() == type;
}

void GpuModel::BoundKv::bind(const KvPool* kv) {
  pool = kv;
  n_blocks = kv->n_blocks();
  block_tokens = kv->block_tokens();
  parts = kv->parts();
  type = kv->kv_type();
  row_bytes = kv->row_bytes();
}

namespace {

// The bytes of one layer of `kv` on the device, or why the GPU cannot hold it.
StatusOr<size_t> device_layer_bytes(const KvPool* kv, const gpu::DeviceInfo& info) {
  if (kv->kv_type() == DType::kQ8_0 && kv->row_elems() > gpu::kMaxQ8RowElems) {
    return unsupported("a q8_0 KV cache on the GPU takes rows of up to " +
                       std::to_string(gpu::kMaxQ8RowElems) + " values; this model's are " +
                       std::to_string(kv->row_elems()) + " (use --kv f16)");
  }
  const size_t layer_bytes =
      kv->parts() * static_cast<size_t>(kv->n_blocks()) * kv->block_tokens() * kv->row_bytes();
  if (layer_bytes > gpu::largest_buffer(info)) {
    return unsupported("a KV cache of " + std::to_string(layer_bytes >> 20) +
                       " MiB a layer is larger than a buffer can be on " + info.name + " (" +
                       std::to_string(gpu::largest_buffer(info) >> 20) +
                       " MiB: one buffer a layer, under 4 GiB); lower --ctx-size");
  }
  return layer_bytes;
}

}  // namespace

Status GpuModel::bind_mtp_kv(const KvPool* kv) {
  if (mtp_bound_.is(kv)) return Status::Ok();
  if (kv->n_layer() != 1 || kv->row_elems() != config_.kv_dim()) {  // model::mtp_kv_config
    return invalid_argument("the MTP block's KV pool is not one layer of the model's rows");
  }
  StatusOr<size_t> bytes = device_layer_bytes(kv, device_->info());
  if (!bytes.ok()) return bytes.status();
  mtp_kv_.reset();
  mtp_bound_.pool = nullptr;
  StatusOr<gpu::Buffer> b = device_->alloc(*bytes, gpu::MemoryKind::kDevice);
  if (!b.ok()) {
    return Status(b.status().code(), "the MTP block's KV cache (" + std::to_string(*bytes >> 20) +
                                         " MiB) does not fit on the GPU: " + b.status().message());
  }
  mtp_kv_ = std::move(*b);
  mtp_bound_.bind(kv);
  return Status::Ok();
}

Status GpuModel::bind_kv(const KvPool* kv) {
  if (kv_bound_.is(kv)) return Status::Ok();
  StatusOr<size_t> bytes = device_layer_bytes(kv, device_->info());
  if (!bytes.ok()) return bytes.status();
  const size_t layer_bytes = *bytes;
  kv_.clear();
  kv_bound_.pool = nullptr;
  for (int l = 0; l < gpu_layers(); ++l) {
    StatusOr<gpu::Buffer> b = device_->alloc(layer_bytes, gpu::MemoryKind::kDevice);
    if (!b.ok()) {
      kv_.clear();
      return Status(b.status().code(),
                    "the KV cache (" + std::to_string(layer_bytes * gpu_layers() >> 20) +
                        " MiB) does not fit on the GPU: " + b.status().message());
    }
    kv_.push_back(std::move(*b));
  }
  kv_bound_.bind(kv);
  return Status::Ok();
}

void GpuModel::copy_kv_block(KvPool* kv, int src, int dst) {
  if (n_cpu_ > 0) kv->copy_block(src, dst);  // the CPU layers' rows
  if (!bind_kv(kv).ok()) return;
  const size_t bytes = kv_bound_.block_bytes();
  gpu::Stream& st = device_->stream();
  st.begin();
  for (size_t l = 0; l < kv_.size(); ++l) {
    for (int k = 0; k < kv_bound_.parts; ++k) {
      const size_t base = k == 0 ? 0 : kv_bound_.v_base();
      st.copy(kv_[l], base + src * bytes, kv_[l], base + dst * bytes, bytes);
    }
  }
  const Status s = st.submit_and_wait();
  if (!s.ok()) GLM_LOG_ERROR("KV block copy on the GPU failed: %s", s.to_string().c_str());
}

// The GPU layers' rows of a block and their bytes in KvPool::save_block's layout
// ([n_layer, parts (K, V), block_tokens, row]): each (layer, part), copied between the layer's
// cache and block_io_ (host-visible) in one submission.
Status GpuModel::block_io(int block, bool to_host) {
  const size_t bytes = kv_bound_.block_bytes();
  const int parts = kv_bound_.parts;
  GLM_RETURN_IF_ERROR(
      grow(device_.get(), &block_io_, kv_.size() * parts * bytes, gpu::MemoryKind::kReadback));
  gpu::Stream& st = device_->stream();
  st.begin();
  for (size_t l = 0; l < kv_.size(); ++l) {
    for (int k = 0; k < parts; ++k) {
      const size_t cache = (k == 0 ? 0 : kv_bound_.v_base()) + block * bytes;
      const size_t host = (l * parts + k) * bytes;
      if (to_host) {
        st.copy(kv_[l], cache, block_io_, host, bytes);
      } else {
        st.copy(block_io_, host, kv_[l], cache, bytes);
      }
    }
  }
  return st.submit_and_wait();
}

void GpuModel::save_kv_block(const KvPool* kv, int block, uint8_t* data) const {
  auto* self = const_cast<GpuModel*>(this);  // the device's stream and block_io_
  GLM_CHECK(self->bind_kv(kv).ok());
  if (n_cpu_ > 0) kv->save_block(block, data);  // the CPU layers' rows (the GPU's follow)
  const size_t first = static_cast<size_t>(n_cpu_) * kv_bound_.parts * kv_bound_.block_bytes();
  // A block that cannot be read would be saved wrong and reused after a restart: stop the
  // engine instead (serve restarts it; docs/gpu.md#failures).
  if (const Status s = self->block_io(block, /*to_host=*/true); !s.ok()) {
    GLM_LOG_ERROR("KV block read from the GPU failed, stopping: %s", s.to_string().c_str());
    std::abort();
  }
  std::memcpy(data + first, block_io_.mapped(), kv->block_bytes() - first);
}

void GpuModel::load_kv_block(KvPool* kv, int block, const uint8_t* data) {
  if (n_cpu_ > 0) kv->load_block(block, data);
  if (!bind_kv(kv).ok()) return;
  const size_t bytes = kv_bound_.block_bytes() * kv_bound_.parts;  // a layer's parts
  const size_t first = static_cast<size_t>(n_cpu_) * bytes;
  if (!grow(device_.get(), &block_io_, kv_.size() * bytes, gpu::MemoryKind::kReadback).ok()) {
    GLM_LOG_ERROR("KV block write to the GPU failed: no host-visible buffer");
    return;
  }
  std::memcpy(block_io_.mapped(), data + first, kv_.size() * bytes);
  if (const Status s = block_io(block, /*to_host=*/false); !s.ok()) {
    GLM_LOG_ERROR("KV block write to the GPU failed: %s", s.to_string().c_str());
  }
}

}  // namespace glm::model
