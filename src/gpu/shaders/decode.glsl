// The weight formats' decoding, shared by the matmul shaders: one variant per type (WTYPE_*),
// as the scalar references of kernels/quant.cc and quant_k.cc decode them.
//
// A 32-value chunk c of a row is decoded in four parts of 8 values, part q by one thread in the
// decode matmul (so that the threads of a row read neighbouring bytes of the weights and of the
// activations: matmul.comp). Part q holds the chunk's elements part_elem(q, 0..7): for the 4- and
// 5-bit block types, whose byte j holds elements j and j + 16, elements 4q .. 4q+3 and
// 16+4q .. 16+4q+3; for the others, 8q .. 8q+7.

uint part_elem(uint q, uint k) {
#if defined(WTYPE_Q4_0) || defined(WTYPE_Q4_1) || defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
  return k < 4u ? 4u * q + k : 12u + 4u * q + k;
#else
  return 8u * q + k;
#endif
}

// Part q of chunk c of the row starting at byte `ro`, into v (elements past n_cols: 0).
void decode_part(Words w, uint n_cols, uint ro, uint c, uint q, out float v[8]) {
#if defined(WTYPE_F32)
  for (uint k = 0u; k < 8u; ++k) {
    uint e = 32u * c + 8u * q + k;
    v[k] = e < n_cols ? uintBitsToFloat(w.v[(ro >> 2) + e]) : 0.0;
  }
#elif defined(WTYPE_F16) || defined(WTYPE_BF16)
  uint e0 = 32u * c + 8u * q;
  for (uint k = 0u; k < 8u; k += 2u) {
    uint e = e0 + k;
    // Two values a word where both are in the row (ro is 2-byte aligned: u32_at).
    uint pair = e + 1u < n_cols ? u32_at(w, ro + 2u * e) : (e < n_cols ? u16_at(w, ro + 2u * e) : 0u);
#if defined(WTYPE_F16)
    vec2 f = unpackHalf2x16(pair);
    v[k] = f.x;
    v[k + 1u] = e + 1u < n_cols ? f.y : 0.0;
#else
    v[k] = uintBitsToFloat(pair << 16);
    v[k + 1u] = e + 1u < n_cols ? uintBitsToFloat(pair & 0xFFFF0000u) : 0.0;
#endif
  }
#elif defined(WTYPE_Q4_0) || defined(WTYPE_Q4_1)
#if defined(WTYPE_Q4_0)
  uint o = ro + 18u * c;
  float d = f16_at(w, o), m = -8.0 * d;
  uint qs = o + 2u;
#else
  uint o = ro + 20u * c;
  float d = f16_at(w, o), m = f16_at(w, o + 2u);
  uint qs = o + 4u;
#endif
  uint qw = u32_at(w, qs + 4u * q);  // bytes 4q .. 4q+3: elements 4q+b (low), 16+4q+b (high)
  for (uint b = 0u; b < 4u; ++b) {
    uint byte = (qw >> (8u * b)) & 0xFFu;
    v[b] = float(byte & 0xFu) * d + m;
    v[4u + b] = float(byte >> 4) * d + m;
  }
#elif defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
#if defined(WTYPE_Q5_0)
  uint o = ro + 22u * c;
  float d = f16_at(w, o), m = -16.0 * d;
  uint qh = u32_at(w, o + 2u);
  uint qs = o + 6u;
#else
  uint o = ro + 24u * c;
  float d = f16_at(w, o), m = f16_at(w, o + 2u);
  uint qh = u32_at(w, o + 4u);
  uint qs = o + 8u;
#endif
  uint qw = u32_at(w, qs + 4u * q);
  for (uint b = 0u; b < 4u; ++b) {
    uint j = 4u * q + b;
    uint byte = (qw >> (8u * b)) & 0xFFu;
    uint lo = (byte & 0xFu) | (((qh >> j) & 1u) << 4);
    uint hi = (byte >> 4) | (((qh >> (j + 16u)) & 1u) << 4);
    v[b] = float(lo) * d + m;
    v[4u + b] = float(hi) * d + m;
  }
#elif defined(WTYPE_Q8_0)
  uint o = ro + 34u * c;
  float d = f16_at(w, o);
  for (uint k = 0u; k < 2u; ++k) {
    uint qw = u32_at(w, o + 2u + 8u * q + 4u * k);
    for (uint b = 0u; b < 4u; ++b) v[4u * k + b] = float(s8((qw >> (8u * b)) & 0xFFu)) * d;
  }
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
  // Super-block c / 8, sub-block s = c % 8 (32 values, one 6-bit scale and min).
#if defined(WTYPE_Q4_K)
  uint o = ro + 144u * (c >> 3);
  uint qs = o + 16u;
#else
  uint o = ro + 176u * (c >> 3);
  uint qh = o + 16u;
  uint qs = o + 48u;
#endif
  uint s = c & 7u;
  float d = f16_at(w, o), dmin = f16_at(w, o + 2u);
  uint sc_off = o + 4u;
  uint sc, mn;
  if (s < 4u) {
    sc = u8_at(w, sc_off + s) & 63u;
    mn = u8_at(w, sc_off + s + 4u) & 63u;
  } else {
    sc = (u8_at(w, sc_off + s + 4u) & 0xFu) | ((u8_at(w, sc_off + s - 4u) >> 6) << 4);
    mn = (u8_at(w, sc_off + s + 4u) >> 4) | ((u8_at(w, sc_off + s) >> 6) << 4);
  }
  float step = d * float(sc), lo = dmin * float(mn);
  uint q0 = qs + 32u * (s >> 1);
  uint shift = (s & 1u) * 4u;
  for (uint k = 0u; k < 2u; ++k) {
    uint word = 2u * q + k;  // bytes 8q .. 8q+7 of the sub-block's 32
    uint qw = u32_at(w, q0 + 4u * word);
#if defined(WTYPE_Q5_K)
    uint h = u32_at(w, qh + 4u * word);
#endif
    for (uint b = 0u; b < 4u; ++b) {
      uint code = (qw >> (8u * b + shift)) & 0xFu;
#if defined(WTYPE_Q5_K)
      code |= ((h >> (8u * b + s)) & 1u) << 4;
#endif
      v[4u * k + b] = step * float(code) - lo;
    }
  }
#elif defined(WTYPE_Q6_K)
  // Element 128 h + 32 k + l of a super-block (see kernels/quant_k.cc): chunk c is (h, k).
  uint o = ro + 210u * (c >> 3);
  uint h = (c >> 2) & 1u, k = c & 3u;
  float d = f16_at(w, o + 208u);
  uint ql = o + 64u * h + 32u * (k & 1u);
  uint qh = o + 128u + 32u * h;
  uint shift = k < 2u ? 0u : 4u;
  // Elements l = 8q .. 8q+7: the first 16 of a chunk take one scale, the last 16 the next.
  float dsc = d * float(s8(u8_at(w, o + 192u + 8u * h + 2u * k + (q >> 1))));
  for (uint jj = 0u; jj < 2u; ++jj) {
    uint j = 2u * q + jj;
    uint lq = u32_at(w, ql + 4u * j);
    uint hq = u32_at(w, qh + 4u * j);
    for (uint b = 0u; b < 4u; ++b) {
      uint low = (lq >> (8u * b + shift)) & 0xFu;
      uint high = (hq >> (8u * b + 2u * k)) & 3u;
      int qv = int(low | (high << 4)) - 32;
      v[4u * jj + b] = dsc * float(qv);
    }
  }
#endif
}

// Chunk c (elements 32c .. 32c+31) of the row starting at byte `ro`, decoded into v: its four
// parts in their places.
void decode_chunk(Words w, uint n_cols, uint ro, uint c, out float v[32]) {
  for (uint q = 0u; q < 4u; ++q) {
    float part[8];
    decode_part(w, n_cols, ro, c, q, part);
    for (uint k = 0u; k < 8u; ++k) v[part_elem(q, k)] = part[k];
  }
}
