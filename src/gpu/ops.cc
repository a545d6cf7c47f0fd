#include "gpu/ops.h"

#include <algorithm>

#include "core/check.h"
#include "gpu/dispatch.h"

namespace glm::gpu {

void moe_route(Stream& s, const MoeRouteArgs& a) {
  GLM_CHECK(a.k >= 1 && a.k <= kMaxMoeExperts && a.k <= a.n_expert);
  if (a.n_tokens == 0) return;
  struct {
    Addr logits, bias, ids, weights;
    uint32_t n_tokens, n_expert, k, has_bias, norm;
    float scale;
    uint32_t groups_per_y;
  } p{a.logits,
      a.bias,
      a.ids,
      a.weights,
      static_cast<uint32_t>(a.n_tokens),
      static_cast<uint32_t>(a.n_expert),
      static_cast<uint32_t>(a.k),
      a.bias != 0 ? 1u : 0u,
      a.norm ? 1u : 0u,
      a.scale,
      0};
  const Grid g = grid_for(a.n_tokens);  // a workgroup a token
  p.groups_per_y = g.x;
  s.dispatch(Shader::kMoeRoute, &p, sizeof(p), g.x, g.y);
}

void moe_combine(Stream& s, Addr y, Addr weights, Addr x, int n_tokens, int k, int n_embd) {
  struct {
    Addr y, weights, x;
    uint32_t n_tokens, n_embd, k;
  } p{y,
      weights,
      x,
      static_cast<uint32_t>(n_tokens),
      static_cast<uint32_t>(n_embd),
      static_cast<uint32_t>(k)};
  dispatch_1d(s, Shader::kMoeCombine, &p, sizeof(p), static_cast<int64_t>(n_tokens) * n_embd);
}

void rms_norm(Stream& s, Addr x, Addr w, Addr out, int n_rows, int n, float eps, Addr idx,
              Addr q8) {
  GLM_CHECK(q8 == 0 || n % 32 == 0);
  struct {
    Addr x, w, out, idx;
    uint32_t n, use_idx;
    float eps;
    uint32_t has_q8;
    Addr q8;
  } p{x, w, out, idx, static_cast<uint32_t>(n), idx != 0 ? 1u : 0u, eps, q8 != 0 ? 1u : 0u, q8};
  GLM_CHECK(static_cast<uint32_t>(n_rows) <= kMaxGroups);
  s.dispatch(Shader::kRmsNorm, &p, sizeof(p), static_cast<uint32_t>(n_rows));
}

void head_norm(Stream& s, Addr x, Addr w, int n_tokens, int row_stride, int n_head, int n_q,
               int head_dim, float eps) {
  GLM_CHECK(n_q >= 0 && n_q <= n_head && int64_t{n_head} * head_dim <= row_stride);
  const int64_t rows = int64_t{n_tokens} * n_head;  // a workgroup each
  if (rows == 0) return;
  struct {
    Addr x, w;
    uint32_t n_tokens, row_stride, n_head, n_q, head_dim;
    float eps;
    uint32_t groups_per_y;
  } p{x,
      w,
      static_cast<uint32_t>(n_tokens),
      static_cast<uint32_t>(row_stride),
      static_cast<uint32_t>(n_head),
      static_cast<uint32_t>(n_q),
      static_cast<uint32_t>(head_dim),
      eps,
      0};
  const Grid g = grid_for(rows);
  p.groups_per_y = g.x;
  s.dispatch(Shader::kHeadNorm, &p, sizeof(p), g.x, g.y);
}

void layer_norm(Stream& s, Addr x, Addr w, Addr b, Addr out, int n_rows, int n, float eps, Addr idx,
                Addr q8) {
  GLM_CHECK(q8 == 0 || n % 32 == 0);
  struct {
    Addr x, w, b, out, idx;
    uint32_t n, use_idx;
    float eps;
    uint32_t has_q8;
    Addr q8;
  } p{x, w, b, out, idx, static_cast<uint32_t>(n), idx != 0 ? 1u : 0u, eps, q8 != 0 ? 1u : 0u, q8};
  GLM_CHECK(static_cast<uint32_t>(n_rows) <= kMaxGroups);
  s.dispatch(Shader::kLayerNorm, &p, sizeof(p), static_cast<uint32_t>(n_rows));
}

void rope(Stream& s, Addr x, Addr cs, Addr sn, int n_tokens, int row_stride, int col0, int n_head,
          int head_dim, int n_rot, RopeKind kind, const RopeTo* to) {
  const uint32_t n_parts = kind == RopeKind::kNeox2D ? 2 : 1;
  const uint32_t neox = kind == RopeKind::kInterleaved ? 0 : 1;
  GLM_CHECK(n_rot % 2 == 0 && n_rot * static_cast<int>(n_parts) <= head_dim);
  const RopeTo out = to != nullptr ? *to : RopeTo{x, row_stride, col0, head_dim};
  struct {
    Addr x, cs, sn;
    uint32_t n_tokens, row_stride, col0, n_head, head_dim, n_rot, n_parts, neox;
    Addr y;
    uint32_t y_stride, y_col, y_head;
  } p{x,
      cs,
      sn,
      static_cast<uint32_t>(n_tokens),
      static_cast<uint32_t>(row_stride),
      static_cast<uint32_t>(col0),
      static_cast<uint32_t>(n_head),
      static_cast<uint32_t>(head_dim),
      static_cast<uint32_t>(n_rot),
      n_parts,
      neox,
      out.y,
      static_cast<uint32_t>(out.stride),
      static_cast<uint32_t>(out.col),
      static_cast<uint32_t>(out.head_stride)};
  dispatch_1d(s, Shader::kRope, &p, sizeof(p), int64_t{n_tokens} * n_head * n_parts * (n_rot / 2));
}

void swiglu(Stream& s, Addr in, Addr out, int n_tokens, int n, int in_stride, int gate_col,
            int up_col, Addr q8) {
  GLM_CHECK(q8 == 0 || n % 32 == 0);
  struct {
    Addr g, u, out;
    uint32_t n_tokens, n, in_stride, gate_col, up_col, has_q8;
    Addr q8;
  } p{in,
      in,
      out,
      static_cast<uint32_t>(n_tokens),
      static_cast<uint32_t>(n),
      static_cast<uint32_t>(in_stride),
      static_cast<uint32_t>(gate_col),
      static_cast<uint32_t>(up_col),
      q8 != 0 ? 1u : 0u,
      q8};
  // A thread a value, or with q8 a thread a 32-value block.
  dispatch_1d(s, Shader::kSwiglu, &p, sizeof(p), int64_t{n_tokens} * (q8 != 0 ? n / 32 : n));
}

void gelu(Stream& s, Addr x, int64_t n, Addr q8) {
  GLM_CHECK(q8 == 0 || n % 32 == 0);
  struct {
    Addr x;
    uint32_t n, has_q8;
    Addr q8;
  } p{x, static_cast<uint32_t>(n), q8 != 0 ? 1u : 0u, q8};
  // A thread a value, or with q8 a thread a 32-value block.
  dispatch_1d(s, Shader::kGelu, &p, sizeof(p), q8 != 0 ? n / 32 : n);
}

void scale_add(Stream& s, Addr x, float scale, Addr y, int64_t n) {
  struct {
    Addr x, y;
    uint32_t n;
    float scale;
  } p{x, y, static_cast<uint32_t>(n), scale};
  dispatch_1d(s, Shader::kAdd, &p, sizeof(p), n);
}

void copy_rows(Stream& s, Addr src, Addr dst, int n_rows, int n, int src_stride, int src_col,
               int dst_stride, int dst_col) {
  struct {
    Addr src, dst;
    uint32_t n_rows, n, src_stride, src_col, dst_stride, dst_col;
  } p{src,
      dst,
      static_cast<uint32_t>(n_rows),
      static_cast<uint32_t>(n),
      static_cast<uint32_t>(src_stride),
      static_cast<uint32_t>(src_col),
      static_cast<uint32_t>(dst_stride),
      static_cast<uint32_t>(dst_col)};
  dispatch_1d(s, Shader::kCopyRows, &p, sizeof(p), int64_t{n_rows} * n);
}

void kv_store(Stream& s, DType type, const KvStoreArgs& a) {
  KvShaders sh;
  GLM_CHECK(kv_shaders(type, &sh));
  GLM_CHECK(type != DType::kQ8_0 || a.row_elems <= kMaxQ8RowElems);
  const bool rotary = a.n_rot > 0;
  GLM_CHECK(!rotary || (a.rope != RopeKind::kNeox2D && a.n_rot % 2 == 0 && a.rot_col >= 0 &&
                        a.rot_col + a.n_rot <= a.head_dim && a.row_elems % a.head_dim == 0 &&
                        (a.store_v || a.n_q_heads == 0)));
  struct {
    Addr src, kv, slots;
    uint32_t src_stride, k_col, v_col, v_base, row_elems, row_bytes;
    Addr cs, sn;  // at offset 48, as the shader's 8-byte aligned references
    uint32_t n_q_heads, head_dim, n_rot, neox, rot_col;
  } p{a.src,
      a.kv,
      a.slots,
      static_cast<uint32_t>(a.src_stride),
      static_cast<uint32_t>(a.k_col),
      static_cast<uint32_t>(a.v_col),
      a.v_base,
      static_cast<uint32_t>(a.row_elems),
      a.row_bytes,
      a.cs,
      a.sn,
      static_cast<uint32_t>(a.n_q_heads),
      static_cast<uint32_t>(rotary ? a.head_dim : 1),
      static_cast<uint32_t>(a.n_rot),
      a.rope == RopeKind::kNeox ? 1u : 0u,
      static_cast<uint32_t>(rotary ? a.rot_col : 0)};
  GLM_CHECK(static_cast<uint32_t>(a.n_tokens) <= kMaxGroups);
  // Workgroups (t, 0): K, (t, 1): V, (t, 2): the query heads' rotary.
  s.dispatch(sh.store, &p, sizeof(p), static_cast<uint32_t>(a.n_tokens),
             rotary && a.n_q_heads > 0 ? 3 : (a.store_v ? 2 : 1));
}

void attention(Stream& s, DType type, const AttentionArgs& a) {
  KvShaders sh;
  GLM_CHECK(kv_shaders(type, &sh));
  GLM_CHECK(a.head_dim <= kAttentionMaxHeadDim && a.n_head % a.n_head_kv == 0 &&
            a.bidir_prefix >= 0);
  const bool wide = a.head_dim > kAttentionNarrowHeadDim;  // attention.comp's DIMS 9
  // A workgroup's rows (attention.comp's ROWS): as many of a KV head's query heads as divide
  // its group, at most kAttentionRows, times tokens to make kAttentionRows; one row a workgroup
  // where that gives a workgroup a single row (no grouped heads, one token).
  const int group = a.n_head / a.n_head_kv;
  int heads = 1;
  while (heads < kAttentionRows && group % (2 * heads) == 0) heads *= 2;
  int tokens = kAttentionRows / heads;
  const bool rows = heads * std::min(tokens, a.n_tokens) >= 2;
  if (!rows) heads = tokens = 1;
  const int v_dims = a.v_dims > 0 ? a.v_dims : a.head_dim;
  GLM_CHECK(v_dims <= a.head_dim && (a.out_q8 == 0 || v_dims % 32 == 0));
  struct {
    Addr q, out, kv, blocks, part, pkv, out_q8;
    uint32_t q_stride, out_row0, v_base, row_bytes, n_past, n_head, n_head_kv, head_dim,
        block_tokens;
    float scale;
    uint32_t bidir_prefix, n_split, split_len, n_prefix, pv_base, group_shape, v_dims, n_tokens;
  } p{a.q,
      a.out,
      a.kv,
      a.blocks,
      a.scratch,
      a.prefix_kv,
      a.out_q8,
      static_cast<uint32_t>(a.q_stride),
      static_cast<uint32_t>(a.out_row0),
      a.v_base,
      a.row_bytes,
      static_cast<uint32_t>(a.n_past),
      static_cast<uint32_t>(a.n_head),
      static_cast<uint32_t>(a.n_head_kv),
      static_cast<uint32_t>(a.head_dim),
      static_cast<uint32_t>(a.block_tokens),
      a.scale,
      static_cast<uint32_t>(a.bidir_prefix),
      1,
      0,
      static_cast<uint32_t>(a.n_prefix),
      a.prefix_v_base,
      static_cast<uint32_t>(heads) | static_cast<uint32_t>(tokens) << 16,
      static_cast<uint32_t>(v_dims),
      static_cast<uint32_t>(a.n_tokens)};
  static_assert(sizeof(p) == 128);
  const int64_t gx = a.n_head / heads, gy = (a.n_tokens + tokens - 1) / tokens;
  GLM_CHECK(gy <= kMaxGroups && a.n_prefix >= 0);
  // Splits of the keys: the most keys a row sees (the last token's, or the bidirectional prefix;
  // after a P-Tuning prefix's), over about kAttentionSplitGroups workgroups.
  const int n_rows = a.n_tokens * a.n_head;
  const int64_t n_keys =
      a.n_prefix + std::max<int64_t>(int64_t{a.n_past} + a.n_tokens, a.bidir_prefix);
  if (a.scratch != 0 && n_rows < kAttentionSplitRows && n_keys >= 2 * kAttentionSplitMinKeys) {
    const int64_t want = (kAttentionSplitGroups + gx * gy - 1) / (gx * gy);
    const int64_t n_split = std::min<int64_t>(want, n_keys / kAttentionSplitMinKeys);
    const int64_t len = ((n_keys + n_split - 1) / n_split + 63) / 64 * 64;  // whole chunks
    p.split_len = static_cast<uint32_t>(len);
    p.n_split = static_cast<uint32_t>((n_keys + len - 1) / len);
    GLM_CHECK(static_cast<size_t>(n_rows) * p.n_split * (a.head_dim + 2) <=
              attention_scratch_floats(a.head_dim));
  }
  const Shader shader = rows ? (wide ? sh.attention_rows_wide : sh.attention_rows)
                             : (wide ? sh.attention_wide : sh.attention);
  s.dispatch(shader, &p, sizeof(p), static_cast<uint32_t>(gx), static_cast<uint32_t>(gy),
             p.n_split);
  if (p.n_split > 1) {
    struct {
      Addr part, out, out_q8;
      uint32_t n_head, head_dim, n_split, out_row0, v_dims;
    } m{a.scratch,
        a.out,
        a.out_q8,
        static_cast<uint32_t>(a.n_head),
        static_cast<uint32_t>(a.head_dim),
        p.n_split,
        static_cast<uint32_t>(a.out_row0),
        static_cast<uint32_t>(v_dims)};
    s.dispatch(Shader::kAttentionMerge, &m, sizeof(m), static_cast<uint32_t>(a.n_head),
               static_cast<uint32_t>(a.n_tokens));
  }
}

}  // namespace glm::gpu
