// Internal to kernels/: the drivers of the kernels over the 16-row interleaved layouts of
// packed.h, written once for every ISA: the activation quantization loop, the context of a call
// and the work split over groups of 16 rows (tiling.h, a "row" there being one group here).
// Each ISA's packed file (packed_avx2.cc, packed_avx512.cc, packed_k_avx2.cc,
// packed_k_avx512.cc) supplies only its register tiles and its quantize_token, as a policy
// struct (a "Kern", described at each driver below). Included by those files only; internal
// linkage like tiling.h, so code built for one ISA never stands in for another's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/act_k.h"
#include "kernels/internal.h"
#include "kernels/packed.h"
#include "kernels/tiling.h"

namespace glm::kernels::internal {
namespace {

// ---- 32-value block layouts (Q4_0x16, Q5_0x16, Q8_0x16) ------------------------------------

struct PCtx {
  const uint8_t* w;  // groups
  size_t group_bytes;
  size_t quants_offset;
  int64_t n_blocks;   // per row
  const int8_t* xq;   // [n_tokens, n_cols]
  const float* xd;    // [n_tokens, n_blocks]
  const int32_t* xc;  // [n_tokens, n_blocks]
  int64_t n_cols;
  float* y;  // [n_tokens, n_rows]
  int64_t n_rows;
};

// The activations of one call, quantized per 32 values (internal.h: quantize_act_ref).
struct ActBuf {
  std::vector<int8_t> q;   // [n_tokens, n_cols]
  std::vector<float> d;    // [n_tokens, n_blocks]
  std::vector<int32_t> c;  // [n_tokens, n_blocks]: -kOffset * sum(q) per block
};

// y = x W^T for rows [0, w.packed_rows) from a 32-value block layout. Kern (one format of one
// ISA) gives:
//   using Ctx = PCtx;
//   kOffset: c = -kOffset * sum(q_x) per block (the weights' unsigned offset; 0: none needed);
//   quantize_token(x, n_cols, offset, q, d, c): one token's activations (the ISA's intrinsics);
//   kDecodeRows, kRows, kTokens and tile<G, T>(c, g, t0): tiles of groups (tiling.h: run_tiles).
template <class Kern>
void packed_q_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool) {
  const int64_t nb = w.n_cols / 32;
  thread_local ActBuf buf;  // the calling thread's; workers read it during the call
  if (buf.q.size() < static_cast<size_t>(n_tokens * w.n_cols)) buf.q.resize(n_tokens * w.n_cols);
  if (buf.d.size() < static_cast<size_t>(n_tokens * nb)) {
    buf.d.resize(n_tokens * nb);
    buf.c.resize(n_tokens * nb);
  }
  // Pointers taken here: inside the lambda, `buf` would name the worker thread's own buffer.
  int8_t* xq = buf.q.data();
  float* xd = buf.d.data();
  int32_t* xc = buf.c.data();
  const int64_t n_cols = w.n_cols;
  for_each_token(pool, n_tokens, [&](int64_t t) {
    Kern::quantize_token(x + t * n_cols, n_cols, Kern::kOffset, xq + t * n_cols, xd + t * nb,
                         xc + t * nb);
  });
  const PCtx c{w.packed,
               packed_group_bytes(w.packed_layout, w.n_cols),
               packed_quants_offset(w.packed_layout, w.n_cols),
               nb,
               xq,
               xd,
               xc,
               w.n_cols,
               y,
               w.n_rows};
  run_tiles<Kern>(c, w.packed_rows / kPackRows, n_tokens, static_cast<int64_t>(c.group_bytes),
                  pool);
}

// ---- k-quant layouts (Q4_Kx16, Q5_Kx16, Q6_Kx16) -------------------------------------------

// Offsets in one packed super-block (packed.h / packed.cc).
constexpr int kD = 0, kDmin = 32, kScales = 64, kMins = 192, kQuants = 320;
constexpr int kSuper4 = kQuants + 16 * 128;  // Q4_Kx16
constexpr int kSuper5 = kSuper4 + 16 * 32;   // Q5_Kx16: + high bits [8 pieces][16 rows][4]
constexpr int k6Scales = 32, k6Quants = 320;
constexpr int kSuper6 = k6Quants + 16 * 192;  // Q6_Kx16

struct KPCtx {
  const uint8_t* w;  // groups
  size_t group_bytes;
  int64_t n_sb;     // super-blocks per row
  const ActK* act;  // [n_tokens, n_sb]
  float* y;         // [n_tokens, n_rows]
  int64_t n_rows;
};

// y = x W^T for rows [0, w.packed_rows) from a k-quant layout. Kern<L> (layout L of one ISA)
// gives Ctx = KPCtx, kDecodeRows, kRows, kTokens and tile<G, T>(c, g, t0) (tiling.h: run_tiles).
template <template <PackedLayout> class Kern>
void packed_k_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool) {
  const int64_t n_sb = w.n_cols / 256;
  const ActK* act = quantize_tokens_k(x, n_sb, n_tokens, pool);
  const KPCtx c{w.packed, packed_group_bytes(w.packed_layout, w.n_cols), n_sb, act, y, w.n_rows};
  const int64_t n_groups = w.packed_rows / kPackRows;
  const auto gb = static_cast<int64_t>(c.group_bytes);
  switch (w.packed_layout) {
    case PackedLayout::kQ4_Kx16:
      return run_tiles<Kern<PackedLayout::kQ4_Kx16>>(c, n_groups, n_tokens, gb, pool);
    case PackedLayout::kQ5_Kx16:
      return run_tiles<Kern<PackedLayout::kQ5_Kx16>>(c, n_groups, n_tokens, gb, pool);
    default:
      return run_tiles<Kern<PackedLayout::kQ6_Kx16>>(c, n_groups, n_tokens, gb, pool);
  }
}

