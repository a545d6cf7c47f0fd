#version 450
// The prefill matmul on tensor cores: y[t, r] = sum_c w[r, c] * x[t, c], as matmul_tiled.comp
// computes it (its tiles, push constants, output rule and split), with the products taken by
// cooperative matrices (GL_NV_cooperative_matrix, DeviceInfo::coop_matrix): fp16 weights and
// activations, f32 sums.
//   w: [n_rows, n_cols] GGUF rows of row_bytes each; x: [n_tokens, n_cols] f32;
//   y: [n_tokens, y_stride] f32, columns y_col .. y_col + n_rows - 1 (write_y.glsl), or the
//   split's parts [z, n_tokens, n_rows] (matmul_tiled.comp).
// A workgroup of 256 threads (8 warps of 32: the driver's subgroups) computes a tile of 128 rows
// x 64 tokens, a 32-value chunk of the rows at a time: its threads decode the tile's weights and
// load its activations into shared memory as fp16, [row][value] and [token][value]; warp w then
// multiplies rows 32 (w % 4) .. 32 (w % 4) + 31 by tokens 32 (w / 4) .. 32 (w / 4) + 31: four
// 16 x 16 tiles of sums, two 16-value steps a chunk. At the end each warp writes its four tiles
// out through a 16 x 16 area of shared memory, one at a time.
// IDS: the experts of a mixture-of-experts layer grouped by expert, as matmul_tiled.comp's IDS
// (workgroup z is expert e; its tiles take e's slots as their tokens; no split).
// REF: the same shader with the tensor cores' products in scalar code (a thread takes 8 values
// of each of its warp's tiles: products of the same fp16 values, summed in f32). It runs on any
// device: what the tests check on lavapipe, and what check_coop_matmul (matmul.h) compares the
// tensor cores with before the prefill takes them.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifndef REF
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#endif
#include "common.glsl"

#define BM 128  // rows a tile
#define BN 64   // tokens a tile
#define KS 40   // a row's stride in ws and xs: 32 values and 8 more (80 bytes: 16-byte aligned)
layout(local_size_x = 256) in;
#include "matmul_tiled_io.glsl"

shared float16_t ws[BM * KS];  // [row of the tile][value of the chunk]
shared float16_t xs[BN * KS];  // [token of the tile][value of the chunk]
shared float cs[8 * 256];      // [warp][token][row]: a 16 x 16 tile of sums on its way out

#ifndef REF
#define FRAG16 fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FRAG32 fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#endif

void main() {
  uint tid = gl_LocalInvocationID.x;
#ifdef REF
  uint warp = tid >> 5, lane = tid & 31u;
#else
  uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
#endif
  Tile tl;
  if (!tile_of_workgroup(tl)) return;
  // This warp's rows and tokens of the tile; a warp whose tokens are all past the list (a short
  // prompt's) skips the products.
  uint wr = 32u * (warp & 3u), wt = 32u * (warp >> 2);
  bool computes = tl.t0 + wt < tl.n_tok;
#ifdef REF
  // [row tile][token tile][k]: the sum of row wr + 16 i + (lane % 16), token
  // wt + 16 j + 8 (lane / 16) + k.
  uint m = lane & 15u, n0 = 8u * (lane >> 4);
  float acc[2][2][8];
  UNROLLED for (uint i = 0u; i < 2u; ++i) {
    UNROLLED for (uint j = 0u; j < 2u; ++j) {
      UNROLLED for (uint k = 0u; k < 8u; ++k) acc[i][j][k] = 0.0;
    }
  }
#else
  FRAG32 acc[2][2];  // [row tile][token tile]
  UNROLLED for (uint i = 0u; i < 2u; ++i) {
    UNROLLED for (uint j = 0u; j < 2u; ++j) acc[i][j] = FRAG32(0.0);
  }
#endif
  for (uint c = tl.c_begin; c < tl.c_end; ++c) {
    // The weights: parts tid and tid + 256 of the tile; the activations: runs tid and tid + 256.
    for (uint h = 0u; h < 2u; ++h) {
      uint lr, q;
      float v[8];
      tile_weights(tl, tid + 256u * h, c, lr, q, v);
      UNROLLED for (uint k = 0u; k < 8u; ++k) ws[lr * KS + part_elem(q, k)] = float16_t(v[k]);
    }
    for (uint h = 0u; h < 2u; ++h) {
      uint lt, e;
      vec4 xv = tile_activations(tl, tid + 256u * h, c, lt, e);
      UNROLLED for (uint k = 0u; k < 4u; ++k) xs[lt * KS + e + k] = float16_t(xv[k]);
    }
    barrier();
    if (computes) {
#ifdef REF
      for (uint k = 0u; k < 32u; ++k) {
        UNROLLED for (uint i = 0u; i < 2u; ++i) {
          float a = float(ws[(wr + 16u * i + m) * KS + k]);
          UNROLLED for (uint j = 0u; j < 2u; ++j) {
            UNROLLED for (uint e = 0u; e < 8u; ++e) {
              acc[i][j][e] += a * float(xs[(wt + 16u * j + n0 + e) * KS + k]);
            }
          }
        }
      }
#else
      for (uint k = 0u; k < 32u; k += 16u) {
        // a: 16 rows x 16 values (row-major in ws); b: 16 values x 16 tokens (xs holds it
        // column-major: a token's values are a row of xs).
        FRAG16 a[2], b[2];
        UNROLLED for (uint i = 0u; i < 2u; ++i) {
          coopMatLoadNV(a[i], ws, (wr + 16u * i) * KS + k, KS, false);
          coopMatLoadNV(b[i], xs, (wt + 16u * i) * KS + k, KS, true);
        }
        UNROLLED for (uint i = 0u; i < 2u; ++i) {
          UNROLLED for (uint j = 0u; j < 2u; ++j) {
            acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
          }
        }
      }
#endif
    }
    barrier();
  }
  // Each tile of sums out through cs ([token][row], so that neighbouring threads write
  // neighbouring rows of y): every thread 8 of its warp's 256.
  UNROLLED for (uint i = 0u; i < 2u; ++i) {
    UNROLLED for (uint j = 0u; j < 2u; ++j) {
#ifdef REF
      UNROLLED for (uint e = 0u; e < 8u; ++e) {
        cs[warp * 256u + (n0 + e) * 16u + m] = acc[i][j][e];
      }
#else
      coopMatStoreNV(acc[i][j], cs, warp * 256u, 16u, true);
#endif
      barrier();
      UNROLLED for (uint e = 0u; e < 8u; ++e) {  // (unrolled: a loop inside keeps i, j rolled)
        uint at = 32u * e + lane;  // token at / 16, row at % 16 of the tile
        uint row = tl.r0 + wr + 16u * i + (at & 15u), t = tl.t0 + wt + 16u * j + (at >> 4);
        if (row < p.n_rows && t < tl.n_tok) tile_write(tl, t, row, cs[warp * 256u + at]);
      }
      barrier();
    }
  }
}
