#version 450
// y[t, r] = sum_c w[r, c] * x[t, c] for a weight matrix in its GGUF block format (one variant
// per type, chosen by WTYPE_*), the GPU twin of kernels::matmul (its reference: matmul_ref), for
// few tokens (decode). Two variants a type: TT = 1 (one token: the decode step of one sequence)
// and TT = 8 (a tile of up to 8 tokens); RMAX rows a thread at most.
//   w: [n_rows, n_cols] GGUF rows of row_bytes each; x: [n_tokens, n_cols] f32;
//   y: [n_tokens, y_stride] f32, columns y_col .. y_col + n_rows - 1 overwritten (or added to),
//   with bias: [n_rows] added where given.
// A workgroup of 64 threads is split into teams of tpr = 2^tpr_log2 threads (as many as a row
// has 8-value parts, at most 64); a team takes nr = 2^ROWS_LOG2 neighbouring rows. A row's work
// is its 32-value chunks in four parts of 8 values (decode.glsl: decode_part); the team's
// threads take the parts in turn, so that neighbouring threads read neighbouring weight bytes
// and activations. A thread decodes its part of each of its team's rows (nr independent loads
// in flight), reads the part's 8 activations of a token once (two 16-byte loads) for all of
// them, then the team's sums are reduced by subgroup adds (shared memory where a team is
// smaller than a subgroup).
// IDS (with TT = 1): the experts of a mixture-of-experts layer (model/moe.h). w holds every
// expert's n_rows rows stacked; workgroup z is a slot s whose expert ids[s] gives the rows
// (byte ids[s] * expert_bytes of w on), whose activations are x row s / x_div (a token's k
// slots share its row) and whose products go to y row s.
// IDOT (the quantized types): the activations come quantized to 8 bits a value (quantize_q8.comp)
// and a part's products are integer dot products of 4 codes by 4 activations (OpSUDot of
// SPV_KHR_integer_dot_product), scaled once a part: no value is converted to a float. Or
// (in_mode 1 or 2) the activations come as f32 rows, and the team quantizes them as it reads
// them, as quantize_q8 would (in_mode 1: their RMS norm's weights applied first): a block's 4
// parts are a quad of neighbouring threads, which find the block's largest value by quad swaps.
// in_mode (the float shaders; gpu::MatmulInput): the input is x as it is (0), or x's RMS norm
// (1: x / sqrt(mean(x^2) + eps) * norm_w, the twin of rms_norm.comp: a team reads its tokens'
// rows whole, so it sums their squares on the way and scales its sums once at the end).
// out_mode (every variant; gpu::MatmulOut): the products as they are (0); gelu of each biased
// product (1, the twin of gelu.comp); or silu(gate) * up of row pairs (2, the twin of
// swiglu.comp: the matrix's n_rows rows are gate rows, then as many up rows; output row o is
// silu(gate o) * up o, biased, so y takes n_rows / 2 columns). A team then takes nr / 2 gate rows
// and the nr / 2 up rows n_rows / 2 after them, so that each output is its team's: each
// activation is computed once, where a fused input would be once a team.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#ifdef IDOT
#extension GL_KHR_shader_subgroup_quad : require
#extension GL_EXT_spirv_intrinsics : require
// sum over the 4 bytes b of a (signed) times b's (unsigned) (format 0: 4 x 8 bits packed).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4452) int sudot4(uint a, uint b, spirv_literal int packed_format);
#endif

