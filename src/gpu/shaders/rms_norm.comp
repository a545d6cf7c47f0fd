#version 450
// out[r] = x[idx[r]] / sqrt(mean(x[idx[r]]^2) + eps) * w, the twin of model::ops::rms_norm.
//   x: [*, n] f32; w: [n]; out: [n_rows, n]; idx: [n_rows] source rows (null: row r itself).
// One workgroup per output row.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  Floats w;
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
  // Four loads in flight a thread (one workgroup reads a whole row: a decode step's norm is a
  // single workgroup, so the loads' latency, not bandwidth, sets its time).
  float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  uint i = tid;
  for (; i + 192u < p.n; i += 256u) {
    float a = p.x.v[xo + i], b = p.x.v[xo + i + 64u];
    float c = p.x.v[xo + i + 128u], d = p.x.v[xo + i + 192u];
    s0 += a * a;
    s1 += b * b;
    s2 += c * c;
    s3 += d * d;
  }
  for (; i < p.n; i += 64u) {
    float v = p.x.v[xo + i];
    s0 += v * v;
  }
  float sum = group_sum((s0 + s1) + (s2 + s3));  // the row's
  float scale = 1.0 / sqrt(sum / float(p.n) + p.eps);
  for (uint i = tid; i < p.n; i += 64u) p.out_.v[oo + i] = p.x.v[xo + i] * scale * p.w.v[i];
}
