// For the tests that run shaders (gpu_test, model_test's GPU tests): under
// GLMSERVE_VULKAN_VALIDATION (ctest's `validated.*` entries, src/gpu/CMakeLists.txt), a test
// process fails when the validation layer reported an error, whichever test made it. Each ctest
// entry is one test's process, so the failure names the test. Included by the GPU test helpers;
// one registration a process (an inline variable).
#pragma once

#include <gtest/gtest.h>

#include "gpu/validation.h"

namespace glm::gpu::testing {

class ValidationErrorsFailTheRun : public ::testing::Environment {
 public:
  void TearDown() override {
    EXPECT_EQ(validation_errors(), 0u)
        << "the Vulkan validation layer reported errors (logged above as \"vulkan validation:\")";
  }
};

inline ::testing::Environment* const kValidationErrorsFailTheRun =
    ::testing::AddGlobalTestEnvironment(new ValidationErrorsFailTheRun);

}  // namespace glm::gpu::testing
