#version 450
// Causal attention of one sequence's new query rows over its cached K/V (the twin of
// kernels::attention; grouped-query: query head h reads KV head h / (n_head / n_head_kv)),
// optionally with a bidirectional prefix (kernels::AttentionShape::bidir_prefix: the row at
// position p sees [0, max(p + 1, bidir_prefix)); ChatGLM-6B's prompt; 0 = causal).
//   q: [n_tokens, q_stride] f32, head h of token t at t * q_stride + h * head_dim;
//   out: [n_tokens, n_head * v_dims] f32 (rows from out_row0): each head's first v_dims value
//   dims (head_dim, or latent attention's kv_lora: its rotary dims are not values);
//   kv: one layer's cache (K rows from its start, V rows from v_base, row_bytes apart);
//   blocks: [n_blocks] the sequence's block table, block_tokens positions a block.
// One workgroup per (ROWS query rows of one KV head, split): workgroup (x, y) takes heads
// x * heads_per_group .. and tokens y * tokens_per_group .. (group_shape's); keys in chunks of
// 64, one key's scores (a row's each) per thread, an online softmax a row across chunks (its max
// and sum by subgroup operations: three barriers a chunk), each thread accumulating v_dims / 64
// output dims of every row (DIMS at most: head_dim up to 256, or 576 in the attention_wide_*
// variants, latent attention's rows of kv_lora + rope, whose V rows are their K rows: v_base 0).
// With n_split > 1 (few rows over many keys: a decode step at depth), split z takes keys
// [z split_len, (z + 1) split_len) and writes its unnormalised state to part ([row, split, (m,
// l, acc[head_dim])]), which attention_merge.comp combines into out.
// With n_prefix > 0 (a P-Tuning v2 prefix: kernels::KvView::prefix_k), every row first sees
// n_prefix keys of pkv (K rows from byte 0, V rows from pv_base, the cache's row layout and
// type): key j < n_prefix is prefix row j, key j >= n_prefix the cache's position j - n_prefix.
// Where out_q8 is not 0, the output rows are also written as the integer-dot matmuls' 8-bit
// blocks (q8.glsl; v_dims a multiple of 32, so a head's dims are whole blocks): [*, n_head *
// v_dims / 32] from out_row0, by attention_merge.comp where the keys split.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "kv.glsl"
#include "q8.glsl"
layout(local_size_x = 64) in;
// The addresses first: with them 8-byte aligned the block fills the 128 bytes exactly.
layout(push_constant) uniform Push {
  Floats q;
  Floats out_;
  Words kv;
  Ints blocks;
  Floats part;  // [n_tokens * n_head, n_split, head_dim + 2] when n_split > 1
  Words pkv;    // the prefix's K and V rows; unread when n_prefix is 0
  Words out_q8;
  uint q_stride;
  uint out_row0;
  uint v_base;
  uint row_bytes;
  uint n_past;
  uint n_head;
  uint n_head_kv;
  uint head_dim;
  uint block_tokens;
  float scale;
  uint bidir_prefix;
  uint n_split;
  uint split_len;  // keys a split (a multiple of 64)
  uint n_prefix;
  uint pv_base;
  uint group_shape;  // heads_per_group | tokens_per_group << 16; their product ROWS (or both 1)
  uint v_dims;
  uint n_tokens;
} p;

// ROWS (1, or 8 for attention_rows_*): the query rows a workgroup takes, all of one KV head, so
// that each key's K and V rows are read once for all of them: heads_per_group neighbouring
// heads (of one KV head's group) x tokens_per_group neighbouring tokens (their product ROWS).
#ifndef ROWS
#define ROWS 1
#endif
// DIMS: the output dims a thread holds, 64 apart (head_dim <= 64 DIMS).
#ifndef DIMS
#define DIMS 4
#endif
#if DIMS != 4 && DIMS != 9
#error "DIMS: 4 (head_dim <= 256) or 9 (<= 576)"
#endif
shared float qs[ROWS][64 * DIMS];
shared float s[ROWS][64];
shared float red_max[ROWS][16];  // a value a subgroup (at least 4 lanes: at most 16)
shared float red_sum[ROWS][16];
shared uint vrow[64];  // the byte offset of each key's V row in this chunk

// The workgroup's row r: head h0 + r % heads_per_group, token t0 + r / heads_per_group (h0, t0:
// the workgroup's first); past the tokens (or the group) it is not computed (row_on). Functions,
// not arrays: a row found at run time (the 8-bit blocks below) would index an array in memory.
uint heads_per_group() { return p.group_shape & 0xFFFFu; }
uint tokens_per_group() { return p.group_shape >> 16; }
uint row_h(uint r) { return gl_WorkGroupID.x * heads_per_group() + r % heads_per_group(); }
uint row_t(uint r) { return gl_WorkGroupID.y * tokens_per_group() + r / heads_per_group(); }
bool row_on(uint r) {
  return r < heads_per_group() * tokens_per_group() && row_t(r) < p.n_tokens;
}

