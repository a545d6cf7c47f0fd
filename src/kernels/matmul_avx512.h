// Internal to kernels/: the pieces of the AVX-512 variant that live in separate files.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/matmul.h"

namespace glm::kernels::internal {

// Integer paths (weights x activations quantized to int8 on the fly, vpdpbusd): legacy
// 32-element quants (matmul_q_avx512.cc, then the k-quants through matmul_k_avx512) and
// k-quants (matmul_k_avx512.cc). Return false for types they do not handle (activation blocks:
// row_tiling.h, act_block_rows).
bool matmul_q_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool);
bool matmul_k_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool);
// The packed Q4_Kx16 / Q5_Kx16 / Q6_Kx16 kernels (packed_k_avx512.cc): rows [0, w.packed_rows)
// of y from w.packed.
void matmul_packed_k_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                            ThreadPool* pool);

}  // namespace glm::kernels::internal