#ifndef TT
#define TT 8
#endif
#if defined(IDS) && TT != 1
#error IDS takes one token a workgroup (TT = 1)
#endif
#if TT == 1
#define RMAX 4
#define UNROLL 4  // IDOT's parts a thread loads at once
#else
#define RMAX 2
// One part at a time: each part's weights serve TT tokens, so a thread has work enough a load;
// two took the unrolled IDOT variants past 256 registers a thread on RADV's compiler, which
// spilled some 850 of them (`glmserve devices --shaders`, DevicesShaders.*).
#define UNROLL 1
#endif
#define NOUT (RMAX * TT)  // sums a team computes: [row, token]
layout(local_size_x = 64) in;
// log2 of the rows a team takes (gpu::Device::pipeline's spec: a constant of the pipeline, so
// that the compiler drops the code and the registers of the rows past it); RMAX's by default.
#if RMAX == 4
layout(constant_id = 0) const uint ROWS_LOG2 = 2u;
#else
layout(constant_id = 0) const uint ROWS_LOG2 = 1u;
#endif
layout(push_constant) uniform Push {
  Words w;
#ifdef IDOT
  Words x;   // the activations' 8-bit blocks (quantize_q8.comp): [n_tokens, n_cols / 32] x 9 words,
             // or (in_mode 1, 2) their f32 rows [n_tokens, n_cols]
  Vec4s x4;  // the same address, the f32 rows read 16 bytes at a time where x_vec4 says so
#else
  Floats x;
  Vec4s x4;  // the same address as x, read 16 bytes at a time where x_vec4 says it may be
#endif
  Floats y;
  uint n_rows;
  uint n_cols;
  uint n_tokens;
  uint row_bytes;
  uint groups_per_y;  // gl_WorkGroupID.y * groups_per_y + gl_WorkGroupID.x = the row group
  uint y_stride;      // y[t, r] is at t * y_stride + y_col + r
  uint y_col;
  uint tpr_log2;  // threads per row: 1 << tpr_log2
  uint x_vec4;     // 1: x is 16-byte aligned and n_cols a multiple of 4
  Floats bias;     // [n_rows], added to every token's row; unread when has_bias is 0
  uint has_bias;
  uint add_to_y;   // 1: y += the products (a residual), else y = them
  Floats norm_w;   // [n_cols] in_mode 1's weights (read 16 bytes at a time where x_vec4)
  float eps;       // in_mode 1's
  uint in_mode;    // 0: x; 1: x's RMS norm; 2 (IDOT): f32 rows quantized here (above)
  uint out_mode;   // 0: the products; 1: their gelu; 2: silu(gate) * up of row pairs (above)
#ifdef IDS
  Ints ids;           // [n_tokens] the expert of each slot
  uint expert_bytes;  // one expert's n_rows rows
  uint x_div;         // slot s reads x row s / x_div
#endif
} p;

#include "matmul_io.glsl"
#include "decode.glsl"
#ifdef IDOT
#include "q8.glsl"
#endif
#include "activation.glsl"

#define IN_RMS_NORM 1u
#define IN_F32 2u
#define OUT_GELU 1u
#define OUT_SWIGLU_PAIRS 2u
#define NRED (NOUT + TT)  // a team's sums, then (IN_RMS_NORM) its tokens' sums of squares

// Per subgroup sums (a team of whole subgroups), or every thread's (narrower teams).
shared float red[64][NRED];

// IN_RMS_NORM's weights e .. e + 3 (0 past the row), read once a part for all its tokens.
vec4 norm_w_run(uint e) {
  if (p.x_vec4 != 0u) return e < p.n_cols ? Vec4s(p.norm_w).v[e >> 2] : vec4(0.0);
  vec4 w;
  UNROLLED for (uint k = 0u; k < 4u; ++k) w[k] = e + k < p.n_cols ? p.norm_w.v[e + k] : 0.0;
  return w;
}

#ifndef IDOT
// The input's 4 values e .. e + 3 of the token row at xo (x_run's), as in_mode makes them
// (nw: norm_w_run(e) for IN_RMS_NORM); ss gains the squares of x's (IN_RMS_NORM).
vec4 in_run(uint xo, uint e, vec4 nw, inout float ss) {
  vec4 v = x_run(xo, e);
  if (p.in_mode == IN_RMS_NORM) {
    ss += dot(v, v);
    return v * nw;
  }
  return v;
}
#else
// The f32 row at xo's values e .. e + 3 (in_mode 1, 2; n_cols is a multiple of 32).
vec4 xf_run(uint xo, uint e) {
  if (p.x_vec4 != 0u) return p.x4.v[(xo + e) >> 2];
  return vec4(uintBitsToFloat(p.x.v[xo + e]), uintBitsToFloat(p.x.v[xo + e + 1u]),
              uintBitsToFloat(p.x.v[xo + e + 2u]), uintBitsToFloat(p.x.v[xo + e + 3u]));
}

// 4 values (already times 127 / the block's largest |value|) as 4 codes in a word (q8.glsl).
uint pack_codes(vec4 v) {
  uint word = 0u;
  UNROLLED for (uint j = 0u; j < 4u; ++j) {
    word |= q8_code(v[j]) << (8u * j);
  }
  return word;
}

