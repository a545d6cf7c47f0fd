#version 450
// out[r] = (x[idx[r]] - mean) / sqrt(var + eps) * w + b, the twin of model::ops::layer_norm
// (ChatGLM-6B's LayerNorm with bias; mean and variance over the row, two passes).
//   x: [*, n] f32; w, b: [n]; out: [n_rows, n]; idx: [n_rows] source rows (null: row r itself).
// One workgroup per output row.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  Floats w;
  Floats b;
  Floats out_;
  Ints idx;
  uint n;
  uint use_idx;
  float eps;
} p;
#include "group_sum.glsl"

void main() {
  uint r = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  uint src = p.use_idx != 0u ? uint(p.idx.v[r]) : r;
  uint xo = src * p.n, oo = r * p.n;
  float s = 0.0;
  for (uint i = tid; i < p.n; i += 64u) s += p.x.v[xo + i];
  float mean = group_sum(s) / float(p.n);
  float q = 0.0;
  for (uint i = tid; i < p.n; i += 64u) {
    float d = p.x.v[xo + i] - mean;
    q += d * d;
  }
  float inv = 1.0 / sqrt(group_sum(q) / float(p.n) + p.eps);
  for (uint i = tid; i < p.n; i += 64u) {
    p.out_.v[oo + i] = (p.x.v[xo + i] - mean) * inv * p.w.v[i] + p.b.v[i];
  }
}
