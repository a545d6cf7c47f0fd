// Matrix products of stored weights with f32 activations: the hot path of the engine.
// Dispatches at run time to the best variant for the CPU (AVX-512 VNNI, AVX2, scalar), each
// tested against the scalar reference (quant.h).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/thread_pool.h"

namespace glm::kernels {

// Interleaved layouts of packed.h (weights repacked at load time for the fastest kernel).
enum class PackedLayout : uint8_t {
  kNone = 0,
  kQ4_0x16,
  kQ8_0x16,
  kF16x16,
  kBF16x16,
  kQ5_0x16,
  kQ4_Kx16,
  kQ6_Kx16,
  kQ5_Kx16,
};

// A weight matrix as stored in the file: n_rows rows of n_cols elements of `type`.
// Not owned (points into the model's mapping). Optionally also a packed copy of its first
// packed_rows rows (packed.h; owned by whoever packed it), which matmul() then uses instead.
struct WeightView {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t n_rows = 0;               // output features
  int64_t n_cols = 0;               // input features (row length)
  const uint8_t* packed = nullptr;  // null = row-major data only
  PackedLayout packed_layout = PackedLayout::kNone;
  int64_t packed_rows = 0;  // a multiple of 16, <= n_rows
};

// y[t, r] = sum_c w[r, c] * x[t, c]
//   x: [n_tokens, w.n_cols] f32, y: [n_tokens, w.n_rows] f32 (overwritten).
// Splits rows across `pool` (null = calling thread only). No allocation on the hot path beyond
// a per-thread scratch buffer that grows once.
void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool);

// Same, computed with dot_row_ref only: the reference for tests.
void matmul_ref(const WeightView& w, const float* x, float* y, int64_t n_tokens);

// Name of the variant matmul() dispatches to: isa_name(active_isa()) ("avx512", "avx2",
// "scalar"), and "avx2+avxvnni" where the avx2 packed kernels use AVX-VNNI (avxvnni_active()).
const char* matmul_isa();

}  // namespace glm::kernels
