#version 450
// y[t, r] = sum_c w[r, c] * x[t, c] for a weight matrix in its GGUF block format (one variant
// per type, chosen by WTYPE_*), the GPU twin of kernels::matmul (its reference: matmul_ref).
//   w: [n_rows, n_cols] GGUF rows of row_bytes each; x: [n_tokens, n_cols] f32;
//   y: [n_tokens, y_stride] f32, columns y_col .. y_col + n_rows - 1 overwritten.
// A workgroup of 64 threads takes 64 / tpr rows and a tile of up to TT tokens. A row's work is
// its 32-value chunks in four parts of 8 values (decode.glsl: decode_part); its tpr threads
// (tpr = 2^tpr_log2, as many as the row has parts, at most 64) take the parts in turn, so that
// neighbouring threads read neighbouring weight bytes and activations, decode each part once and
// use it for every token of the tile, then sum their partial dot products in shared memory.
#include "common.glsl"

#define TT 8
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Words w;
  Floats x;
  Floats y;
  uint n_rows;
  uint n_cols;
  uint n_tokens;
  uint row_bytes;
  uint groups_per_y;  // gl_WorkGroupID.y * groups_per_y + gl_WorkGroupID.x = the row group
  uint y_stride;    // y[t, r] is at t * y_stride + y_col + r
  uint y_col;
  uint tpr_log2;  // threads per row: 1 << tpr_log2
} p;

shared float partial[TT][64];

#include "decode.glsl"

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint tpr = 1u << p.tpr_log2;
  uint lane = tid & (tpr - 1u);
  uint group = gl_WorkGroupID.y * p.groups_per_y + gl_WorkGroupID.x;
  uint row = (group << (6u - p.tpr_log2)) + (tid >> p.tpr_log2);
  uint t0 = gl_WorkGroupID.z * TT;
  uint nt = min(TT, p.n_tokens - t0);
  float acc[TT];
  for (uint t = 0u; t < TT; ++t) acc[t] = 0.0;
  // A row past the end has no parts.
  uint n_parts = row < p.n_rows ? 4u * ((p.n_cols + 31u) / 32u) : 0u;
  uint ro = row * p.row_bytes;
  for (uint i = lane; i < n_parts; i += tpr) {
    uint c = i >> 2, q = i & 3u;
    float v[8];
    decode_part(p.w, p.n_cols, ro, c, q, v);
    uint e0 = 32u * c;
    for (uint t = 0u; t < TT; ++t) {
      if (t < nt) {
        uint xo = (t0 + t) * p.n_cols + e0;
        float s = 0.0;
        for (uint k = 0u; k < 8u; ++k) {
          uint e = part_elem(q, k);
#if defined(WTYPE_F32) || defined(WTYPE_F16) || defined(WTYPE_BF16)
          // A float row's last chunk may end early: v is 0 past it and x is not read there.
          s += e0 + e < p.n_cols ? v[k] * p.x.v[xo + e] : 0.0;
#else
          s += v[k] * p.x.v[xo + e];  // block types: rows are whole 32-value blocks
#endif
        }
        acc[t] += s;
      }
    }
  }
  for (uint t = 0u; t < TT; ++t) partial[t][tid] = acc[t];
  barrier();
  for (uint stride = tpr >> 1; stride > 0u; stride >>= 1) {  // the same count in every thread
    if (lane < stride) {
      for (uint t = 0u; t < nt; ++t) partial[t][tid] += partial[t][tid + stride];
    }
    barrier();
  }
  if (row < p.n_rows) {
    for (uint t = lane; t < nt; t += tpr) {
      p.y.v[(t0 + t) * p.y_stride + p.y_col + row] = partial[t][tid - lane];
    }
  }
}
