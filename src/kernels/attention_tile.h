// Internal to kernels/: the tile operations of the tiled attention (internal.h, AttnTileOps),
// written once over a vector type V and compiled per ISA by attention_avx2.cc and
// attention_avx512.cc (each defines its V and instantiates TileKernels<V>). Everything has
// internal linkage, so each ISA's translation unit keeps its own copy.
//
// V provides: `reg` (W f32 lanes), W, kQkRows / kPvRows (register-tile heights), zero(),
// load(p), store(p, r), set1(x), add, sub, fmadd(a, b, c) = a * b + c, exp(r) (lane-wise, for
// r <= 0: within a few ulp, exp(0) = 1 exactly, 0 or a tiny positive value below -87), and sum(r)
// (horizontal add).
//
// Register tiles: qk holds kQkRows query rows x kVecs vectors of key columns in registers while
// it walks the head dimension (one broadcast of q, kVecs loads of the transposed keys per step);
// pv holds kPvRows rows x kVecs vectors of the head dimension while it walks the keys.
#pragma once

#include <algorithm>

#include "kernels/internal.h"

// Fully unrolls the loops over a register tile's rows and vectors, so its accumulator arrays
// live in registers (GCC keeps them on the stack otherwise).
#define GLM_TILE_UNROLL _Pragma("GCC unroll 16")

namespace glm::kernels::internal {
namespace {

template <class V>
struct TileKernels {
  using reg = typename V::reg;
  static constexpr int W = V::W;
  static constexpr int kVecs = 4;  // vectors per register-tile row
  static_assert(kKeyTile % W == 0);

  // s[r, c0 + x W ..] for rows [0, RB) and NV vectors of columns from c0.
  template <int RB, int NV>
  static void qk_block(const float* q, int hd, const float* kt, int c0, float* s) {
    reg acc[RB][NV];
    GLM_TILE_UNROLL
    for (int r = 0; r < RB; ++r) {
      GLM_TILE_UNROLL
      for (int x = 0; x < NV; ++x) acc[r][x] = V::zero();
    }
    for (int i = 0; i < hd; ++i) {
      reg k[NV];
      const float* ki = kt + static_cast<size_t>(i) * kKeyTile + c0;
      GLM_TILE_UNROLL
      for (int x = 0; x < NV; ++x) k[x] = V::load(ki + x * W);
      GLM_TILE_UNROLL
      for (int r = 0; r < RB; ++r) {
        const reg b = V::set1(q[r * hd + i]);
        GLM_TILE_UNROLL
        for (int x = 0; x < NV; ++x) acc[r][x] = V::fmadd(b, k[x], acc[r][x]);
      }
    }
    GLM_TILE_UNROLL
    for (int r = 0; r < RB; ++r) {
      GLM_TILE_UNROLL
      for (int x = 0; x < NV; ++x) V::store(s + r * kKeyTile + c0 + x * W, acc[r][x]);
    }
  }

  template <int RB>
  static void qk_rows(const float* q, int hd, const float* kt, int n_vecs, float* s) {
    for (int c = 0; c < n_vecs; c += kVecs) {
      switch (std::min(kVecs, n_vecs - c)) {
        case 1:
          qk_block<RB, 1>(q, hd, kt, c * W, s);
          break;
        case 2:
          qk_block<RB, 2>(q, hd, kt, c * W, s);
          break;
        case 3:
          qk_block<RB, 3>(q, hd, kt, c * W, s);
          break;
        default:
          qk_block<RB, 4>(q, hd, kt, c * W, s);
          break;
      }
    }
  }

  static void qk(const float* q, int n_rows, int hd, const float* kt, int nk, float* s) {
    const int n_vecs = (nk + W - 1) / W;
    int r = 0;
    for (; r + V::kQkRows <= n_rows; r += V::kQkRows) {
      qk_rows<V::kQkRows>(q + r * hd, hd, kt, n_vecs, s + r * kKeyTile);
    }
    for (; r < n_rows; ++r) qk_rows<1>(q + r * hd, hd, kt, n_vecs, s + r * kKeyTile);
  }