// Part q (runs at ea and eb) of block c of the f32 row at xo, quantized as quantize_q8 quantizes
// its block (store_q8_block), by the quad of threads that hold the block's 4 parts: the part's
// codes in xa, xb and the block's scale in dx. IN_RMS_NORM: the values times the norm's weights
// (the norm's factor, common to the row, scales the sums at the end and leaves the codes as
// they are); ss gains the squares of x's.
void quantize_part(uint xo, uint ea, uint eb, inout float ss, out uint xa, out uint xb,
                   out float dx) {
  vec4 va = xf_run(xo, ea), vb = xf_run(xo, eb);
  if (p.in_mode == IN_RMS_NORM) {
    ss += dot(va, va) + dot(vb, vb);
    va *= norm_w_run(ea);
    vb *= norm_w_run(eb);
  }
  vec4 a = max(abs(va), abs(vb));
  float amax = max(max(a.x, a.y), max(a.z, a.w));
  amax = max(amax, subgroupQuadSwapHorizontal(amax));
  amax = max(amax, subgroupQuadSwapVertical(amax));
  float id = amax > 0.0 ? 127.0 / amax : 0.0;
  xa = pack_codes(va * id);
  xb = pack_codes(vb * id);
  dx = amax / 127.0;
}
#endif

// The factor of a token's sums: 1, or (IN_RMS_NORM) the inverse RMS of its row from the sum of
// its squares.
float out_scale(float ss) {
  return p.in_mode == IN_RMS_NORM ? 1.0 / sqrt(ss / float(p.n_cols) + p.eps) : 1.0;
}

// The matrix row of a team's row r (its first row row0, nr rows): the next, or (OUT_SWIGLU_PAIRS)
// gate rows row0 / 2 .. and the up rows n_rows / 2 after them; past the last, the last.
uint matrix_row(uint row0, uint r, uint nr) {
  if (p.out_mode != OUT_SWIGLU_PAIRS) return min(row0 + r, p.n_rows - 1u);
  uint half_rows = p.n_rows >> 1, pairs = nr >> 1;
  uint o = min((row0 >> 1) + r % pairs, half_rows - 1u);
  return r < pairs ? o : half_rows + o;
}

