// Internal to kernels/: the drivers of the row-major matmul kernels (weights as the file stores
// them: the rows after the last packed group of 16, --repack 0, and the types with no packed
// layout), written once for every ISA: the context of a call, the activation buffer and its
// quantization loop, and the work split (tiling.h). Each ISA's file (matmul_avx2.cc,
// matmul_avx512.cc, matmul_q_avx512.cc, matmul_k_avx2.cc, matmul_k_avx512.cc) supplies only its
// register tiles and its activation layout, as a policy struct (a "Kern"; every Kern gives
// Ctx, kDecodeRows, kRows, kTokens and tile<R, T>, tiling.h: run_tiles). Included by those
// files only; internal linkage like tiling.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kernels/act_k.h"
#include "kernels/internal.h"
#include "kernels/tiling.h"

namespace glm::kernels::internal {
namespace {

// ---- float weights (F32, F16, BF16): f32 FMA with the f32 activations ------------------------

struct FloatCtx {
  const uint8_t* w;
  size_t row_bytes;
  const float* x;  // [n_tokens, n_cols]
  float* y;        // [n_tokens, n_rows]
  int64_t n_rows, n_cols;
};

template <class Kern>
void float_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                  ThreadPool* pool) {
  const FloatCtx c{
      static_cast<const uint8_t*>(w.data), row_bytes(w.type, w.n_cols), x, y, w.n_rows, w.n_cols};
  run_tiles<Kern>(c, w.n_rows, n_tokens, static_cast<int64_t>(c.row_bytes), pool);
}

// ---- 32-value block quants (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) ------------------------------------

// Act: the ISA's unit of quantized activations (one block of 32 values, or a chunk of two).
template <class Act>
struct QuantCtx {
  const uint8_t* w;
  size_t row_bytes;
  const Act* act;    // [n_tokens, n_act]
  int64_t n_act;     // per token
  int64_t n_blocks;  // of 32 values, per row
  float* y;          // [n_tokens, n_rows]
  int64_t n_rows;
};

// The calling thread's activations of type Act (one buffer per type, shared by the formats);
// workers read it during the call.
template <class Act>
std::vector<Act>& act_buffer() {
  thread_local std::vector<Act> buf;
  return buf;
}

// y = x W^T with activations quantized per 32 values. Kern (one format of one ISA) gives,
// besides the tiles over QuantCtx<Act> (Ctx = QuantCtx<Act>):
//   Act, kActValues: the activation unit and how many values it holds (32 or 64);
//   quantize_token(x, n_cols, act): one token's n_act units (the ISA's intrinsics).
template <class Kern>
void q_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool) {
  using Act = typename Kern::Act;
  const int64_t n_cols = w.n_cols;
  const int64_t n_act = (n_cols + Kern::kActValues - 1) / Kern::kActValues;
  std::vector<Act>& buf = act_buffer<Act>();
  if (buf.size() < static_cast<size_t>(n_act * n_tokens)) buf.resize(n_act * n_tokens);
  Act* act = buf.data();  // here: inside the lambda, act_buffer() would be the worker's own
  for_each_token(pool, n_tokens,
                 [&](int64_t t) { Kern::quantize_token(x + t * n_cols, n_cols, act + t * n_act); });
  const QuantCtx<Act> c{static_cast<const uint8_t*>(w.data),
                        row_bytes(w.type, n_cols),
                        act,
                        n_act,
                        n_cols / 32,
                        y,
                        w.n_rows};
  run_tiles<Kern>(c, w.n_rows, n_tokens, static_cast<int64_t>(c.row_bytes), pool);
}

// ---- k-quants (Q4_K, Q5_K, Q6_K): activations per 256 values (act_k.h) -----------------------

struct KCtx {
  const uint8_t* w;
  size_t row_bytes;
  const ActK* act;  // [n_tokens, n_sb]
  int64_t n_sb;     // super-blocks per row
  float* y;         // [n_tokens, n_rows]
  int64_t n_rows;
};

template <class Kern>
void k_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool) {
  const int64_t n_sb = w.n_cols / 256;
  const ActK* act = quantize_tokens_k(x, n_sb, n_tokens, pool);
  const KCtx c{
      static_cast<const uint8_t*>(w.data), row_bytes(w.type, w.n_cols), act, n_sb, y, w.n_rows};
  run_tiles<Kern>(c, w.n_rows, n_tokens, static_cast<int64_t>(c.row_bytes), pool);
}

// ---- the weight types of an ISA -------------------------------------------------------------

// Activation block of the row-major vector kernels for weights of type t (internal.h:
// act_block): 0 for the float types (f32 FMA), 32 for the 32-value block quants, 256 for the
// k-quants, -1 for the rest (the generic path runs them). AVX2 and AVX-512 run the same types.
inline int act_block_rows(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return 0;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ4_1:
    case DType::kQ5_1:
      return 32;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return 256;
    default:
      return -1;
  }
}

// y = x W^T for the float types with FloatKern<type> (float_matmul); false, y untouched, for
// any other type.
template <template <DType> class FloatKern>
bool float_types_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                        ThreadPool* pool) {
  switch (w.type) {
    case DType::kF32:
      float_matmul<FloatKern<DType::kF32>>(w, x, y, n_tokens, pool);
      return true;
    case DType::kF16:
      float_matmul<FloatKern<DType::kF16>>(w, x, y, n_tokens, pool);
      return true;
    case DType::kBF16:
      float_matmul<FloatKern<DType::kBF16>>(w, x, y, n_tokens, pool);
      return true;
    default:
      return false;
  }
}

// y = x W^T for the 32-value block quants with QKern<format> (q_matmul), the ISA's format
// structs given for each type; false, y untouched, for any other type.
template <template <class> class QKern, class Q8_0, class Q4_0, class Q5_0, class Q4_1, class Q5_1>
bool quant_types_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                        ThreadPool* pool) {
  switch (w.type) {
    case DType::kQ8_0:
      q_matmul<QKern<Q8_0>>(w, x, y, n_tokens, pool);
      return true;
    case DType::kQ4_0:
      q_matmul<QKern<Q4_0>>(w, x, y, n_tokens, pool);
      return true;
    case DType::kQ5_0:
      q_matmul<QKern<Q5_0>>(w, x, y, n_tokens, pool);
      return true;
    case DType::kQ4_1:
      q_matmul<QKern<Q4_1>>(w, x, y, n_tokens, pool);
      return true;
    case DType::kQ5_1:
      q_matmul<QKern<Q5_1>>(w, x, y, n_tokens, pool);
      return true;
    default:
      return false;
  }
}

}  // namespace
}  // namespace glm::kernels::internal
