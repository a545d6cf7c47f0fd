// Reference quant formats: (a) hand-built blocks decoded to values computed by hand from the
// format spec (this is what proves bit-exactness with ggml, independently of our encoder);
// (b) round-trip error bounds derived from each format; (c) dot_row_ref against a double dot
// of the dequantized row; (d) RMS error per type on N(0, 1) data.
#include "kernels/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"

namespace glm::kernels {
namespace {

std::vector<float> decode(DType t, const std::vector<uint8_t>& bytes) {
  const int64_t n =
      static_cast<int64_t>(bytes.size() / dtype_info(t).type_size) * dtype_info(t).block_size;
  std::vector<float> y(n);
  dequantize_row_ref(t, bytes.data(), y.data(), n);
  return y;
}

std::vector<uint8_t> encode(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_row_ref(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

void put16(std::vector<uint8_t>* b, size_t at, uint16_t v) {
  (*b)[at] = static_cast<uint8_t>(v);
  (*b)[at + 1] = static_cast<uint8_t>(v >> 8);
}

// fp16 constants used below: 0.5 = 0x3800, 0.25 = 0x3400, -1 = 0xbc00, 2 = 0x4000,
// 0.125 = 0x3000, 1 = 0x3c00, 3 = 0x4200.

// ---- (a) hand-built blocks ----------------------------------------------------------------

TEST(QuantSpec, FloatFormats) {
  const std::vector<uint8_t> f16 = {0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00};
  EXPECT_EQ(decode(DType::kF16, f16),
            (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}));
  const std::vector<uint8_t> bf16 = {0x80, 0x3f, 0x40, 0xc0, 0x00, 0x00};
  EXPECT_EQ(decode(DType::kBF16, bf16), (std::vector<float>{1.0f, -3.0f, 0.0f}));
  EXPECT_EQ(encode(DType::kF16, {1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}), f16);
  EXPECT_EQ(encode(DType::kBF16, {1.0f, -3.0f, 0.0f}), bf16);
  const std::vector<float> f = {1.5f, -0.0f, 3e38f};
  EXPECT_EQ(decode(DType::kF32, encode(DType::kF32, f)), f);
}

TEST(QuantSpec, Q4_0) {
  std::vector<uint8_t> b(18);
  put16(&b, 0, 0x3800);  // d = 0.5
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = decode(DType::kQ4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[j + 16], (7 - j) * 0.5f) << j;
  }
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
  // The encoder: values -8..7 (twice) give d = max / -8 = 1 and codes x + 8, exactly.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16 - 8);
  const std::vector<uint8_t> q = encode(DType::kQ4_0, x);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x3c);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[2 + j], j | (j << 4)) << j;
}

TEST(QuantSpec, Q4_1) {
  std::vector<uint8_t> b(20);
  put16(&b, 0, 0x3400);  // d = 0.25
  put16(&b, 2, 0xbc00);  // m = -1
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | ((j ^ 5) << 4));
  const std::vector<float> y = decode(DType::kQ4_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.0f);
    EXPECT_EQ(y[j + 16], (j ^ 5) * 0.25f - 1.0f);
  }
  EXPECT_EQ(y[31], 10 * 0.25f - 1.0f);  // 15 ^ 5 = 10
}

TEST(QuantSpec, Q5_0) {
  std::vector<uint8_t> b(22);
  put16(&b, 0, 0x4000);                            // d = 2
  const uint8_t qh[4] = {0x0f, 0xf0, 0x00, 0x81};  // bits 0-3, 12-15, 24, 31 set
  std::memcpy(&b[2], qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | (((j * 3) & 15) << 4));
  const std::vector<float> y = decode(DType::kQ5_0, b);
  const uint32_t bits = 0x8100f00fu;
  for (int j = 0; j < 16; ++j) {
    const int lo = j | (((bits >> j) & 1) << 4);
    const int hi = ((j * 3) & 15) | (((bits >> (j + 16)) & 1) << 4);
    EXPECT_EQ(y[j], (lo - 16) * 2.0f) << j;
    EXPECT_EQ(y[j + 16], (hi - 16) * 2.0f) << j;
  }
  EXPECT_EQ(y[0], 0.0f);    // low nibble 0, bit 0 set: code 16 -> 0
  EXPECT_EQ(y[4], -24.0f);  // low nibble 4, bit 4 clear: code 4 -> (4 - 16) * 2
  EXPECT_EQ(y[24], 16.0f);  // high nibble of qs[8] = 24 & 15 = 8, bit 24 set: code 24
  EXPECT_EQ(y[31], 26.0f);  // high nibble of qs[15] = 45 & 15 = 13, bit 31 set: code 29
}

