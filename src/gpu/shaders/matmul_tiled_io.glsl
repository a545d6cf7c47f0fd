// What the prefill matmuls (matmul_tiled.comp, matmul_coop.comp) share beside their products:
// their push constants (matmul.cc's matmul and matmul_experts_grouped fill them), a tile's tokens,
// weight rows and chunks, the decoding of its weights and activations a chunk at a time, and
// where a sum goes. BM x BN tiles (128 x 64) of 256 threads. IDS: the experts' variants
// (matmul_tiled.comp says how they run).
layout(push_constant) uniform Push {
  Words w;
  Floats x;
  Vec4s x4;  // the same address as x, read 16 bytes at a time where x_vec4 says it may be
  Floats y;
  uint n_rows;
  uint n_cols;
  uint n_tokens;
  uint row_bytes;
  uint y_stride;
  uint y_col;
  uint x_vec4;  // 1: x is 16-byte aligned and n_cols a multiple of 4
  Floats bias;  // [n_rows], added to every token's row; unread when has_bias is 0
  uint has_bias;
  uint add_to_y;  // 1: y += the products (a residual), else y = them
#ifdef IDS
  Ints slots;         // [n_expert, cap] each expert's slots
  Ints counts;        // [n_expert] how many
  uint cap;           // the lists' stride
  uint expert_bytes;  // one expert's n_rows rows
  uint x_div;         // slot s reads x row s / x_div
#else
  // Split over the row length (few tiles, long rows: a short prompt's): workgroup z takes chunks
  // z * chunks_per_split .. of every row and writes its sums to part [z, n_tokens, n_rows],
  // which matmul_reduce.comp adds up into y; chunks_per_split >= the row's chunks: no split.
  uint chunks_per_split;
  Floats part;
#endif
} p;

// Token t of the tile's list: its row of x and of y (t < n_tok). IDS: list_at, the first of the
// expert's slots (set by main).
#ifdef IDS
uint list_at;
uint x_row(uint t) { return uint(p.slots.v[list_at + t]) / p.x_div; }
uint y_row(uint t) { return uint(p.slots.v[list_at + t]); }
#else
uint x_row(uint t) { return t; }
uint y_row(uint t) { return t; }
#endif

#include "decode.glsl"
#include "matmul_io.glsl"

// The workgroup's tile: tokens t0 .. of its list of n_tok, weight rows from byte w0 of w,
// chunks [c_begin, c_end) of the rows (the split's, where split).
struct Tile {
  uint r0, t0, n_tok, w0, c_begin, c_end;
  bool split;
};
// False where the tile has no token (an expert's tiles past its count: the whole workgroup).
bool tile_of_workgroup(out Tile tl) {
  tl.r0 = gl_WorkGroupID.x * BM;
  tl.t0 = gl_WorkGroupID.y * BN;
#ifdef IDS
  uint expert = gl_WorkGroupID.z;
  tl.n_tok = uint(p.counts.v[expert]);
  list_at = expert * p.cap;
  tl.w0 = expert * p.expert_bytes;
#else
  tl.n_tok = p.n_tokens;
  tl.w0 = 0u;
#endif
  uint n_chunks = (p.n_cols + 31u) / 32u;
  tl.c_begin = 0u;
  tl.c_end = n_chunks;
#ifdef IDS
  tl.split = false;
#else
  tl.split = p.chunks_per_split < n_chunks;
  if (tl.split) {
    tl.c_begin = gl_WorkGroupID.z * p.chunks_per_split;
    tl.c_end = min(tl.c_begin + p.chunks_per_split, n_chunks);
  }
#endif
  return tl.t0 < tl.n_tok;
}

// Part `part` (0 .. 511: 4 a row's chunk, neighbouring bytes for neighbouring threads) of chunk
// c of the tile's weights: its row of the tile lr, its part q of the chunk (decode.glsl's
// part_elem places its values), and those 8 values (0 past the matrix's rows).
void tile_weights(Tile tl, uint part, uint c, out uint lr, out uint q, out float vals[8]) {
  lr = part >> 2;
  q = part & 3u;
  uint row = tl.r0 + lr;
  float v[8], d = 0.0, m = 0.0;
  if (row < p.n_rows) {
    decode_part(p.w, p.n_cols, tl.w0 + row * p.row_bytes, c, q, v, d, m);
  } else {
    UNROLLED for (uint k = 0u; k < 8u; ++k) v[k] = 0.0;
  }
  UNROLLED for (uint k = 0u; k < 8u; ++k) vals[k] = d * v[k] + m;
}

// Run `run` (0 .. 511: 8 a token, 4 values each) of chunk c of the tile's activations: its token
// of the tile lt, its first value of the chunk e, and the 4 values (0 past the token list).
vec4 tile_activations(Tile tl, uint run, uint c, out uint lt, out uint e) {
  lt = run >> 3;
  e = 4u * (run & 7u);
  uint t = tl.t0 + lt;
  return t < tl.n_tok ? x_run(x_row(t) * p.n_cols, 32u * c + e) : vec4(0.0);
}

// Token t's sum for row `row` (both inside the matrix and the list): into the split's part,
// else y by write_y.glsl's rule.
void tile_write(Tile tl, uint t, uint row, float s) {
#ifndef IDS
  if (tl.split) {
    p.part.v[(gl_WorkGroupID.z * tl.n_tok + t) * p.n_rows + row] = s;
    return;
  }
#endif
  write_y(y_row(t), row, s);
}
