// glmserve devices [--json] [--shaders [--device vulkan:N]]: the compute devices a model can
// run on, and what each driver compiles the shaders into (docs/gpu.md).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "gpu/device.h"
#include "gpu/pipeline_stats.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "model/model.h"

namespace glm::cli {
namespace {

constexpr char kHelp[] =
    "usage: glmserve devices [--json] [--shaders [--device vulkan:N]]\n"
    "\n"
    "Lists the compute devices, one a line: the CPU (the instruction set its kernels use), then\n"
    "each Vulkan device as --device vulkan:N names it: name, type, memory, Vulkan version and\n"
    "the features glmserve uses, or why it cannot run there. Without a Vulkan loader or device\n"
    "the CPU is the only one (and says why). --device auto takes the first discrete GPU.\n"
    "  --json     one JSON object a line instead\n"
    "  --shaders  for each usable Vulkan device (or the one --device names), what its driver\n"
    "             compiles each shader glmserve runs there into, as the driver says it\n"
    "             (VK_KHR_pipeline_executable_properties: registers, spills, scratch and\n"
    "             shared memory, code size), the decode matmuls once for each count of rows a\n"
    "             team (rows=N); then the shaders that spill. Fails where the driver gives no\n"
    "             statistics.\n";

// --shaders on device `index`: a line (or JSON object) per shader. False where the device
// cannot be opened or gives no statistics (said on stderr).
bool print_shader_statistics(int index, bool json) {
  const std::string dev_name = "vulkan:" + std::to_string(index);
  StatusOr<std::unique_ptr<gpu::Device>> device =
      gpu::Device::open(index, /*discrete_only=*/false, gpu::DeviceUse::kCompile);
  if (!device.ok()) {
    std::fprintf(stderr, "%s: %s\n", dev_name.c_str(), device.status().message().c_str());
    return false;
  }
  gpu::Device& d = **device;
  if (Status st = gpu::statistics_available(d); !st.ok()) {
    std::fprintf(stderr, "%s: %s\n", dev_name.c_str(), st.message().c_str());
    return false;
  }
  const char* build = d.shader_build() == gpu::ShaderBuild::kRolled ? "rolled" : "unrolled";
  if (!json) {
    std::printf("%s  %s, %s shaders, %s\n", dev_name.c_str(), d.info().name.c_str(), build,
                d.info().features().c_str());
  }
  std::vector<std::string> spilling;
  bool ok = true;
  for (int i = 0; i < gpu::kShaderCount; ++i) {
    const auto shader = static_cast<gpu::Shader>(i);
    const char* name = gpu::spirv(shader).name;
    nlohmann::json j = {{"device", dev_name}, {"shader", name}, {"build", build}};
    if (!d.runs(shader)) {
      j["runs"] = false;
      if (json) {
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("  %-31s not run here (a feature it needs is missing)\n", name);
      }
      continue;
    }
    // A pipeline a specialization (the decode matmuls' rows a team), else the shader's own.
    std::vector<int> specs = gpu::shader_specs(shader);
    if (specs.empty()) specs.push_back(gpu::kShaderDefaults);
    for (int spec : specs) {
      std::string label = name;
      if (spec != gpu::kShaderDefaults) {
        j["rows"] = 1 << spec;
        label += " rows=" + std::to_string(1 << spec);
      }
      StatusOr<std::vector<gpu::PipelineStatistic>> stats =
          gpu::pipeline_statistics(d, shader, spec);
      if (!stats.ok()) {
        std::fprintf(stderr, "%s: %s: %s\n", dev_name.c_str(), label.c_str(),
                     stats.status().message().c_str());
        ok = false;
        continue;
      }
      bool spills = false;
      std::string line;
      nlohmann::json values = nlohmann::json::object();
      for (const gpu::PipelineStatistic& s : *stats) {
        values[s.name] = s.value;
        line += (line.empty() ? "" : ", ") + s.name + " " + s.text;
        spills = spills || (gpu::counts_spills(s.name) && s.value != 0);
      }
      if (spills) spilling.push_back(label);
      j["runs"] = true;
      j["statistics"] = values;
      j["spills"] = spills;
      if (json) {
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("  %-31s %s\n", label.c_str(), line.c_str());
      }
    }
  }
  if (!json) {
    std::string list;
    for (const std::string& s : spilling) list += ", " + s;
    std::printf("  spilling: %s\n", spilling.empty() ? "none" : list.c_str() + 2);
  }
  return ok;
}

}  // namespace

int cmd_devices(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  auto args = Args::parse(argc, argv, {"device"}, {"json", "shaders"});
  if (!args.ok()) return fail(args.status());
  const bool json = args->has("json");
  StatusOr<std::vector<gpu::DeviceInfo>> list = gpu::list_devices();
  if (args->has("shaders")) {
    if (!list.ok()) return fail(list.status());
    std::vector<int> indexes;
    if (args->has("device")) {
      const std::string want = args->get("device");
      const int n = model::validate_device(want).ok() ? model::device_index(want) : -1;
      if (n < 0 || n >= static_cast<int>(list->size())) {
        return fail(invalid_argument("--device " + want + ": vulkan:N of `glmserve devices` (" +
                                     std::to_string(list->size()) + " Vulkan devices) expected"));
      }
      indexes.push_back(n);
    } else {
      for (const gpu::DeviceInfo& d : *list) {
        if (d.unusable.empty()) indexes.push_back(d.index);
      }
      if (indexes.empty()) return fail(Status(ErrorCode::kUnavailable, "no usable Vulkan device"));
    }
    bool ok = true;
    for (int i : indexes) ok = print_shader_statistics(i, json) && ok;
    return ok ? 0 : 1;
  }
  if (args->has("device")) return fail(invalid_argument("--device goes with --shaders"));
  const std::string vulkan_note = list.ok()
                                      ? (list->empty() ? "the Vulkan loader reports no device" : "")
                                      : list.status().message();
  if (json) {
    nlohmann::json cpu = {{"device", "cpu"},
                          {"type", "cpu"},
                          {"isa", kernels::matmul_isa()},
                          {"cores", kernels::physical_cores()}};
    if (!vulkan_note.empty()) cpu["vulkan"] = vulkan_note;
    std::printf("%s\n", cpu.dump().c_str());
  } else {
    std::printf("cpu  %d cores, kernels %s%s%s\n", kernels::physical_cores(), kernels::matmul_isa(),
                vulkan_note.empty() ? "" : "; vulkan: ", vulkan_note.c_str());
  }
  if (!list.ok()) return 0;
  for (const gpu::DeviceInfo& d : *list) {
    const std::string name = "vulkan:" + std::to_string(d.index);
    if (json) {
      nlohmann::json j = {{"device", name},
                          {"name", d.name},
                          {"type", d.type},
                          {"memory_bytes", d.memory_bytes},
                          {"budget_bytes", d.budget_bytes},
                          {"max_buffer_bytes", d.max_buffer_bytes},
                          {"vulkan", d.api_version_string()},
                          {"features", d.features()},
                          {"usable", d.unusable.empty()}};
      if (!d.unusable.empty()) j["unusable"] = d.unusable;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf(
          "%s  %s (%s), %.1f GiB (%.1f GiB free, buffers up to %.1f GiB), Vulkan %s, %s%s%s\n",
          name.c_str(), d.name.c_str(), d.type.c_str(),
          static_cast<double>(d.memory_bytes) / 1073741824.0,
          static_cast<double>(d.budget_bytes) / 1073741824.0,
          static_cast<double>(d.max_buffer_bytes) / 1073741824.0, d.api_version_string().c_str(),
          d.features().c_str(),
          d.unusable.empty() ? "" : "; cannot run glmserve: ", d.unusable.c_str());
    }
  }
  return 0;
}

}  // namespace glm::cli
