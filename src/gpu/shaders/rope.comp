#version 450
// Rotary on interleaved pairs (x[2i], x[2i+1]) of the first n_rot dims of each head, in place,
// the twin of model::ops::rope_interleaved. x: [n_tokens, row_stride] f32 whose head h starts at
// col0 + h * head_dim; cs, sn: [n_tokens, n_rot / 2] (the host's rope_table of each position).
// One thread per (token, head, pair).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  Floats cs;
  Floats sn;
  uint n_tokens;
  uint row_stride;
  uint col0;
  uint n_head;
  uint head_dim;
  uint n_rot;
} p;
void main() {
  uint half_rot = p.n_rot / 2u;
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  uint per_token = p.n_head * half_rot;
  if (i >= p.n_tokens * per_token) return;
  uint t = i / per_token, rem = i % per_token;
  uint h = rem / half_rot, k = rem % half_rot;
  uint o = t * p.row_stride + p.col0 + h * p.head_dim + 2u * k;
  float c = p.cs.v[t * half_rot + k], s = p.sn.v[t * half_rot + k];
  float a = p.x.v[o], b = p.x.v[o + 1u];
  p.x.v[o] = a * c - b * s;
  p.x.v[o + 1u] = a * s + b * c;
}
