#include "gpu/vulkan_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace glm::gpu {

const VulkanApi* load_vulkan(std::string* why) {
  static VulkanApi api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* name = std::getenv("GLMSERVE_VULKAN_LIBRARY");
    if (name == nullptr || *name == '\0') name = "libvulkan.so.1";
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      error = e != nullptr ? e : std::string(name) + ": cannot be opened";
      return;
    }
    api.vkGetInstanceProcAddr =
        reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
    if (api.vkGetInstanceProcAddr == nullptr) {
      error = std::string(name) + " has no vkGetInstanceProcAddr";
      return;
    }
#define GLM_VK_LOAD(fn) \
  api.fn = reinterpret_cast<PFN_##fn>(api.vkGetInstanceProcAddr(nullptr, #fn));
    GLM_VK_GLOBAL_FNS(GLM_VK_LOAD)
#undef GLM_VK_LOAD
    if (api.vkCreateInstance == nullptr) {
      error = std::string(name) + " has no vkCreateInstance";
      api.vkGetInstanceProcAddr = nullptr;
    }
  });
  if (api.vkGetInstanceProcAddr == nullptr) {
    if (why != nullptr) *why = error;
    return nullptr;
  }
  return &api;
}

void load_instance_fns(VkInstance instance, VulkanApi* api) {
#define GLM_VK_LOAD(fn) \
  api->fn = reinterpret_cast<PFN_##fn>(api->vkGetInstanceProcAddr(instance, #fn));
  GLM_VK_INSTANCE_FNS(GLM_VK_LOAD)
#undef GLM_VK_LOAD
}

void load_device_fns(VkDevice device, VulkanApi* api) {
#define GLM_VK_LOAD(fn) api->fn = reinterpret_cast<PFN_##fn>(api->vkGetDeviceProcAddr(device, #fn));
  GLM_VK_DEVICE_FNS(GLM_VK_LOAD)
#undef GLM_VK_LOAD
}

const char* vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    default:
      return "VK_ERROR (other)";
  }
}

Status vk_error(const char* what, VkResult r) {
  const ErrorCode code = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
                             ? ErrorCode::kOutOfMemory
                             : ErrorCode::kUnavailable;
  return Status(code, std::string("vulkan: ") + what + " failed: " + vk_result_name(r));
}

}  // namespace glm::gpu
