#version 450
// out[r] = x[idx[r]] / sqrt(mean(x[idx[r]]^2) + eps) * w, the twin of model::ops::rms_norm.
//   x: [*, n] f32; w: [n]; out: [n_rows, n]; idx: [n_rows] source rows (null: row r itself);
//   q8: [n_rows, n / 32] the same rows as the integer-dot matmuls' 8-bit blocks (q8.glsl), where
//   has_q8 (n a multiple of 32): the next matmul's input in both forms, without a dispatch.
// One workgroup of NT threads per output row.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "q8.glsl"
#define NT 256  // a decode step's norm is one workgroup: as many loads in flight as it can
layout(local_size_x = NT) in;
layout(push_constant) uniform Push {
  Floats x;
  Floats w;
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
  // Four loads in flight a thread (one workgroup reads a whole row: a decode step's norm is a
  // single workgroup, so the loads' latency, not bandwidth, sets its time; a row of 4096 is
  // one round of loads).
  float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  uint i = tid;
  for (; i + 3u * NT < p.n; i += 4u * NT) {
    float a = p.x.v[xo + i], b = p.x.v[xo + i + NT];
    float c = p.x.v[xo + i + 2u * NT], d = p.x.v[xo + i + 3u * NT];
    s0 += a * a;
    s1 += b * b;
    s2 += c * c;
    s3 += d * d;
  }
  for (; i < p.n; i += NT) {
    float v = p.x.v[xo + i];
    s0 += v * v;
  }
  float sum = group_sum((s0 + s1) + (s2 + s3));  // the row's
  float scale = 1.0 / sqrt(sum / float(p.n) + p.eps);
  if (p.has_q8 == 0u) {
    for (uint i = tid; i < p.n; i += NT) p.out_.v[oo + i] = p.x.v[xo + i] * scale * p.w.v[i];
    return;
  }
  // A 32-value block a thread: its outputs, then their 8-bit block.
  uint n_blocks = p.n / 32u;
  for (uint b = tid; b < n_blocks; b += NT) {
    float v[32];
    UNROLLED for (uint e = 0u; e < 32u; ++e) {
      uint i = 32u * b + e;
      v[e] = p.x.v[xo + i] * scale * p.w.v[i];
      p.out_.v[oo + i] = v[e];
    }
    store_q8_block(p.q8, 9u * (r * n_blocks + b), v);
  }
}
