// The weight formats' decoding, shared by the matmul shaders: one variant per type (WTYPE_*),
// as the scalar references of kernels/quant.cc and quant_k.cc decode them.
// Chunk c (elements 32c .. 32c+31) of the row starting at byte `ro`, decoded into v.
void decode_chunk(Words w, uint n_cols, uint ro, uint c, out float v[32]) {
#if defined(WTYPE_F32)
  for (uint i = 0u; i < 32u; ++i) {
    uint e = 32u * c + i;
    v[i] = e < n_cols ? uintBitsToFloat(w.v[(ro >> 2) + e]) : 0.0;
  }
#elif defined(WTYPE_F16)
  for (uint i = 0u; i < 32u; ++i) {
    uint e = 32u * c + i;
    v[i] = e < n_cols ? f16_at(w, ro + 2u * e) : 0.0;
  }
#elif defined(WTYPE_BF16)
  for (uint i = 0u; i < 32u; ++i) {
    uint e = 32u * c + i;
    v[i] = e < n_cols ? uintBitsToFloat(u16_at(w, ro + 2u * e) << 16) : 0.0;
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
  for (uint k = 0u; k < 4u; ++k) {
    uint q = u32_at(w, qs + 4u * k);
    for (uint b = 0u; b < 4u; ++b) {
      uint byte = (q >> (8u * b)) & 0xFFu;
      v[4u * k + b] = float(byte & 0xFu) * d + m;
      v[16u + 4u * k + b] = float(byte >> 4) * d + m;
    }
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
  for (uint k = 0u; k < 4u; ++k) {
    uint q = u32_at(w, qs + 4u * k);
    for (uint b = 0u; b < 4u; ++b) {
      uint j = 4u * k + b;
      uint byte = (q >> (8u * b)) & 0xFFu;
      uint lo = (byte & 0xFu) | (((qh >> j) & 1u) << 4);
      uint hi = (byte >> 4) | (((qh >> (j + 16u)) & 1u) << 4);
      v[j] = float(lo) * d + m;
      v[16u + j] = float(hi) * d + m;
    }
  }
#elif defined(WTYPE_Q8_0)
  uint o = ro + 34u * c;
  float d = f16_at(w, o);
  for (uint k = 0u; k < 8u; ++k) {
    uint q = u32_at(w, o + 2u + 4u * k);
    for (uint b = 0u; b < 4u; ++b) v[4u * k + b] = float(s8((q >> (8u * b)) & 0xFFu)) * d;
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
  for (uint k = 0u; k < 8u; ++k) {
    uint q = u32_at(w, q0 + 4u * k);
#if defined(WTYPE_Q5_K)
    uint h = u32_at(w, qh + 4u * k);
#endif
    for (uint b = 0u; b < 4u; ++b) {
      uint code = (q >> (8u * b + shift)) & 0xFu;
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
  int sc0 = s8(u8_at(w, o + 192u + 8u * h + 2u * k));
  int sc1 = s8(u8_at(w, o + 192u + 8u * h + 2u * k + 1u));
  for (uint j = 0u; j < 8u; ++j) {
    uint lq = u32_at(w, ql + 4u * j);
    uint hq = u32_at(w, qh + 4u * j);
    for (uint b = 0u; b < 4u; ++b) {
      uint l = 4u * j + b;
      uint low = (lq >> (8u * b + shift)) & 0xFu;
      uint high = (hq >> (8u * b + 2u * k)) & 3u;
      int q = int(low | (high << 4)) - 32;
      v[l] = d * float(l < 16u ? sc0 : sc1) * float(q);
    }
  }
#endif
}