TEST(QuantSpec, Q5_1) {
  std::vector<uint8_t> b(24);
  put16(&b, 0, 0x3400);                            // d = 0.25
  put16(&b, 2, 0x4200);                            // m = 3
  const uint8_t qh[4] = {0x00, 0x00, 0xff, 0x00};  // bits 16..23: elements 16..23 get +16
  std::memcpy(&b[4], qh, 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(15 - j);  // high nibbles 0
  const std::vector<float> y = decode(DType::kQ5_1, b);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(y[j], (15 - j) * 0.25f + 3.0f) << j;
  for (int j = 16; j < 32; ++j) EXPECT_EQ(y[j], (j < 24 ? 16 : 0) * 0.25f + 3.0f) << j;
}

TEST(QuantSpec, Q8_0) {
  std::vector<uint8_t> b(34);
  put16(&b, 0, 0x3000);  // d = 0.125
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  const std::vector<float> y = decode(DType::kQ8_0, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.125f) << j;
  // Encoder: amax 127 -> d = 1 (exact in fp16), codes = values.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j * 8 - 121);
  x[3] = 127.0f;
  const std::vector<uint8_t> q = encode(DType::kQ8_0, x);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x3c);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(static_cast<int8_t>(q[2 + j]), x[j]) << j;
}

// Q4_K / Q5_K scales for sub-blocks 0..7, packed by hand (see quant.h):
//   sc = {1, 2, 3, 4, 17, 33, 49, 63}, m = {5, 6, 7, 8, 18, 34, 50, 62}.
// j < 4: low 6 bits of bytes j (sc) and j + 4 (m). j >= 4: byte j + 4 = sc low nibble |
// m low nibble << 4; sc >> 4 in the top 2 bits of byte j - 4, m >> 4 in the top of byte j.
constexpr uint8_t kScales12[12] = {0x41, 0x82, 0xc3, 0xc4, 0x45, 0x86,
                                   0xc7, 0xc8, 0x21, 0x21, 0x21, 0xef};
constexpr int kSc[8] = {1, 2, 3, 4, 17, 33, 49, 63};
constexpr int kMin[8] = {5, 6, 7, 8, 18, 34, 50, 62};

TEST(QuantSpec, ScaleMinK4Unpacking) {
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    unpack_scale_min_k4(j, kScales12, &sc, &m);
    EXPECT_EQ(sc, kSc[j]) << j;
    EXPECT_EQ(m, kMin[j]) << j;
  }
}

TEST(QuantSpec, Q4_K) {
  std::vector<uint8_t> b(144);
  put16(&b, 0, 0x3c00);  // d = 1
  put16(&b, 2, 0x3800);  // dmin = 0.5
  std::memcpy(&b[4], kScales12, 12);
  for (int i = 0; i < 128; ++i) b[16 + i] = static_cast<uint8_t>(i);
  const std::vector<float> y = decode(DType::kQ4_K, b);
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const int byte = 32 * (s / 2) + l;  // qs byte; even s: low nibble, odd s: high nibble
      const int code = s % 2 == 0 ? (byte & 15) : (byte >> 4);
      EXPECT_EQ(y[32 * s + l], 1.0f * kSc[s] * code - 0.5f * kMin[s]) << s << " " << l;
    }
  }
  EXPECT_EQ(y[0], -2.5f);     // sc 1, code 0, min 5
  EXPECT_EQ(y[255], 410.0f);  // sub-block 7: byte 127 high nibble 7: 63 * 7 - 0.5 * 62
}

