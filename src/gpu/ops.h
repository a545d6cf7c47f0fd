// The host side of each shader: typed arguments packed into its push constants and the dispatch
// geometry, recorded on a Stream (nothing runs until Stream::submit_and_wait). Buffers are
// passed as device addresses (Buffer::address() + a byte offset), so a view into a larger
// buffer is an address. Each op names its CPU twin, which is its reference in gpu_test.cc. The
// matrix products are in matmul.h (included here: a model records both).
// Thread-safety: as the Stream (one thread). Cost: recording only, O(1) per op.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "gpu/device.h"
#include "gpu/matmul.h"

namespace glm::gpu {

// The routing of n_tokens tokens into k experts each (model::route_token; moe_route.comp):
// logits [n_tokens, n_expert] -> ids [n_tokens, k] int32 (highest biased score first) and
// weights [n_tokens, k] f32. bias: [n_expert] or 0. k at most kMaxMoeExperts.
inline constexpr int kMaxMoeExperts = 16;
struct MoeRouteArgs {
  Addr logits = 0, bias = 0, ids = 0, weights = 0;
  int n_tokens = 0, n_expert = 0, k = 0;
  bool norm = false;   // divide by the chosen scores' sum
  float scale = 1.0f;  // then times this
};
void moe_route(Stream& s, const MoeRouteArgs& a);

// x[t, c] += sum_j weights[t, j] * y[t * k + j, c]  (model::MoeFfn::forward's weighted sum)
//   y: [n_tokens * k, n_embd]; weights: [n_tokens, k]; x: [n_tokens, n_embd].
void moe_combine(Stream& s, Addr y, Addr weights, Addr x, int n_tokens, int k, int n_embd);

// out[r] = rms_norm(x[idx ? idx[r] : r]) * w   (model::ops::rms_norm)
//   x: [*, n]; w: [n]; out: [n_rows, n]; idx: [n_rows] int32 or 0; q8: 0, or out's rows also
//   as quantize_q8 writes them (n a multiple of 32), for a matmul's x_q8.
void rms_norm(Stream& s, Addr x, Addr w, Addr out, int n_rows, int n, float eps, Addr idx = 0,
              Addr q8 = 0);

// Each head of x[t * row_stride + h * head_dim ...] (t < n_tokens, h < n_head) RMS-normed over
// its head_dim values in place, times w's first row for h < n_q and its second for the others
// (model::ops::rms_norm_heads: GLM-4.5's Q/K norms over the q heads and the k heads after them).
//   x: [n_tokens, row_stride] f32; w: [2, head_dim].
void head_norm(Stream& s, Addr x, Addr w, int n_tokens, int row_stride, int n_head, int n_q,
               int head_dim, float eps);

// out[r] = layer_norm(x[idx ? idx[r] : r]) * w + b   (model::ops::layer_norm)
//   x: [*, n]; w, b: [n]; out: [n_rows, n] (not aliasing x); idx: [n_rows] int32 or 0;
//   q8: where not 0, out's rows also as quantize_q8 writes them (n a multiple of 32).
void layer_norm(Stream& s, Addr x, Addr w, Addr b, Addr out, int n_rows, int n, float eps,
                Addr idx = 0, Addr q8 = 0);

// Rotary on the heads of x[t * row_stride + col0 ...], in place. kInterleaved: pairs (x[2i],
// x[2i+1]) of the first n_rot dims of each head (model::ops::rope_interleaved); cs, sn:
// [n_tokens, n_rot / 2]. kNeox2D: ChatGLM-6B's 2D rotary, each half of a head (head_dim / 2
// dims) rotated over its first n_rot dims by rotate-half pairs (x[i], x[i + n_rot/2])
// (model::ops::rope_neox), the first half by the token's position, the second by its block
// position; cs, sn: [n_tokens, 2 (position, block position), n_rot / 2]. kNeox: rotate-half
// pairs (x[i], x[i + n_rot/2]) of the first n_rot dims of each head (model::ops::rope_neox:
// GLM-4.5); cs, sn as kInterleaved's.
// With `to`, x is left as it is and only the rotated dims are written, head h of token t's
// (each part's first n_rot) into to->y[t * to->stride + to->col + h * to->head_stride ...], at
// the offsets they have in x's head (GLM-4.7-Flash's query heads: each head's rotary part rotated
// into its absorbed row, rope and copy in one dispatch). y must not overlap x's heads.
enum class RopeKind { kInterleaved, kNeox2D, kNeox };
struct RopeTo {
  Addr y = 0;
  int stride = 0, col = 0, head_stride = 0;
};
void rope(Stream& s, Addr x, Addr cs, Addr sn, int n_tokens, int row_stride, int col0, int n_head,
          int head_dim, int n_rot, RopeKind kind = RopeKind::kInterleaved,
          const RopeTo* to = nullptr);

// out[t, i] = silu(in[t * in_stride + gate_col + i]) * in[t * in_stride + up_col + i]
// (model::ops::swiglu); out: [n_tokens, n]; q8: 0, or out's rows also as quantize_q8 writes
// them (n a multiple of 32), for a matmul's x_q8.
void swiglu(Stream& s, Addr in, Addr out, int n_tokens, int n, int in_stride, int gate_col,
            int up_col, Addr q8 = 0);

// x[i] = gelu_tanh(x[i]), in place, [n]   (model::ops::gelu_tanh)
//   q8: where not 0, the results also as quantize_q8 writes them, [n / 32] blocks (n and the
//   rows' length multiples of 32).
void gelu(Stream& s, Addr x, int64_t n, Addr q8 = 0);

// y[i] = y[i] * scale + x[i], [n]   (model::ops::scale_add)
void scale_add(Stream& s, Addr x, float scale, Addr y, int64_t n);
// y[i] += x[i], [n]   (model::ops::add)
inline void add(Stream& s, Addr x, Addr y, int64_t n) { scale_add(s, x, 1.0f, y, n); }

// dst[t * dst_stride + dst_col + c] = src[t * src_stride + src_col + c].
void copy_rows(Stream& s, Addr src, Addr dst, int n_rows, int n, int src_stride, int src_col,
               int dst_stride, int dst_col);

// The widest K/V row a q8_0 cache takes on the GPU (the store shader stages a row in shared
// memory).
inline constexpr int kMaxQ8RowElems = 4096;

// Stores token t's K row (src[t * src_stride + k_col ...]) and V row (v_col) of row_elems
// values as `type` (kernels::kv_store_row) into slot slots[t] of a layer's cache buffer `kv`:
// at byte slot * row_bytes (K), v_base + slot * row_bytes (V). Without store_v, the K rows only
// (a latent-attention cache: model::KvPool::parts 1; v_col and v_base unread).
// With n_rot > 0, also rope()'s rotary (kInterleaved or kNeox; cs, sn: [n_tokens, n_rot / 2])
// in the same dispatch: the K row's heads of head_dim are stored rotated (src's K columns stay
// as they were) and the n_q_heads query heads at column 0 of src are rotated in place, as
// rope() over them and then kv_store() would; each head over its dims rot_col .. rot_col +
// n_rot - 1 (rope() with col0 rot_col). Query heads only with store_v.
struct KvStoreArgs {
  Addr src = 0, kv = 0, slots = 0;
  int n_tokens = 0, src_stride = 0, k_col = 0, v_col = 0;
  uint32_t v_base = 0;
  int row_elems = 0;
  uint32_t row_bytes = 0;
  Addr cs = 0, sn = 0;  // the rotary's tables, where n_rot > 0
  int n_q_heads = 0, head_dim = 0, n_rot = 0;
  int rot_col = 0;  // a head's first rotated dim (GLM-4.7-Flash's K row: kv_lora)
  RopeKind rope = RopeKind::kInterleaved;
  bool store_v = true;
};
void kv_store(Stream& s, DType type, const KvStoreArgs& a);

// Causal grouped-query attention of one sequence's n_tokens new query rows over its cache
// (kernels::attention): q head h of token t at q[t * q_stride + h * head_dim]; out rows
// out_row0 + t of [*, n_head * v_dims], each head's first v_dims value dims (v_dims 0: head_dim;
// fewer: latent attention's K rows, whose last dims are the rotary's and no values); blocks:
// the sequence's block table (int32); head_dim <= kAttentionMaxHeadDim.
// bidir_prefix as kernels::AttentionShape's (0 = causal): the block table must then cover
// max(n_past + n_tokens, bidir_prefix) positions.
// With a scratch buffer (attention_scratch_floats(head_dim) f32 at `scratch`), few rows over many
// keys (a decode step at depth: n_tokens x n_head < kAttentionSplitRows) split their keys across
// workgroups, about kAttentionSplitGroups in all with at least kAttentionSplitMinKeys keys
// each, and a second dispatch merges the splits (attention_merge.comp): without it one
// workgroup a head walks every key. The scratch must not be in use by another attention
// recorded beside this one (Stream::concurrent_with_last).
// A workgroup takes up to kAttentionRows query rows of one KV head (its query heads first, then
// neighbouring tokens: attention.comp's ROWS), so each K and V row is read once for all of them.
inline constexpr int kAttentionSplitRows = 128;
inline constexpr int kAttentionSplitGroups = 256;
inline constexpr int kAttentionSplitMinKeys = 256;
inline constexpr int kAttentionRows = 8;
// The widest head: latent attention's rows (GLM-4.7-Flash: kv_lora 512 + rope 64). Heads over
// kAttentionNarrowHeadDim run attention.comp's wide variants (DIMS 9; DIMS 4 below).
inline constexpr int kAttentionNarrowHeadDim = 256;
inline constexpr int kAttentionMaxHeadDim = 576;
// The split scratch of heads of head_dim: rows x splits < kAttentionRows x kAttentionSplitGroups +
// kAttentionSplitRows (a workgroup's rows each split alike), each of head_dim + 2.
inline constexpr size_t attention_scratch_floats(int head_dim) {
  return size_t{kAttentionRows * kAttentionSplitGroups + kAttentionSplitRows} *
         static_cast<size_t>(head_dim + 2);
}
// out_q8: 0, or out's rows also as quantize_q8 writes them (v_dims a multiple of 32), for
// the next matmul's x_q8: [*, n_head * v_dims / 32] blocks from out_row0.
// The K rows start at kv, the V rows at kv + v_base (as kv_store writes them).
struct AttentionArgs {
  Addr q = 0, out = 0, kv = 0, blocks = 0;
  Addr scratch = 0;  // attention_scratch_floats(head_dim) f32, or 0: no splits
  Addr out_q8 = 0;
  int n_tokens = 0, q_stride = 0, out_row0 = 0;
  uint32_t v_base = 0, row_bytes = 0;
  int n_past = 0, n_head = 0, n_head_kv = 0, head_dim = 0, block_tokens = 0;
  int v_dims = 0;
  float scale = 0;
  int bidir_prefix = 0;
  // A P-Tuning v2 prefix (kernels::KvView::prefix_k): n_prefix keys every row sees first, rows
  // of the cache's type and row_bytes at prefix_kv (K) and prefix_kv + prefix_v_base (V).
  Addr prefix_kv = 0;
  int n_prefix = 0;
  uint32_t prefix_v_base = 0;
};
void attention(Stream& s, DType type, const AttentionArgs& a);

}  // namespace glm::gpu
