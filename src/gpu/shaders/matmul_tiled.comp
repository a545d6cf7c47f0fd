#version 450
// The prefill matmul (many tokens): y[t, r] = sum_c w[r, c] * x[t, c], as matmul.comp computes it,
// in tiles that read each weight block once per 32 tokens instead of once per 8.
//   w: [n_rows, n_cols] GGUF rows of row_bytes each; x: [n_tokens, n_cols] f32;
//   y: [n_tokens, y_stride] f32, columns y_col .. y_col + n_rows - 1 overwritten.
// A workgroup of 64 threads computes a tile of 64 rows x 32 tokens: for each 32-value chunk of
// the rows, each thread decodes one row's chunk into shared memory and loads 16 activations,
// then computes its 8 rows x 4 tokens of the tile from shared memory.
#include "common.glsl"
#include "decode.glsl"

#define BM 64  // rows a tile
#define BN 32  // tokens a tile
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Words w;
  Floats x;
  Floats y;
  uint n_rows;
  uint n_cols;
  uint n_tokens;
  uint row_bytes;
  uint y_stride;
  uint y_col;
} p;

shared float ws[BM][33];  // [row, value] of the current chunk (+1: no bank conflicts)
shared float xs[BN][33];  // [token, value]

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint r0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
  uint n_chunks = (p.n_cols + 31u) / 32u;
  // This thread's micro-tile: rows rm .. rm + 7 (strided by 8), tokens tn .. tn + 3 (by 8).
  uint rm = tid & 7u, tn = tid >> 3;
  float acc[8][4];
  for (uint i = 0u; i < 8u; ++i) {
    for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;
  }
  float v[32];
  for (uint c = 0u; c < n_chunks; ++c) {
    uint row = r0 + tid;
    if (row < p.n_rows) {
      decode_chunk(p.w, p.n_cols, row * p.row_bytes, c, v);
    } else {
      for (uint i = 0u; i < 32u; ++i) v[i] = 0.0;
    }
    for (uint i = 0u; i < 32u; ++i) ws[tid][i] = v[i];
    // Activations: thread tid loads half a token's chunk (16 values).
    uint tt = tid >> 1, half_ = (tid & 1u) * 16u;
    for (uint i = 0u; i < 16u; ++i) {
      uint e = 32u * c + half_ + i;
      xs[tt][half_ + i] = (t0 + tt < p.n_tokens && e < p.n_cols) ? p.x.v[(t0 + tt) * p.n_cols + e]
                                                                  : 0.0;
    }
    barrier();
    for (uint k = 0u; k < 32u; ++k) {
      float xv[4];
      for (uint j = 0u; j < 4u; ++j) xv[j] = xs[tn + 8u * j][k];
      for (uint i = 0u; i < 8u; ++i) {
        float wv = ws[rm + 8u * i][k];
        for (uint j = 0u; j < 4u; ++j) acc[i][j] += wv * xv[j];
      }
    }
    barrier();
  }
  for (uint i = 0u; i < 8u; ++i) {
    uint row = r0 + rm + 8u * i;
    if (row >= p.n_rows) continue;
    for (uint j = 0u; j < 4u; ++j) {
      uint t = t0 + tn + 8u * j;
      if (t < p.n_tokens) p.y.v[t * p.y_stride + p.y_col + row] = acc[i][j];
    }
  }
}
