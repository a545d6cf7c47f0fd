#include "gpu/validation.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "core/log.h"
#include "gpu/instance.h"

namespace glm::gpu {
namespace {

constexpr const char* kLayer = "VK_LAYER_KHRONOS_validation";

std::atomic<uint64_t> g_errors{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT /*types*/,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data,
                                          void* /*user*/) {
  const char* text = data != nullptr && data->pMessage != nullptr ? data->pMessage : "";
  if ((severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) != 0) {
    g_errors.fetch_add(1);
    GLM_LOG_ERROR("vulkan validation: %s", text);
  } else if ((severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) != 0) {
    GLM_LOG_WARN("vulkan validation: %s", text);
  }
  return VK_FALSE;  // the call goes on (GPU-assisted checks have already skipped a bad access)
}

// What the messenger reports: the layer's warnings and errors, general and validation ones.
VkDebugUtilsMessengerCreateInfoEXT messenger_info() {
  VkDebugUtilsMessengerCreateInfoEXT ci{};
  ci.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  ci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  ci.messageType =
      VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
  ci.pfnUserCallback = on_message;
  return ci;
}

template <typename Props, typename Name>
bool listed(const std::vector<Props>& all, const char* want, Name name) {
  return std::any_of(all.begin(), all.end(),
                     [&](const Props& p) { return std::strcmp(name(p), want) == 0; });
}

}  // namespace

bool validation_requested() { return env_switch("GLMSERVE_VULKAN_VALIDATION"); }

Status ValidationSetup::apply(const VulkanApi& global, VkInstanceCreateInfo* ci) {
  uint32_t n = 0;
  global.vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layer_props(n);
  if (n > 0) global.vkEnumerateInstanceLayerProperties(&n, layer_props.data());
  if (!listed(layer_props, kLayer, [](const VkLayerProperties& p) { return p.layerName; })) {
    return Status(ErrorCode::kUnavailable,
                  std::string("GLMSERVE_VULKAN_VALIDATION is set but the loader has no ") + kLayer +
                      " (Debian: vulkan-validationlayers)");
  }
  n = 0;
  global.vkEnumerateInstanceExtensionProperties(kLayer, &n, nullptr);
  std::vector<VkExtensionProperties> ext_props(n);
  if (n > 0) global.vkEnumerateInstanceExtensionProperties(kLayer, &n, ext_props.data());
  if (!listed(ext_props, VK_EXT_DEBUG_UTILS_EXTENSION_NAME,
              [](const VkExtensionProperties& p) { return p.extensionName; })) {
    return Status(ErrorCode::kUnavailable, std::string(kLayer) + " has no VK_EXT_debug_utils");
  }
  layers = {kLayer};
  extensions = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  messenger = messenger_info();
  messenger.pNext = ci->pNext;
  features.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  features.pNext = &messenger;
  ci->pNext = &features;
  ci->enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci->ppEnabledLayerNames = layers.data();
  ci->enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci->ppEnabledExtensionNames = extensions.data();
  return Status::Ok();
}

Status start_validation(const VulkanApi& api, VkInstance instance) {
  auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      api.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
  if (create == nullptr) {
    return Status(ErrorCode::kUnavailable, "vulkan: no vkCreateDebugUtilsMessengerEXT");
  }
  const VkDebugUtilsMessengerCreateInfoEXT ci = messenger_info();
  // Kept for the process's life, as the instance is (instance.cc).
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  const VkResult r = create(instance, &ci, nullptr, &messenger);
  if (r != VK_SUCCESS) {
    return Status(
        ErrorCode::kUnavailable,
        std::string("vulkan: vkCreateDebugUtilsMessengerEXT failed: ") + vk_result_name(r));
  }
  GLM_LOG_INFO("vulkan: validation on (%s, GPU-assisted checks)", kLayer);
  return Status::Ok();
}

uint64_t validation_errors() { return g_errors.load(); }

}  // namespace glm::gpu
