// The weight formats' decoding, shared by the matmul shaders: one variant per type (WTYPE_*),
// as the scalar references of kernels/quant.cc and quant_k.cc decode them.
//
// A 32-value chunk c of a row is decoded in four parts of 8 values, part q by one thread in the
// decode matmul (so that the threads of a row read neighbouring bytes of the weights and of the
// activations: matmul.comp). Part q holds the chunk's elements part_elem(q, 0..7): for the 4- and
// 5-bit block types, whose byte j holds elements j and j + 16, elements 4q .. 4q+3 and
// 16+4q .. 16+4q+3; for the others, 8q .. 8q+7. Each is two runs of 4 elements (part_run).
//
// A part comes back as a scale d, an offset m and 8 values v: element k is d * v[k] + m, so that
// a dot product takes d (and m times the activations' sum) once a part, not once a value. m is
// 0 unless the type has a minimum (HAS_MIN). For the quantized types v are codes less CODE_BIAS,
// and decode_codes gives the codes themselves, 4 bytes a run (matmul.comp's IDOT multiplies
// them by 8-bit activations as they are).

#if defined(WTYPE_Q4_1) || defined(WTYPE_Q5_1) || defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
#define HAS_MIN 1
#endif
#if defined(WTYPE_Q4_0)
#define CODE_BIAS 8
#elif defined(WTYPE_Q5_0)
#define CODE_BIAS 16
#elif defined(WTYPE_Q8_0)
#define CODE_BIAS 128  // -128..127 stored, the codes with each sign bit flipped
#elif defined(WTYPE_Q6_K)
#define CODE_BIAS 32
#elif defined(WTYPE_Q4_1) || defined(WTYPE_Q5_1) || defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
#define CODE_BIAS 0
#endif
#if defined(IDOT) && !defined(CODE_BIAS)
#error the integer-dot matmul takes the quantized types only
#endif

uint part_elem(uint q, uint k) {
#if defined(WTYPE_Q4_0) || defined(WTYPE_Q4_1) || defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
  return k < 4u ? 4u * q + k : 12u + 4u * q + k;
#else
  return 8u * q + k;
#endif
}

// The first element of part q's run k (0, 1) in its chunk.
uint part_run(uint q, uint k) {
#if defined(WTYPE_Q4_0) || defined(WTYPE_Q4_1) || defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
  return 4u * q + 16u * k;
#else
  return 8u * q + 4u * k;
#endif
}

#ifdef CODE_BIAS
// Bit b (0..3) of h to bit 4 of byte b (the multiply puts bit b at 8b; nothing else lands there).
uint high_bits(uint h) { return ((h * 0x00204081u) & 0x01010101u) << 4; }

#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
// Chunk c of the row at byte ro: its super-block's byte offset (c / 8), and its sub-block's
// (c % 8: 32 values, one 6-bit scale and min) scale d and offset m.
uint k_sub_block(Words w, uint ro, uint c, out float d, out float m) {
#if defined(WTYPE_Q4_K)
  uint o = ro + 144u * (c >> 3);
#else
  uint o = ro + 176u * (c >> 3);
#endif
  uint s = c & 7u, sc_off = o + 4u;
  uint sc, mn;
  if (s < 4u) {
    sc = u8_at(w, sc_off + s) & 63u;
    mn = u8_at(w, sc_off + s + 4u) & 63u;
  } else {
    sc = (u8_at(w, sc_off + s + 4u) & 0xFu) | ((u8_at(w, sc_off + s - 4u) >> 6) << 4);
    mn = (u8_at(w, sc_off + s + 4u) >> 4) | ((u8_at(w, sc_off + s) >> 6) << 4);
  }
  d = f16_at(w, o) * code_f(sc, 0.0);
  m = -f16_at(w, o + 2u) * code_f(mn, 0.0);
  return o;
}
#endif

