#version 450
// Writes new K and V rows into their cache slots (the twin of kernels::kv_store_row).
//   src: [n_tokens, src_stride] f32, the K row of token t at col k_col, the V row at v_col;
//   kv: one layer's cache, the K rows from its start, the V rows from v_base, row_bytes apart;
//   slots: [n_tokens] the slot of each token (block * block_tokens + position % block_tokens).
// Workgroup (t, 0) stores token t's K row, (t, 1) its V row.
// With the rotary (n_rot != 0; rope.comp's, one table row a token: cs, sn [n_tokens, n_rot / 2],
// over dims rot_col .. rot_col + n_rot - 1 of each head: 0 but for GLM-4.7-Flash's K row, whose
// rotary part follows its kv_lora compressed values), the K row's heads are stored rotated (src
// keeps them as they were) and workgroup (t, 2) rotates token t's n_q_heads query heads (src's
// first columns) in place: a layer's rotary and K/V store in one dispatch.
#include "common.glsl"
#include "kv.glsl"
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats src;
  Words kv;
  Ints slots;
  uint src_stride;
  uint k_col;
  uint v_col;
  uint v_base;
  uint row_elems;
  uint row_bytes;
  Floats cs;  // unread where n_rot is 0 (no rotary)
  Floats sn;
  uint n_q_heads;
  uint head_dim;
  uint n_rot;
  uint neox;  // 0: interleaved pairs (2i, 2i + 1); 1: rotate-half pairs (i, i + n_rot / 2)
  uint rot_col;
} p;

// The pair of dim d (< n_rot) of the rotary part at src[h]: its two elements' offsets, its table
// entry.
void rope_pair(uint h, uint d, out uint o0, out uint o1, out uint k) {
  uint half_rot = p.n_rot / 2u;
  k = p.neox != 0u ? d % half_rot : d / 2u;
  o0 = p.neox != 0u ? h + k : h + 2u * k;
  o1 = p.neox != 0u ? o0 + half_rot : o0 + 1u;
}

// Element i of the row at src[so] (token t), rotated where `rotate` (a K row with the rotary).
float src_elem(uint so, uint i, uint t, bool rotate) {
  uint d = i % p.head_dim;
  if (!rotate || d < p.rot_col || d >= p.rot_col + p.n_rot) return p.src.v[so + i];
  uint o0, o1, k;
  rope_pair(so + i - d + p.rot_col, d - p.rot_col, o0, o1, k);
  uint ti = t * (p.n_rot / 2u) + k;
  float c = p.cs.v[ti], s = p.sn.v[ti];
  float a = p.src.v[o0], b = p.src.v[o1];
  return so + i == o0 ? a * c - b * s : a * s + b * c;
}

#if defined(KV_Q8_0)
#define MAX_ROW_BYTES 4352  // 128 blocks: row_elems up to 4096 (kMaxQ8RowElems)
shared uint bytes_[MAX_ROW_BYTES];
#endif

void main() {
  uint t = gl_WorkGroupID.x, which = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  if (which == 2u) {  // the query heads' rotary, in place: a thread a pair
    uint half_rot = p.n_rot / 2u;
    for (uint j = tid; j < p.n_q_heads * half_rot; j += 64u) {
      uint o0, o1, k;
      uint d = p.neox != 0u ? j % half_rot : 2u * (j % half_rot);  // the pair's first dim
      rope_pair(t * p.src_stride + (j / half_rot) * p.head_dim + p.rot_col, d, o0, o1, k);
      uint ti = t * half_rot + k;
      float c = p.cs.v[ti], s = p.sn.v[ti];
      float a = p.src.v[o0], b = p.src.v[o1];
      p.src.v[o0] = a * c - b * s;
      p.src.v[o1] = a * s + b * c;
    }
    return;
  }
  bool rotate = which == 0u && p.n_rot != 0u;
  uint so = t * p.src_stride + (which == 0u ? p.k_col : p.v_col);
  uint ro = (which == 0u ? 0u : p.v_base) + uint(p.slots.v[t]) * p.row_bytes;
#if defined(KV_F32)
  for (uint i = tid; i < p.row_elems; i += 64u) {
    p.kv.v[(ro >> 2) + i] = floatBitsToUint(src_elem(so, i, t, rotate));
  }
#elif defined(KV_F16)
  for (uint i = tid; 2u * i < p.row_elems; i += 64u) {
    p.kv.v[(ro >> 2) + i] =
        packHalf2x16(vec2(src_elem(so, 2u * i, t, rotate), src_elem(so, 2u * i + 1u, t, rotate)));
  }
#else
  // Each thread quantizes whole blocks into shared bytes, as kernels::quantize_row_ref does
  // (d = max |x| / 127, q = round half away from zero of x / d); then the row's words are
  // written, the two edge words (shared with the neighbouring rows) by atomic and/or.
  uint n_blocks = p.row_elems / 32u;
  for (uint b = tid; b < n_blocks; b += 64u) {
    float amax = 0.0;
    for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(src_elem(so, 32u * b + j, t, rotate)));
    float d = amax / 127.0;
    float id = d != 0.0 ? 1.0 / d : 0.0;
    uint dh = packHalf2x16(vec2(d, 0.0));
    bytes_[34u * b] = dh & 0xFFu;
    bytes_[34u * b + 1u] = (dh >> 8) & 0xFFu;
    for (uint j = 0u; j < 32u; ++j) {
      float x = src_elem(so, 32u * b + j, t, rotate) * id;
      float r = sign(x) * floor(abs(x) + 0.5);
      bytes_[34u * b + 2u + j] = uint(int(clamp(r, -127.0, 127.0))) & 0xFFu;
    }
  }
  barrier();
  uint first = ro >> 2, last = (ro + p.row_bytes - 1u) >> 2;
  for (uint w = first + tid; w <= last; w += 64u) {
    uint value = 0u, mask = 0u;
    for (uint k = 0u; k < 4u; ++k) {
      uint at = 4u * w + k;
      if (at >= ro && at < ro + p.row_bytes) {
        value |= bytes_[at - ro] << (8u * k);
        mask |= 0xFFu << (8u * k);
      }
    }
    if (mask == 0xFFFFFFFFu) {
      p.kv.v[w] = value;
    } else {
      atomicAnd(p.kv.v[w], ~mask);
      atomicOr(p.kv.v[w], value);
    }
  }
#endif
}
