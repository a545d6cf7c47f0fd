#version 450
// out[t, i] = silu(gate[t, i]) * up[t, i], the twin of model::ops::swiglu.
//   gate at g[t * in_stride + gate_col + i], up at u[t * in_stride + up_col + i] (the fused
//   [T, 2 n_ff] layout: one buffer, gate_col 0, up_col n_ff); out: [n_tokens, n] f32.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats g;
  Floats u;
  Floats out_;
  uint n_tokens;
  uint n;
  uint in_stride;
  uint gate_col;
  uint up_col;
} p;
void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  if (i >= p.n_tokens * p.n) return;
  uint t = i / p.n, c = i % p.n;
  float g = p.g.v[t * p.in_stride + p.gate_col + c];
  float u = p.u.v[t * p.in_stride + p.up_col + c];
  p.out_.v[i] = g / (1.0 + exp(-g)) * u;
}
