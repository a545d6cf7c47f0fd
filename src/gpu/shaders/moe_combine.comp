#version 450
// x[t, c] += sum_j weights[t, j] * y[t * k + j, c]: each token's experts' outputs, weighted by
// their routing (moe_route.comp), into the residual stream (model::MoeFfn::forward's sum).
//   y: [n_tokens * k, n_embd] (a token's k slots in a row); weights: [n_tokens, k];
//   x: [n_tokens, n_embd]. One thread an element of x.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats y;
  Floats weights;
  Floats x;
  uint n_tokens;
  uint n_embd;
  uint k;
} p;
void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  if (i >= p.n_tokens * p.n_embd) return;
  uint t = i / p.n_embd, c = i % p.n_embd;
  float s = 0.0;
  for (uint j = 0u; j < p.k; ++j) {
    s += p.weights.v[t * p.k + j] * p.y.v[(t * p.k + j) * p.n_embd + c];
  }
  p.x.v[i] += s;
}
