// Instruction-set dispatch for the kernels: which variant (scalar, AVX2, AVX-512) runs.
// The best variant the CPU supports is chosen at run time; the environment variable
// GLMSERVE_ISA=scalar|avx2|avx512 forces a lower one (tests cover every variant on one machine;
// asking for one the CPU lacks gives the best one it has). Thread-safe; cheap (one getenv).
#pragma once

namespace glm::kernels {

enum class Isa {
  kScalar = 0,
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI (+ BF16 when present)
};

// Best ISA of this CPU.
Isa cpu_isa();
// The ISA to use now: cpu_isa(), lowered by GLMSERVE_ISA if set.
Isa active_isa();
// "scalar", "avx2", "avx512".
const char* isa_name(Isa isa);
// True if the CPU has AVX512_BF16 (vdpbf16ps).
bool cpu_has_avx512bf16();

}  // namespace glm::kernels
