// Attention of one sequence's new query rows against its KV cache, stored in blocks of
// `block_tokens` positions (the paged layout of model::KvPool). Grouped-query: query head h uses
// KV head h / (n_head / n_head_kv). Causal, optionally with a bidirectional prefix (ChatGLM-6B's
// prompt), and optionally after a P-Tuning v2 prefix (KvView::n_prefix f32 K/V rows held outside
// the cache, seen by every query row ahead of position 0; no rotary, no mask on them).
//
// attention() is tiled (attention_tiled.cc, flash-attention style): a tile of query rows (several
// tokens x the query heads of one KV head) goes through the keys kKeyTile positions at a time,
// score and value products as register-tiled matrix products, one online softmax (running max,
// running sum, rescaled accumulator) per row; so each K/V row is converted and read once per
// tile, not once per query row. Work items (KV head, tile) run on the pool; for few tokens over a
// long cache (decode at depth) each item's positions are also split into ranges with their own
// max / sum / partial output, merged at the end (flash-decoding), so one sequence uses every
// thread.
// Thread-safety: the functions are reentrant; each call may use the pool (one caller at a time,
// as ThreadPool requires). Cost: O(n_tokens * n_ctx * n_head * head_dim) flops; K/V bytes read
// about once per tile of ~256 query rows.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/thread_pool.h"

namespace glm::kernels {

struct KvView {
  const void* const* k_blocks = nullptr;  // [n_blocks] -> [block_tokens, n_head_kv * head_dim]
  const void* const* v_blocks = nullptr;  // same layout
  int n_blocks = 0;
  int block_tokens = 0;
  DType type = DType::kF16;  // kF16, kF32 or kQ8_0 (a row = n_head_kv * head_dim / 32 blocks)
  // A P-Tuning v2 prefix (model/adapter.h): n_prefix key and value rows, f32 whatever `type`
  // is, attended by every query row before the cache's positions (all visible: the mask covers
  // only the cached positions). Keys index [0, n_prefix + n_ctx): prefix rows, then positions.
  const float* prefix_k = nullptr;  // [n_prefix, n_head_kv * head_dim]
  const float* prefix_v = nullptr;  // [n_prefix, n_head_kv * head_dim]
  int n_prefix = 0;
};

struct AttentionShape {
  int n_tokens = 0;  // new query rows
  int n_past = 0;    // query row t sits at position n_past + t and sees positions [0, n_past + t]
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  float scale = 0;  // usually 1 / sqrt(head_dim)
  // Bidirectional prefix: a row at position p sees [0, max(p + 1, bidir_prefix)), so the rows of
  // positions below bidir_prefix see all of [0, bidir_prefix). 0 = causal. ChatGLM-6B passes its
  // prompt length - 1 (the prompt but <sop> sees the prompt but <sop>; <sop> and later rows are
  // causal). Positions [0, bidir_prefix) must be in the cache.
  int bidir_prefix = 0;
};

// How attention() cuts the work; plan_attention() chooses it, tests force others.
struct AttentionPlan {
  int tile_tokens = 1;  // query tokens per tile (a tile = tile_tokens x the heads of one slice)
  int n_slices = 1;     // the query heads of a KV head in this many slices (a divisor of them)
  int n_splits = 1;     // position ranges per item, merged at the end (flash-decoding)
};
// Tiles of about 256 query rows (at most 64 tokens); position splits when there are few (head,
// tile) items for the threads and at least 1024 positions; head slices when still fewer items than
// threads.
AttentionPlan plan_attention(const AttentionShape& s, int n_threads);

// q: [n_tokens, n_head * head_dim] f32; out: [n_tokens, n_head * head_dim] f32.
// The K/V rows of positions [0, max(n_past + n_tokens, bidir_prefix)) must be in the cache.
// GLMSERVE_ATTENTION=rows (read once) makes it attention_rows() where the mask is causal: the
// A/B switch of whole-run benchmarks.
void attention(const float* q, const KvView& kv, const AttentionShape& s, float* out,
               ThreadPool* pool);
// attention() with a given plan (tile_tokens >= 1, n_slices dividing n_head / n_head_kv,
// n_splits >= 1).
void attention_planned(const float* q, const KvView& kv, const AttentionShape& s,
                       const AttentionPlan& plan, float* out, ThreadPool* pool);
// The row-at-a-time kernel that attention() replaced (one query row and the heads of one KV
// head against every position): kept for A/B benchmarks (kernels_bench) and tested like it.
// Causal only (bidir_prefix must be 0).
void attention_rows(const float* q, const KvView& kv, const AttentionShape& s, float* out,
                    ThreadPool* pool);
// Scalar reference (double accumulation) for tests.
void attention_ref(const float* q, const KvView& kv, const AttentionShape& s, float* out);

// One KV row's element i (F16, F32, or Q8_0: GGUF blocks of 32 values with an fp16 scale, i in
// any block of the row), and n elements from e0 into dst. Scalar; for model code outside the hot
// path (ChatGLM-6B's attention) and tests.
float kv_elem(const void* row, DType type, int i);
void kv_read(const void* row, DType type, int e0, int n, float* dst);
// Writes a row of n f32 values as `type` (Q8_0: n a multiple of 32, each block scaled by its
// max |x| / 127 and rounded, as GGUF's Q8_0). Cost: O(n).
void kv_store_row(const float* src, DType type, void* dst, int n);

}  // namespace glm::kernels
