#include "gpu/device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/bytes.h"
#include "core/check.h"
#include "core/log.h"
#include "gpu/instance.h"
#include "gpu/validation.h"

namespace glm::gpu {
namespace {

std::atomic<uint64_t> g_pipelines_created{0};

}  // namespace

// ---- Buffer ----------------------------------------------------------------------------------

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = o.device_;
    buffer_ = o.buffer_;
    memory_ = o.memory_;
    address_ = o.address_;
    size_ = o.size_;
    mapped_ = o.mapped_;
    o.device_ = nullptr;
    o.buffer_ = VK_NULL_HANDLE;
    o.memory_ = VK_NULL_HANDLE;
    o.address_ = 0;
    o.size_ = 0;
    o.mapped_ = nullptr;
  }
  return *this;
}

void Buffer::reset() {
  if (device_ != nullptr) {
    const VulkanApi& vk = device_->api_;
    if (buffer_ != VK_NULL_HANDLE) vk.vkDestroyBuffer(device_->device_, buffer_, nullptr);
    if (memory_ != VK_NULL_HANDLE) vk.vkFreeMemory(device_->device_, memory_, nullptr);
  }
  device_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  address_ = 0;
  size_ = 0;
  mapped_ = nullptr;
}

// ---- Device ----------------------------------------------------------------------------------