// Dim d (of the KV head at e0) of the chunk's V rows weighted by each row's softmax weights
// (s[r][jj], keys jj < n_chunk; the first n_pre are the prefix's rows), added to acc_d[r] once
// it is scaled by corr[r]; nothing where d is past the values (v_dims). Each V value is read
// once for every row. main calls it once a dim a thread holds: a loop over them around the key
// loops would stay rolled (only loops without loops inside unroll), and acc with it in memory.
void add_chunk_v(uint d, uint e0, uint n_pre, uint n_chunk, float corr[ROWS],
                 inout float acc_d[ROWS]) {
  if (d < p.v_dims) {
    float a0[ROWS], a1[ROWS];
    UNROLLED for (uint r = 0u; r < ROWS; ++r) a0[r] = a1[r] = 0.0;
    uint jj = 0u;
    for (; jj < n_pre; ++jj) {
      float v = kv_elem(p.pkv, vrow[jj], e0 + d);
      UNROLLED for (uint r = 0u; r < ROWS; ++r) a0[r] += s[r][jj] * v;
    }
    for (; jj + 1u < n_chunk; jj += 2u) {
      float v0 = kv_elem(p.kv, vrow[jj], e0 + d);
      float v1 = kv_elem(p.kv, vrow[jj + 1u], e0 + d);
      UNROLLED for (uint r = 0u; r < ROWS; ++r) {
        a0[r] += s[r][jj] * v0;
        a1[r] += s[r][jj + 1u] * v1;
      }
    }
    if (jj < n_chunk) {
      float v = kv_elem(p.kv, vrow[jj], e0 + d);
      UNROLLED for (uint r = 0u; r < ROWS; ++r) a0[r] += s[r][jj] * v;
    }
    UNROLLED for (uint r = 0u; r < ROWS; ++r) acc_d[r] = acc_d[r] * corr[r] + (a0[r] + a1[r]);
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x, z = gl_WorkGroupID.z;
  uint hd = p.head_dim;
  uint kvh = row_h(0u) / (p.n_head / p.n_head_kv);
  uint row_keys[ROWS];  // row r's keys: [0, row_keys[r])
  uint n_keys = 0u;     // the most keys a row of the workgroup sees
  UNROLLED for (uint r = 0u; r < ROWS; ++r) {
    row_keys[r] = row_on(r) ? p.n_prefix + max(p.n_past + row_t(r) + 1u, p.bidir_prefix) : 0u;
    n_keys = max(n_keys, row_keys[r]);
  }
  for (uint d = tid; d < hd; d += 64u) {
    UNROLLED for (uint r = 0u; r < ROWS; ++r) {
      qs[r][d] = row_on(r) ? p.q.v[row_t(r) * p.q_stride + row_h(r) * hd + d] : 0.0;
    }
  }
  barrier();
  uint k_begin = min(z * p.split_len, n_keys);
  uint k_end = p.n_split > 1u ? min(k_begin + p.split_len, n_keys) : n_keys;
  float m[ROWS], l[ROWS], acc[DIMS][ROWS];  // acc[k][r]: row r's dim tid + 64 k
  UNROLLED for (uint r = 0u; r < ROWS; ++r) {
    m[r] = -1.0 / 0.0;
    l[r] = 0.0;
    UNROLLED for (uint k = 0u; k < DIMS; ++k) acc[k][r] = 0.0;
  }
  for (uint j0 = k_begin; j0 < k_end; j0 += 64u) {
    uint j = j0 + tid;
    float score[ROWS];
    UNROLLED for (uint r = 0u; r < ROWS; ++r) score[r] = -1.0 / 0.0;
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
        ro = slot * p.row_bytes;
        vrow[tid] = p.v_base + slot * p.row_bytes;
      }
      // Two partial sums a row (ROWS 1: independent loads in flight); each K value once for
      // every row.
      float d0[ROWS], d1[ROWS];
      UNROLLED for (uint r = 0u; r < ROWS; ++r) d0[r] = d1[r] = 0.0;
      uint e0 = kvh * hd;
      uint d = 0u;
      for (; d + 1u < hd; d += 2u) {
        float k0 = kv_elem(src, ro, e0 + d), k1 = kv_elem(src, ro, e0 + d + 1u);
        UNROLLED for (uint r = 0u; r < ROWS; ++r) {
          d0[r] += qs[r][d] * k0;
          d1[r] += qs[r][d + 1u] * k1;
        }
      }
      if (d < hd) {
        float k0 = kv_elem(src, ro, e0 + d);
        UNROLLED for (uint r = 0u; r < ROWS; ++r) d0[r] += qs[r][d] * k0;
      }
      UNROLLED for (uint r = 0u; r < ROWS; ++r) {
        if (j < row_keys[r]) score[r] = (d0[r] + d1[r]) * p.scale;
      }
    }
    // Each row's chunk max: each subgroup's, then theirs.
    UNROLLED for (uint r = 0u; r < ROWS; ++r) {
      float sm = subgroupMax(score[r]);
      if (subgroupElect()) red_max[r][gl_SubgroupID] = sm;
    }
    barrier();
    float m_new[ROWS];
    UNROLLED for (uint r = 0u; r < ROWS; ++r) m_new[r] = max(m[r], red_max[r][0]);
    for (uint g = 1u; g < gl_NumSubgroups; ++g) {
      UNROLLED for (uint r = 0u; r < ROWS; ++r) m_new[r] = max(m_new[r], red_max[r][g]);
    }
    UNROLLED for (uint r = 0u; r < ROWS; ++r) {
      // A key past the row's (or a row that has seen none yet: m_new -inf) weighs 0.
      float pj = score[r] > -1.0 / 0.0 ? exp(score[r] - m_new[r]) : 0.0;
      s[r][tid] = pj;
      float ss = subgroupAdd(pj);
      if (subgroupElect()) red_sum[r][gl_SubgroupID] = ss;
    }
    barrier();
    float corr[ROWS], chunk_sum[ROWS];
    UNROLLED for (uint r = 0u; r < ROWS; ++r) chunk_sum[r] = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; ++g) {
      UNROLLED for (uint r = 0u; r < ROWS; ++r) chunk_sum[r] += red_sum[r][g];
    }
    UNROLLED for (uint r = 0u; r < ROWS; ++r) {
      corr[r] = m_new[r] > -1.0 / 0.0 ? exp(m[r] - m_new[r]) : 1.0;
      l[r] = l[r] * corr[r] + chunk_sum[r];
      m[r] = m_new[r];
    }
    uint n_chunk = min(64u, k_end - j0);
    uint n_pre = j0 < p.n_prefix ? min(p.n_prefix - j0, n_chunk) : 0u;
    // The dims a thread holds, one call each.
    add_chunk_v(tid, kvh * hd, n_pre, n_chunk, corr, acc[0]);
    add_chunk_v(tid + 64u, kvh * hd, n_pre, n_chunk, corr, acc[1]);
    add_chunk_v(tid + 128u, kvh * hd, n_pre, n_chunk, corr, acc[2]);
    add_chunk_v(tid + 192u, kvh * hd, n_pre, n_chunk, corr, acc[3]);