  // acc[r, i0 + x W ..] += p[r, j] v[j][..] for rows [0, RB), NV vectors from element i0.
  template <int RB, int NV>
  static void pv_block(const float* p, int nk, const float* const* v, int i0, int hd, float* acc) {
    reg a[RB][NV];
    GLM_TILE_UNROLL
    for (int r = 0; r < RB; ++r) {
      GLM_TILE_UNROLL
      for (int x = 0; x < NV; ++x) a[r][x] = V::load(acc + r * hd + i0 + x * W);
    }
    for (int j = 0; j < nk; ++j) {
      reg vv[NV];
      GLM_TILE_UNROLL
      for (int x = 0; x < NV; ++x) vv[x] = V::load(v[j] + i0 + x * W);
      GLM_TILE_UNROLL
      for (int r = 0; r < RB; ++r) {
        const reg b = V::set1(p[r * kKeyTile + j]);
        GLM_TILE_UNROLL
        for (int x = 0; x < NV; ++x) a[r][x] = V::fmadd(b, vv[x], a[r][x]);
      }
    }
    GLM_TILE_UNROLL
    for (int r = 0; r < RB; ++r) {
      GLM_TILE_UNROLL
      for (int x = 0; x < NV; ++x) V::store(acc + r * hd + i0 + x * W, a[r][x]);
    }
  }

  template <int RB>
  static void pv_rows(const float* p, int nk, const float* const* v, int hd, float* acc) {
    const int n_vecs = hd / W;
    for (int c = 0; c < n_vecs; c += kVecs) {
      switch (std::min(kVecs, n_vecs - c)) {
        case 1:
          pv_block<RB, 1>(p, nk, v, c * W, hd, acc);
          break;
        case 2:
          pv_block<RB, 2>(p, nk, v, c * W, hd, acc);
          break;
        case 3:
          pv_block<RB, 3>(p, nk, v, c * W, hd, acc);
          break;
        default:
          pv_block<RB, 4>(p, nk, v, c * W, hd, acc);
          break;
      }
    }
    // The head's tail past the last whole vector (head_dim not a multiple of W).
    GLM_TILE_UNROLL
    for (int r = 0; r < RB; ++r) {
      for (int i = n_vecs * W; i < hd; ++i) {
        float a = acc[r * hd + i];
        for (int j = 0; j < nk; ++j) a += p[r * kKeyTile + j] * v[j][i];
        acc[r * hd + i] = a;
      }
    }
  }

  static void pv(const float* p, int n_rows, int nk, const float* const* v, int hd, float* acc) {
    int r = 0;
    for (; r + V::kPvRows <= n_rows; r += V::kPvRows) {
      pv_rows<V::kPvRows>(p + r * kKeyTile, nk, v, hd, acc + r * hd);
    }
    for (; r < n_rows; ++r) pv_rows<1>(p + r * kKeyTile, nk, v, hd, acc + r * hd);
  }

  static float exp_sum(float* x, int n, float m) {
    const reg mv = V::set1(m);
    reg sum = V::zero();
    int j = 0;
    for (; j + W <= n; j += W) {
      const reg e = V::exp(V::sub(V::load(x + j), mv));
      V::store(x + j, e);
      sum = V::add(sum, e);
    }
    float total = V::sum(sum);
    if (j < n) {
      alignas(64) float t[W];
      for (int k = 0; k < W; ++k) t[k] = j + k < n ? x[j + k] - m : 0.0f;
      V::store(t, V::exp(V::load(t)));
      for (int k = 0; j + k < n; ++k) {
        x[j + k] = t[k];
        total += t[k];
      }
    }
    return total;
  }
};

}  // namespace
}  // namespace glm::kernels::internal