TEST(QuantSpec, Q5_K) {
  std::vector<uint8_t> b(176);
  put16(&b, 0, 0x3c00);  // d = 1
  put16(&b, 2, 0x3800);  // dmin = 0.5
  std::memcpy(&b[4], kScales12, 12);
  for (int l = 0; l < 32; ++l) b[16 + l] = static_cast<uint8_t>(1u << (l % 8));  // qh
  for (int i = 0; i < 128; ++i) b[48 + i] = static_cast<uint8_t>(255 - i);
  const std::vector<float> y = decode(DType::kQ5_K, b);
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const int byte = 255 - (32 * (s / 2) + l);
      const int code = (s % 2 == 0 ? (byte & 15) : (byte >> 4)) + (l % 8 == s ? 16 : 0);
      EXPECT_EQ(y[32 * s + l], 1.0f * kSc[s] * code - 0.5f * kMin[s]) << s << " " << l;
    }
  }
  EXPECT_EQ(y[0], 1.0f * 31 - 2.5f);  // byte 255 low nibble 15, qh[0] bit 0 set: code 31
}

TEST(QuantSpec, Q6_K) {
  std::vector<uint8_t> b(210);
  for (int i = 0; i < 128; ++i) b[i] = static_cast<uint8_t>(i);                   // ql
  for (int i = 0; i < 64; ++i) b[128 + i] = static_cast<uint8_t>((i * 7) & 255);  // qh
  for (int k = 0; k < 16; ++k) b[192 + k] = static_cast<uint8_t>(static_cast<int8_t>(k - 8));
  put16(&b, 208, 0x3800);  // d = 0.5
  const std::vector<float> y = decode(DType::kQ6_K, b);
  // Element 128 h + 32 k + l: low 4 bits from ql[64 h + 32 (k % 2) + l] (low nibble for
  // k < 2), high 2 bits = bits 2k, 2k+1 of qh[32 h + l], scale index 8 h + 2 k + l / 16.
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const int qlb = 64 * h + 32 * (k % 2) + l;
        const int low = k < 2 ? (qlb & 15) : (qlb >> 4);
        const int high = (((32 * h + l) * 7 & 255) >> (2 * k)) & 3;
        const int sc = 8 * h + 2 * k + l / 16 - 8;
        EXPECT_EQ(y[128 * h + 32 * k + l], 0.5f * sc * ((low | (high << 4)) - 32));
      }
    }
  }
  EXPECT_EQ(y[0], 128.0f);   // code 0 -> -32, scale -8, d 0.5
  EXPECT_EQ(y[255], 24.5f);  // ql[127] high nibble 7, qh[63] = 185 bits 6-7 = 2: 39 - 32 = 7
}

TEST(QuantSpec, Q8_K) {
  std::vector<uint8_t> b(292, 0);
  const float d = 0.25f;
  std::memcpy(&b[0], &d, 4);
  for (int i = 0; i < 256; ++i) b[4 + i] = static_cast<uint8_t>(i);  // int8: i - 256 for i > 127
  const std::vector<float> y = decode(DType::kQ8_K, b);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.25f * static_cast<int8_t>(i)) << i;
  // Encoder: the largest magnitude maps to -128 exactly; bsums are sums of 16 codes.
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 64) - 32.0f;
  x[5] = 64.0f;
  const std::vector<uint8_t> q = encode(DType::kQ8_K, x);
  BlockQ8_K blk;
  std::memcpy(&blk, q.data(), sizeof(blk));
  EXPECT_EQ(blk.d, -0.5f);
  EXPECT_EQ(blk.qs[5], -128);
  for (int i = 0; i < 256; ++i) {
    if (i != 5) {
      EXPECT_EQ(blk.qs[i], -2 * (i % 64 - 32)) << i;
    }
  }
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += blk.qs[16 * g + i];
    EXPECT_EQ(blk.bsums[g], sum) << g;
  }
}

TEST(QuantSpec, SupportedTypes) {
  for (DType t :
       {DType::kF32, DType::kF16, DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
        DType::kQ5_1, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K}) {
    EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
    EXPECT_TRUE(can_dequantize(t)) << dtype_name(t);
  }
  for (DType t : {DType::kQ2_K, DType::kQ3_K, DType::kQ8_1, DType::kI8, DType::kF64}) {
    EXPECT_FALSE(can_quantize(t)) << dtype_name(t);
  }
}

}  // namespace
}  // namespace glm::kernels