StatusOr<std::unique_ptr<Device>> Device::open(int index, bool discrete_only, DeviceUse use) {
  std::unique_ptr<Device> dev(new Device());
  StatusOr<VkInstance> instance = process_instance(&dev->api_);
  if (!instance.ok()) return instance.status();
  dev->instance_ = *instance;
  const VulkanApi& vk = dev->api_;
  uint32_t n = 0;
  vk.vkEnumeratePhysicalDevices(dev->instance_, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  if (n > 0) vk.vkEnumeratePhysicalDevices(dev->instance_, &n, pds.data());
  if (n == 0) return Status(ErrorCode::kUnavailable, "the Vulkan loader reports no device");
  std::vector<DeviceInfo> infos;
  for (uint32_t i = 0; i < n; ++i) infos.push_back(describe(vk, pds[i], static_cast<int>(i)));
  int pick = -1;
  if (index >= 0) {
    if (index >= static_cast<int>(n)) {
      return Status(ErrorCode::kUnavailable, "vulkan:" + std::to_string(index) +
                                                 " does not exist (" + std::to_string(n) +
                                                 " device(s); `glmserve devices` lists them)");
    }
    if (!infos[index].unusable.empty()) {
      return unsupported("vulkan:" + std::to_string(index) + " (" + infos[index].name +
                         ") cannot run glmserve: " + infos[index].unusable);
    }
    pick = index;
  } else if (discrete_only) {
    for (uint32_t i = 0; i < n && pick < 0; ++i) {
      if (infos[i].unusable.empty() && infos[i].type == "discrete") pick = static_cast<int>(i);
    }
    if (pick < 0) return Status(ErrorCode::kUnavailable, "no discrete GPU");
  } else {
    for (const char* want : {"discrete", "integrated", "virtual", ""}) {
      for (uint32_t i = 0; i < n && pick < 0; ++i) {
        if (infos[i].unusable.empty() && (*want == '\0' || infos[i].type == want)) pick = i;
      }
    }
    if (pick < 0) {
      return unsupported("no Vulkan device can run glmserve (" + infos[0].name + ": " +
                         infos[0].unusable + ")");
    }
  }
  GLM_RETURN_IF_ERROR(dev->init(pds[pick], infos[pick], use));
  return dev;
}

ShaderBuild default_shader_build(const DeviceInfo& info) {
  return info.driver_id == VK_DRIVER_ID_MESA_RADV ? ShaderBuild::kRolled : ShaderBuild::kUnrolled;
}

Status Device::init(VkPhysicalDevice physical, const DeviceInfo& info, DeviceUse use) {
  physical_ = physical;
  info_ = info;
  set_upload_chunk(kUploadChunk);  // no larger than a buffer may be
  if (const char* t = std::getenv("GLMSERVE_VULKAN_TIMEOUT_MS"); t != nullptr && *t != '\0') {
    timeout_ms_ = std::max<uint64_t>(1, std::strtoull(t, nullptr, 10));
  }
  if (const char* t = std::getenv("GLMSERVE_VULKAN_SUBMIT"); t != nullptr && *t != '\0') {
    char* end = nullptr;
    const long n = std::strtol(t, &end, 10);
    if (*end != '\0' || n < 0 || n > (1 << 20)) {
      GLM_LOG_WARN(
          "GLMSERVE_VULKAN_SUBMIT=%s ignored: dispatches a part (0: a step whole) expected", t);
    } else {
      submit_every_ = static_cast<int>(n);
    }
  }
  shader_build_ = default_shader_build(info_);
  if (const char* v = std::getenv("GLMSERVE_VULKAN_ROLLED"); v != nullptr && *v != '\0') {
    shader_build_ = std::strcmp(v, "0") == 0 ? ShaderBuild::kUnrolled : ShaderBuild::kRolled;
  }
  if (validation_requested()) shader_build_ = ShaderBuild::kRolled;
  const VulkanApi& vk = api_;
  uint32_t nq = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> families(nq);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nq, families.data());
  bool found = false;
  // A compute queue; a compute-only family first (it is not shared with graphics work).
  for (int pass = 0; pass < 2 && !found; ++pass) {
    for (uint32_t i = 0; i < nq && !found; ++i) {
      const VkQueueFlags fl = families[i].queueFlags;
      if (!(fl & VK_QUEUE_COMPUTE_BIT)) continue;
      if (pass == 0 && (fl & VK_QUEUE_GRAPHICS_BIT)) continue;
      queue_family_ = i;
      found = true;
    }
  }
  if (!found) return unsupported("vulkan: " + info_.name + " has no compute queue");
  const uint32_t ts_bits = families[queue_family_].timestampValidBits;
  timestamp_mask_ = ts_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << ts_bits) - 1;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{};
  qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f12.bufferDeviceAddress = VK_TRUE;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  f11.storageBuffer16BitAccess = VK_TRUE;
  f11.pNext = &f12;
  VkPhysicalDeviceShaderIntegerDotProductFeatures fdot{};
  fdot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  fdot.shaderIntegerDotProduct = VK_TRUE;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV fcoop{};
  fcoop.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  fcoop.cooperativeMatrix = VK_TRUE;
  std::vector<const char*> extensions;
  // The optional features' structs, chained after f12 as the device offers them.
  void** next = &f12.pNext;
  if (info_.int_dot) {
    *next = &fdot;
    next = &fdot.pNext;
    extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  }
  // fp16 arithmetic where offered: matmul_coop.comp's products (its scalar twin's too).
  f12.shaderFloat16 = info_.fp16_arithmetic ? VK_TRUE : VK_FALSE;
  if (info_.coop_matrix) {
    f12.vulkanMemoryModel = VK_TRUE;  // GL_KHR_memory_scope_semantics, which the NV shaders need
    *next = &fcoop;
    next = &fcoop.pNext;
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  }
  VkPhysicalDeviceSubgroupSizeControlFeatures fsize{};
  fsize.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  fsize.computeFullSubgroups = VK_TRUE;
  if (info_.full_subgroups) {  // every pipeline asks for full subgroups (compile)
    *next = &fsize;
    next = &fsize.pNext;
    extensions.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fstats{};
  fstats.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  fstats.pipelineExecutableInfo = VK_TRUE;
  if (info_.shader_statistics) {  // read only by pipelines compiled to be read (pipeline_stats.h)
    *next = &fstats;
    next = &fstats.pNext;
    extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  }
  VkDeviceCreateInfo dci{};
  dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  dci.pNext = &f11;
  dci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  dci.ppEnabledExtensionNames = extensions.data();
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  VkResult r = vk.vkCreateDevice(physical_, &dci, nullptr, &device_);
  if (r != VK_SUCCESS) return vk_error("vkCreateDevice", r);
  load_device_fns(device_, &api_);
  vk.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  vk.vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  VkPushConstantRange range{};
  range.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  range.size = 128;
  VkPipelineLayoutCreateInfo lci{};
  lci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  lci.pushConstantRangeCount = 1;
  lci.pPushConstantRanges = &range;
  r = vk.vkCreatePipelineLayout(device_, &lci, nullptr, &layout_);
  if (r != VK_SUCCESS) return vk_error("vkCreatePipelineLayout", r);
  pipelines_.assign(static_cast<size_t>(kShaderCount) * (kMaxSpec + 2), VK_NULL_HANDLE);
  if (use == DeviceUse::kCompile) return Status::Ok();

  stream_.device_ = this;
  VkCommandPoolCreateInfo pci{};
  pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = queue_family_;
  r = vk.vkCreateCommandPool(device_, &pci, nullptr, &stream_.pool_);
  if (r != VK_SUCCESS) return vk_error("vkCreateCommandPool", r);
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = stream_.pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  stream_.cmds_.resize(1);
  r = vk.vkAllocateCommandBuffers(device_, &ai, stream_.cmds_.data());
  if (r != VK_SUCCESS) return vk_error("vkAllocateCommandBuffers", r);
  VkFenceCreateInfo fci{};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  r = vk.vkCreateFence(device_, &fci, nullptr, &stream_.fence_);
  if (r != VK_SUCCESS) return vk_error("vkCreateFence", r);
  if (env_switch("GLMSERVE_VULKAN_PROFILE") && !enable_profile()) {
    GLM_LOG_WARN("vulkan: %s writes no timestamps: GLMSERVE_VULKAN_PROFILE ignored",
                 info_.name.c_str());
  }
  GLM_LOG_INFO("vulkan: using %s (%s, Vulkan %s, %s)%s", info_.name.c_str(), info_.type.c_str(),
               info_.api_version_string().c_str(), info_.features().c_str(),
               shader_build_ == ShaderBuild::kRolled ? ", rolled shaders" : "");
  return Status::Ok();
}

