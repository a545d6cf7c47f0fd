// The Vulkan entry points glmserve uses, loaded at run time from the system's loader
// (libvulkan.so.1) with dlopen: the binary links no Vulkan library, so it starts on machines
// without one (the CPU serves). One process-wide table, filled once.
// Thread-safety: load_vulkan() is safe to call from any thread (call_once); the table is
// immutable afterwards.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

#include "core/status.h"

namespace glm::gpu {

// X(name) for every function used: global, instance and device level. An extension's entry
// point is null where no driver offers it (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV).
#define GLM_VK_GLOBAL_FNS(X)            \
  X(vkCreateInstance)                   \
  X(vkEnumerateInstanceVersion)         \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceExtensionProperties)

#define GLM_VK_INSTANCE_FNS(X)                \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceMemoryProperties2)     \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)                      \
  X(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)

#define GLM_VK_DEVICE_FNS(X)              \
  X(vkDestroyDevice)                      \
  X(vkGetDeviceQueue)                     \
  X(vkDeviceWaitIdle)                     \
  X(vkCreateBuffer)                       \
  X(vkDestroyBuffer)                      \
  X(vkGetBufferMemoryRequirements)        \
  X(vkAllocateMemory)                     \
  X(vkFreeMemory)                         \
  X(vkBindBufferMemory)                   \
  X(vkMapMemory)                          \
  X(vkUnmapMemory)                        \
  X(vkGetBufferDeviceAddress)             \
  X(vkCreateShaderModule)                 \
  X(vkDestroyShaderModule)                \
  X(vkCreatePipelineLayout)               \
  X(vkDestroyPipelineLayout)              \
  X(vkCreateComputePipelines)             \
  X(vkDestroyPipeline)                    \
  X(vkCreateCommandPool)                  \
  X(vkDestroyCommandPool)                 \
  X(vkAllocateCommandBuffers)             \
  X(vkResetCommandBuffer)                 \
  X(vkBeginCommandBuffer)                 \
  X(vkEndCommandBuffer)                   \
  X(vkCmdBindPipeline)                    \
  X(vkCmdPushConstants)                   \
  X(vkCmdDispatch)                        \
  X(vkCmdPipelineBarrier)                 \
  X(vkCmdCopyBuffer)                      \
  X(vkCmdFillBuffer)                      \
  X(vkCreateFence)                        \
  X(vkDestroyFence)                       \
  X(vkResetFences)                        \
  X(vkWaitForFences)                      \
  X(vkQueueSubmit)                        \
  X(vkCreateQueryPool)                    \
  X(vkDestroyQueryPool)                   \
  X(vkCmdResetQueryPool)                  \
  X(vkCmdWriteTimestamp)                  \
  X(vkGetQueryPoolResults)                \
  X(vkGetPipelineExecutablePropertiesKHR) \
  X(vkGetPipelineExecutableStatisticsKHR)

struct VulkanApi {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define GLM_VK_DECLARE(name) PFN_##name name = nullptr;
  GLM_VK_GLOBAL_FNS(GLM_VK_DECLARE)
  GLM_VK_INSTANCE_FNS(GLM_VK_DECLARE)
  GLM_VK_DEVICE_FNS(GLM_VK_DECLARE)
#undef GLM_VK_DECLARE
};

// The loader's global entry points, or null with *why set ("libvulkan.so.1: cannot open shared
// object file") when the system has no Vulkan loader. GLMSERVE_VULKAN_LIBRARY names another
// library file (tests of the no-loader path set it to a file that does not exist).
const VulkanApi* load_vulkan(std::string* why);

// Fills the instance-level entries of *api for `instance` (once per instance).
void load_instance_fns(VkInstance instance, VulkanApi* api);
// Fills the device-level entries of *api for `device`.
void load_device_fns(VkDevice device, VulkanApi* api);

// "VK_ERROR_DEVICE_LOST" for a VkResult.
const char* vk_result_name(VkResult r);
// The error of a failed call `what`: out_of_memory for the two out-of-memory results, else
// unavailable; the message names the call and the result.
Status vk_error(const char* what, VkResult r);

}  // namespace glm::gpu
