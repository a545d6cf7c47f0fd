#include "gpu/pipeline_stats.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace glm::gpu {

namespace {

PipelineStatistic statistic(const VkPipelineExecutableStatisticKHR& s) {
  PipelineStatistic out;
  out.name = s.name;
  char buf[32];
  switch (s.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
      out.value = s.value.b32 ? 1.0 : 0.0;
      out.text = s.value.b32 ? "true" : "false";
      return out;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
      out.value = static_cast<double>(s.value.i64);
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(s.value.i64));
      break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
      out.value = static_cast<double>(s.value.u64);
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(s.value.u64));
      break;
    default:
      out.value = s.value.f64;
      std::snprintf(buf, sizeof buf, "%g", s.value.f64);
  }
  out.text = buf;
  return out;
}

Status driver_error(const char* what, VkResult r) {
  return Status(ErrorCode::kUnavailable,
                std::string("vulkan: ") + what + " answered " + vk_result_name(r));
}

}  // namespace

Status statistics_available(const Device& device) {
  const VulkanApi& vk = device.vk();
  if (device.info().shader_statistics && vk.vkGetPipelineExecutablePropertiesKHR != nullptr &&
      vk.vkGetPipelineExecutableStatisticsKHR != nullptr) {
    return Status::Ok();
  }
  return Status(
      ErrorCode::kUnsupported,
      device.info().name + " gives no pipeline statistics (VK_KHR_pipeline_executable_properties)");
}

StatusOr<std::vector<PipelineStatistic>> pipeline_statistics(Device& device, Shader shader,
                                                             int spec) {
  GLM_RETURN_IF_ERROR(statistics_available(device));
  if (!device.runs(shader)) {
    return Status(ErrorCode::kUnsupported,
                  "vulkan: " + device.info().name + " does not run " + spirv(shader).name);
  }
  const VulkanApi& vk = device.vk();
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkResult r =
      device.compile(shader, VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR, &pipeline, spec);
  if (r != VK_SUCCESS) return driver_error("vkCreateComputePipelines", r);
  std::vector<PipelineStatistic> out;
  VkPipelineInfoKHR pinfo{};
  pinfo.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR;
  pinfo.pipeline = pipeline;
  uint32_t n_exec = 0;
  r = vk.vkGetPipelineExecutablePropertiesKHR(device.handle(), &pinfo, &n_exec, nullptr);
  Status status =
      r == VK_SUCCESS ? Status::Ok() : driver_error("vkGetPipelineExecutablePropertiesKHR", r);
  for (uint32_t e = 0; e < n_exec && status.ok(); ++e) {
    VkPipelineExecutableInfoKHR einfo{};
    einfo.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR;
    einfo.pipeline = pipeline;
    einfo.executableIndex = e;
    uint32_t n = 0;
    r = vk.vkGetPipelineExecutableStatisticsKHR(device.handle(), &einfo, &n, nullptr);
    std::vector<VkPipelineExecutableStatisticKHR> stats(n);
    for (VkPipelineExecutableStatisticKHR& s : stats) {
      s.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    }
    if (r == VK_SUCCESS) {
      r = vk.vkGetPipelineExecutableStatisticsKHR(device.handle(), &einfo, &n, stats.data());
    }
    if (r != VK_SUCCESS) {
      status = driver_error("vkGetPipelineExecutableStatisticsKHR", r);
      break;
    }
    for (uint32_t i = 0; i < n; ++i) out.push_back(statistic(stats[i]));
  }
  vk.vkDestroyPipeline(device.handle(), pipeline, nullptr);
  if (!status.ok()) return status;
  return out;
}

bool counts_spills(const std::string& statistic) {
  std::string s = statistic;
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s.find("spill") != std::string::npos || s.find("scratch") != std::string::npos ||
         s.find("local memory") != std::string::npos;
}

}  // namespace glm::gpu
