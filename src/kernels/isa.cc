#include "kernels/isa.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace glm::kernels {
namespace {

// -1 until chosen; then static_cast<int>(Isa).
std::atomic<int> g_isa{-1};
// The AVX-VNNI kernels wanted (GLMSERVE_AVXVNNI, set_avxvnni); used only where the CPU has it.
std::atomic<bool> g_avxvnni{true};

}  // namespace

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

bool cpu_has_avxvnni() {
#if defined(__x86_64__)
  // CPUID leaf 7 subleaf 1, EAX bit 4 (GCC 12's __builtin_cpu_supports has no "avxvnni").
  static const bool has = [] {
    if (cpu_isa() == Isa::kScalar) return false;
    unsigned a = 7, b = 0, c = 1, d = 0;
    __asm__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    return (a & (1u << 4)) != 0;
  }();
  return has;
#else
  return false;
#endif
}

bool avxvnni_active() {
  return g_avxvnni.load(std::memory_order_relaxed) && active_isa() == Isa::kAvx2 &&
         cpu_has_avxvnni();
}

Status set_avxvnni(bool on) {
  if (on && !cpu_has_avxvnni()) return invalid_argument("this CPU has no AVX-VNNI");
  g_avxvnni.store(on, std::memory_order_relaxed);
  return Status::Ok();
}

std::string cpu_isa_description() {
  std::string s;
  for (Isa i : {Isa::kAvx512, Isa::kAvx2, Isa::kScalar}) {
    if (static_cast<int>(i) > static_cast<int>(cpu_isa())) continue;
    if (!s.empty()) s += ", ";
    s += isa_name(i);
    if (i == Isa::kAvx512 && cpu_has_avx512bf16()) s += " (with avx512bf16)";
    if (i == Isa::kAvx2 && cpu_has_avxvnni()) s += " (with avxvnni)";
  }
  return s;
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

StatusOr<Isa> parse_isa(std::string_view name) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (name == isa_name(i)) return i;
  }
  return invalid_argument("unknown instruction set '" + std::string(name) +
                          "' (use scalar, avx2 or avx512)");
}

Status set_isa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(cpu_isa())) {
    return invalid_argument(std::string("this CPU has no ") + isa_name(isa) +
                            " (it has: " + cpu_isa_description() + ")");
  }
  g_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
  return Status::Ok();
}

Status init_isa_from_env() {
  const char* vnni = std::getenv("GLMSERVE_AVXVNNI");
  const std::string vnni_value = vnni != nullptr ? vnni : "";
  if (!vnni_value.empty() && vnni_value != "0" && vnni_value != "1") {
    return invalid_argument("GLMSERVE_AVXVNNI=" + vnni_value +
                            ": use 0 (off) or 1 (on where the CPU has it)");
  }
  g_avxvnni.store(vnni_value != "0", std::memory_order_relaxed);
  const char* env = std::getenv("GLMSERVE_ISA");
  if (env == nullptr || *env == '\0') return set_isa(cpu_isa());
  StatusOr<Isa> want = parse_isa(env);
  if (!want.ok()) {
    return invalid_argument("GLMSERVE_ISA: " + want.status().message());
  }
  Status s = set_isa(*want);
  if (!s.ok()) return invalid_argument("GLMSERVE_ISA=" + std::string(env) + ": " + s.message());
  return s;
}

Isa active_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    // Nothing chose yet (a program that skipped init_isa_from_env(): tests, benchmarks).
    const Status s = init_isa_from_env();
    if (!s.ok()) {
      std::fprintf(stderr, "glmserve: %s\n", s.message().c_str());
      std::exit(2);
    }
    v = g_isa.load(std::memory_order_relaxed);
  }
  return static_cast<Isa>(v);
}

}  // namespace glm::kernels
