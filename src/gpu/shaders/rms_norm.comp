#version 450
// out[r] = x[idx[r]] / sqrt(mean(x[idx[r]]^2) + eps) * w, the twin of model::ops::rms_norm.
//   x: [*, n] f32; w: [n]; out: [n_rows, n]; idx: [n_rows] source rows (null: row r itself).
// One workgroup per output row.
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
shared float part[64];
void main() {
  uint r = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  uint src = p.use_idx != 0u ? uint(p.idx.v[r]) : r;
  uint xo = src * p.n, oo = r * p.n;
  float s = 0.0;
  for (uint i = tid; i < p.n; i += 64u) {
    float v = p.x.v[xo + i];
    s += v * v;
  }
  part[tid] = s;
  barrier();
  for (uint stride = 32u; stride > 0u; stride >>= 1) {
    if (tid < stride) part[tid] += part[tid + stride];
    barrier();
  }
  float scale = 1.0 / sqrt(part[0] / float(p.n) + p.eps);
  for (uint i = tid; i < p.n; i += 64u) p.out_.v[oo + i] = p.x.v[xo + i] * scale * p.w.v[i];
}
