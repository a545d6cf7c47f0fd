#version 450
// y[i] = y[i] * scale + x[i]; [n] f32, the twin of model::ops::scale_add (scale 1: the residual
// adds, model::ops::add; ChatGLM-6B's x = LN(x) * alpha + proj with y = LN(x)).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  Floats y;
  uint n;
  float scale;
} p;
void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  if (i < p.n) p.y.v[i] = p.y.v[i] * p.scale + p.x.v[i];
}