// Token t's output of its team's row r (first row row0): s, the row's sum; su, the sum of row
// r + nr / 2 (OUT_SWIGLU_PAIRS, where r < nr / 2: the up row of r's gate row). By out_mode.
void write_out(uint t, uint row0, uint r, uint nr, float s, float su) {
  if (p.out_mode == OUT_SWIGLU_PAIRS) {
    uint o = (row0 >> 1) + r, half_rows = p.n_rows >> 1;
    if (r < (nr >> 1) && o < half_rows) {
      store_y(t, o, SILU_MUL(biased(o, s), biased(half_rows + o, su)));
    }
  } else if (row0 + r < p.n_rows) {
    float v = biased(row0 + r, s);
    store_y(t, row0 + r, p.out_mode == OUT_GELU ? GELU_TANH(v) : v);
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint tpr = 1u << p.tpr_log2;
  uint lane = tid & (tpr - 1u);
  uint team = tid >> p.tpr_log2;
  uint nr = 1u << ROWS_LOG2;
  uint group = gl_WorkGroupID.y * p.groups_per_y + gl_WorkGroupID.x;
  uint row0 = ((group << (6u - p.tpr_log2)) + team) << ROWS_LOG2;
  uint t0 = gl_WorkGroupID.z * TT;
  uint nt = min(TT, p.n_tokens - t0);
#ifdef IDS
  uint w0 = uint(p.ids.v[t0]) * p.expert_bytes;
  uint x0 = t0 / p.x_div;
#else
  uint w0 = 0u;
  uint x0 = t0;
#endif
  float acc[RMAX][TT];
  UNROLLED for (uint r = 0u; r < RMAX; ++r) {
    UNROLLED for (uint t = 0u; t < TT; ++t) acc[r][t] = 0.0;
  }
  float ss[TT];  // IN_RMS_NORM: the squares of each token's row, this thread's parts
  UNROLLED for (uint t = 0u; t < TT; ++t) ss[t] = 0.0;
  // A team past the last row has no parts; rows past it within a team read the last row (their
  // sums are not written).
  uint n_parts = row0 < p.n_rows ? 4u * ((p.n_cols + 31u) / 32u) : 0u;
  uint ro[RMAX];
  UNROLLED for (uint r = 0u; r < RMAX; ++r) ro[r] = w0 + matrix_row(row0, r, nr) * p.row_bytes;
#ifdef IDOT
  // UNROLL parts a thread at once, their weights loaded before any is used: a part is only 4.5
  // (Q4_0) to 8.5 (Q8_0) bytes a row, and a decode matmul is as fast as the bytes in flight.
  uint n_blocks = p.n_cols / 32u;
  for (uint i0 = lane; i0 < n_parts; i0 += UNROLL * tpr) {
    uint c0[UNROLL][RMAX], c1[UNROLL][RMAX];
    float d[UNROLL][RMAX], m[UNROLL][RMAX];
    UNROLLED for (uint u = 0u; u < UNROLL; ++u) {
      uint i = i0 + u * tpr;
      UNROLLED for (uint r = 0u; r < RMAX; ++r) {
        if (r < nr && i < n_parts) {
          decode_codes(p.w, ro[r], i >> 2, i & 3u, c0[u][r], c1[u][r], d[u][r], m[u][r]);
        }
      }
    }
    UNROLLED for (uint u = 0u; u < UNROLL; ++u) {
      uint i = i0 + u * tpr;  // (no break past n_parts: a loop that breaks stays rolled)
      uint c = i >> 2, q = i & 3u;
      uint wa = part_run(q, 0u) >> 2, wb = part_run(q, 1u) >> 2;  // words of the block's 8
      UNROLLED for (uint t = 0u; t < TT; ++t) {
        if (t < nt && i < n_parts) {
          uint xa, xb;
          float dx;
          if (p.in_mode != 0u) {
            quantize_part((x0 + t) * p.n_cols, 32u * c + 4u * wa, 32u * c + 4u * wb, ss[t], xa,
                          xb, dx);
          } else {
            uint xo = ((x0 + t) * n_blocks + c) * 9u;
            xa = p.x.v[xo + wa];
            xb = p.x.v[xo + wb];
            dx = uintBitsToFloat(p.x.v[xo + 8u]);
          }
          int sx = sudot4(xa, 0x01010101u, 0) + sudot4(xb, 0x01010101u, 0);  // the codes' sum
          float fx = int_f(sx);  // (int_f: no integer-to-float conversion, common.glsl)
          UNROLLED for (uint r = 0u; r < RMAX; ++r) {
            if (r < nr) {
              int sc = sudot4(xa, c0[u][r], 0) + sudot4(xb, c1[u][r], 0);
              acc[r][t] += dx * (d[u][r] * int_f(sc - CODE_BIAS * sx) + m[u][r] * fx);
            }
          }
        }
      }
    }
  }
#else
  for (uint i = lane; i < n_parts; i += tpr) {
    uint c = i >> 2, q = i & 3u;
    float v[RMAX][8], d[RMAX], m[RMAX];
    UNROLLED for (uint r = 0u; r < RMAX; ++r) {
      if (r < nr) decode_part(p.w, p.n_cols, ro[r], c, q, v[r], d[r], m[r]);
    }
    uint ea = 32u * c + part_run(q, 0u), eb = 32u * c + part_run(q, 1u);
    vec4 nwa = vec4(1.0), nwb = vec4(1.0);
    if (p.in_mode == IN_RMS_NORM) {
      nwa = norm_w_run(ea);
      nwb = norm_w_run(eb);
    }
    UNROLLED for (uint t = 0u; t < TT; ++t) {
      if (t < nt) {
        uint xo = (x0 + t) * p.n_cols;
        vec4 xa = in_run(xo, ea, nwa, ss[t]), xb = in_run(xo, eb, nwb, ss[t]);
#ifdef HAS_MIN
        float xsum = dot(xa + xb, vec4(1.0));  // the part's activations, for the offsets m
#endif
        UNROLLED for (uint r = 0u; r < RMAX; ++r) {
          if (r < nr) {
            // The part's codes against its activations, then its scale (decode.glsl).
            float s = dot(vec4(v[r][0], v[r][1], v[r][2], v[r][3]), xa) +
                      dot(vec4(v[r][4], v[r][5], v[r][6], v[r][7]), xb);
#ifdef HAS_MIN
            acc[r][t] += d[r] * s + m[r] * xsum;
#else
            acc[r][t] += d[r] * s;
#endif
          }
        }
      }
    }
  }
#endif
  // The team's sums: out k = r * TT + t; then, IN_RMS_NORM, k = NOUT + t its squares.
  uint n_teams = 64u >> p.tpr_log2;
  bool norm = p.in_mode == IN_RMS_NORM;
  // Full subgroups only: a driver may run a workgroup as partial ones (fewer invocations than
  // gl_SubgroupSize each, as lavapipe does past its widest vectors), unless the pipeline asks
  // for full ones (gpu::Device does where the device can).
  bool full = gl_NumSubgroups * gl_SubgroupSize == 64u;
  if (full && tpr >= gl_SubgroupSize && gl_SubgroupSize >= 4u) {
    // Whole subgroups a team: a subgroup add, one value a subgroup into shared memory.
    UNROLLED for (uint r = 0u; r < RMAX; ++r) {
      UNROLLED for (uint t = 0u; t < TT; ++t) {
        if (r < nr && t < nt) {
          float s = subgroupAdd(acc[r][t]);
          if (subgroupElect()) red[gl_SubgroupID][r * TT + t] = s;
        }
      }
    }
    UNROLLED for (uint t = 0u; t < TT; ++t) {
      if (norm && t < nt) {
        float s = subgroupAdd(ss[t]);
        if (subgroupElect()) red[gl_SubgroupID][NOUT + t] = s;
      }
    }
    barrier();
    uint per_team = tpr / gl_SubgroupSize;
    // A row's pair (OUT_SWIGLU_PAIRS): its up row's sums, nr / 2 rows on.
    uint ku = p.out_mode == OUT_SWIGLU_PAIRS ? (nr >> 1) * TT : 0u;
    for (uint j = tid; j < n_teams * NOUT; j += 64u) {
      uint tm = j / NOUT, k = j % NOUT, r = k / TT, t = k % TT;
      uint team_row0 = ((group << (6u - p.tpr_log2)) + tm) << ROWS_LOG2;
      if (r < nr && t < nt && team_row0 < p.n_rows) {
        float s = 0.0, su = 0.0, q = 0.0;
        for (uint g = 0u; g < per_team; ++g) {
          s += red[tm * per_team + g][k];
          if (ku != 0u && r < (nr >> 1)) su += red[tm * per_team + g][k + ku];
          if (norm) q += red[tm * per_team + g][NOUT + t];
        }
        float sc = out_scale(q);
        write_out(t0 + t, team_row0, r, nr, s * sc, su * sc);
      }
    }
  } else {
    // Teams narrower than a subgroup: every thread's sums into shared memory, a tree a team.
    UNROLLED for (uint r = 0u; r < RMAX; ++r) {
      UNROLLED for (uint t = 0u; t < TT; ++t) red[tid][r * TT + t] = acc[r][t];
    }
    UNROLLED for (uint t = 0u; t < TT; ++t) red[tid][NOUT + t] = ss[t];
    barrier();
    uint n_red = norm ? NRED : NOUT;
    for (uint stride = tpr >> 1; stride > 0u; stride >>= 1) {  // the same count in every thread
      if (lane < stride) {
        for (uint k = 0u; k < n_red; ++k) red[tid][k] += red[tid + stride][k];
      }
      barrier();
    }
    if (lane == 0u && row0 < p.n_rows) {
      uint ru = p.out_mode == OUT_SWIGLU_PAIRS ? nr >> 1 : 0u;  // a row's up row, r + ru
      // (Rolled: the sums are in shared memory now, and a write a row and token unrolled would
      // copy write_out's activations RMAX x TT times.)
      for (uint r = 0u; r < RMAX; ++r) {
        for (uint t = 0u; t < TT; ++t) {
          if (r < nr && t < nt) {
            float sc = out_scale(red[tid][NOUT + t]);
            float su = ru != 0u && r < ru ? red[tid][(r + ru) * TT + t] : 0.0;
            write_out(t0 + t, row0, r, nr, red[tid][r * TT + t] * sc, su * sc);
          }
        }
      }
    }
  }
}
