#version 450
// x's rows as the integer-dot matmuls' 8-bit blocks (q8.glsl), for a matmul whose input no op
// wrote in that form.
//   x: [n_rows, n_cols] f32 (n_cols a multiple of 32); y: [n_rows, n_cols / 32] blocks.
// One thread a block.
#include "common.glsl"
#include "q8.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  Words y;
  uint n_blocks;  // over all rows
} p;

void main() {
  uint b = gl_GlobalInvocationID.x;
  if (b >= p.n_blocks) return;
  float v[32];
  UNROLLED for (uint e = 0u; e < 32u; ++e) v[e] = p.x.v[32u * b + e];
  store_q8_block(p.y, 9u * b, v);
}
