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
#include "matmul_tiled_io.glsl"

// [value of the chunk][rows / tokens in fours] (+1: the next value's row starts on another bank)
shared vec4 ws[32][BM / 4 + 1];
shared vec4 xs[32][BN / 4 + 1];


void main() {
  uint tid = gl_LocalInvocationID.x;
  Tile tl;
  if (!tile_of_workgroup(tl)) return;
  // This thread's micro-tile: rows 4 tr .. 4 tr + 3 and 64 + 4 tr .. 64 + 4 tr + 3, tokens
  // 4 tc .. 4 tc + 3.
  uint tr = tid & 15u, tc = tid >> 4;
  bool computes = tl.t0 + 4u * tc < tl.n_tok;
  vec4 acc[8];  // [row][4 tokens]
  UNROLLED for (uint i = 0u; i < 8u; ++i) acc[i] = vec4(0.0);
  for (uint c = tl.c_begin; c < tl.c_end; ++c) {
    // The weights: parts tid and tid + 256 of the tile; the activations: runs tid and tid + 256.
    for (uint h = 0u; h < 2u; ++h) {
      uint lr, q;
      float v[8];
      tile_weights(tl, tid + 256u * h, c, lr, q, v);
      UNROLLED for (uint k = 0u; k < 8u; ++k) ws[part_elem(q, k)][lr >> 2][lr & 3u] = v[k];
    }
    for (uint h = 0u; h < 2u; ++h) {
      uint lt, e;
      vec4 xv = tile_activations(tl, tid + 256u * h, c, lt, e);
      UNROLLED for (uint k = 0u; k < 4u; ++k) xs[e + k][lt >> 2][lt & 3u] = xv[k];
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
  // A token at a time (a rolled loop: 32 writes unrolled made the shader four times larger),
  // its sum of each row taken from acc by selects, not a run-time index (which would put acc in
  // memory: GpuShaders.NoPrivateArrayIsIndexedAtRunTime).
  for (uint j = 0u; j < 4u; ++j) {
    uint t = tl.t0 + 4u * tc + j;
    UNROLLED for (uint i = 0u; i < 8u; ++i) {
      uint row = tl.r0 + (i < 4u ? 4u * tr + i : 64u + 4u * tr + i - 4u);
      vec4 a = acc[i];
      float s = j == 0u ? a.x : (j == 1u ? a.y : (j == 2u ? a.z : a.w));
      if (row < p.n_rows && t < tl.n_tok) tile_write(tl, t, row, s);
    }
  }
}
