#version 450
// x[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place; [n] f32, the twin of
// model::ops::gelu_tanh (ChatGLM-6B's MLP); q8: [n / 32] the same values as the integer-dot
// matmuls' 8-bit blocks (q8.glsl), where has_q8 (n a multiple of 32, rows of whole blocks): then
// a thread computes a block of 32 values, else one.
#include "common.glsl"
#include "activation.glsl"
#include "q8.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  uint n;
  uint has_q8;
  Words q8;
} p;

float gelu(float v) { return GELU_TANH(v); }

void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  if (p.has_q8 == 0u) {
    if (i >= p.n) return;
    p.x.v[i] = gelu(p.x.v[i]);
    return;
  }
  if (i >= p.n / 32u) return;  // item i is block i
  float v[32];
  UNROLLED for (uint e = 0u; e < 32u; ++e) {
    v[e] = gelu(p.x.v[32u * i + e]);
    p.x.v[32u * i + e] = v[e];
  }
  store_q8_block(p.q8, 9u * i, v);
}
