#version 450
// out[t, i] = silu(gate[t, i]) * up[t, i], the twin of model::ops::swiglu.
//   gate at g[t * in_stride + gate_col + i], up at u[t * in_stride + up_col + i] (the fused
//   [T, 2 n_ff] layout: one buffer, gate_col 0, up_col n_ff); out: [n_tokens, n] f32;
//   q8: [n_tokens, n / 32] the same rows as the integer-dot matmuls' 8-bit blocks (q8.glsl), where
//   has_q8 (n a multiple of 32): then a thread computes a block of 32 outputs, else one.
#include "common.glsl"
#include "activation.glsl"
#include "q8.glsl"
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
  uint has_q8;
  Words q8;
} p;

float swiglu_at(uint t, uint c) {
  float g = p.g.v[t * p.in_stride + p.gate_col + c];
  float u = p.u.v[t * p.in_stride + p.up_col + c];
  return SILU_MUL(g, u);
}

void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  if (p.has_q8 == 0u) {
    if (i >= p.n_tokens * p.n) return;
    p.out_.v[i] = swiglu_at(i / p.n, i % p.n);
    return;
  }
  // Item i is block i: token i / (n / 32), values 32 (i % (n / 32)) ..
  uint n_blocks = p.n / 32u;
  if (i >= p.n_tokens * n_blocks) return;
  uint t = i / n_blocks, c0 = 32u * (i % n_blocks);
  float v[32];
  UNROLLED for (uint e = 0u; e < 32u; ++e) {
    v[e] = swiglu_at(t, c0 + e);
    p.out_.v[t * p.n + c0 + e] = v[e];
  }
  store_q8_block(p.q8, 9u * i, v);
}
