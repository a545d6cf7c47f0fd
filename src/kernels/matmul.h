// Matrix products of stored weights with f32 activations: the hot path of the engine.
// Dispatches at run time to the best variant for the CPU (AVX-512 VNNI, AVX2, scalar), each
// tested against the scalar reference (quant.h).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/thread_pool.h"

namespace glm::kernels {

// A weight matrix as stored in the file: n_rows rows of n_cols elements of `type`.
// Not owned (points into the model's mapping).
struct WeightView {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t n_rows = 0;  // output features
  int64_t n_cols = 0;  // input features (row length)
};

// y[t, r] = sum_c w[r, c] * x[t, c]
//   x: [n_tokens, w.n_cols] f32, y: [n_tokens, w.n_rows] f32 (overwritten).
// Splits rows across `pool` (null = calling thread only). No allocation on the hot path beyond
// a per-thread scratch buffer that grows once.
void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool);

// Same, computed with dot_row_ref only: the reference for tests.
void matmul_ref(const WeightView& w, const float* x, float* y, int64_t n_tokens);

// Name of the variant matmul() dispatches to on this CPU ("avx512vnni", "avx2", "scalar").
const char* matmul_isa();

}  // namespace glm::kernels
