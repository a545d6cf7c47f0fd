// Internal to kernels/: the tile operations of the tiled attention (internal.h, AttnTileOps) and
// the row operations of both attention kernels (AttnOps), written once over a vector type V and
// compiled per ISA by attention_avx2.cc and attention_avx512.cc (each defines its V, with the
// conversion of K/V rows to f32, and instantiates TileKernels<V> and RowKernels<V>). Everything has
// internal linkage, so each ISA's translation unit keeps its own copy.
//
// V provides: `reg` (W f32 lanes), W, kQkRows / kPvRows (register-tile heights), zero(),
// load(p), store(p, r), set1(x), add, sub, fmadd(a, b, c) = a * b + c, exp(r) (lane-wise, for
// r <= 0: within a few ulp, exp(0) = 1 exactly, 0 or a tiny positive value below -87), sum(r)
// (horizontal add), max(a, b) (lane-wise) and hmax(r) (horizontal max).
//
// Register tiles: qk holds kQkRows query rows x kVecs vectors of key columns in registers while
// it walks the head dimension (one broadcast of q, kVecs loads of the transposed keys per step);
// pv holds kPvRows rows x kVecs vectors of the head dimension while it walks the keys.
#pragma once

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/internal.h"
#include "kernels/quant.h"

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

  // max(x[0 .. n)), n >= 1.
  static float max(const float* x, int n) {
    int j = 0;
    float mb = x[0];
    if (n >= W) {
      reg mv = V::load(x);
      for (j = W; j + W <= n; j += W) mv = V::max(mv, V::load(x + j));
      mb = V::hmax(mv);
    }
    for (; j < n; ++j) mb = std::max(mb, x[j]);
    return mb;
  }

  static void softmax_step(float* s, int n_rows, const int* n_vis, int nk, float* m, float* l,
                           float* acc, int hd) {
    for (int r = 0; r < n_rows; ++r) {
      float* sr = s + static_cast<size_t>(r) * kKeyTile;
      const int nv = n_vis[r];
      if (nv > 0) {
        const float mb = max(sr, nv);
        if (mb > m[r]) {
          const float c = std::exp(m[r] - mb);  // 0 on the row's first step (m = -inf)
          l[r] *= c;
          float* ar = acc + static_cast<size_t>(r) * hd;
          const reg cv = V::set1(c);
          int i = 0;
          for (; i + W <= hd; i += W) V::store(ar + i, V::mul(V::load(ar + i), cv));
          for (; i < hd; ++i) ar[i] *= c;
          m[r] = mb;
        }
        l[r] += exp_sum(sr, nv, m[r]);
      }
      std::fill(sr + nv, sr + nk, 0.0f);
    }
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

// The row operations of attention (internal.h, AttnOps) and AttnTileOps::load_row over the same
// V, which also provides mul(a, b), from_i8(p) and from_f16(p) (W int8 / fp16 values as f32).
// Heads up to kMaxHeadDim elements.
constexpr int kMaxHeadDim = 1024;

template <class V>
struct RowKernels {
  using reg = typename V::reg;
  static constexpr int W = V::W;

  // Head elements [e0, e0 + hd) of a K/V row as f32: in `dst`, or the row itself when it is F32.
  // Q8_0: whole aligned blocks of 32, W values at a time times the block's scale; a head that
  // starts or ends inside a block (head_dim < 32) element by element.
  static const float* load_row(const void* row, int e0, DType type, int hd, float* dst) {
    static_assert(kQK % W == 0);
    if (type == DType::kF32) return static_cast<const float*>(row) + e0;
    if (type == DType::kQ8_0) {
      const BlockQ8_0* blocks = static_cast<const BlockQ8_0*>(row);
      int i = 0;
      if (e0 % kQK == 0) {
        for (; i + kQK <= hd; i += kQK) {
          const BlockQ8_0& b = blocks[(e0 + i) / kQK];
          const reg d = V::set1(fp16_to_fp32(b.d));
          for (int k = 0; k < kQK; k += W) V::store(dst + i + k, V::mul(d, V::from_i8(b.qs + k)));
        }
      }
      for (; i < hd; ++i) dst[i] = kv_elem(row, type, e0 + i);
      return dst;
    }
    const uint16_t* h = static_cast<const uint16_t*>(row) + e0;
    int i = 0;
    for (; i + W <= hd; i += W) V::store(dst + i, V::from_f16(h + i));
    for (; i < hd; ++i) dst[i] = fp16_to_fp32(h[i]);
    return dst;
  }

  // AttnTileOps::qk_keys: kKeysRows query rows x 4 keys a register block (each key's slice
  // loaded once for the rows, each row's once for the keys), one horizontal sum a score. F16
  // keys are converted in registers; the others through load_row.
  static constexpr int kKeyRows = W >= 16 ? 4 : 2;  // 16 + 4 + 1 of 32 zmm; 8 + 4 + 1 of 16 ymm
  template <int RB, bool kF16>
  static void qk_keys_block(const float* q, int hd, const float* const* kf,
                            const uint16_t* const* kh, int m, float* s) {
    constexpr int KB = 4;
    reg acc[RB][KB];
    GLM_TILE_UNROLL
    for (int r = 0; r < RB; ++r) {
      GLM_TILE_UNROLL
      for (int x = 0; x < KB; ++x) acc[r][x] = V::zero();
    }
    int i = 0;
    for (; i + W <= hd; i += W) {
      reg k[KB];
      GLM_TILE_UNROLL
      for (int x = 0; x < KB; ++x) k[x] = kF16 ? V::from_f16(kh[x] + i) : V::load(kf[x] + i);
      GLM_TILE_UNROLL
      for (int r = 0; r < RB; ++r) {
        const reg b = V::load(q + r * hd + i);
        GLM_TILE_UNROLL
        for (int x = 0; x < KB; ++x) acc[r][x] = V::fmadd(b, k[x], acc[r][x]);
      }
    }
    for (int r = 0; r < RB; ++r) {
      for (int x = 0; x < m; ++x) {
        float d = V::sum(acc[r][x]);
        for (int e = i; e < hd; ++e) {
          d += q[r * hd + e] * (kF16 ? fp16_to_fp32(kh[x][e]) : kf[x][e]);
        }
        s[r * kKeyTile + x] = d;
      }
    }
  }

  static void qk_keys(const float* q, int n_rows, int hd, const void* const* k, int e0, DType type,
                      int nk, float* s) {
    GLM_CHECK(hd <= kMaxHeadDim);
    constexpr int KB = 4;
    alignas(64) float buf[KB][kMaxHeadDim];
    const bool f16 = type == DType::kF16;
    for (int j0 = 0; j0 < nk; j0 += KB) {
      const int m = std::min(KB, nk - j0);
      const float* kf[KB] = {};
      const uint16_t* kh[KB] = {};
      for (int x = 0; x < KB; ++x) {
        const void* row = k[j0 + (x < m ? x : 0)];  // past nk: key j0 again, not stored
        if (f16) {
          kh[x] = static_cast<const uint16_t*>(row) + e0;
        } else {
          kf[x] = x < m ? load_row(row, e0, type, hd, buf[x]) : kf[0];
        }
      }
      int r = 0;
      for (; r + kKeyRows <= n_rows; r += kKeyRows) {
        float* sr = s + static_cast<size_t>(r) * kKeyTile + j0;
        if (f16) {
          qk_keys_block<kKeyRows, true>(q + r * hd, hd, kf, kh, m, sr);
        } else {
          qk_keys_block<kKeyRows, false>(q + r * hd, hd, kf, kh, m, sr);
        }
      }
      for (; r < n_rows; ++r) {
        float* sr = s + static_cast<size_t>(r) * kKeyTile + j0;
        if (f16) {
          qk_keys_block<1, true>(q + r * hd, hd, kf, kh, m, sr);
        } else {
          qk_keys_block<1, false>(q + r * hd, hd, kf, kh, m, sr);
        }
      }
    }
  }

  // s[h] = dot(q[h], the head of k) for the g query heads.
  static void scores(const float* q, int g, int hd, const void* k, int e0, DType type, float* s) {
    GLM_CHECK(hd <= kMaxHeadDim);
    alignas(64) float buf[kMaxHeadDim];
    const float* kf = load_row(k, e0, type, hd, buf);
    for (int h = 0; h < g; ++h) {
      const float* qh = q + h * hd;
      reg a0 = V::zero();
      reg a1 = V::zero();
      int i = 0;
      for (; i + 2 * W <= hd; i += 2 * W) {
        a0 = V::fmadd(V::load(qh + i), V::load(kf + i), a0);
        a1 = V::fmadd(V::load(qh + i + W), V::load(kf + i + W), a1);
      }
      for (; i + W <= hd; i += W) {
        a0 = V::fmadd(V::load(qh + i), V::load(kf + i), a0);
      }
      float sum = V::sum(V::add(a0, a1));
      for (; i < hd; ++i) sum += qh[i] * kf[i];
      s[h] = sum;
    }
  }

  // acc[h] += sum over the n rows j of p[j, h] * v_j: up to kRows V rows converted at a time,
  // then each W-lane piece of acc[h] loaded once, updated by every row, stored once.
  static void accumulate(float* acc, int g, int hd, const float* p, const uint8_t* v,
                         size_t row_bytes, int n, int e0, DType type) {
    GLM_CHECK(hd <= kMaxHeadDim);
    constexpr int kRows = 8;
    alignas(64) float buf[kRows][kMaxHeadDim];
    const float* vf[kRows];
    for (int j0 = 0; j0 < n; j0 += kRows) {
      const int m = std::min(kRows, n - j0);
      for (int r = 0; r < m; ++r) vf[r] = load_row(v + (j0 + r) * row_bytes, e0, type, hd, buf[r]);
      const float* pj = p + static_cast<size_t>(j0) * g;
      for (int h = 0; h < g; ++h) {
        float* ah = acc + h * hd;
        int i = 0;
        for (; i + W <= hd; i += W) {
          reg a = V::load(ah + i);
          for (int r = 0; r < m; ++r) {
            a = V::fmadd(V::set1(pj[r * g + h]), V::load(vf[r] + i), a);
          }
          V::store(ah + i, a);
        }
        for (; i < hd; ++i) {
          float a = ah[i];
          for (int r = 0; r < m; ++r) a += pj[r * g + h] * vf[r][i];
          ah[i] = a;
        }
      }
    }
  }
};

}  // namespace
}  // namespace glm::kernels::internal
