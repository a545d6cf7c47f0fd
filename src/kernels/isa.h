// Instruction-set dispatch for the kernels: which variant (scalar, AVX2, AVX-512) runs.
// The ISA is chosen once per process: the best the CPU supports, or the one GLMSERVE_ISA names
// (scalar|avx2|avx512), read once at start by init_isa_from_env(). An unknown name, or one the
// CPU lacks, is an error that names what the CPU has (never silently replaced). Tests select a
// variant with set_isa() (validated the same way) between kernel calls, so one machine covers
// every variant it can run.
// Thread-safety: active_isa() is one relaxed atomic load, safe from any thread; set_isa() and
// init_isa_from_env() must not run while a kernel is running (call them at start or in tests).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace glm::kernels {

enum class Isa {
  kScalar = 0,
  kAvx2 = 1,    // AVX2 + FMA + F16C (+ 256-bit AVX-VNNI when present: cpu_has_avxvnni())
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI (+ BF16 when present)
};

// Best ISA of this CPU.
Isa cpu_isa();
// The ISA the kernels use. Chosen on the first call if nothing chose it before: from
// GLMSERVE_ISA as init_isa_from_env() does, except that a bad value there (a program that never
// called init_isa_from_env()) ends the process with that error's message on stderr.
Isa active_isa();
// Sets the process ISA; invalid_argument if the CPU lacks it (the message names what it has).
Status set_isa(Isa isa);
// Sets the process ISA from GLMSERVE_ISA (unset or empty: cpu_isa()) and the AVX-VNNI kernels
// from GLMSERVE_AVXVNNI (unset, empty or 1: on where the CPU has it; 0: off). invalid_argument
// for an unknown name or an ISA the CPU lacks, or a GLMSERVE_AVXVNNI other than 0 or 1. Programs
// call it once at start; later calls read the variable again.
Status init_isa_from_env();
// "scalar", "avx2", "avx512": the one name of each ISA (GLMSERVE_ISA values, bench reports).
const char* isa_name(Isa isa);
// Inverse of isa_name; invalid_argument for anything else (the message lists the names).
StatusOr<Isa> parse_isa(std::string_view name);
// What the CPU has, for messages: "avx512 (with avx512bf16), avx2, scalar".
std::string cpu_isa_description();
// True if the CPU has AVX512_BF16 (vdpbf16ps).
bool cpu_has_avx512bf16();
// True if the CPU has AVX-VNNI (VEX-encoded 256-bit vpdpbusd: Alder Lake, Zen 5 and later).
bool cpu_has_avxvnni();
// Whether the avx2 ISA's packed Q4_0 / Q5_0 / Q8_0 kernels use AVX-VNNI (packed_avxvnni.cc):
// cpu_has_avxvnni(), the active ISA is avx2, and it is on (GLMSERVE_AVXVNNI=0 turns it off, read
// by init_isa_from_env(); tests switch with set_avxvnni()). Same thread-safety as the ISA.
bool avxvnni_active();
// Turns the AVX-VNNI kernels on or off; invalid_argument when turning them on on a CPU without.
Status set_avxvnni(bool on);

}  // namespace glm::kernels
