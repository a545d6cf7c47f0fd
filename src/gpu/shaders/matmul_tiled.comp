#version 450
// The prefill matmul (many tokens): y[t, r] = sum_c w[r, c] * x[t, c], as matmul.comp computes it,
// in tiles that read each weight block once per 64 tokens.
//   w: [n_rows, n_cols] GGUF rows of row_bytes each; x: [n_tokens, n_cols] f32;
//   y: [n_tokens, y_stride] f32, columns y_col .. y_col + n_rows - 1 overwritten (or added to),
//   with bias: [n_rows] added where given (matmul.comp).
// A workgroup of 256 threads computes a tile of 128 rows x 64 tokens, a 32-value chunk of the
// rows at a time: its threads decode the tile's 512 parts of 8 values (two each, four threads a
// row's chunk: neighbouring bytes) into shared memory as [value, row], and load its 64 tokens'
// activations (two 16-byte runs each) as [value, token]; then each thread computes 8 rows x 4
// tokens of the tile from shared memory, three 16-byte reads for 32 products a value.
// IDS: the experts of a mixture-of-experts layer (model/moe.h), grouped (moe_group.comp):
// workgroup z is expert e, whose slots are slots[e * cap .. e * cap + counts[e]); its tiles take
// those slots as their tokens: weights from byte e * expert_bytes of w (e's n_rows rows), a
// slot s's activations from x row s / x_div, its products into y row s. Tiles past the
// expert's count end at once.
// A split over the row length (chunks_per_split) where the tiles are too few to fill the GPU.
#include "common.glsl"

#define BM 128  // rows a tile
#define BN 64   // tokens a tile
layout(local_size_x = 256) in;
#include "matmul_tiled_push.glsl"

#include "decode.glsl"
#include "matmul_io.glsl"

// [value of the chunk][rows / tokens in fours] (+1: the next value's row starts on another bank)
shared vec4 ws[32][BM / 4 + 1];
shared vec4 xs[32][BN / 4 + 1];


void main() {
  uint tid = gl_LocalInvocationID.x;
  uint r0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
#ifdef IDS
  uint expert = gl_WorkGroupID.z;
  uint n_tok = uint(p.counts.v[expert]);
  if (t0 >= n_tok) return;  // the whole workgroup
  list_at = expert * p.cap;
  uint w0 = expert * p.expert_bytes;
#else
  uint n_tok = p.n_tokens;
  uint w0 = 0u;
#endif
  uint n_chunks = (p.n_cols + 31u) / 32u, c_begin = 0u, c_end = n_chunks;
#ifndef IDS
  bool split = p.chunks_per_split < n_chunks;
  if (split) {
    c_begin = gl_WorkGroupID.z * p.chunks_per_split;
    c_end = min(c_begin + p.chunks_per_split, n_chunks);
  }
#endif
  // This thread's micro-tile: rows 4 tr .. 4 tr + 3 and 64 + 4 tr .. 64 + 4 tr + 3, tokens
  // 4 tc .. 4 tc + 3.
  uint tr = tid & 15u, tc = tid >> 4;
  bool computes = t0 + 4u * tc < n_tok;
  vec4 acc[8];  // [row][4 tokens]
  for (uint i = 0u; i < 8u; ++i) acc[i] = vec4(0.0);
  for (uint c = c_begin; c < c_end; ++c) {
    // The weights: parts tid and tid + 256 of the tile (row = part / 4, q = part % 4).
    for (uint h = 0u; h < 2u; ++h) {
      uint part = tid + 256u * h;
      uint lr = part >> 2, q = part & 3u, row = r0 + lr;
      float v[8], d = 0.0, m = 0.0;
      if (row < p.n_rows) {
        decode_part(p.w, p.n_cols, w0 + row * p.row_bytes, c, q, v, d, m);
      } else {
        for (uint k = 0u; k < 8u; ++k) v[k] = 0.0;
      }
      for (uint k = 0u; k < 8u; ++k) ws[part_elem(q, k)][lr >> 2][lr & 3u] = d * v[k] + m;
    }
    // The activations: runs tid and tid + 256 of the tile's 64 tokens x 8 runs of 4 values.
    for (uint h = 0u; h < 2u; ++h) {
      uint run = tid + 256u * h;
      uint lt = run >> 3, e = 32u * c + 4u * (run & 7u), t = t0 + lt;
      vec4 xv = t < n_tok ? x_run(x_row(t) * p.n_cols, e) : vec4(0.0);
      for (uint k = 0u; k < 4u; ++k) xs[4u * (run & 7u) + k][lt >> 2][lt & 3u] = xv[k];
    }
    barrier();
    // Threads whose 4 tokens are all past the list skip the products (a short prompt's one tile:
    // 17 tokens leave 5 of the 8 subgroups of 32 nothing to compute).
    if (computes) {
      for (uint k = 0u; k < 32u; ++k) {
        vec4 a0 = ws[k][tr], a1 = ws[k][16u + tr];
        vec4 b = xs[k][tc];
        acc[0] += a0.x * b;
        acc[1] += a0.y * b;
        acc[2] += a0.z * b;
        acc[3] += a0.w * b;
        acc[4] += a1.x * b;
        acc[5] += a1.y * b;
        acc[6] += a1.z * b;
        acc[7] += a1.w * b;
      }
    }
    barrier();
  }
  for (uint i = 0u; i < 8u; ++i) {
    uint row = r0 + (i < 4u ? 4u * tr + i : 64u + 4u * tr + i - 4u);
    if (row >= p.n_rows) continue;
    for (uint j = 0u; j < 4u; ++j) {
      uint t = t0 + 4u * tc + j;
      if (t >= n_tok) continue;
#ifndef IDS
      if (split) {
        p.part.v[(gl_WorkGroupID.z * n_tok + t) * p.n_rows + row] = acc[i][j];
        continue;
      }
#endif
      write_y(y_row(t), row, acc[i][j]);
    }
  }
}
