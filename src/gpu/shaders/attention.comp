#version 450
// Causal attention of one sequence's new query rows over its cached K/V (the twin of
// kernels::attention; grouped-query: query head h reads KV head h / (n_head / n_head_kv)),
// optionally with a bidirectional prefix (kernels::AttentionShape::bidir_prefix: the row at
// position p sees [0, max(p + 1, bidir_prefix)); ChatGLM-6B's prompt; 0 = causal).
//   q: [n_tokens, q_stride] f32, head h of token t at t * q_stride + h * head_dim;
//   out: [n_tokens, n_head * head_dim] f32 (rows from out_row0);
//   kv: one layer's cache (K rows from k_base, V rows from v_base, row_bytes apart);
//   blocks: [n_blocks] the sequence's block table, block_tokens positions a block.
// One workgroup per (head, token): keys in chunks of 64, one key's score per thread, an online
// softmax across chunks, each thread accumulating head_dim / 64 output dims.
#include "common.glsl"
#include "kv.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats q;
  Floats out_;
  Words kv;
  Ints blocks;
  uint q_stride;
  uint out_row0;
  uint k_base;
  uint v_base;
  uint row_bytes;
  uint n_past;
  uint n_head;
  uint n_head_kv;
  uint head_dim;
  uint block_tokens;
  float scale;
  uint bidir_prefix;
} p;

shared float qs[256];
shared float s[64];
shared float red[64];
shared uint vrow[64];  // the byte offset of each key's V row in this chunk

void main() {
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  uint hd = p.head_dim;
  uint kvh = h / (p.n_head / p.n_head_kv);
  uint qo = t * p.q_stride + h * hd;
  for (uint d = tid; d < hd; d += 64u) qs[d] = p.q.v[qo + d];
  barrier();
  uint n_keys = max(p.n_past + t + 1u, p.bidir_prefix);
  float m = -1.0 / 0.0, l = 0.0;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  for (uint j0 = 0u; j0 < n_keys; j0 += 64u) {
    uint j = j0 + tid;
    float score = -1.0 / 0.0;
    if (j < n_keys) {
      // The block table read once a key: the K row here, the V row for the sums below.
      uint slot = uint(p.blocks.v[j / p.block_tokens]) * p.block_tokens + j % p.block_tokens;
      uint ro = p.k_base + slot * p.row_bytes;
      vrow[tid] = p.v_base + slot * p.row_bytes;
      // Four partial sums: independent loads in flight.
      float d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
      uint e0 = kvh * hd;
      uint d = 0u;
      for (; d + 3u < hd; d += 4u) {
        d0 += qs[d] * kv_elem(p.kv, ro, e0 + d);
        d1 += qs[d + 1u] * kv_elem(p.kv, ro, e0 + d + 1u);
        d2 += qs[d + 2u] * kv_elem(p.kv, ro, e0 + d + 2u);
        d3 += qs[d + 3u] * kv_elem(p.kv, ro, e0 + d + 3u);
      }
      for (; d < hd; ++d) d0 += qs[d] * kv_elem(p.kv, ro, e0 + d);
      score = ((d0 + d1) + (d2 + d3)) * p.scale;
    }
    s[tid] = score;
    red[tid] = score;
    barrier();
    for (uint stride = 32u; stride > 0u; stride >>= 1) {
      if (tid < stride) red[tid] = max(red[tid], red[tid + stride]);
      barrier();
    }
    float m_new = max(m, red[0]);
    barrier();
    float pj = j < n_keys ? exp(score - m_new) : 0.0;
    s[tid] = pj;
    red[tid] = pj;
    barrier();
    for (uint stride = 32u; stride > 0u; stride >>= 1) {
      if (tid < stride) red[tid] += red[tid + stride];
      barrier();
    }
    float corr = exp(m - m_new);
    l = l * corr + red[0];
    uint n_chunk = min(64u, n_keys - j0);
    for (uint k = 0u; k < 4u; ++k) {
      uint d = tid + 64u * k;
      if (d >= hd) break;
      float a0 = 0.0, a1 = 0.0;
      uint jj = 0u;
      for (; jj + 1u < n_chunk; jj += 2u) {
        a0 += s[jj] * kv_elem(p.kv, vrow[jj], kvh * hd + d);
        a1 += s[jj + 1u] * kv_elem(p.kv, vrow[jj + 1u], kvh * hd + d);
      }
      if (jj < n_chunk) a0 += s[jj] * kv_elem(p.kv, vrow[jj], kvh * hd + d);
      acc[k] = acc[k] * corr + (a0 + a1);
    }
    m = m_new;
    barrier();
  }
  uint oo = (p.out_row0 + t) * (p.n_head * hd) + h * hd;
  for (uint k = 0u; k < 4u; ++k) {
    uint d = tid + 64u * k;
    if (d < hd) p.out_.v[oo + d] = acc[k] / l;
  }
}