// Part q of chunk c of the row at byte `ro`: the codes of its runs (c0 the first, c1 the second;
// byte b of each the run's element b), and d, m: element = d * (code - CODE_BIAS) + m.
void decode_codes(Words w, uint ro, uint c, uint q, out uint c0, out uint c1, out float d,
                  out float m) {
  m = 0.0;
#if defined(WTYPE_Q4_0) || defined(WTYPE_Q4_1)
#if defined(WTYPE_Q4_0)
  uint o = ro + 18u * c;
  uint qs = o + 2u;
#else
  uint o = ro + 20u * c;
  m = f16_at(w, o + 2u);
  uint qs = o + 4u;
#endif
  d = f16_at(w, o);
  uint qw = u32_at(w, qs + 4u * q);  // bytes 4q .. 4q+3: elements 4q+b (low), 16+4q+b (high)
  c0 = qw & 0x0F0F0F0Fu;
  c1 = (qw >> 4) & 0x0F0F0F0Fu;
#elif defined(WTYPE_Q5_0) || defined(WTYPE_Q5_1)
#if defined(WTYPE_Q5_0)
  uint o = ro + 22u * c;
  uint qh = u32_at(w, o + 2u);
  uint qs = o + 6u;
#else
  uint o = ro + 24u * c;
  m = f16_at(w, o + 2u);
  uint qh = u32_at(w, o + 4u);
  uint qs = o + 8u;
#endif
  d = f16_at(w, o);
  uint qw = u32_at(w, qs + 4u * q);  // the low 4 bits; bit j of qh is element j's fifth
  c0 = (qw & 0x0F0F0F0Fu) | high_bits((qh >> (4u * q)) & 0xFu);
  c1 = ((qw >> 4) & 0x0F0F0F0Fu) | high_bits((qh >> (4u * q + 16u)) & 0xFu);
#elif defined(WTYPE_Q8_0)
  uint o = ro + 34u * c;
  d = f16_at(w, o);
  c0 = u32_at(w, o + 2u + 8u * q) ^ 0x80808080u;
  c1 = u32_at(w, o + 6u + 8u * q) ^ 0x80808080u;
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
  uint o = k_sub_block(w, ro, c, d, m), s = c & 7u;
#if defined(WTYPE_Q4_K)
  uint qs = o + 16u;
#else
  uint qh = o + 16u;
  uint qs = o + 48u;
#endif
  // Sub-blocks 2i and 2i+1 share 32 bytes, low and high nibbles; the part is bytes 8q .. 8q+7.
  uint q0 = qs + 32u * (s >> 1), shift = (s & 1u) * 4u;
  c0 = (u32_at(w, q0 + 8u * q) >> shift) & 0x0F0F0F0Fu;
  c1 = (u32_at(w, q0 + 8u * q + 4u) >> shift) & 0x0F0F0F0Fu;
#if defined(WTYPE_Q5_K)
  c0 |= ((u32_at(w, qh + 8u * q) >> s) & 0x01010101u) << 4;  // bit s of each byte: the fifth
  c1 |= ((u32_at(w, qh + 8u * q + 4u) >> s) & 0x01010101u) << 4;
#endif
#elif defined(WTYPE_Q6_K)
  // Element 128 h + 32 k + l of a super-block (see kernels/quant_k.cc): chunk c is (h, k).
  uint o = ro + 210u * (c >> 3);
  uint h = (c >> 2) & 1u, k = c & 3u;
  uint ql = o + 64u * h + 32u * (k & 1u);
  uint qh = o + 128u + 32u * h;
  uint shift = k < 2u ? 0u : 4u;
  // Elements l = 8q .. 8q+7: the first 16 of a chunk take one scale, the last 16 the next.
  d = f16_at(w, o + 208u) * s8_f(u8_at(w, o + 192u + 8u * h + 2u * k + (q >> 1)));
  c0 = ((u32_at(w, ql + 8u * q) >> shift) & 0x0F0F0F0Fu) |
       (((u32_at(w, qh + 8u * q) >> (2u * k)) & 0x03030303u) << 4);
  c1 = ((u32_at(w, ql + 8u * q + 4u) >> shift) & 0x0F0F0F0Fu) |
       (((u32_at(w, qh + 8u * q + 4u) >> (2u * k)) & 0x03030303u) << 4);
#endif
}
#endif

// Part q of chunk c of the row starting at byte `ro`: element k is d * v[k] + m (elements past
// n_cols: 0).
void decode_part(Words w, uint n_cols, uint ro, uint c, uint q, out float v[8], out float d,
                 out float m) {
#ifdef CODE_BIAS
  uint c0, c1;
  decode_codes(w, ro, c, q, c0, c1, d, m);
  UNROLLED for (uint b = 0u; b < 4u; ++b) {
    v[b] = code_f((c0 >> (8u * b)) & 0xFFu, float(CODE_BIAS));
    v[4u + b] = code_f((c1 >> (8u * b)) & 0xFFu, float(CODE_BIAS));
  }
#else
  d = 1.0;
  m = 0.0;
#if defined(WTYPE_F32)
  UNROLLED for (uint k = 0u; k < 8u; ++k) {
    uint e = 32u * c + 8u * q + k;
    v[k] = e < n_cols ? uintBitsToFloat(w.v[(ro >> 2) + e]) : 0.0;
  }
#elif defined(WTYPE_F16) || defined(WTYPE_BF16)
  uint e0 = 32u * c + 8u * q;
  if (e0 + 8u <= n_cols && aligned16(w, ro)) {
    // The part's 16 bytes in one load (rows of a multiple of 8 values, as every real model's).
    uvec4 words = Uvec4s(uvec2(w)).v[(ro >> 4) + 4u * c + q];
    UNROLLED for (uint k = 0u; k < 4u; ++k) {
#if defined(WTYPE_F16)
      vec2 f = unpackHalf2x16(words[k]);
      v[2u * k] = f.x;
      v[2u * k + 1u] = f.y;
#else
      v[2u * k] = uintBitsToFloat(words[k] << 16);
      v[2u * k + 1u] = uintBitsToFloat(words[k] & 0xFFFF0000u);
#endif
    }
    return;
  }
  UNROLLED for (uint k = 0u; k < 8u; k += 2u) {
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
#endif
#endif
}
