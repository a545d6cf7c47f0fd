// The stream's recording and submission of a step (Stream, in parts: device.h) and the op
// profile read from its timestamps (Device::enable_profile, docs/gpu.md#profile).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/check.h"
#include "gpu/device.h"

namespace glm::gpu {

// Timestamps a step can hold when profiling: one before its first op and one after each op;
// ops past the last are not timed.
constexpr uint32_t kProfileQueries = 4096;

bool Device::enable_profile() {
  if (query_pool_ != VK_NULL_HANDLE) return true;
  if (timestamp_mask_ == 0) return false;
  VkQueryPoolCreateInfo qci{};
  qci.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
  qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qci.queryCount = kProfileQueries;
  if (api_.vkCreateQueryPool(device_, &qci, nullptr, &query_pool_) != VK_SUCCESS) {
    query_pool_ = VK_NULL_HANDLE;
    return false;
  }
  VkPhysicalDeviceProperties props{};
  api_.vkGetPhysicalDeviceProperties(physical_, &props);
  timestamp_ns_ = props.limits.timestampPeriod;
  profile_.assign(kShaderCount + 1, OpTime{});
  for (int i = 0; i < kShaderCount; ++i) profile_[i].name = spirv(static_cast<Shader>(i)).name;
  profile_[kShaderCount].name = "copy";
  return true;
}

std::vector<OpTime> Device::profile() const {
  std::vector<OpTime> out;
  for (const OpTime& t : profile_) {
    if (t.calls > 0) out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  return out;
}

std::string Device::profile_report() const {
  const std::vector<OpTime> ops = profile();
  double total = 0;
  for (const OpTime& t : ops) total += t.ms;
  char line[160];
  std::snprintf(line, sizeof line, "vulkan profile (%s): %llu steps, %.3f ms on the device",
                info_.name.c_str(), static_cast<unsigned long long>(profiled_steps_), total);
  std::string out = line;
  // The host's side of the same steps: recording (begin to the last part's submit, less the
  // pipelines it created; parts submitted before it run meanwhile) and waiting for the device
  // after it; and every pipeline's creation since the open.
  std::snprintf(line, sizeof line,
                "; host: %.3f ms recording, %.3f ms waiting; shaders compiled in %.3f ms",
                record_ms_, wait_ms_, compile_ms_);
  out += line;
  for (const OpTime& t : ops) {
    std::snprintf(line, sizeof line, "\n  %-20s %10llu calls %12.3f ms %6.1f%%", t.name.c_str(),
                  static_cast<unsigned long long>(t.calls), t.ms,
                  total > 0 ? 100.0 * t.ms / total : 0.0);
    out += line;
  }
  return out;
}

void Stream::begin() {
  part_ = 0;
  submitted_ = 0;
  failed_ = Status::Ok();
  start_part();
  recording_ = true;
  pending_barrier_ = false;
  begun_ = std::chrono::steady_clock::now();
  compile_ms_at_begin_ = device_->compile_ms_;
  // The last step has finished (submit_and_wait): scratch buffers it outgrew are free.
  if (scratch_.size() > 1) scratch_.erase(scratch_.begin(), scratch_.end() - 1);
  marks_.clear();
  if (device_->query_pool_ != VK_NULL_HANDLE) {
    const VulkanApi& vk = device_->api_;
    vk.vkCmdResetQueryPool(cmd_, device_->query_pool_, 0, kProfileQueries);
    vk.vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, device_->query_pool_, 0);
  }
}

void Stream::start_part() {
  cmd_ = cmds_[part_];
  device_->begin_commands(cmd_);  // not pending: the step before has finished
  part_dispatches_ = 0;
}

void Stream::submit_part() {
  const VulkanApi& vk = device_->api_;
  if (part_ + 1 == cmds_.size()) {
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBuffer next = VK_NULL_HANDLE;
    // Without a next part this one records on: the step is submitted whole at its end.
    if (vk.vkAllocateCommandBuffers(device_->device_, &ai, &next) != VK_SUCCESS) return;
    cmds_.push_back(next);
  }
  // After a failure the step records on (its ops are void) and submit_and_wait reports it.
  failed_ = end_and_submit(VK_NULL_HANDLE);
  ++part_;
  start_part();
}

Status Stream::end_and_submit(VkFence fence) {
  GLM_RETURN_IF_ERROR(device_->end_and_submit(cmd_, fence));
  ++submitted_;
  return Status::Ok();
}

VkResult Stream::drain(bool fenced) {
  if (submitted_ == 0) return VK_SUCCESS;
  submitted_ = 0;
  const VulkanApi& vk = device_->api_;
  // Else no batches, a fence: signalled when everything submitted before it has finished.
  const VkResult r = fenced ? VK_SUCCESS : vk.vkQueueSubmit(device_->queue_, 0, nullptr, fence_);
  if (r != VK_SUCCESS) {
    device_->lost_ = true;
    return r;
  }
  return device_->wait_fence(fence_);
}

void Stream::mark(int op) {
  if (device_->query_pool_ == VK_NULL_HANDLE || marks_.size() + 1 >= kProfileQueries) return;
  // After every command before it has finished: the time since the last mark is this op's.
  device_->api_.vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                                    device_->query_pool_, static_cast<uint32_t>(marks_.size() + 1));
  marks_.push_back(op);
}