Device::~Device() {
  if (device_ != VK_NULL_HANDLE) {
    const VulkanApi& vk = api_;
    // Without the stream's fence nothing was submitted (a failed open, DeviceUse::kCompile).
    if (stream_.fence_ != VK_NULL_HANDLE) vk.vkDeviceWaitIdle(device_);
    for (Staging& s : staging_) {
      s.buf.reset();
      if (s.fence != VK_NULL_HANDLE) vk.vkDestroyFence(device_, s.fence, nullptr);
    }
    stream_.scratch_.clear();
    if (query_pool_ != VK_NULL_HANDLE) {
      if (profiled_steps_ > 0) GLM_LOG_INFO("%s", profile_report().c_str());
      vk.vkDestroyQueryPool(device_, query_pool_, nullptr);
    }
    for (VkPipeline p : pipelines_) {
      if (p != VK_NULL_HANDLE) vk.vkDestroyPipeline(device_, p, nullptr);
    }
    if (stream_.fence_ != VK_NULL_HANDLE) vk.vkDestroyFence(device_, stream_.fence_, nullptr);
    if (stream_.pool_ != VK_NULL_HANDLE) vk.vkDestroyCommandPool(device_, stream_.pool_, nullptr);
    if (layout_ != VK_NULL_HANDLE) vk.vkDestroyPipelineLayout(device_, layout_, nullptr);
    vk.vkDestroyDevice(device_, nullptr);
  }
}

int Device::find_memory_type(uint32_t type_bits, MemoryKind kind) const {
  VkMemoryPropertyFlags want = 0, prefer = 0, avoid = 0;
  switch (kind) {
    case MemoryKind::kDevice:
      want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
      avoid = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;  // keep the BAR window for staging
      break;
    case MemoryKind::kUpload:
      want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
      avoid = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
      break;
    case MemoryKind::kReadback:
      want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
      prefer = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
      avoid = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
      break;
  }
  int best = -1, best_score = -1;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    const int score = ((f & prefer) == prefer ? 2 : 0) + ((f & avoid) == 0 ? 1 : 0);
    if (score > best_score) {
      best = static_cast<int>(i);
      best_score = score;
    }
  }
  return best;
}

