#include "gpu/instance.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/validation.h"

namespace glm::gpu {
namespace {

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

// A device's extensions, enumerated once (none where the driver fails to list them).
class Extensions {
 public:
  Extensions(const VulkanApi& vk, VkPhysicalDevice pd) {
    uint32_t n = 0;
    if (vk.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr) != VK_SUCCESS) return;
    all_.resize(n);
    if (vk.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, all_.data()) != VK_SUCCESS) n = 0;
    all_.resize(n);
  }
  bool has(const char* name) const {
    return std::any_of(all_.begin(), all_.end(), [name](const VkExtensionProperties& e) {
      return std::strcmp(e.extensionName, name) == 0;
    });
  }

 private:
  std::vector<VkExtensionProperties> all_;
};

// Whether `pd` offers what matmul_coop.comp needs (beside the Vulkan memory model, which its
// caller reads): VK_NV_cooperative_matrix in compute shaders, fp16 arithmetic, subgroups of 32
// (its warps), and 16 x 16 x 16 products of fp16 tiles into f32 ones at subgroup scope among
// the driver's shapes.
bool has_coop_shape(const VulkanApi& vk, VkPhysicalDevice pd, const Extensions& exts, bool fp16,
                    uint32_t subgroup_size) {
  if (!fp16 || subgroup_size != 32 ||
      vk.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV == nullptr ||
      !exts.has(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
    return false;
  }
  VkPhysicalDeviceCooperativeMatrixFeaturesNV feat{};
  feat.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  VkPhysicalDeviceFeatures2 f{};
  f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f.pNext = &feat;
  vk.vkGetPhysicalDeviceFeatures2(pd, &f);
  VkPhysicalDeviceCooperativeMatrixPropertiesNV props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  VkPhysicalDeviceProperties2 p2{};
  p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  p2.pNext = &props;
  vk.vkGetPhysicalDeviceProperties2(pd, &p2);
  if (!feat.cooperativeMatrix ||
      (props.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) == 0) {
    return false;
  }
  uint32_t n = 0;
  if (vk.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, nullptr) != VK_SUCCESS) {
    return false;
  }
  std::vector<VkCooperativeMatrixPropertiesNV> shapes(n);
  for (VkCooperativeMatrixPropertiesNV& c : shapes) {
    c.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  }
  if (vk.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, shapes.data()) != VK_SUCCESS) {
    return false;
  }
  return std::any_of(shapes.begin(), shapes.end(), [](const VkCooperativeMatrixPropertiesNV& c) {
    return c.MSize == 16 && c.NSize == 16 && c.KSize == 16 &&
           c.AType == VK_COMPONENT_TYPE_FLOAT16_NV && c.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
           c.CType == VK_COMPONENT_TYPE_FLOAT32_NV && c.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
           c.scope == VK_SCOPE_SUBGROUP_NV;
  });
}

// *limit lowered to `to` (0: the driver did not say).
void lower_limit(uint64_t* limit, uint64_t to) {
  if (to > 0) *limit = std::min(*limit, to);
}

}  // namespace

StatusOr<VkInstance> process_instance(VulkanApi* api) {
  static std::mutex mu;
  static VulkanApi with_instance;
  static VkInstance instance = VK_NULL_HANDLE;
  std::lock_guard<std::mutex> lock(mu);
  if (instance != VK_NULL_HANDLE) {
    *api = with_instance;
    return instance;
  }
  std::string why;
  const VulkanApi* global = load_vulkan(&why);
  if (global == nullptr) {
    return Status(ErrorCode::kUnavailable, "no Vulkan loader (" + why + ")");
  }
  VulkanApi fns = *global;
  uint32_t version = VK_API_VERSION_1_0;
  if (fns.vkEnumerateInstanceVersion != nullptr) fns.vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_2) {
    return Status(ErrorCode::kUnavailable, "the Vulkan loader is older than 1.2");
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "glmserve";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  ValidationSetup validation;
  const bool validate = validation_requested();
  if (validate) GLM_RETURN_IF_ERROR(validation.apply(fns, &ci));
  VkInstance made = VK_NULL_HANDLE;
  const VkResult r = fns.vkCreateInstance(&ci, nullptr, &made);
  if (r != VK_SUCCESS) return vk_error("vkCreateInstance", r);
  load_instance_fns(made, &fns);
  if (validate) {
    if (Status s = start_validation(fns, made); !s.ok()) {
      auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(
          fns.vkGetInstanceProcAddr(made, "vkDestroyInstance"));
      if (destroy != nullptr) destroy(made, nullptr);
      return s;
    }
  }
  with_instance = fns;
  instance = made;
  *api = fns;
  return instance;
}

