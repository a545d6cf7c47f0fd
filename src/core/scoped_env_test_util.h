// An environment variable set for a scope: what tests use to turn on a hook or a cap
// (GLMSERVE_VULKAN_MAX_BUFFER_MB, GLMSERVE_ISA, ...) for one check. Test-only (GoogleTest).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace glm::testing {

// Sets the environment variable `name` to `value` for its lifetime; its old value (or its
// absence) comes back after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    EXPECT_EQ(setenv(name, value, 1), 0);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace glm::testing
