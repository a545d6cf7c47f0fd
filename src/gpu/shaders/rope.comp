#version 450
// Rotary of each head of x[t * row_stride + col0 ...], in place, or into y (below). A head is
// n_parts parts of head_dim / n_parts dims, each rotated over its first n_rot dims by its own
// table row:
//   interleaved pairs (x[2i], x[2i+1]) (neox 0; model::ops::rope_interleaved: ChatGLM2/3,
//   GLM-4, llama; n_parts 1), or rotate-half pairs (x[i], x[i + n_rot/2]) (neox 1;
//   model::ops::rope_neox: ChatGLM-6B's 2D rotary, n_parts 2: position, block position).
//   cs, sn: [n_tokens, n_parts, n_rot / 2] (the host's tables of each position).
// The rotated pairs go to y, head h of token t at y[t * y_stride + y_col + h * y_head]: x itself
// (in place: y_stride = row_stride, y_col = col0, y_head = head_dim), or another buffer, where
// only each part's n_rot rotated dims are written (GLM-4.7-Flash's query heads: each head's
// rotary part rotated into the absorbed query's row).
// One thread per (token, head, part, pair).
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
  uint n_parts;
  uint neox;
  Floats y;
  uint y_stride;
  uint y_col;
  uint y_head;
} p;
void main() {
  uint half_rot = p.n_rot / 2u;
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  uint per_head = p.n_parts * half_rot;
  if (i >= p.n_tokens * p.n_head * per_head) return;
  uint t = i / (p.n_head * per_head), rem = i % (p.n_head * per_head);
  uint h = rem / per_head, part = (rem % per_head) / half_rot, k = rem % half_rot;
  uint in_part = part * (p.head_dim / p.n_parts);
  uint o = t * p.row_stride + p.col0 + h * p.head_dim + in_part;
  uint u = t * p.y_stride + p.y_col + h * p.y_head + in_part;
  uint i0 = p.neox != 0u ? k : 2u * k;       // the pair's dims in its part
  uint i1 = p.neox != 0u ? k + half_rot : i0 + 1u;
  uint ti = (t * p.n_parts + part) * half_rot + k;
  float c = p.cs.v[ti], s = p.sn.v[ti];
  float a = p.x.v[o + i0], b = p.x.v[o + i1];
  p.y.v[u + i0] = a * c - b * s;
  p.y.v[u + i1] = a * s + b * c;
}
