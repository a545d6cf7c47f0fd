// The packed AVX2 kernels of packed_avx2.cc for CPUs with AVX-VNNI (Alder Lake, Sapphire Rapids,
// Zen 5 and later): the same source built with -mavxvnni, so Q4_0x16 / Q5_0x16 / Q8_0x16 blocks
// take one 256-bit vpdpbusd per piece (see the __AVXVNNI__ branches there). matmul() runs it
// under the avx2 ISA where avxvnni_active() (isa.h). Same results as the plain AVX2 build, to
// the bit (matmul_test checks it).
#include <atomic>
#include <cstdint>

namespace glm::kernels::internal {
namespace {

std::atomic<int64_t> g_calls{0};

void avxvnni_calls_add() { g_calls.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

int64_t avxvnni_calls() { return g_calls.load(std::memory_order_relaxed); }

}  // namespace glm::kernels::internal

#define GLM_PACKED_AVX2_ENTRY matmul_packed_avxvnni
#include "kernels/packed_avx2.cc"  // NOLINT(bugprone-suspicious-include)
