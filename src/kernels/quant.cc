// Scalar reference formats: dispatch, the float formats and the 32-element "legacy" quants
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0). The k-quants live in quant_k.cc.
#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/quant_internal.h"

namespace glm::kernels {

namespace {

// Blocks are copied through memcpy: rows in a GGUF file may sit at any 2-byte offset.
template <typename Block>
Block load_block(const void* base, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(base) + i * sizeof(Block), sizeof(Block));
  return b;
}
template <typename Block>
void store_block(void* base, int64_t i, const Block& b) {
  std::memcpy(static_cast<uint8_t*>(base) + i * sizeof(Block), &b, sizeof(Block));
}

// trunc(v) clamped to [lo, hi]; NaN gives lo. (A plain float -> int cast of an out-of-range
// value is undefined behaviour.)
int trunc_clamp(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// Value of largest magnitude (keeps its sign); the first one wins ties.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Symmetric 4/5-bit: d = max / -2^(bits-1) maps the largest-magnitude value to code 0 exactly;
// q = clamp(trunc(x / d + offset + 0.5), 0, 2^bits - 1), as ggml's reference quantizer does.
void quantize_sym(const float* x, int bits, uint16_t* d_out, uint8_t* q) {
  const int offset = 1 << (bits - 1);
  const float d = signed_absmax(x, kQK) / static_cast<float>(-offset);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = fp32_to_fp16(d);
  const int qmax = (1 << bits) - 1;
  for (int j = 0; j < kQK; ++j) {
    q[j] =
        static_cast<uint8_t>(trunc_clamp(x[j] * id + (static_cast<float>(offset) + 0.5f), 0, qmax));
  }
}

// Asymmetric 4/5-bit: d = (max - min) / (2^bits - 1), m = min, q = round((x - min) / d).
void quantize_asym(const float* x, int bits, uint16_t* d_out, uint16_t* m_out, uint8_t* q) {
  float min = x[0], max = x[0];
  for (int j = 1; j < kQK; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const int qmax = (1 << bits) - 1;
  const float d = (max - min) / static_cast<float>(qmax);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = fp32_to_fp16(d);
  *m_out = fp32_to_fp16(min);
  for (int j = 0; j < kQK; ++j) {
    q[j] = static_cast<uint8_t>(trunc_clamp((x[j] - min) * id + 0.5f, 0, qmax));
  }
}

// Packs 32 codes: element j < 16 in the low nibble of qs[j], j + 16 in its high nibble; bit 4
// of element j (5-bit formats) in bit j of qh.
void pack_nibbles(const uint8_t* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + kQK / 2] & 0xF) << 4));
    high |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    high |= static_cast<uint32_t>((q[j + kQK / 2] >> 4) & 1) << (j + kQK / 2);
  }
  if (qh != nullptr) {
    for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(high >> (8 * b));
  }
}

void unpack_nibbles(const uint8_t* qs, const uint8_t* qh, uint8_t* q) {
  uint32_t high = 0;
  if (qh != nullptr) {
    for (int b = 0; b < 4; ++b) high |= static_cast<uint32_t>(qh[b]) << (8 * b);
  }
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = static_cast<uint8_t>((qs[j] & 0xF) | (((high >> j) & 1) << 4));
    q[j + kQK / 2] = static_cast<uint8_t>((qs[j] >> 4) | (((high >> (j + kQK / 2)) & 1) << 4));
  }
}

void quantize_legacy(DType t, const float* x, void* y, int64_t nb) {
  uint8_t q[kQK];
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK;
    switch (t) {
      case DType::kQ4_0: {
        BlockQ4_0 b;
        quantize_sym(xb, 4, &b.d, q);
        pack_nibbles(q, b.qs, nullptr);
        store_block(y, i, b);
        break;
      }
      case DType::kQ4_1: {
        BlockQ4_1 b;
        quantize_asym(xb, 4, &b.d, &b.m, q);
        pack_nibbles(q, b.qs, nullptr);
        store_block(y, i, b);
        break;
      }
      case DType::kQ5_0: {
        BlockQ5_0 b;
        quantize_sym(xb, 5, &b.d, q);
        pack_nibbles(q, b.qs, b.qh);
        store_block(y, i, b);
        break;
      }
      case DType::kQ5_1: {
        BlockQ5_1 b;
        quantize_asym(xb, 5, &b.d, &b.m, q);
        pack_nibbles(q, b.qs, b.qh);
        store_block(y, i, b);
        break;
      }
      case DType::kQ8_0: {
        BlockQ8_0 b;
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b.d = fp32_to_fp16(d);
        for (int j = 0; j < kQK; ++j) {
          const float r = std::round(xb[j] * id);  // |r| <= 127 for finite input
          b.qs[j] = static_cast<int8_t>(trunc_clamp(r, -127, 127));
        }
        store_block(y, i, b);
        break;
      }
      default:
        GLM_CHECK(false);
    }
  }
}

}  // namespace

