// Device::upload (device.h): host bytes into device buffers through two staging buffers in turn,
// so that the host fills one while the device copies the other out (docs/gpu.md "Uploads").
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "gpu/device.h"

namespace glm::gpu {

void Device::set_upload_chunk(size_t bytes) {
  bytes = std::min<size_t>(bytes, info_.max_buffer_bytes & ~uint64_t{15});
  const size_t chunk = std::max<size_t>(16, (bytes + 15) / 16 * 16);
  if (chunk == upload_chunk_) return;
  for (Staging& s : staging_) {
    GLM_CHECK(!s.pending);
    s.buf.reset();  // made again at the new size by the next upload
  }
  upload_chunk_ = chunk;
}

Status Device::make_staging() {
  const VulkanApi& vk = api_;
  for (Staging& s : staging_) {
    if (!s.buf.valid()) {
      StatusOr<Buffer> b = alloc(upload_chunk_, MemoryKind::kUpload);
      if (!b.ok()) return b.status();
      s.buf = std::move(*b);
    }
    if (s.cmd == VK_NULL_HANDLE) {
      VkCommandBufferAllocateInfo ai{};
      ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
      ai.commandPool = stream_.pool_;  // freed with it
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      if (VkResult r = vk.vkAllocateCommandBuffers(device_, &ai, &s.cmd); r != VK_SUCCESS) {
        s.cmd = VK_NULL_HANDLE;
        return vk_error("vkAllocateCommandBuffers", r);
      }
    }
    if (s.fence == VK_NULL_HANDLE) {
      VkFenceCreateInfo fci{};
      fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
      if (VkResult r = vk.vkCreateFence(device_, &fci, nullptr, &s.fence); r != VK_SUCCESS) {
        s.fence = VK_NULL_HANDLE;
        return vk_error("vkCreateFence", r);
      }
    }
  }
  return Status::Ok();
}

Status Device::copy_staged(Staging& s, size_t bytes, const Buffer& dst, size_t offset) {
  GLM_CHECK(!s.pending);
  begin_commands(s.cmd);  // its last copy was waited for
  const VkBufferCopy region{0, offset, bytes};
  api_.vkCmdCopyBuffer(s.cmd, s.buf.handle(), dst.handle(), 1, &region);
  // The dispatches and copies submitted after it (in submission order, on this one queue) see
  // what it wrote. (The host's writes to the staging buffer are seen by the copy: a submit
  // makes a coherent mapping's writes visible.)
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  api_.vkCmdPipelineBarrier(s.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            0, 1, &mb, 0, nullptr, 0, nullptr);
  GLM_RETURN_IF_ERROR(end_and_submit(s.cmd, s.fence));
  s.pending = true;
  return Status::Ok();
}

Status Device::wait_staged(Staging& s) {
  if (!s.pending) return Status::Ok();
  s.pending = false;
  const VkResult r = wait_fence(s.fence);
  return r == VK_SUCCESS ? Status::Ok() : unfinished("an upload", r);
}

Status Device::upload(const void* data, size_t bytes, const Buffer& dst, size_t offset) {
  return upload(std::vector<HostBytes>{{data, bytes}}, dst, offset);
}

Status Device::upload(const std::vector<HostBytes>& parts, const Buffer& dst, size_t offset) {
  size_t total = 0;
  for (const HostBytes& part : parts) total += part.bytes;
  GLM_CHECK(offset + total <= dst.size());
  if (total == 0) return Status::Ok();
  GLM_RETURN_IF_ERROR(make_staging());
  // Returns `st` once no copy is pending (the first failure wins): a staging buffer is never
  // written while the device may still read it, nor dst freed while it may be written.
  const auto settle = [this](Status st) {
    for (Staging& s : staging_) {
      Status w = wait_staged(s);
      if (st.ok()) st = std::move(w);
    }
    return st;
  };
  const size_t chunk = upload_chunk_;
  size_t turn = 0;  // staging_[turn % 2] is being filled
  size_t filled = 0;
  const auto flush = [&]() -> Status {
    Staging& s = staging_[turn % 2];
    GLM_RETURN_IF_ERROR(copy_staged(s, filled, dst, offset));
    offset += filled;
    filled = 0;
    ++turn;
    return Status::Ok();
  };
  for (const HostBytes& part : parts) {
    const auto* src = static_cast<const uint8_t*>(part.data);
    for (size_t done = 0; done < part.bytes;) {
      Staging& s = staging_[turn % 2];
      if (filled == 0) {
        if (Status st = wait_staged(s); !st.ok()) return settle(std::move(st));
      }
      const size_t n = std::min(chunk - filled, part.bytes - done);
      auto* at = static_cast<uint8_t*>(s.buf.mapped()) + filled;
      if (part.file != nullptr) {
        part.file->copy_out(src + done, n, at);
      } else {
        std::memcpy(at, src + done, n);
      }
      filled += n;
      done += n;
      if (filled == chunk) {
        if (Status st = flush(); !st.ok()) return settle(std::move(st));
      }
    }
  }
  if (filled > 0) {
    if (Status st = flush(); !st.ok()) return settle(std::move(st));
  }
  return settle(Status::Ok());
}

}  // namespace glm::gpu