StatusOr<Buffer> Device::alloc(size_t bytes, MemoryKind kind) {
  const VulkanApi& vk = api_;
  bytes = std::max<size_t>(16, (bytes + 15) / 16 * 16);
  if (bytes > info_.max_buffer_bytes) {
    return unsupported("vulkan: a " + format_mib(bytes) +
                       " buffer is larger than a buffer can be on " + info_.name + " (" +
                       format_mib(info_.max_buffer_bytes) + ")");
  }
  Buffer b;
  b.device_ = this;
  b.size_ = bytes;
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vk.vkCreateBuffer(device_, &bci, nullptr, &b.buffer_);
  if (r != VK_SUCCESS) return vk_error("vkCreateBuffer", r);
  VkMemoryRequirements req{};
  vk.vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  const int type = find_memory_type(req.memoryTypeBits, kind);
  if (type < 0) return Status(ErrorCode::kUnavailable, "vulkan: no suitable memory type");
  VkMemoryAllocateFlagsInfo flags{};
  flags.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo mai{};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.pNext = &flags;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = static_cast<uint32_t>(type);
  r = vk.vkAllocateMemory(device_, &mai, nullptr, &b.memory_);
  if (r != VK_SUCCESS) {
    return Status(ErrorCode::kOutOfMemory, "vulkan: cannot allocate " +
                                               std::to_string(bytes >> 20) + " MiB on " +
                                               info_.name + " (" + vk_result_name(r) + ")");
  }
  r = vk.vkBindBufferMemory(device_, b.buffer_, b.memory_, 0);
  if (r != VK_SUCCESS) return vk_error("vkBindBufferMemory", r);
  VkBufferDeviceAddressInfo dai{};
  dai.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
  dai.buffer = b.buffer_;
  b.address_ = vk.vkGetBufferDeviceAddress(device_, &dai);
  if (kind != MemoryKind::kDevice) {
    r = vk.vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.mapped_);
    if (r != VK_SUCCESS) return vk_error("vkMapMemory", r);
  }
  return b;
}

Status Device::download(const Buffer& src, size_t offset, size_t bytes, void* data) {
  GLM_CHECK(offset + bytes <= src.size());
  StatusOr<Buffer> rb = alloc(bytes, MemoryKind::kReadback);
  if (!rb.ok()) return rb.status();
  stream_.begin();
  stream_.copy(src, offset, *rb, 0, bytes);
  GLM_RETURN_IF_ERROR(stream_.submit_and_wait());
  std::memcpy(data, rb->mapped(), bytes);
  return Status::Ok();
}

VkResult Device::compile(Shader shader, VkPipelineCreateFlags flags, VkPipeline* out, int spec) {
  GLM_CHECK(shader != Shader::kCount && spec >= kShaderDefaults && spec <= kMaxSpec);
  *out = VK_NULL_HANDLE;
  const VulkanApi& vk = api_;
  const Spirv& code = spirv(shader, shader_build_);
  VkShaderModuleCreateInfo mci{};
  mci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mci.codeSize = code.n_words * 4;
  mci.pCode = code.words;
  VkShaderModule module = VK_NULL_HANDLE;
  VkResult r = vk.vkCreateShaderModule(device_, &mci, nullptr, &module);
  if (r != VK_SUCCESS) return r;
  VkComputePipelineCreateInfo cci{};
  cci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  cci.flags = flags;
  cci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cci.stage.module = module;
  cci.stage.pName = "main";
  const uint32_t spec_value = static_cast<uint32_t>(spec);
  const VkSpecializationMapEntry entry{0, 0, sizeof(uint32_t)};
  const VkSpecializationInfo spec_info{1, &entry, sizeof(uint32_t), &spec_value};
  if (spec != kShaderDefaults) cci.stage.pSpecializationInfo = &spec_info;
  if (info_.full_subgroups) {
    cci.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
  }
  cci.layout = layout_;
  r = vk.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cci, nullptr, out);
  vk.vkDestroyShaderModule(device_, module, nullptr);
  if (r != VK_SUCCESS) *out = VK_NULL_HANDLE;
  return r;
}

