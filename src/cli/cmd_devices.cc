// glmserve devices [--json]: the compute devices a model can run on (docs/gpu.md).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "gpu/device.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"

namespace glm::cli {
namespace {

constexpr char kHelp[] =
    "usage: glmserve devices [--json]\n"
    "\n"
    "Lists the compute devices, one a line: the CPU (the instruction set its kernels use), then\n"
    "each Vulkan device as --device vulkan:N names it: name, type, memory, Vulkan version and\n"
    "the features glmserve uses, or why it cannot run there. Without a Vulkan loader or device\n"
    "the CPU is the only one (and says why). --device auto takes the first discrete GPU.\n"
    "  --json  one JSON object a line instead\n";

}  // namespace

int cmd_devices(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  auto args = Args::parse(argc, argv, {}, {"json"});
  if (!args.ok()) return fail(args.status());
  const bool json = args->has("json");
  StatusOr<std::vector<gpu::DeviceInfo>> list = gpu::list_devices();
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
                          {"vulkan", d.api_version_string()},
                          {"features", d.features()},
                          {"usable", d.unusable.empty()}};
      if (!d.unusable.empty()) j["unusable"] = d.unusable;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s  %s (%s), %.1f GiB (%.1f GiB free), Vulkan %s, %s%s%s\n", name.c_str(),
                  d.name.c_str(), d.type.c_str(),
                  static_cast<double>(d.memory_bytes) / 1073741824.0,
                  static_cast<double>(d.budget_bytes) / 1073741824.0,
                  d.api_version_string().c_str(), d.features().c_str(),
                  d.unusable.empty() ? "" : "; cannot run glmserve: ", d.unusable.c_str());
    }
  }
  return 0;
}

}  // namespace glm::cli
