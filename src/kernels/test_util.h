// Helpers shared by the kernels' tests: deterministic random data and ISA selection.
#pragma once

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/isa.h"

namespace glm::kernels::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// The variants this CPU can run, lowest first.
inline std::vector<Isa> runnable_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (static_cast<int>(i) <= static_cast<int>(cpu_isa())) out.push_back(i);
  }
  return out;
}

// Forces GLMSERVE_ISA for its lifetime.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) {
    const char* old = std::getenv("GLMSERVE_ISA");
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    setenv("GLMSERVE_ISA", isa_name(isa), 1);
  }
  ~ScopedIsa() {
    if (had_old_) {
      setenv("GLMSERVE_ISA", old_.c_str(), 1);
    } else {
      unsetenv("GLMSERVE_ISA");
    }
  }

 private:
  bool had_old_ = false;
  std::string old_;
};

}  // namespace glm::kernels::testing