bool Device::runs(Shader shader) const {
  switch (matmul_role(shader)) {
    case MatmulRole::kOneDot:
    case MatmulRole::kFewDot:
    case MatmulRole::kExpertsDot:
      return info_.int_dot;
    case MatmulRole::kCoop:
    case MatmulRole::kExpertsCoop:
      return info_.coop_matrix;
    case MatmulRole::kCoopRef:
    case MatmulRole::kExpertsCoopRef:
      return info_.fp16_arithmetic;
    default:
      return true;
  }
}

VkResult Device::create_pipeline(Shader shader, int spec) {
  GLM_CHECK(shader != Shader::kCount && spec >= kShaderDefaults && spec <= kMaxSpec);
  VkPipeline& p = pipelines_[static_cast<size_t>(shader) * (kMaxSpec + 2) + (spec + 1)];
  if (p != VK_NULL_HANDLE) return VK_SUCCESS;
  const auto started = std::chrono::steady_clock::now();
  const VkResult r = compile(shader, 0, &p, spec);
  compile_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (r != VK_SUCCESS) return r;
  g_pipelines_created.fetch_add(1, std::memory_order_relaxed);
  return VK_SUCCESS;
}

VkPipeline Device::pipeline(Shader shader, int spec) {
  const VkResult r = create_pipeline(shader, spec);
  GLM_CHECK(r == VK_SUCCESS && "the driver rejected an embedded shader");
  return pipelines_[static_cast<size_t>(shader) * (kMaxSpec + 2) + (spec + 1)];
}

Status Device::try_pipeline(Shader shader) {
  const VkResult r = create_pipeline(shader, kShaderDefaults);
  if (r == VK_SUCCESS) return Status::Ok();
  return unsupported(std::string("vulkan: the driver rejected shader ") + spirv(shader).name +
                     ": " + vk_result_name(r));
}

uint64_t Device::pipelines_created() { return g_pipelines_created.load(std::memory_order_relaxed); }

Status Device::check_submit() {
  if (lost_) {
    return Status(ErrorCode::kUnavailable,
                  "the GPU (" + info_.name + ") was lost; restart the engine to serve again");
  }
  if (fail_after_ > 0 && --fail_after_ == 0) {
    lost_ = true;
    return Status(ErrorCode::kUnavailable, "the GPU (" + info_.name +
                                               ") failed a submission: VK_ERROR_DEVICE_LOST " +
                                               "(injected by a test)");
  }
  return Status::Ok();
}

void Device::begin_commands(VkCommandBuffer cmd) {
  api_.vkResetCommandBuffer(cmd, 0);
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  api_.vkBeginCommandBuffer(cmd, &bi);
}

Status Device::end_and_submit(VkCommandBuffer cmd, VkFence fence) {
  VkResult r = api_.vkEndCommandBuffer(cmd);
  if (r != VK_SUCCESS) return vk_error("vkEndCommandBuffer", r);
  GLM_RETURN_IF_ERROR(check_submit());
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  r = api_.vkQueueSubmit(queue_, 1, &si, fence);
  if (r != VK_SUCCESS) {
    if (r == VK_ERROR_DEVICE_LOST) lost_ = true;
    return vk_error("vkQueueSubmit", r);
  }
  return Status::Ok();
}

VkResult Device::wait_fence(VkFence fence) {
  const VkResult r = api_.vkWaitForFences(device_, 1, &fence, VK_TRUE, timeout_ms_ * 1000000);
  api_.vkResetFences(device_, 1, &fence);
  if (r != VK_SUCCESS) lost_ = true;
  return r;
}

Status Device::unfinished(const std::string& what, VkResult r) const {
  return Status(ErrorCode::kUnavailable,
                "the GPU (" + info_.name + ") did not finish " + what + ": " + vk_result_name(r) +
                    (r == VK_TIMEOUT ? " after " + std::to_string(timeout_ms_) + " ms" : ""));
}

}  // namespace glm::gpu
