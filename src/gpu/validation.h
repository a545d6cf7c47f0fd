// Khronos' validation layer under glmserve (GLMSERVE_VULKAN_VALIDATION=1): the process's
// instance is made with VK_LAYER_KHRONOS_validation, its core checks and its GPU-assisted checks
// (every shader load and store through a buffer device address is checked against the buffers
// that exist: an out-of-bounds access is reported and not made), and a messenger that logs each
// message the layer reports and counts its errors. For tests (ctest's `validated.*` entries: on
// lavapipe, whatever the real GPU would do with a stray access) and for a user's bug report.
// The layer is a Debian package (vulkan-validationlayers); asked for without it, no instance is
// made and the error says so.
//
// Thread-safety: the count is atomic; the rest runs under process_instance's lock.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "gpu/vulkan_api.h"

namespace glm::gpu {

// GLMSERVE_VULKAN_VALIDATION is set and not "0".
bool validation_requested();

// What the instance's create info takes to be validated; points into itself, so keep it where
// it is until vkCreateInstance returns.
struct ValidationSetup {
  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  VkValidationFeatureEnableEXT enables[1] = {VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_EXT};
  VkValidationFeaturesEXT features{};
  VkDebugUtilsMessengerCreateInfoEXT messenger{};  // also reports vkCreateInstance's own checks
  // Chains this setup into `ci` (layers, extensions, pNext). Errors: unavailable when the
  // loader has no validation layer or the layer no VK_EXT_debug_utils.
  Status apply(const VulkanApi& global, VkInstanceCreateInfo* ci);
};

// After vkCreateInstance with an applied setup: the messenger for the instance's life.
Status start_validation(const VulkanApi& api, VkInstance instance);

// The errors the layer has reported in this process so far.
uint64_t validation_errors();

}  // namespace glm::gpu
