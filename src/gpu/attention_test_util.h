// For the GPU tests and gpu_bench.cc: the kv_store and attention arguments of one sequence whose
// source rows are [n_pos, q | k | v] f32 (n_head query heads, then n_head_kv key heads and as
// many value heads, head_dim each), stored into a layer's cache buffer (K at 0, V at v_base)
// by slot, then attended by its last n_tokens rows.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "gpu/ops.h"

namespace glm::gpu {

struct AttentionCaseShape {
  DType type = DType::kF16;  // the cache's
  int n_head = 0, n_head_kv = 0, head_dim = 0, block_tokens = 0;
  int n_past = 0, n_tokens = 0;  // n_pos = n_past + n_tokens source rows, or more (a prefix)
  int n_pos = 0;
  uint32_t v_base = 0;  // the V half's byte offset in the cache buffer
};

struct AttentionCase {
  KvStoreArgs store;     // every source row's K and V into its slot
  AttentionArgs attend;  // rows n_past .. n_past + n_tokens - 1 over the block table
};

// src: [n_pos, q | k | v]; slots: [n_pos] int32; blocks: the block table (int32); out:
// [n_tokens, n_head * head_dim].
inline AttentionCase attention_case(const AttentionCaseShape& c, Addr src, Addr kv, Addr slots,
                                    Addr blocks, Addr out) {
  const int qd = c.n_head * c.head_dim, kd = c.n_head_kv * c.head_dim, w = qd + 2 * kd;
  const uint32_t rb = static_cast<uint32_t>(row_bytes(c.type, kd));
  AttentionCase a;
  a.store.src = src;
  a.store.kv = kv;
  a.store.slots = slots;
  a.store.n_tokens = c.n_pos;
  a.store.src_stride = w;
  a.store.k_col = qd;
  a.store.v_col = qd + kd;
  a.store.v_base = c.v_base;
  a.store.row_elems = kd;
  a.store.row_bytes = rb;
  a.attend.q = src + static_cast<size_t>(c.n_past) * w * sizeof(float);
  a.attend.out = out;
  a.attend.kv = kv;
  a.attend.blocks = blocks;
  a.attend.n_tokens = c.n_tokens;
  a.attend.q_stride = w;
  a.attend.v_base = c.v_base;
  a.attend.row_bytes = rb;
  a.attend.n_past = c.n_past;
  a.attend.n_head = c.n_head;
  a.attend.n_head_kv = c.n_head_kv;
  a.attend.head_dim = c.head_dim;
  a.attend.block_tokens = c.block_tokens;
  a.attend.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return a;
}

// The store of latent attention's K rows alone (KvStoreArgs::store_v false): token t's row of
// row_elems values at src[t * src_stride + k_col] into slot slots[t] of kv (rows row_bytes
// apart); v_base is where V rows would go (none is written there).
inline KvStoreArgs k_rows_store(Addr src, Addr kv, Addr slots, int n_tokens, int src_stride,
                                int k_col, int row_elems, size_t row_bytes, uint32_t v_base) {
  KvStoreArgs a;
  a.src = src;
  a.kv = kv;
  a.slots = slots;
  a.n_tokens = n_tokens;
  a.src_stride = src_stride;
  a.k_col = k_col;
  a.v_col = 0;  // unread: no V rows
  a.v_base = v_base;
  a.row_elems = row_elems;
  a.row_bytes = static_cast<uint32_t>(row_bytes);
  a.store_v = false;
  return a;
}

}  // namespace glm::gpu
