#version 450
// dst[t * dst_stride + dst_col + c] = src[t * src_stride + src_col + c] for t < n_rows,
// c < n (splitting a fused projection's rows into its parts).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats src;
  Floats dst;
  uint n_rows;
  uint n;
  uint src_stride;
  uint src_col;
  uint dst_stride;
  uint dst_col;
} p;
void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  if (i >= p.n_rows * p.n) return;
  uint t = i / p.n, c = i % p.n;
  p.dst.v[t * p.dst_stride + p.dst_col + c] = p.src.v[t * p.src_stride + p.src_col + c];
}
