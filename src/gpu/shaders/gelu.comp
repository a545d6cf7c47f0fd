#version 450
// x[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place; [n] f32, the twin of
// model::ops::gelu_tanh (ChatGLM-6B's MLP).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  uint n;
} p;
void main() {
  uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  float v = p.x.v[i];
  // tanh of a clamped argument: some drivers compute tanh through exp(2u), which overflows to
  // inf / inf = NaN for large |u|; tanh(+-15) is already +-1 in f32.
  float u = clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0);
  p.x.v[i] = 0.5 * v * (1.0 + tanh(u));
}