#if DIMS == 9
    add_chunk_v(tid + 256u, kvh * hd, n_pre, n_chunk, corr, acc[4]);
    add_chunk_v(tid + 320u, kvh * hd, n_pre, n_chunk, corr, acc[5]);
    add_chunk_v(tid + 384u, kvh * hd, n_pre, n_chunk, corr, acc[6]);
    add_chunk_v(tid + 448u, kvh * hd, n_pre, n_chunk, corr, acc[7]);
    add_chunk_v(tid + 512u, kvh * hd, n_pre, n_chunk, corr, acc[8]);
#endif
    barrier();  // s, vrow and the sums are written again by the next chunk
  }
  UNROLLED for (uint r = 0u; r < ROWS; ++r) {
    uint t = row_t(r), h = row_h(r);
    if (row_on(r) && p.n_split > 1u) {
      // This split's state (m = -inf, l = 0 where it saw no key: it weighs 0 in the merge).
      uint po = ((t * p.n_head + h) * p.n_split + z) * (hd + 2u);
      if (tid == 0u) {
        p.part.v[po] = m[r];
        p.part.v[po + 1u] = l[r];
      }
      UNROLLED for (uint k = 0u; k < DIMS; ++k) {
        uint d = tid + 64u * k;
        if (d < p.v_dims) p.part.v[po + 2u + d] = acc[k][r];
      }
    } else if (row_on(r)) {
      uint oo = (p.out_row0 + t) * (p.n_head * p.v_dims) + h * p.v_dims;
      UNROLLED for (uint k = 0u; k < DIMS; ++k) {
        uint d = tid + 64u * k;
        if (d < p.v_dims) p.out_.v[oo + d] = acc[k][r] / l[r];
      }
    }
  }
  if (p.n_split > 1u || all(equal(uvec2(p.out_q8), uvec2(0u)))) return;  // the same in every thread
  // The rows' 8-bit blocks: the rows staged in qs (after every thread's last read of it), then
  // a thread a block of 32 dims.
  barrier();
  UNROLLED for (uint r = 0u; r < ROWS; ++r) {
    UNROLLED for (uint k = 0u; k < DIMS; ++k) {
      uint d = tid + 64u * k;
      if (row_on(r) && d < p.v_dims) qs[r][d] = acc[k][r] / l[r];
    }
  }
  barrier();
  uint nb = p.v_dims / 32u;
  for (uint j = tid; j < ROWS * nb; j += 64u) {
    uint r = j / nb, b = j % nb;
    if (row_on(r)) {
      float v[32];
      UNROLLED for (uint e = 0u; e < 32u; ++e) v[e] = qs[r][32u * b + e];
      uint o = (p.out_row0 + row_t(r)) * (p.n_head * nb) + row_h(r) * nb + b;
      store_q8_block(p.out_q8, 9u * o, v);
    }
  }
}
