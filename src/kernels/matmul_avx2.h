// Internal to kernels/: the pieces of the AVX2 variant that live in separate files.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/matmul.h"

namespace glm::kernels::internal {

// Integer path for the k-quants Q4_K, Q5_K, Q6_K (matmul_k_avx2.cc). Returns false for types
// it does not handle (activation blocks: row_tiling.h, act_block_rows).
bool matmul_k_avx2(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                   ThreadPool* pool);
// The packed Q4_Kx16 / Q6_Kx16 kernels (packed_k_avx2.cc): rows [0, w.packed_rows) of y from
// w.packed.
void matmul_packed_k_avx2(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                          ThreadPool* pool);

}  // namespace glm::kernels::internal
