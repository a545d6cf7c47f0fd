// The validation layer as the tests use it (validation.h): it must see what it is there for.
#include "gpu/validation.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "gpu/device.h"
#include "gpu/gpu_test_util.h"
#include "gpu/ops.h"

namespace glm::gpu {
namespace {

// y[i] += x[i] for i < n, on a fresh device, then exits: 0 when the layer's error count after
// the in-bounds run and after the out-of-bounds one are what they should be, else which one was
// not. Runs in a child process (the instance, validated or not, is made once a process).
[[noreturn]] void run_in_and_out_of_bounds() {
  StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
  if (!d.ok()) {
    std::fprintf(stderr, "open: %s\n", d.status().message().c_str());
    std::_Exit(2);
  }
  Device* dev = d->get();
  const std::vector<float> ones(64, 1.0f);
  StatusOr<Buffer> x = upload_floats(dev, ones.data(), 64);      // [64] f32: 256 bytes
  StatusOr<Buffer> y = upload_floats(dev, ones.data(), 64 + 4);  // [68]
  if (!x.ok() || !y.ok()) std::_Exit(2);
  auto add = [&](int n) {
    dev->stream().begin();
    scale_add(dev->stream(), x->address(), 1.0f, y->address(), n);
    if (!dev->stream().submit_and_wait().ok()) std::_Exit(2);
  };
  add(64);
  if (validation_errors() != 0) std::_Exit(3);
  add(65);  // reads x[64], 4 bytes past x's end (the layer reports it and skips the load)
  if (validation_errors() == 0) std::_Exit(4);
  std::_Exit(0);
}

// Under the layer (what ctest's validated.* entries run), a shader's read past its buffer is an
// error with the layer's own words, and an in-bounds dispatch is none.
TEST(GpuValidation, TheLayerReportsAnOutOfBoundsReadAndNotAnInBoundsOne) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child starts a process of its own
  const ScopedEnv validation("GLMSERVE_VULKAN_VALIDATION", "1");
  EXPECT_EXIT(run_in_and_out_of_bounds(), ::testing::ExitedWithCode(0),
              "vulkan validation: .*Device address .* out of bounds");
}

// Asked for where the loader has no such layer, the instance is refused with the reason, not
// made without the checks.
TEST(GpuValidation, AskedForWithoutTheLayerIsAnError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const ScopedEnv validation("GLMSERVE_VULKAN_VALIDATION", "1");
  // The loader finds explicit layers through this path only (an empty folder).
  const ScopedEnv layer_path("VK_LAYER_PATH", ::testing::TempDir().c_str());
  EXPECT_EXIT(
      {
        StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
        std::fprintf(stderr, "%s\n", d.ok() ? "opened" : d.status().message().c_str());
        std::_Exit(d.ok() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "has no VK_LAYER_KHRONOS_validation");
}

}  // namespace
}  // namespace glm::gpu
