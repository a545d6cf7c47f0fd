#version 450
// Causal attention of one sequence's new query rows over its cached K/V (the twin of
// kernels::attention; grouped-query: query head h reads KV head h / (n_head / n_head_kv)),
// optionally with a bidirectional prefix (kernels::AttentionShape::bidir_prefix: the row at
// position p sees [0, max(p + 1, bidir_prefix)); ChatGLM-6B's prompt; 0 = causal).
//   q: [n_tokens, q_stride] f32, head h of token t at t * q_stride + h * head_dim;
//   out: [n_tokens, n_head * head_dim] f32 (rows from out_row0);
//   kv: one layer's cache (K rows from k_base, V rows from v_base, row_bytes apart);
//   blocks: [n_blocks] the sequence's block table, block_tokens positions a block.
// One workgroup per (head, token, split): keys in chunks of 64, one key's score per thread, an
// online softmax across chunks (its max and sum by subgroup operations: three barriers a
// chunk), each thread accumulating head_dim / 64 output dims. With n_split > 1 (few rows over
// many keys: a decode step at depth), split z takes keys [z split_len, (z + 1) split_len) and
// writes its unnormalised state to part ([row, split, (m, l, acc[head_dim])]), which
// attention_merge.comp combines into out.
// With n_prefix > 0 (a P-Tuning v2 prefix: kernels::KvView::prefix_k), every row first sees
// n_prefix keys of pkv (K rows from byte 0, V rows from pv_base, the cache's row layout and
// type): key j < n_prefix is prefix row j, key j >= n_prefix the cache's position j - n_prefix.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
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
  Floats part;     // [n_tokens * n_head, n_split, head_dim + 2] when n_split > 1
  uint n_split;
  uint split_len;  // keys a split (a multiple of 64)
  Words pkv;       // the prefix's K and V rows; unread when n_prefix is 0
  uint n_prefix;
  uint pv_base;
} p;

shared float qs[256];
shared float s[64];
shared float red_max[64];  // a value a subgroup
shared float red_sum[64];
shared uint vrow[64];  // the byte offset of each key's V row in this chunk

void main() {
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, z = gl_WorkGroupID.z;
  uint tid = gl_LocalInvocationID.x;
  uint hd = p.head_dim;
  uint kvh = h / (p.n_head / p.n_head_kv);
  uint qo = t * p.q_stride + h * hd;
  for (uint d = tid; d < hd; d += 64u) qs[d] = p.q.v[qo + d];
  barrier();
  uint n_keys = p.n_prefix + max(p.n_past + t + 1u, p.bidir_prefix);
  uint k_begin = min(z * p.split_len, n_keys);
  uint k_end = p.n_split > 1u ? min(k_begin + p.split_len, n_keys) : n_keys;
  float m = -1.0 / 0.0, l = 0.0;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  for (uint j0 = k_begin; j0 < k_end; j0 += 64u) {
    uint j = j0 + tid;
    float score = -1.0 / 0.0;
    if (j < k_end) {
      // The block table read once a key: the K row here, the V row for the sums below.
      Words src = p.kv;
      uint ro;
      if (j < p.n_prefix) {
        src = p.pkv;
        ro = j * p.row_bytes;
        vrow[tid] = p.pv_base + ro;
      } else {
        uint c = j - p.n_prefix;
        uint slot = uint(p.blocks.v[c / p.block_tokens]) * p.block_tokens + c % p.block_tokens;
        ro = p.k_base + slot * p.row_bytes;
        vrow[tid] = p.v_base + slot * p.row_bytes;
      }
      // Four partial sums: independent loads in flight.
      float d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
      uint e0 = kvh * hd;
      uint d = 0u;
      for (; d + 3u < hd; d += 4u) {
        d0 += qs[d] * kv_elem(src, ro, e0 + d);
        d1 += qs[d + 1u] * kv_elem(src, ro, e0 + d + 1u);
        d2 += qs[d + 2u] * kv_elem(src, ro, e0 + d + 2u);
        d3 += qs[d + 3u] * kv_elem(src, ro, e0 + d + 3u);
      }
      for (; d < hd; ++d) d0 += qs[d] * kv_elem(src, ro, e0 + d);
      score = ((d0 + d1) + (d2 + d3)) * p.scale;
    }
    // The chunk's max: each subgroup's, then theirs.
    float sm = subgroupMax(score);
    if (subgroupElect()) red_max[gl_SubgroupID] = sm;
    barrier();
    float chunk_max = red_max[0];
    for (uint g = 1u; g < gl_NumSubgroups; ++g) chunk_max = max(chunk_max, red_max[g]);
    float m_new = max(m, chunk_max);
    float pj = j < k_end ? exp(score - m_new) : 0.0;
    s[tid] = pj;
    float ss = subgroupAdd(pj);
    if (subgroupElect()) red_sum[gl_SubgroupID] = ss;
    barrier();
    float chunk_sum = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; ++g) chunk_sum += red_sum[g];
    float corr = exp(m - m_new);
    l = l * corr + chunk_sum;
    uint n_chunk = min(64u, k_end - j0);
    for (uint k = 0u; k < 4u; ++k) {
      uint d = tid + 64u * k;
      if (d >= hd) break;
      float a0 = 0.0, a1 = 0.0;
      uint jj = 0u;
      // The chunk's prefix keys (its first n_pre) read pkv, the others the cache.
      uint n_pre = j0 < p.n_prefix ? min(p.n_prefix - j0, n_chunk) : 0u;
      for (; jj < n_pre; ++jj) a0 += s[jj] * kv_elem(p.pkv, vrow[jj], kvh * hd + d);
      for (; jj + 1u < n_chunk; jj += 2u) {
        a0 += s[jj] * kv_elem(p.kv, vrow[jj], kvh * hd + d);
        a1 += s[jj + 1u] * kv_elem(p.kv, vrow[jj + 1u], kvh * hd + d);
      }
      if (jj < n_chunk) a0 += s[jj] * kv_elem(p.kv, vrow[jj], kvh * hd + d);
      acc[k] = acc[k] * corr + (a0 + a1);
    }
    m = m_new;
    barrier();  // s, vrow and the sums are written again by the next chunk
  }
  if (p.n_split > 1u) {
    // This split's state (m = -inf, l = 0 where it saw no key: it weighs 0 in the merge).
    uint po = ((t * p.n_head + h) * p.n_split + z) * (hd + 2u);
    if (tid == 0u) {
      p.part.v[po] = m;
      p.part.v[po + 1u] = l;
    }
    for (uint k = 0u; k < 4u; ++k) {
      uint d = tid + 64u * k;
      if (d < hd) p.part.v[po + 2u + d] = acc[k];
    }
    return;
  }
  uint oo = (p.out_row0 + t) * (p.n_head * hd) + h * hd;
  for (uint k = 0u; k < 4u; ++k) {
    uint d = tid + 64u * k;
    if (d < hd) p.out_.v[oo + d] = acc[k] / l;
  }
}
