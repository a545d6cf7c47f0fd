#version 450
// Each head of x[t * row_stride + h * head_dim ...] (t < n_tokens, h < n_head) RMS-normed over its
// head_dim values, in place, times w[h < n_q ? 0 : head_dim ...]: the twin of
// model::ops::rms_norm_heads over a token's first n_q heads with w's first row, then its others
// with the second (GLM-4.5's Q/K norms: the q heads, then the k heads after them, before the
// rotary). x: f32 rows of row_stride; w: [2, head_dim].
// One workgroup of 64 threads a (token, head): workgroup y * groups_per_y + x.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  Floats w;
  uint n_tokens;
  uint row_stride;
  uint n_head;
  uint n_q;
  uint head_dim;
  float eps;
  uint groups_per_y;
} p;
#include "group_sum.glsl"

void main() {
  uint r = gl_WorkGroupID.y * p.groups_per_y + gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  if (r >= p.n_tokens * p.n_head) return;  // the whole workgroup: group_sum's barriers agree
  uint t = r / p.n_head, h = r % p.n_head;
  uint o = t * p.row_stride + h * p.head_dim, wo = h < p.n_q ? 0u : p.head_dim;
  float s = 0.0;
  for (uint i = tid; i < p.head_dim; i += 64u) {
    float v = p.x.v[o + i];
    s += v * v;
  }
  float scale = 1.0 / sqrt(group_sum(s) / float(p.head_dim) + p.eps);
  for (uint i = tid; i < p.head_dim; i += 64u) p.x.v[o + i] = p.x.v[o + i] * scale * p.w.v[wo + i];
}
