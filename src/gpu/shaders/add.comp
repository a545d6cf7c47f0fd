#version 450
// y[i] += x[i]; [n] f32 (the residual adds; model::ops::add).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  Floats y;
  uint n;
} p;
void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  if (i < p.n) p.y.v[i] += p.x.v[i];
}
