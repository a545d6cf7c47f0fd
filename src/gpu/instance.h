// The process's Vulkan instance and what glmserve reads of each physical device (DeviceInfo):
// shared by list_devices (instance.cc) and Device::open (device.cc). Internal to the gpu module.
#pragma once

#include "core/status.h"
#include "gpu/device.h"
#include "gpu/vulkan_api.h"

namespace glm::gpu {

// The process's one instance, made on first use and kept for the process's life (with its
// instance-level entry points in *api): list_devices and every Device share it. NVIDIA's driver
// fails vkCreateInstance (VK_ERROR_INCOMPATIBLE_DRIVER) after a few dozen create/destroy cycles
// in one process (seen on an H200, driver 580), and others have seen it corrupt later shaders
// after fewer; a process that opens a device per model (tests, several models) would hit it.
// A failure is not kept: the next call tries again.
// Thread-safe.
StatusOr<VkInstance> process_instance(VulkanApi* api);

// What glmserve reads of a physical device, and why it cannot run there (if so).
DeviceInfo describe(const VulkanApi& vk, VkPhysicalDevice pd, int index);

// Whether the environment variable `name` is set and neither empty nor "0": the on/off
// GLMSERVE_VULKAN_* settings (VALIDATION, PROFILE).
bool env_switch(const char* name);

}  // namespace glm::gpu
