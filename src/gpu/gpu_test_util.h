// For the GPU module's tests (gpu_test.cc, moe_test.cc): the device they share (opened once a
// process; no device fails the test, never skips it), random activations, buffers up and down.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gpu/device.h"
#include "gpu/ops.h"
#include "gpu/validation_test_util.h"

namespace glm::gpu {

inline Device* device() {
  static std::unique_ptr<Device> dev = [] {
    StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
    if (!d.ok()) {
      ADD_FAILURE() << "no Vulkan device: " << d.status().message()
                    << " (scripts/install-deps.sh installs mesa-vulkan-drivers)";
      return std::unique_ptr<Device>();
    }
    return std::move(*d);
  }();
  return dev.get();
}

#define NEED_DEVICE()     \
  Device* dev = device(); \
  ASSERT_NE(dev, nullptr)

inline std::vector<float> random_floats(size_t n, uint32_t seed, float std = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, std);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline Buffer device_floats(Device* dev, const std::vector<float>& v) {
  StatusOr<Buffer> b = upload_floats(dev, v.data(), v.size());
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(*b) : Buffer();
}

inline std::vector<float> read_floats(Device* dev, const Buffer& b, size_t n) {
  std::vector<float> v(n);
  EXPECT_TRUE(dev->download(b, 0, n * sizeof(float), v.data()).ok());
  return v;
}

// The largest |got - want| / (1 + |want|).
inline double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double m = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(got[i]) - want[i]) / (1 + std::fabs(want[i])));
  }
  return m;
}

}  // namespace glm::gpu
