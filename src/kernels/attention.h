// Causal attention of one sequence's new query rows against its KV cache, stored in blocks of
// `block_tokens` positions (the paged layout of model::KvPool). Grouped-query: query head h uses
// KV head h / (n_head / n_head_kv).
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
};

struct AttentionShape {
  int n_tokens = 0;  // new query rows
  int n_past = 0;    // query row t sits at position n_past + t and sees positions [0, n_past + t]
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  float scale = 0;  // usually 1 / sqrt(head_dim)
};

// q: [n_tokens, n_head * head_dim] f32; out: [n_tokens, n_head * head_dim] f32.
// The K/V rows of positions [0, n_past + n_tokens) must already be in the cache.
void attention(const float* q, const KvView& kv, const AttentionShape& s, float* out,
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
