#version 450
// y[t * stride + col + c] += b[c] for t < n_tokens, c < n (the projections' biases).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats b;
  Floats y;
  uint n_tokens;
  uint n;
  uint stride;
  uint col;
} p;
void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  if (i < p.n_tokens * p.n) p.y.v[(i / p.n) * p.stride + p.col + i % p.n] += p.b.v[i % p.n];
}
