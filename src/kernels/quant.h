// Scalar reference quantization formats of GGUF/ggml: the ground truth every fast kernel is
// tested against. Layouts are bit-exact with ggml's block definitions (ggml-common.h), so
// files written here load in llama.cpp and vice versa. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace glm::kernels {

// True if quantize_row_ref / dequantize_row_ref handle type t.
bool can_quantize(DType t);
bool can_dequantize(DType t);

// x: [n] floats -> y: row_bytes(t, n) bytes. n must be a multiple of the block size.
void quantize_row_ref(DType t, const float* x, void* y, int64_t n);
// x: row_bytes(t, n) bytes -> y: [n] floats.
void dequantize_row_ref(DType t, const void* x, float* y, int64_t n);
// Reference dot product of one stored row (type t, n elements) with f32 activations,
// accumulated in double-free f32 order: dequantize block by block, then multiply.
float dot_row_ref(DType t, const void* row, const float* x, int64_t n);

}  // namespace glm::kernels
