#include "kernels/isa.h"

#include <cstdlib>
#include <cstring>

namespace glm::kernels {

Isa cpu_isa() {
#if defined(__x86_64__)
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c") &&
        __builtin_cpu_supports("fma")) {
      return Isa::kAvx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c")) {
      return Isa::kAvx2;
    }
    return Isa::kScalar;
  }();
  return isa;
#else
  return Isa::kScalar;
#endif
}

bool cpu_has_avx512bf16() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_isa() == Isa::kAvx512 && __builtin_cpu_supports("avx512bf16");
  }();
  return has;
#else
  return false;
#endif
}

Isa active_isa() {
  const Isa best = cpu_isa();
  const char* env = std::getenv("GLMSERVE_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa want = best;
  if (std::strcmp(env, "scalar") == 0) want = Isa::kScalar;
  if (std::strcmp(env, "avx2") == 0) want = Isa::kAvx2;
  if (std::strcmp(env, "avx512") == 0) want = Isa::kAvx512;
  return static_cast<int>(want) < static_cast<int>(best) ? want : best;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kScalar:
      break;
  }
  return "scalar";
}

}  // namespace glm::kernels
