// Small elementwise ops of the transformer forward pass (the heavy work is kernels::matmul and
// kernels::attention). Written as plain loops the compiler vectorises; each is O(elements) and
// allocation-free. Pure functions; thread-safe. In-place use (out == x) is allowed where noted.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace glm::model::ops {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; x, w, out: [n]. out may alias x.
void rms_norm(const float* x, const float* w, float eps, float* out, int n);

// Each of the n_head heads of row [n_head, head_dim] RMS-normed over its head_dim values times
// w [head_dim], in place (GLM-4.5's Q/K norms; gpu::head_norm's reference).
void rms_norm_heads(float* row, int n_head, int head_dim, const float* w, float eps);

// LayerNorm with bias (ChatGLM-6B v1): out = (x - mean) / sqrt(var + eps) * w + b. out may alias x.
void layer_norm(const float* x, const float* w, const float* b, float eps, float* out, int n);

// Rotary tables for one position: cos_out/sin_out [n_rot / 2],
// angle_i = pos * freq_scale * base^(-2i/n_rot). freq_scale < 1 is linear position
// interpolation (rope.scaling.type "linear", factor = 1 / freq_scale: ChatGLM2-6B-32K).
// Computed in double, then rounded.
void rope_table(int pos, int n_rot, float base, float* cos_out, float* sin_out,
                float freq_scale = 1.0f);

// Rotates the first n_rot dims of each of n_head heads of one row in place, interleaved pairs
// (x[2i], x[2i+1]) by angle_i (llama.cpp's "normal" rope; ChatGLM2/3, GLM-4, LLaMA GGUF files).
//   row: [n_head, head_dim]; cos/sin: [n_rot / 2] from rope_table.
void rope_interleaved(float* row, int n_head, int head_dim, int n_rot, const float* cos,
                      const float* sin);

// Same with the rotate-half pairing (x[i], x[i + n_rot/2]) over the first n_rot dims of each
// head (GPT-NeoX style; ChatGLM-6B v1 applies it twice, once per half of the head).
void rope_neox(float* row, int n_head, int head_dim, int n_rot, const float* cos, const float* sin);

// SwiGLU: out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)); [n]. out may alias gate
// or up.
void swiglu(const float* gate, const float* up, float* out, int n);

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); in place, [n].
void gelu_tanh(float* x, int n);

// y[i] += x[i]; [n].
void add(const float* x, float* y, int n);
// y[i] = y[i] * scale + x[i]; [n].
void scale_add(const float* x, float scale, float* y, int n);

// Row `row` of a [n_rows, n] matrix stored as `type` (any type quant.h can dequantize),
// converted to f32: out [n].
void get_row(DType type, const void* data, int64_t row, int64_t n, float* out);

// f32 -> stored KV element type (kF32, kF16 or kQ8_0: n a multiple of 32): row_bytes(type, n)
// bytes at dst.
void store_row(const float* src, DType type, void* dst, int n);

}  // namespace glm::model::ops
