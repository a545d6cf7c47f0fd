// Shared between quant.cc (dispatch, float and 32-element formats) and quant_k.cc (k-quants).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace glm::kernels {

// nb blocks of x -> y for t in {Q4_K, Q5_K, Q6_K, Q8_K}.
void quantize_row_k(DType t, const float* x, void* y, int64_t nb);
// Block i of x -> y[0 .. block_size) for the k-quants and the 32-element quants.
void dequantize_block_k(DType t, const void* x, int64_t i, float* y);
void dequantize_block_legacy(DType t, const void* x, int64_t i, float* y);

}  // namespace glm::kernels
