// What a driver compiled a shader into (VK_KHR_pipeline_executable_properties): its registers,
// the values it spilled out of them, its scratch and shared memory, its code size, as the
// driver names them ("VGPRs", "Spilled VGPRs", "Scratch size" on Mesa's RADV; "Register Count"
// on NVIDIA's). `glmserve devices --shaders` prints them for every shader a device runs
// (docs/gpu.md, "What a driver makes of the shaders"); a test reads them from RADV's compiler
// (ACO) with no AMD GPU present (RADV_FORCE_FAMILY: Mesa's null device), so a shader whose
// thread arrays or sums leave the registers fails on every commit.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "gpu/device.h"

namespace glm::gpu {

struct PipelineStatistic {
  std::string name;  // the driver's: "Spilled VGPRs"
  double value = 0;  // a count, a size in bytes or a flag (0 or 1), as the driver gives it
  std::string text;  // the value as the driver gives it, exactly ("18446744073709551557")
};

// Ok where the device's driver gives statistics (DeviceInfo::shader_statistics); else
// unsupported, naming the device and the extension it lacks.
Status statistics_available(const Device& device);

// The driver's statistics of the pipeline it compiles `shader` into on `device` (the build
// and subgroup settings that Device::pipeline uses; a pipeline of its own, compiled again and
// destroyed), every executable's (a compute pipeline has one) in the driver's order. Errors:
// unsupported where the device gives no statistics (DeviceInfo::shader_statistics) or does not
// run the shader (Device::runs); unavailable naming the driver's answer.
// spec: the pipeline's specialization (Device::pipeline; shader_specs lists a shader's).
StatusOr<std::vector<PipelineStatistic>> pipeline_statistics(Device& device, Shader shader,
                                                             int spec = kShaderDefaults);

// Whether a statistic counts values kept outside the registers: spilled registers, scratch
// (private) or local memory. Such a value is each thread's own, in device memory.
bool counts_spills(const std::string& statistic);

}  // namespace glm::gpu