DeviceInfo describe(const VulkanApi& vk, VkPhysicalDevice pd, int index) {
  DeviceInfo info;
  info.index = index;
  const Extensions exts(vk, pd);
  const bool has_dot = exts.has(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  // The extension even on a 1.3 device: the instance asks for 1.2, so 1.3's core is not ours.
  const bool has_size_control = exts.has(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  VkPhysicalDeviceShaderIntegerDotProductProperties dot_props{};
  dot_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES;
  VkPhysicalDeviceSubgroupProperties sub{};
  sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  if (has_dot) sub.pNext = &dot_props;
  VkPhysicalDeviceSubgroupSizeControlProperties size_props{};
  size_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
  if (has_size_control) {
    size_props.pNext = sub.pNext;
    sub.pNext = &size_props;
  }
  VkPhysicalDeviceMaintenance3Properties m3{};  // Vulkan 1.1's: maxMemoryAllocationSize
  m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  m3.pNext = sub.pNext;
  sub.pNext = &m3;
  VkPhysicalDeviceMaintenance4Properties m4{};  // maxBufferSize
  m4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES;
  if (exts.has(VK_KHR_MAINTENANCE_4_EXTENSION_NAME)) {
    m4.pNext = sub.pNext;
    sub.pNext = &m4;
  }
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &sub;
  vk.vkGetPhysicalDeviceProperties2(pd, &props);
  lower_limit(&info.max_buffer_bytes, m3.maxMemoryAllocationSize);
  lower_limit(&info.max_buffer_bytes, m4.maxBufferSize);
  info.name = props.properties.deviceName;
  info.type = type_name(props.properties.deviceType);
  info.api_version = props.properties.apiVersion;
  info.subgroup_size = sub.subgroupSize;
  if (info.api_version >= VK_API_VERSION_1_2) {  // (VkPhysicalDeviceDriverProperties is 1.2's)
    VkPhysicalDeviceDriverProperties driver{};
    driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &driver;
    vk.vkGetPhysicalDeviceProperties2(pd, &p2);
    info.driver_id = driver.driverID;
  }

  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
  budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
  VkPhysicalDeviceMemoryProperties2 mem2{};
  mem2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
  const bool has_budget = exts.has(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (has_budget) mem2.pNext = &budget;
  vk.vkGetPhysicalDeviceMemoryProperties2(pd, &mem2);
  const VkPhysicalDeviceMemoryProperties& mem = mem2.memoryProperties;
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
    if ((mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) == 0 ||
        mem.memoryHeaps[h].size <= info.memory_bytes) {
      continue;
    }
    info.memory_bytes = mem.memoryHeaps[h].size;
    info.budget_bytes = info.memory_bytes;
    if (has_budget && budget.heapBudget[h] > 0) {
      const uint64_t used = std::min(budget.heapUsage[h], budget.heapBudget[h]);
      info.budget_bytes = std::min(info.memory_bytes, budget.heapBudget[h] - used);
      info.budget_from_driver = true;
    }
  }

  // A cap on the memory glmserve plans with (GLMSERVE_VULKAN_MEMORY_MB: tests, shared GPUs).
  if (const char* cap = std::getenv("GLMSERVE_VULKAN_MEMORY_MB"); cap != nullptr && *cap != '\0') {
    const uint64_t bytes = std::strtoull(cap, nullptr, 10) << 20;
    info.memory_bytes = std::min<uint64_t>(info.memory_bytes, bytes);
    info.budget_bytes = std::min<uint64_t>(info.budget_bytes, bytes);
  }
  // A cap on one buffer (GLMSERVE_VULKAN_MAX_BUFFER_MB, fractions too: tests, a driver that
  // allocates less than it says).
  if (const char* cap = std::getenv("GLMSERVE_VULKAN_MAX_BUFFER_MB");
      cap != nullptr && *cap != '\0') {
    const double mib = std::strtod(cap, nullptr);
    if (mib > 0) lower_limit(&info.max_buffer_bytes, static_cast<uint64_t>(mib * (1 << 20)));
  }
  if (info.api_version < VK_API_VERSION_1_2) {
    info.unusable = "Vulkan " + info.api_version_string() + " (1.2 is needed)";
    return info;
  }
  VkPhysicalDeviceShaderIntegerDotProductFeatures fdot{};
  fdot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  VkPhysicalDeviceSubgroupSizeControlFeatures fsize{};
  fsize.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  const bool has_stats = exts.has(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fstats{};
  fstats.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  f11.pNext = &f12;
  if (has_dot) f12.pNext = &fdot;
  if (has_size_control) {
    fsize.pNext = f12.pNext;
    f12.pNext = &fsize;
  }
  if (has_stats) {
    fstats.pNext = f12.pNext;
    f12.pNext = &fstats;
  }
  VkPhysicalDeviceFeatures2 f{};
  f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f.pNext = &f11;
  vk.vkGetPhysicalDeviceFeatures2(pd, &f);
  info.fp16_arithmetic = f12.shaderFloat16;
  info.storage8 = f12.storageBuffer8BitAccess;
  // (The 8-bit shaders quantize f32 rows in quads of threads: subgroup quad operations.)
  info.int_dot = has_dot && fdot.shaderIntegerDotProduct &&
                 (sub.supportedOperations & VK_SUBGROUP_FEATURE_QUAD_BIT) != 0 &&
                 sub.subgroupSize >= 4;
  info.int_dot_fast =
      info.int_dot && dot_props.integerDotProduct4x8BitPackedMixedSignednessAccelerated;
  info.full_subgroups = has_size_control && fsize.computeFullSubgroups == VK_TRUE &&
                        size_props.maxSubgroupSize > 0 && 64 % size_props.maxSubgroupSize == 0;
  info.shader_statistics = has_stats && fstats.pipelineExecutableInfo == VK_TRUE;
  info.coop_matrix = f12.vulkanMemoryModel == VK_TRUE &&
                     has_coop_shape(vk, pd, exts, f12.shaderFloat16 == VK_TRUE, sub.subgroupSize);
  if (!f12.bufferDeviceAddress) {
    info.unusable = "no bufferDeviceAddress";
  } else if (!f11.storageBuffer16BitAccess) {
    info.unusable = "no storageBuffer16BitAccess";
  } else if ((sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) == 0 ||
             (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) == 0) {
    info.unusable = "no subgroup arithmetic in compute shaders";  // the decode matmul's sums
  }
  return info;
}

std::string DeviceInfo::features() const {
  std::string s = fp16_arithmetic ? "fp16" : "no-fp16";
  s += storage8 ? " int8-storage" : "";
  s += int_dot ? (int_dot_fast ? " int8-dot" : " int8-dot(slow)") : "";
  s += coop_matrix ? " coopmat" : "";
  s += " subgroup=" + std::to_string(subgroup_size) + (full_subgroups ? "(full)" : "");
  return s;
}

std::string DeviceInfo::api_version_string() const {
  return std::to_string(VK_API_VERSION_MAJOR(api_version)) + "." +
         std::to_string(VK_API_VERSION_MINOR(api_version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(api_version));
}

StatusOr<std::vector<DeviceInfo>> list_devices() {
  VulkanApi api;
  StatusOr<VkInstance> instance = process_instance(&api);
  if (!instance.ok()) return instance.status();
  uint32_t n = 0;
  api.vkEnumeratePhysicalDevices(*instance, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  if (n > 0) api.vkEnumeratePhysicalDevices(*instance, &n, pds.data());
  std::vector<DeviceInfo> out;
  for (uint32_t i = 0; i < n; ++i) out.push_back(describe(api, pds[i], static_cast<int>(i)));
  return out;
}

bool env_switch(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace glm::gpu