void Stream::read_profile(double record_ms, double wait_ms) {
  // Steps of copies alone (uploads, downloads) are not a model's step.
  if (device_->query_pool_ == VK_NULL_HANDLE ||
      std::all_of(marks_.begin(), marks_.end(), [](int op) { return op == kShaderCount; })) {
    return;
  }
  std::vector<uint64_t> ts(marks_.size() + 1);
  const VkResult r = device_->api_.vkGetQueryPoolResults(
      device_->device_, device_->query_pool_, 0, static_cast<uint32_t>(ts.size()),
      ts.size() * sizeof(uint64_t), ts.data(), sizeof(uint64_t),
      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS) return;
  const uint64_t mask = device_->timestamp_mask_;
  for (size_t i = 0; i < marks_.size(); ++i) {
    const uint64_t ticks = ((ts[i + 1] & mask) - (ts[i] & mask)) & mask;
    OpTime& t = device_->profile_[marks_[i]];
    t.calls += 1;
    t.ms += static_cast<double>(ticks) * device_->timestamp_ns_ * 1e-6;
  }
  device_->profiled_steps_ += 1;
  device_->record_ms_ += record_ms;
  device_->wait_ms_ += wait_ms;
}

void Stream::barrier() {
  if (!pending_barrier_) return;
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  device_->api_.vkCmdPipelineBarrier(cmd_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
  pending_barrier_ = false;
}

void Stream::dispatch(Shader shader, int spec, const void* push, size_t push_bytes, uint32_t gx,
                      uint32_t gy, uint32_t gz) {
  GLM_CHECK(recording_ && push_bytes <= 128);
  if (gx == 0 || gy == 0 || gz == 0) return;
  // A part ends only before a barrier: the next part's opens with it, after everything before.
  const int every = device_->submit_every_;
  if (every > 0 && part_dispatches_ >= every && pending_barrier_ && failed_.ok()) submit_part();
  barrier();
  const VulkanApi& vk = device_->api_;
  vk.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, device_->pipeline(shader, spec));
  vk.vkCmdPushConstants(cmd_, device_->layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                        static_cast<uint32_t>(push_bytes), push);
  vk.vkCmdDispatch(cmd_, gx, gy, gz);
  ++part_dispatches_;
  pending_barrier_ = true;
  mark(static_cast<int>(shader));
}

VkDeviceAddress Stream::scratch(size_t bytes) {
  GLM_CHECK(recording_);
  if (scratch_.empty() || scratch_.back().size() < bytes) {
    // Doubling: a step that grows it op by op allocates O(log) times (up to a buffer's largest).
    const size_t doubled = scratch_.empty() ? size_t{0} : 2 * scratch_.back().size();
    const size_t want =
        std::max(bytes, std::min<size_t>(doubled, device_->info().max_buffer_bytes));
    StatusOr<Buffer> b = device_->alloc(want, MemoryKind::kDevice);
    if (!b.ok()) return 0;
    scratch_.push_back(std::move(*b));
  }
  // Its user's first dispatch waits for every one before it (which may still read it), even
  // after concurrent_with_last().
  pending_barrier_ = true;
  return scratch_.back().address();
}

void Stream::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
                  size_t bytes) {
  GLM_CHECK(recording_);
  if (bytes == 0) return;
  barrier();
  VkBufferCopy region{src_offset, dst_offset, bytes};
  device_->api_.vkCmdCopyBuffer(cmd_, src.handle(), dst.handle(), 1, &region);
  pending_barrier_ = true;
  mark(kShaderCount);
}

Status Stream::submit_and_wait() {
  GLM_CHECK(recording_);
  const VulkanApi& vk = device_->api_;
  recording_ = false;
  // A final barrier makes the last writes visible to the host's reads of mapped memory.
  if (pending_barrier_) {
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk.vkCmdPipelineBarrier(cmd_,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    pending_barrier_ = false;
  }
  const auto submitted = std::chrono::steady_clock::now();
  // A step in parts waits on the drain's fence, which covers every part, not the last alone.
  const bool in_parts = submitted_ > 0;
  Status s = failed_;
  if (s.ok()) s = end_and_submit(in_parts ? VK_NULL_HANDLE : fence_);
  if (s.ok()) {
    if (const VkResult r = drain(/*fenced=*/!in_parts); r != VK_SUCCESS) {
      s = device_->unfinished("a step", r);
    }
  }
  if (!s.ok()) {
    // Parts submitted before the failure finish before their command buffers are reused.
    drain(/*fenced=*/false);
    failed_ = Status::Ok();
    return s;
  }
  const auto done = std::chrono::steady_clock::now();
  // Compiling the step's new shaders is not recording (a driver compiles at pipeline creation).
  const double compiling = device_->compile_ms_ - compile_ms_at_begin_;
  read_profile(std::chrono::duration<double, std::milli>(submitted - begun_).count() - compiling,
               std::chrono::duration<double, std::milli>(done - submitted).count());
  return Status::Ok();
}

}  // namespace glm::gpu
