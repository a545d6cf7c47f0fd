// Internal to kernels/: the pieces of the AVX-512 variant that live in separate files.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/matmul.h"

namespace glm::kernels::internal {

// Integer paths (weights x activations quantized to int8 on the fly, vpdpbusd): legacy
// 32-element quants (matmul_q_avx512.cc) and k-quants (matmul_k_avx512.cc). Return false for
// types they do not handle; act_block_*: the activation block size, -1 if not handled.
bool matmul_q_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool);
int act_block_q_avx512(DType t);
bool matmul_k_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool);
int act_block_k_avx512(DType t);

}  // namespace glm::kernels::internal