void dequantize_block_legacy(DType t, const void* x, int64_t i, float* y) {
  uint8_t q[kQK];
  switch (t) {
    case DType::kQ4_0: {
      const auto b = load_block<BlockQ4_0>(x, i);
      const float d = fp16_to_fp32(b.d);
      unpack_nibbles(b.qs, nullptr, q);
      for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j] - 8) * d;
      return;
    }
    case DType::kQ4_1: {
      const auto b = load_block<BlockQ4_1>(x, i);
      const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
      unpack_nibbles(b.qs, nullptr, q);
      for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j]) * d + m;
      return;
    }
    case DType::kQ5_0: {
      const auto b = load_block<BlockQ5_0>(x, i);
      const float d = fp16_to_fp32(b.d);
      unpack_nibbles(b.qs, b.qh, q);
      for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
      return;
    }
    case DType::kQ5_1: {
      const auto b = load_block<BlockQ5_1>(x, i);
      const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
      unpack_nibbles(b.qs, b.qh, q);
      for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j]) * d + m;
      return;
    }
    case DType::kQ8_0: {
      const auto b = load_block<BlockQ8_0>(x, i);
      const float d = fp16_to_fp32(b.d);
      for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
      return;
    }
    default:
      GLM_CHECK(false);
  }
}

bool can_quantize(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
      return true;
    default:
      return false;
  }
}

bool can_dequantize(DType t) { return can_quantize(t); }

void quantize_row_ref(DType t, const float* x, void* y, int64_t n) {
  GLM_CHECK(can_quantize(t));
  const int64_t bs = dtype_info(t).block_size;
  GLM_CHECK(n % bs == 0);
  switch (t) {
    case DType::kF32:
      std::memcpy(y, x, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
    case DType::kBF16: {
      uint8_t* out = static_cast<uint8_t*>(y);
      for (int64_t j = 0; j < n; ++j) {
        const uint16_t h = t == DType::kF16 ? fp32_to_fp16(x[j]) : fp32_to_bf16(x[j]);
        std::memcpy(out + 2 * j, &h, 2);
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
      quantize_row_k(t, x, y, n / bs);
      return;
    default:
      quantize_legacy(t, x, y, n / bs);
      return;
  }
}

void dequantize_row_ref(DType t, const void* x, float* y, int64_t n) {
  GLM_CHECK(can_dequantize(t));
  const int64_t bs = dtype_info(t).block_size;
  GLM_CHECK(n % bs == 0);
  const uint8_t* in = static_cast<const uint8_t*>(x);
  switch (t) {
    case DType::kF32:
      std::memcpy(y, x, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t j = 0; j < n; ++j) {
        uint16_t h;
        std::memcpy(&h, in + 2 * j, 2);
        y[j] = t == DType::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      return;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
      for (int64_t i = 0; i < n / bs; ++i) dequantize_block_k(t, x, i, y + i * bs);
      return;
    default:
      for (int64_t i = 0; i < n / bs; ++i) dequantize_block_legacy(t, x, i, y + i * bs);
      return;
  }
}

float dot_row_ref(DType t, const void* row, const float* x, int64_t n) {
  GLM_CHECK(can_dequantize(t));
  const int64_t bs = std::max<int64_t>(dtype_info(t).block_size, kQK);  // floats: 32 at a time
  GLM_CHECK(n % dtype_info(t).block_size == 0);
  float buf[kQK_K];
  float sum = 0.0f;
  const size_t bytes_per = row_bytes(t, bs);
  const uint8_t* p = static_cast<const uint8_t*>(row);
  for (int64_t i = 0; i < n; i += bs) {
    const int64_t len = std::min(bs, n - i);
    dequantize_row_ref(t, p, buf, len);
    for (int64_t j = 0; j < len; ++j) sum += buf[j] * x[i + j];
    p += bytes_per;
  }
  return sum;
}

}  // namespace glm::kernels
