// A step recorded in parts (Device::submit_every): the queue runs the first parts while the host
// records the rest, and the step's results, failures and profile are those of a whole one.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu/device.h"
#include "gpu/gpu_test_util.h"
#include "gpu/ops.h"

namespace glm::gpu {
namespace {

std::unique_ptr<Device> open_device() {
  StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? std::move(*d) : nullptr;
}

// 20 dependent adds into y (each reads what the one before wrote), each with a side-by-side add
// into another buffer (concurrent_with_last: no barrier between the two, so never split apart):
// y = 1 + 20 * 0.5 a step, whatever the parts.
TEST(GpuStream, AStepInPartsComputesWhatAWholeOneDoes) {
  std::unique_ptr<Device> dev = open_device();
  ASSERT_NE(dev, nullptr);
  const int n = 1000;
  Buffer x = device_floats(dev.get(), std::vector<float>(n, 0.5f));
  Buffer other = device_floats(dev.get(), std::vector<float>(n, 0.0f));
  // Dispatches a part; the parts of 40 dispatches that end only between pairs.
  for (auto [every, want_parts] : {std::pair{0, 1}, {1, 20}, {3, 10}, {48, 1}}) {
    dev->set_submit_every(every);
    Buffer y = device_floats(dev.get(), std::vector<float>(n, 1.0f));
    Stream& s = dev->stream();
    for (int step = 1; step <= 2; ++step) {  // the parts' buffers are reused step after step
      s.begin();
      for (int i = 0; i < 20; ++i) {
        add(s, x.address(), y.address(), n);
        s.concurrent_with_last();
        add(s, x.address(), other.address(), n);
      }
      ASSERT_TRUE(s.submit_and_wait().ok()) << every;
      EXPECT_EQ(s.parts(), want_parts) << every;
      const std::vector<float> got = read_floats(dev.get(), y, n);
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], 1.0f + 0.5f * 20 * step) << every << " at " << i;
      }
    }
  }
}

// A part that fails to go to the queue fails its step with the device's error once the parts
// before it have finished (their command buffers are not reused while pending), and the
// device is lost from then on, as for a whole step.
TEST(GpuStream, AFailedPartFailsTheStepAndLosesTheDevice) {
  std::unique_ptr<Device> dev = open_device();
  ASSERT_NE(dev, nullptr);
  dev->set_submit_every(2);
  const int n = 64;
  Buffer x = device_floats(dev.get(), std::vector<float>(n, 1.0f));
  Buffer y = device_floats(dev.get(), std::vector<float>(n, 0.0f));
  dev->inject_failure_after(3);  // the step's third part
  Stream& s = dev->stream();
  s.begin();
  for (int i = 0; i < 10; ++i) add(s, x.address(), y.address(), n);
  Status st = s.submit_and_wait();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kUnavailable);
  EXPECT_NE(st.message().find("VK_ERROR_DEVICE_LOST"), std::string::npos) << st.message();
  EXPECT_TRUE(dev->lost());
  s.begin();
  add(s, x.address(), y.address(), n);
  EXPECT_FALSE(s.submit_and_wait().ok());
}

}  // namespace
}  // namespace glm::gpu
