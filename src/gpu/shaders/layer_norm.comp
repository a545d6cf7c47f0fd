#version 450
// out[r] = (x[idx[r]] - mean) / sqrt(var + eps) * w + b, the twin of model::ops::layer_norm
// (ChatGLM-6B's LayerNorm with bias; mean and variance over the row, two passes).
//   x: [*, n] f32; w, b: [n]; out: [n_rows, n]; idx: [n_rows] source rows (null: row r itself);
//   q8: [n_rows, n / 32] the same rows as the integer-dot matmuls' 8-bit blocks (q8.glsl), where
//   has_q8 (n a multiple of 32): the next matmul's input in both forms, without a dispatch.
// One workgroup per output row.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "q8.glsl"
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
  uint has_q8;
  Words q8;
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
  if (p.has_q8 == 0u) {
    for (uint i = tid; i < p.n; i += 64u) {
      p.out_.v[oo + i] = (p.x.v[xo + i] - mean) * inv * p.w.v[i] + p.b.v[i];
    }
    return;
  }
  // A 32-value block a thread: its outputs, then their 8-bit block.
  uint n_blocks = p.n / 32u;
  for (uint b = tid; b < n_blocks; b += 64u) {
    float v[32];
    UNROLLED for (uint e = 0u; e < 32u; ++e) {
      uint i = 32u * b + e;
      v[e] = (p.x.v[xo + i] - mean) * inv * p.w.v[i] + p.b.v[i];
      p.out_.v[oo + i] = v[e];
    }
    store_q8_block(p.q8, 9u * (r * n_blocks + b), v);
  }
}
