// Scalar reference quantization formats of GGUF/ggml: the ground truth every fast kernel is
// tested against. Layouts are bit-exact with ggml's block definitions (ggml-common.h), so
// files written here load in llama.cpp and vice versa. Pure functions; thread-safe.
//
// Block layouts (all little-endian; `half` = IEEE fp16 bits, see core/fp16.h). Below, q is the
// stored integer and y the decoded float.
//   Q4_0  32/block, 18 B: half d; u8 qs[16]. Element j < 16 is the low nibble of qs[j],
//         element j + 16 the high nibble. y = (q - 8) * d.
//   Q4_1  32/block, 20 B: half d, m; u8 qs[16] (nibbles as Q4_0). y = q * d + m.
//   Q5_0  32/block, 22 B: half d; u8 qh[4]; u8 qs[16]. The 5th bit of element j is bit j of the
//         u32 qh. y = (q - 16) * d.
//   Q5_1  32/block, 24 B: half d, m; u8 qh[4]; u8 qs[16]. y = q * d + m.
//   Q8_0  32/block, 34 B: half d; i8 qs[32]. y = q * d.
//   Q4_K  256/block, 144 B: half d, dmin; u8 scales[12]; u8 qs[128]. Eight sub-blocks of 32 with
//         a 6-bit scale sc and 6-bit min m each (packed in scales[12], see unpack_scale_min_k4).
//         Each 32 bytes of qs hold two sub-blocks: low nibbles the first, high nibbles the
//         second. y = d * sc * q - dmin * m.
//   Q5_K  256/block, 176 B: half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]. As Q4_K with a
//         5th bit: element l (0..31) of sub-block s takes bit s of qh[l].
//   Q6_K  256/block, 210 B: u8 ql[128]; u8 qh[64]; i8 scales[16]; half d. Sixteen sub-blocks of
//         16 with an int8 scale each. y = d * sc * (q - 32), q = 4 low bits from ql and 2 high
//         bits from qh (layout in quant_k.cc).
//   Q8_K  256/block, 292 B: f32 d; i8 qs[256]; i16 bsums[16]. Not a weight format: the
//         activation format that ggml's k-quant dot products use. y = q * d; bsums[i] is the sum
//         of qs[16 i .. 16 i + 15] (lets a dot with Q4_K/Q5_K apply the mins per 16 values).
//         Quantized with d = max / -128 where max is the value of largest magnitude, so that
//         value maps to -128 exactly and every other value rounds into [-128, 127].
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace glm::kernels {

// ggml's block structs, for kernels that walk quantized rows. Rows in a GGUF file are not
// necessarily aligned beyond 2 bytes; Q8_K (float d) is only used for activations we allocate.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 &&
              sizeof(BlockQ8_K) == 292);

// 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block: j < 4 keep them in the low 6
// bits of scales[j] and scales[j + 4]; j >= 4 split them into a low nibble in scales[j + 4] and
// two high bits in the top bits of scales[j - 4] (scale) and scales[j] (min).
inline void unpack_scale_min_k4(int j, const uint8_t* scales, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Inverse of unpack_scale_min_k4: the 12 bytes that hold sc[0..8) and m[0..8) (each < 64).
// Every bit of the 12 is used, so unpacking and packing again gives the same bytes.
inline void pack_scale_min_k4(const int* sc, const int* m, uint8_t* scales) {
  for (int j = 0; j < 12; ++j) scales[j] = 0;
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] |= static_cast<uint8_t>(sc[j]);
      scales[j + 4] |= static_cast<uint8_t>(m[j]);
    } else {
      scales[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
}

// True if quantize_row_ref / dequantize_row_ref handle type t (F32, F16, BF16, Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K).
bool can_quantize(DType t);
bool can_dequantize(DType t);

// x: [n] floats -> y: row_bytes(t, n) bytes. n must be a multiple of the block size.
// K-quants search their scales (least squares over candidate scales): ~50x slower than Q8_0;
// meant for writing model files, not for the hot path.
void quantize_row_ref(DType t, const float* x, void* y, int64_t n);
// x: row_bytes(t, n) bytes -> y: [n] floats.
void dequantize_row_ref(DType t, const void* x, float* y, int64_t n);
// Reference dot product of one stored row (type t, n elements) with f32 activations,
// accumulated in double-free f32 order: dequantize block by block, then multiply.
float dot_row_ref(DType t, const void* row, const float* x, int64_t n);

}  // namespace glm::kernels
