// The drivers' statistics of the compiled shaders (pipeline_stats.h). What a real GPU compiler
// makes of every shader is tested through `glmserve devices --shaders` on RADV's null device
// (tests/devices_shaders_test.cc: the driver is picked when the process starts).
#include "gpu/pipeline_stats.h"

#include <gtest/gtest.h>

#include <memory>

namespace glm::gpu {
namespace {

TEST(PipelineStats, SpillStatisticsAreFoundByTheDriversNames) {
  for (const char* name :
       {"Spilled VGPRs", "Spilled SGPRs", "Scratch size", "Local Memory Size", "SPILL stores"}) {
    EXPECT_TRUE(counts_spills(name)) << name;
  }
  for (const char* name : {"VGPRs", "SGPRs", "Register Count", "LDS size", "Code size",
                           "Subgroups per SIMD", "Shared Memory Size"}) {
    EXPECT_FALSE(counts_spills(name)) << name;
  }
}

// A device opened to compile runs no stream: it opens, compiles, and closes without a submit.
// Where the driver gives statistics they name registers; where it does not (lavapipe), the
// error says so.
TEST(PipelineStats, ACompileOnlyDeviceCompilesAndReportsWhatItHas) {
  StatusOr<std::unique_ptr<Device>> d = Device::open(-1, false, DeviceUse::kCompile);
  ASSERT_TRUE(d.ok()) << d.status().message();
  Device& dev = **d;
  VkPipeline pipeline = VK_NULL_HANDLE;
  ASSERT_EQ(dev.compile(Shader::kAdd, 0, &pipeline), VK_SUCCESS);
  EXPECT_NE(pipeline, VK_NULL_HANDLE);
  dev.vk().vkDestroyPipeline(dev.handle(), pipeline, nullptr);
  StatusOr<std::vector<PipelineStatistic>> stats = pipeline_statistics(dev, Shader::kAdd);
  if (dev.info().shader_statistics) {
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    EXPECT_FALSE(stats->empty());
  } else {
    ASSERT_FALSE(stats.ok());
    EXPECT_EQ(stats.status().code(), ErrorCode::kUnsupported);
    EXPECT_NE(stats.status().message().find("gives no pipeline statistics"), std::string::npos)
        << stats.status().message();
  }
}

// The shaders of optional features are run only where the device has them; the rest always.
TEST(PipelineStats, RunsFollowsTheDevicesFeatures) {
  StatusOr<std::unique_ptr<Device>> d = Device::open(-1, false, DeviceUse::kCompile);
  ASSERT_TRUE(d.ok()) << d.status().message();
  const Device& dev = **d;
  const DeviceInfo& info = dev.info();
  EXPECT_TRUE(dev.runs(Shader::kMatvecQ4_0));
  EXPECT_TRUE(dev.runs(Shader::kAttentionF16));
  EXPECT_TRUE(dev.runs(Shader::kMatmulTiledQ4_K));
  EXPECT_EQ(dev.runs(Shader::kMatvecDotQ4_0), info.int_dot);
  EXPECT_EQ(dev.runs(Shader::kMatmulDotQ6_K), info.int_dot);
  EXPECT_EQ(dev.runs(Shader::kMatvecIdDotQ8_0), info.int_dot);
  EXPECT_EQ(dev.runs(Shader::kMatmulCoopF16), info.coop_matrix);
  EXPECT_EQ(dev.runs(Shader::kMatmulCoopIdQ4_0), info.coop_matrix);
  EXPECT_EQ(dev.runs(Shader::kMatmulCoopRefQ5_K), info.fp16_arithmetic);
  EXPECT_EQ(dev.runs(Shader::kMatmulCoopIdRefBF16), info.fp16_arithmetic);
}

// The decode matmuls run a pipeline for each count of rows a team (matmul.comp's ROWS_LOG2):
// 1, 2 or 4 for one token and the experts', 1 or 2 for a few; the rest their defaults.
TEST(PipelineStats, TheDecodeMatmulsAreSpecializedByTheirRows) {
  const std::vector<int> one = {0, 1, 2}, few = {0, 1};
  EXPECT_EQ(shader_specs(Shader::kMatvecQ4_0), one);
  EXPECT_EQ(shader_specs(Shader::kMatvecF32), one);
  EXPECT_EQ(shader_specs(Shader::kMatvecDotQ6_K), one);
  EXPECT_EQ(shader_specs(Shader::kMatvecIdBF16), one);
  EXPECT_EQ(shader_specs(Shader::kMatvecIdDotQ8_0), one);
  EXPECT_EQ(shader_specs(Shader::kMatmulQ4_K), few);
  EXPECT_EQ(shader_specs(Shader::kMatmulDotQ5_0), few);
  for (Shader s : {Shader::kMatmulTiledQ4_0, Shader::kMatmulCoopF16, Shader::kRmsNorm,
                   Shader::kAttentionF16, Shader::kQuantizeQ8, Shader::kMatmulReduce}) {
    EXPECT_TRUE(shader_specs(s).empty()) << spirv(s).name;
  }
}

// Mesa's RADV takes the rolled build (its compiler unrolls the loops itself, and spills the
// unrolled build's registers on RDNA3: tests/devices_shaders_test.cc); every other driver the
// unrolled one.
TEST(GpuShaderBuild, TheDriverPicksTheDefaultBuild) {
  DeviceInfo info;
  info.driver_id = VK_DRIVER_ID_MESA_RADV;
  EXPECT_EQ(default_shader_build(info), ShaderBuild::kRolled);
  for (VkDriverId id : {VK_DRIVER_ID_NVIDIA_PROPRIETARY, VK_DRIVER_ID_MESA_LLVMPIPE,
                        VK_DRIVER_ID_INTEL_OPEN_SOURCE_MESA, VK_DRIVER_ID_AMD_PROPRIETARY,
                        static_cast<VkDriverId>(0)}) {
    info.driver_id = id;
    EXPECT_EQ(default_shader_build(info), ShaderBuild::kUnrolled) << id;
  }
}

}  // namespace
}  // namespace glm::gpu
