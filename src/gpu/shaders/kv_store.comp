#version 450
// Writes new K and V rows into their cache slots (the twin of kernels::kv_store_row).
//   src: [n_tokens, src_stride] f32, the K row of token t at col k_col, the V row at v_col;
//   kv: one layer's cache, the K rows from byte k_base, the V rows from v_base, row_bytes apart;
//   slots: [n_tokens] the slot of each token (block * block_tokens + position % block_tokens).
// Workgroup (t, 0) stores token t's K row, (t, 1) its V row.
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
  uint k_base;
  uint v_base;
  uint row_elems;
  uint row_bytes;
} p;

#if defined(KV_Q8_0)
#define MAX_ROW_BYTES 4352  // 128 blocks: row_elems up to 4096 (kMaxQ8RowElems)
shared uint bytes_[MAX_ROW_BYTES];
#endif

void main() {
  uint t = gl_WorkGroupID.x, which = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  uint so = t * p.src_stride + (which == 0u ? p.k_col : p.v_col);
  uint ro = (which == 0u ? p.k_base : p.v_base) + uint(p.slots.v[t]) * p.row_bytes;
#if defined(KV_F32)
  for (uint i = tid; i < p.row_elems; i += 64u) p.kv.v[(ro >> 2) + i] = floatBitsToUint(p.src.v[so + i]);
#elif defined(KV_F16)
  for (uint i = tid; 2u * i < p.row_elems; i += 64u) {
    p.kv.v[(ro >> 2) + i] = packHalf2x16(vec2(p.src.v[so + 2u * i], p.src.v[so + 2u * i + 1u]));
  }
#else
  // Each thread quantizes whole blocks into shared bytes, as kernels::quantize_row_ref does
  // (d = max |x| / 127, q = round half away from zero of x / d); then the row's words are
  // written, the two edge words (shared with the neighbouring rows) by atomic and/or.
  uint n_blocks = p.row_elems / 32u;
  for (uint b = tid; b < n_blocks; b += 64u) {
    float amax = 0.0;
    for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(p.src.v[so + 32u * b + j]));
    float d = amax / 127.0;
    float id = d != 0.0 ? 1.0 / d : 0.0;
    uint dh = packHalf2x16(vec2(d, 0.0));
    bytes_[34u * b] = dh & 0xFFu;
    bytes_[34u * b + 1u] = (dh >> 8) & 0xFFu;
    for (uint j = 0u; j < 32u; ++j) {
      float x = p.src.v[so + 32u * b + j] * id;
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
