// `glmserve devices --shaders` (docs/gpu.md, "What a driver makes of the shaders") on a GPU
// compiler that is not lavapipe's: Mesa's RADV compiles every shader for AMD RDNA2 and RDNA3
// GPUs (RADV_FORCE_FAMILY=navi21, gfx1100: its null device, no AMD GPU needed) with ACO, and
// says how many registers each takes and whether any value spills out of them into memory.
#include <glob.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "gpu/shaders.h"

namespace {

using glm::testing::run_shell;

// The manifest of Mesa's Vulkan driver `name` (mesa-vulkan-drivers: "radeon" for RADV, "lvp"
// for lavapipe), or "" where it is missing.
std::string icd(const std::string& name) {
  glob_t g{};
  std::string path;
  const std::string pattern = "/usr/share/vulkan/icd.d/" + name + "_icd.*.json";
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) path = g.gl_pathv[0];
  ::globfree(&g);
  return path;
}

// The environment (shell words) that gives RADV's null device of AMD GPU `family` alone.
std::string radv_env(const std::string& family) {
  return "RADV_FORCE_FAMILY=" + family + " VK_ICD_FILENAMES=" + icd("radeon");
}

struct ShaderLines {
  int exit_code = -1;
  std::string out;
  std::map<std::string, nlohmann::json> shaders;  // by name, and " rows=N" where specialized
};

// `glmserve devices --shaders --json` with `env` (shell words), its JSON lines by shader.
ShaderLines shader_lines(const std::string& env) {
  ShaderLines s;
  const glm::testing::CliRun r =
      run_shell(env + " " + GLMSERVE_BIN + " devices --shaders --json 2>&1");
  s.exit_code = r.exit_code;
  s.out = r.out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line);
    std::string key = j.at("shader").get<std::string>();
    if (j.contains("rows")) key += " rows=" + std::to_string(j.at("rows").get<int>());
    s.shaders[key] = j;
  }
  return s;
}

// Every shader of the build compiles on AMD GPU `family` (only the tensor-core ones, which
// RADV's cooperative matrices do not cover in Debian 12's Mesa, are not run), and none spills a
// register or takes scratch memory: a spill is a thread's value in device memory, read back at
// memory's speed.
void expect_no_spills(const std::string& family, const std::string& build_env, const char* build) {
  ASSERT_FALSE(icd("radeon").empty()) << "no RADV manifest (scripts/install-deps.sh installs "
                                         "mesa-vulkan-drivers)";
  ShaderLines s = shader_lines(radv_env(family) + " " + build_env);
  ASSERT_EQ(s.exit_code, 0) << s.out;
  int pipelines = 0, compiled = 0;
  for (int i = 0; i < glm::gpu::kShaderCount; ++i) {
    const auto shader = static_cast<glm::gpu::Shader>(i);
    const std::string name = glm::gpu::spirv(shader).name;
    const bool tensor_cores =
        name.find("_coop_") != std::string::npos && name.find("_ref_") == std::string::npos;
    std::vector<std::string> keys;
    for (int spec : glm::gpu::shader_specs(shader)) {
      keys.push_back(name + " rows=" + std::to_string(1 << spec));
    }
    if (keys.empty() || tensor_cores) keys = {name};
    for (const std::string& key : keys) {
      ++pipelines;
      ASSERT_EQ(s.shaders.count(key), 1u) << key << "\n" << s.out;
      const nlohmann::json& j = s.shaders[key];
      EXPECT_NE(j.at("device").get<std::string>().find("vulkan:"), std::string::npos);
      EXPECT_EQ(j.at("build"), build) << key;
      if (tensor_cores) {
        EXPECT_FALSE(j.at("runs").get<bool>()) << key;
        continue;
      }
      ASSERT_TRUE(j.at("runs").get<bool>()) << key;
      const nlohmann::json& st = j.at("statistics");
      for (const char* stat : {"VGPRs", "Spilled VGPRs", "Spilled SGPRs", "Scratch size"}) {
        ASSERT_TRUE(st.contains(stat)) << key << ": " << st.dump();
      }
      const std::string where = key + " (" + family + ", " + build + ")";
      EXPECT_GT(st.at("VGPRs").get<double>(), 0) << where;
      EXPECT_EQ(st.at("Spilled VGPRs").get<double>(), 0) << where;
      EXPECT_EQ(st.at("Spilled SGPRs").get<double>(), 0) << where;
      EXPECT_EQ(st.at("Scratch size").get<double>(), 0) << where;
      EXPECT_FALSE(j.at("spills").get<bool>()) << where;
      ++compiled;
    }
  }
  EXPECT_EQ(static_cast<int>(s.shaders.size()), pipelines) << s.out;
  // All but the 20 tensor-core variants; the 38 one-token and experts' decode matmuls 3 times
  // (1, 2, 4 rows a team), the 19 few-token ones twice (1, 2).
  EXPECT_EQ(compiled, glm::gpu::kShaderCount - 20 + 38 * 2 + 19);
}

// What RADV runs by default (gpu::default_shader_build: the rolled build), on RDNA2 and RDNA3.
TEST(DevicesShaders, RadvsDefaultBuildSpillsNothingOnRdna2AndRdna3) {
  expect_no_spills("navi21", "", "rolled");
  expect_no_spills("gfx1100", "", "rolled");
}

// The unrolled build (the default on the other drivers) through a GPU's compiler: on RDNA2.
// (Debian 12's Mesa compiles RDNA3 code in at most 128 registers a thread, where the unrolled
// decode matmuls spill: docs/gpu.md.)
TEST(DevicesShaders, TheUnrolledBuildSpillsNothingOnRdna2) {
  expect_no_spills("navi21", "GLMSERVE_VULKAN_ROLLED=0", "unrolled");
}

// The text form: a line a shader with the driver's names, then the spilling ones.
TEST(DevicesShaders, TheTextFormNamesTheDeviceAndEachShader) {
  ASSERT_FALSE(icd("radeon").empty());
  const glm::testing::CliRun r = run_shell(radv_env("navi21") + " " + GLMSERVE_BIN +
                                           " devices --shaders --device vulkan:0 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("vulkan:0  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NAVI21"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", rolled shaders, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  matvec_q4_0 rows=1  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  matvec_q4_0 rows=4  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  matmul_q4_0 rows=2  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  rms_norm  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Spilled VGPRs 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  matmul_coop_f16                 not run here"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  spilling: none"), std::string::npos) << r.out;
}

// A driver that gives no statistics (lavapipe), a device that does not exist, --device without
// --shaders: one line each, and a failing exit.
TEST(DevicesShaders, WhatCannotBeShownIsAnErrorOfOneLine) {
  const std::string lvp = icd("lvp");
  ASSERT_FALSE(lvp.empty());
  glm::testing::CliRun r =
      run_shell("VK_ICD_FILENAMES=" + lvp + " " + GLMSERVE_BIN + " devices --shaders 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("gives no pipeline statistics"), std::string::npos) << r.out;
  r = run_shell("VK_ICD_FILENAMES=" + lvp + " " + GLMSERVE_BIN +
                " devices --shaders --device vulkan:7 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("--device vulkan:7"), std::string::npos) << r.out;
  r = run_shell(std::string(GLMSERVE_BIN) + " devices --device vulkan:0 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("--device goes with --shaders"), std::string::npos) << r.out;
}

}  // namespace
