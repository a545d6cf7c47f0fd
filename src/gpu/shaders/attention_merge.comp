#version 450
// The splits of attention.comp combined (n_split > 1): for row (token t, head h), with the
// splits' states (m_k, l_k, acc_k), M = max m_k and
//   out[t, h] = sum_k acc_k e^(m_k - M) / sum_k l_k e^(m_k - M)
// (a split that saw no key has m = -inf and weighs 0; every row sees at least one key).
//   part: [n_tokens * n_head, n_split, head_dim + 2]; out: rows from out_row0 of
//   [*, n_head * v_dims] (each head's first v_dims dims: attention.comp's).
// One workgroup per (head, token), a thread per output dim. Where out_q8 is not 0, the rows
// are also written as 8-bit blocks (attention.comp's out_q8).
#include "common.glsl"
#include "q8.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats part;
  Floats out_;
  Words out_q8;
  uint n_head;
  uint head_dim;
  uint n_split;
  uint out_row0;
  uint v_dims;
} p;

shared float row_[576];  // the head's output (head_dim <= 576), for its 8-bit blocks

void main() {
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  uint hd = p.head_dim, row = t * p.n_head + h;
  uint base = row * p.n_split * (hd + 2u);
  float mx = -1.0 / 0.0;
  for (uint k = 0u; k < p.n_split; ++k) mx = max(mx, p.part.v[base + k * (hd + 2u)]);
  float l = 0.0;
  for (uint k = 0u; k < p.n_split; ++k) {
    float mk = p.part.v[base + k * (hd + 2u)];
    if (mk > -1.0 / 0.0) l += p.part.v[base + k * (hd + 2u) + 1u] * exp(mk - mx);
  }
  uint vd = p.v_dims, oo = (p.out_row0 + t) * (p.n_head * vd) + h * vd;
  for (uint d = tid; d < vd; d += 64u) {
    float a = 0.0;
    for (uint k = 0u; k < p.n_split; ++k) {
      uint ko = base + k * (hd + 2u);
      float mk = p.part.v[ko];
      if (mk > -1.0 / 0.0) a += p.part.v[ko + 2u + d] * exp(mk - mx);
    }
    p.out_.v[oo + d] = a / l;
    row_[d] = a / l;
  }
  if (all(equal(uvec2(p.out_q8), uvec2(0u)))) return;  // the same in every thread
  barrier();
  uint nb = vd / 32u;
  if (tid < nb) {
    float v[32];
    UNROLLED for (uint e = 0u; e < 32u; ++e) v[e] = row_[32u * tid + e];
    store_q8_block(p.out_q8, 9u * ((p.out_row0 + t) * (p.n_head * nb) + h * nb + tid), v);
  }
}