// ---- 16-bit float layouts (F16x16, BF16x16) ------------------------------------------------

struct FCtx {
  const uint8_t* w;
  size_t group_bytes;
  const float* x;  // [n_tokens, n_cols]
  int64_t n_cols;
  float* y;  // [n_tokens, n_rows]
  int64_t n_rows;
};

// Prefill sweeps columns in panels: a tile's groups x 1024 columns of weights (32 KB a group)
// stay in L1/L2 while every token tile passes over them (a whole row of ffn_down, 13696
// columns, would not).
constexpr int64_t kPanelCols = 1024;

template <class Kern, int G, int T>
void ftile_dispatch(const FCtx& c, int64_t g0, int ng, int64_t t0, int nt, int64_t k0, int64_t k1) {
  if constexpr (T > 1) {
    if (nt < T) return ftile_dispatch<Kern, G, T - 1>(c, g0, ng, t0, nt, k0, k1);
  }
  if constexpr (G > 1) {
    if (ng < G) return ftile_dispatch<Kern, G - 1, T>(c, g0, ng, t0, nt, k0, k1);
  }
  Kern::template tile<G, T>(c, g0, t0, k0, k1);
}

// Groups [g0, g1) in tiles of G groups x T tokens; with more than one token tile, in column
// panels (each tile adds its panel to y).
template <class Kern, int G, int T>
void run_float_groups(const FCtx& c, int64_t g0, int64_t g1, int64_t n_tokens) {
  const int64_t panel = n_tokens <= T ? c.n_cols : kPanelCols;
  for (int64_t g = g0; g < g1; g += G) {
    const int ng = static_cast<int>(std::min<int64_t>(G, g1 - g));
    for (int64_t k0 = 0; k0 < c.n_cols; k0 += panel) {
      const int64_t k1 = std::min(k0 + panel, c.n_cols);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += T) {
        const int nt = static_cast<int>(std::min<int64_t>(T, n_tokens - t0));
        ftile_dispatch<Kern, G, T>(c, g, ng, t0, nt, k0, k1);
      }
    }
  }
}

template <class Kern, int G, int T>
void run_float_matmul(const FCtx& c, int64_t n_tokens, int64_t n_groups, ThreadPool* pool) {
  const int64_t chunk =
      chunk_rows<G, T>(n_groups, n_tokens, static_cast<int64_t>(c.group_bytes), pool);
  claim_chunks(pool, n_groups, chunk,
               [&](int64_t g0, int64_t g1) { run_float_groups<Kern, G, T>(c, g0, g1, n_tokens); });
}

// y = x W^T for rows [0, w.packed_rows) from a 16-bit float layout (f32 FMA). Kern gives:
//   kDecodeRows: groups per decode tile; kRows x kTokens: groups x tokens of a prefill tile;
//   tile<G, T>(c, g0, t0, k0, k1): columns [k0, k1) of G groups x T tokens, adding to y unless
//   k0 == 0.
template <class Kern>
void float_packed_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                         ThreadPool* pool) {
  const FCtx c{w.packed, packed_group_bytes(w.packed_layout, w.n_cols), x, w.n_cols, y, w.n_rows};
  const int64_t n_groups = w.packed_rows / kPackRows;
  if (n_tokens == 1) {
    run_float_matmul<Kern, Kern::kDecodeRows, 1>(c, n_tokens, n_groups, pool);
  } else {
    run_float_matmul<Kern, Kern::kRows, Kern::kTokens>(c, n_tokens, n_groups, pool);
  }
}

// ---- the entry of an ISA --------------------------------------------------------------------

// y = x W^T for rows [0, w.packed_rows) of any packed layout, from the kernels of one ISA:
//   QKern<Fmt>: packed_q_matmul's Kern of format Fmt, one of Q4, Q5, Q8 (Q4_0x16, ...);
//   FKern<kBf16>: float_packed_matmul's Kern of F16 (false) or BF16 (true);
//   k_matmul: the k-quant layouts (packed_k_*.cc, files of their own).
template <template <class> class QKern, class Q4, class Q5, class Q8, template <bool> class FKern>
void packed_matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                   ThreadPool* pool, MatmulPackedFn k_matmul) {
  switch (w.packed_layout) {
    case PackedLayout::kQ4_0x16:
      return packed_q_matmul<QKern<Q4>>(w, x, y, n_tokens, pool);
    case PackedLayout::kQ5_0x16:
      return packed_q_matmul<QKern<Q5>>(w, x, y, n_tokens, pool);
    case PackedLayout::kQ8_0x16:
      return packed_q_matmul<QKern<Q8>>(w, x, y, n_tokens, pool);
    case PackedLayout::kQ4_Kx16:
    case PackedLayout::kQ5_Kx16:
    case PackedLayout::kQ6_Kx16:
      return k_matmul(w, x, y, n_tokens, pool);
    case PackedLayout::kF16x16:
      return float_packed_matmul<FKern<false>>(w, x, y, n_tokens, pool);
    case PackedLayout::kBF16x16:
      return float_packed_matmul<FKern<true>>(w, x, y, n_tokens, pool);
    case PackedLayout::kNone:
      break;
  }
}

}  // namespace
}  // namespace glm::kernels::internal
