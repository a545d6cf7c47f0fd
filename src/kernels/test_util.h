// Helpers shared by the kernels' tests: deterministic random data and ISA selection.
#pragma once

#include <random>
#include <vector>

#include "core/check.h"
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

// Selects `isa` (set_isa) for its lifetime, then restores the ISA that was active before.
// isa must be one of runnable_isas().
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) : old_(active_isa()) { GLM_CHECK(set_isa(isa).ok()); }
  ~ScopedIsa() { GLM_CHECK(set_isa(old_).ok()); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa old_;
};

// Turns the AVX-VNNI kernels on or off (set_avxvnni) for its lifetime, then back to the default
// (on where the CPU has them). `on` needs cpu_has_avxvnni().
class ScopedAvxVnni {
 public:
  explicit ScopedAvxVnni(bool on) { GLM_CHECK(set_avxvnni(on).ok()); }
  ~ScopedAvxVnni() { GLM_CHECK(set_avxvnni(cpu_has_avxvnni()).ok()); }
  ScopedAvxVnni(const ScopedAvxVnni&) = delete;
  ScopedAvxVnni& operator=(const ScopedAvxVnni&) = delete;
};

}  // namespace glm::kernels::testing
