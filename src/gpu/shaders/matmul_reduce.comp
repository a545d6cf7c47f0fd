#version 450
// The tiled matmul split over the row length (matmul_tiled.comp's chunks_per_split): y[t, row]
// = the sum of the splits' partial sums (in split order) (+ bias[row]) (+ y[t, row]).
//   part: [n_splits, n_tokens, n_rows] f32; y: [n_tokens, y_stride] f32 (columns y_col ..).
// One thread an output.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats part;
  Floats y;
  Floats bias;  // [n_rows]; unread when has_bias is 0
  uint n_rows;
  uint n_tokens;
  uint n_splits;
  uint y_stride;
  uint y_col;
  uint has_bias;
  uint add_to_y;
} p;
#include "write_y.glsl"

void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  uint n = p.n_tokens * p.n_rows;
  if (i >= n) return;
  float s = 0.0;
  for (uint k = 0u; k < p.n_splits; ++k) s += p.part.v[k * n + i];
  write_y(i / p.n_rows, i % p.n_rows, s);
}
