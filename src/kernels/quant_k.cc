// Reference k-quants (256-element super-blocks): Q4_K, Q5_K, Q6_K and the Q8_K activation
// format. Layouts are documented in quant.h. The quantizers search each sub-block's scale (and
// min) by least squares over a set of candidate grids, then quantize the sub-block scales
// themselves (6-bit for Q4_K/Q5_K, int8 for Q6_K) and re-encode every value against the scale
// that will actually be decoded.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/quant.h"
#include "kernels/quant_internal.h"

namespace glm::kernels {

namespace {

// round-to-nearest-even of v, clamped to [lo, hi]; NaN gives lo.
int round_clamp(float v, int lo, int hi) {
  const float r = std::nearbyint(v);
  if (!(r >= static_cast<float>(lo))) return lo;
  if (r >= static_cast<float>(hi)) return hi;
  return static_cast<int>(r);
}

// ---- Asymmetric sub-block fit: x ~ scale * L + offset, L in [0, nmax], offset <= 0 ----------

struct AsymFit {
  float scale = 0.0f;
  float offset = 0.0f;  // <= 0; the format stores -offset as an unsigned "min"
  float error = 0.0f;   // sum of squared errors
};

// Squared error of x against the grid (scale, offset) when each value takes its nearest code.
float asym_codes(const float* x, int n, int nmax, float scale, float offset, uint8_t* L) {
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  float err = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(round_clamp((x[i] - offset) * inv, 0, nmax));
    const float diff = scale * L[i] + offset - x[i];
    err += diff * diff;
  }
  return err;
}

// Least-squares (scale, offset) for fixed codes L, with offset constrained to <= 0.
bool asym_refit(const float* x, int n, const uint8_t* L, float* scale, float* offset) {
  double sl = 0, sl2 = 0, sx = 0, sxl = 0;
  for (int i = 0; i < n; ++i) {
    sl += L[i];
    sl2 += static_cast<double>(L[i]) * L[i];
    sx += x[i];
    sxl += static_cast<double>(x[i]) * L[i];
  }
  const double det = n * sl2 - sl * sl;
  if (det <= 0) return false;
  double s = (n * sxl - sx * sl) / det;
  double o = (sl2 * sx - sl * sxl) / det;
  if (o > 0) {  // the format cannot add a positive offset: fit the scale alone
    o = 0;
    s = sxl / sl2;
  }
  if (!(s > 0)) return false;
  *scale = static_cast<float>(s);
  *offset = static_cast<float>(o);
  return true;
}

// Starts from the min-max grid, tries grids stretched by nmax + delta for delta in
// [-1, +1], refits each by least squares, then polishes the best by alternating
// re-encode / refit. Returns the fit with the smallest squared error; L holds its codes.
AsymFit fit_asym(const float* x, int n, int nmax, uint8_t* L) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);
  AsymFit best;
  if (!(hi > lo)) {  // all values equal and <= 0 (or NaN): the offset alone represents them
    std::fill(L, L + n, 0);
    best.offset = lo;
    return best;
  }
  uint8_t cand[kQK_K];
  best.scale = (hi - lo) / static_cast<float>(nmax);
  best.offset = lo;
  best.error = asym_codes(x, n, nmax, best.scale, best.offset, L);
  for (int step = -10; step <= 10; ++step) {
    const float grid = (hi - lo) / (static_cast<float>(nmax) + 0.1f * static_cast<float>(step));
    asym_codes(x, n, nmax, grid, lo, cand);
    float s, o;
    if (!asym_refit(x, n, cand, &s, &o)) continue;
    const float err = asym_codes(x, n, nmax, s, o, cand);
    if (err < best.error) {
      best = {s, o, err};
      std::copy(cand, cand + n, L);
    }
  }
  for (int iter = 0; iter < 3; ++iter) {  // Lloyd-style polish: codes <-> least squares
    float s, o;
    if (!asym_refit(x, n, L, &s, &o)) break;
    const float err = asym_codes(x, n, nmax, s, o, cand);
    if (!(err < best.error)) break;
    best = {s, o, err};
    std::copy(cand, cand + n, L);
  }
  return best;
}

// ---- Symmetric sub-block fit: x ~ scale * l, l in [-nmax, nmax - 1] -----------------------

// Returns the scale minimising the squared error over grids -(nmax + 0.1 k) / max,
// k in [-9, 9], each refit by least squares (max: the value of largest magnitude).
float fit_sym(const float* x, int n, int nmax) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (!(amax > 0.0f)) return 0.0f;
  float best_scale = -max / static_cast<float>(nmax);
  double best_gain = -1.0;  // sum(x l)^2 / sum(l^2): larger means a smaller squared error
  for (int k = -9; k <= 9; ++k) {
    const float inv = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    double sxl = 0, sl2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = round_clamp(x[i] * inv, -nmax, nmax - 1);
      sxl += static_cast<double>(x[i]) * l;
      sl2 += static_cast<double>(l) * l;
    }
    if (sl2 > 0 && sxl * sxl / sl2 > best_gain) {
      best_gain = sxl * sxl / sl2;
      best_scale = static_cast<float>(sxl / sl2);
    }
  }
  return best_scale;
}

// ---- Q4_K / Q5_K ------------------------------------------------------------------------------

// Encodes one 256-value super-block with nmax = 15 (Q4_K) or 31 (Q5_K). L gets the codes.
void quantize_super_asym(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out,
                         uint8_t* scales, uint8_t* L) {
  float sub_scale[8], sub_min[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const AsymFit f = fit_asym(x + 32 * j, 32, nmax, L + 32 * j);
    sub_scale[j] = f.scale;
    sub_min[j] = -f.offset;
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  int sc[8], m[8];
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < 8; ++j) {
    sc[j] = round_clamp(inv_scale * sub_scale[j], 0, 63);
    m[j] = round_clamp(inv_min * sub_min[j], 0, 63);
  }
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_min / 63.0f);
  pack_scale_min_k4(sc, m, scales);
  // Re-encode against the scales a decoder will see (6-bit, times fp16 d and dmin).
  const float d = fp16_to_fp32(*d_out), dmin = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float step = d * static_cast<float>(sc[j]);
    const float lo = dmin * static_cast<float>(m[j]);
    for (int i = 0; i < 32; ++i) {
      L[32 * j + i] =
          step > 0.0f ? static_cast<uint8_t>(round_clamp((x[32 * j + i] + lo) / step, 0, nmax)) : 0;
    }
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* b) {
  uint8_t L[kQK_K];
  quantize_super_asym(x, 15, &b->d, &b->dmin, b->scales, L);
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      b->qs[32 * g + l] = static_cast<uint8_t>(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
    }
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* b) {
  uint8_t L[kQK_K];
  quantize_super_asym(x, 31, &b->d, &b->dmin, b->scales, L);
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      const int a = L[64 * g + l], c = L[64 * g + 32 + l];
      b->qs[32 * g + l] = static_cast<uint8_t>((a & 0xF) | ((c & 0xF) << 4));
      b->qh[l] |= static_cast<uint8_t>(((a >> 4) << (2 * g)) | ((c >> 4) << (2 * g + 1)));
    }
  }
}

void dequantize_q45_k(const uint8_t* scales, float d, float dmin, const uint8_t* qs,
                      const uint8_t* qh, float* y) {
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    unpack_scale_min_k4(s, scales, &sc, &m);
    const float step = d * static_cast<float>(sc), lo = dmin * static_cast<float>(m);
    const uint8_t* q = qs + 32 * (s / 2);
    for (int l = 0; l < 32; ++l) {
      int code = (s % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
      if (qh != nullptr) code |= ((qh[l] >> s) & 1) << 4;
      y[32 * s + l] = step * static_cast<float>(code) - lo;
    }
  }
}

// ---- Q6_K -------------------------------------------------------------------------------------

void quantize_q6_k(const float* x, BlockQ6_K* b) {
  float sub_scale[16];
  float max_scale = 0.0f, amax_scale = 0.0f;
  for (int j = 0; j < 16; ++j) {
    sub_scale[j] = fit_sym(x + 16 * j, 16, 32);
    if (std::fabs(sub_scale[j]) > amax_scale) {
      amax_scale = std::fabs(sub_scale[j]);
      max_scale = sub_scale[j];
    }
  }
  uint8_t L[kQK_K];
  if (!(amax_scale > 0.0f)) {
    std::memset(b, 0, sizeof(*b));
    std::fill(L, L + kQK_K, 32);
  } else {
    // The largest-magnitude scale maps to -128 exactly; the others round into [-128, 127].
    const float inv = -128.0f / max_scale;
    b->d = fp32_to_fp16(1.0f / inv);
    const float d = fp16_to_fp32(b->d);
    for (int j = 0; j < 16; ++j) {
      b->scales[j] = static_cast<int8_t>(round_clamp(inv * sub_scale[j], -128, 127));
      const float step = d * static_cast<float>(b->scales[j]);
      for (int i = 0; i < 16; ++i) {
        const int l = step != 0.0f ? round_clamp(x[16 * j + i] / step, -32, 31) : 0;
        L[16 * j + i] = static_cast<uint8_t>(l + 32);
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    const uint8_t* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int a = Lh[l], c = Lh[32 + l], e = Lh[64 + l], f = Lh[96 + l];
      b->ql[64 * h + l] = static_cast<uint8_t>((a & 0xF) | ((e & 0xF) << 4));
      b->ql[64 * h + 32 + l] = static_cast<uint8_t>((c & 0xF) | ((f & 0xF) << 4));
      b->qh[32 * h + l] =
          static_cast<uint8_t>((a >> 4) | ((c >> 4) << 2) | ((e >> 4) << 4) | ((f >> 4) << 6));
    }
  }
}

// Element 128 h + 32 k + l (k = 0..3, l = 0..31) of a Q6_K block: low 4 bits from
// ql[64 h + 32 (k % 2) + l] (low nibble for k < 2, high for k >= 2), high 2 bits from bits
// 2k..2k+1 of qh[32 h + l]; its scale is scales[8 h + 2 k + l / 16].
void dequantize_q6_k(const BlockQ6_K& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo_byte = b.ql[64 * h + 32 * (k % 2) + l];
        const int low = k < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
        const int high = (b.qh[32 * h + l] >> (2 * k)) & 3;
        const int q = (low | (high << 4)) - 32;
        const int sc = b.scales[8 * h + 2 * k + l / 16];
        y[128 * h + 32 * k + l] = d * static_cast<float>(sc) * static_cast<float>(q);
      }
    }
  }
}

// ---- Q8_K -------------------------------------------------------------------------------------

void quantize_q8_k(const float* x, BlockQ8_K* b) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < kQK_K; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  std::memset(b, 0, sizeof(*b));
  if (!(amax > 0.0f)) return;
  const float inv = -128.0f / max;
  b->d = 1.0f / inv;
  for (int i = 0; i < kQK_K; ++i) {
    b->qs[i] = static_cast<int8_t>(round_clamp(inv * x[i], -128, 127));
  }
  for (int g = 0; g < kQK_K / 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += b->qs[16 * g + i];
    b->bsums[g] = static_cast<int16_t>(sum);
  }
}

template <typename Block>
Block load(const void* base, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(base) + i * sizeof(Block), sizeof(Block));
  return b;
}

template <typename Block, typename Fn>
void quantize_blocks(const float* x, void* y, int64_t nb, Fn fn) {
  for (int64_t i = 0; i < nb; ++i) {
    Block b;
    fn(x + i * kQK_K, &b);
    std::memcpy(static_cast<uint8_t*>(y) + i * sizeof(Block), &b, sizeof(Block));
  }
}

}  // namespace

void quantize_row_k(DType t, const float* x, void* y, int64_t nb) {
  switch (t) {
    case DType::kQ4_K:
      quantize_blocks<BlockQ4_K>(x, y, nb, quantize_q4_k);
      return;
    case DType::kQ5_K:
      quantize_blocks<BlockQ5_K>(x, y, nb, quantize_q5_k);
      return;
    case DType::kQ6_K:
      quantize_blocks<BlockQ6_K>(x, y, nb, quantize_q6_k);
      return;
    case DType::kQ8_K:
      quantize_blocks<BlockQ8_K>(x, y, nb, quantize_q8_k);
      return;
    default:
      GLM_CHECK(false);
  }
}

void dequantize_block_k(DType t, const void* x, int64_t i, float* y) {
  switch (t) {
    case DType::kQ4_K: {
      const auto b = load<BlockQ4_K>(x, i);
      dequantize_q45_k(b.scales, fp16_to_fp32(b.d), fp16_to_fp32(b.dmin), b.qs, nullptr, y);
      return;
    }
    case DType::kQ5_K: {
      const auto b = load<BlockQ5_K>(x, i);
      dequantize_q45_k(b.scales, fp16_to_fp32(b.d), fp16_to_fp32(b.dmin), b.qs, b.qh, y);
      return;
    }
    case DType::kQ6_K:
      dequantize_q6_k(load<BlockQ6_K>(x, i), y);
      return;
    case DType::kQ8_K: {
      const auto b = load<BlockQ8_K>(x, i);
      for (int j = 0; j < kQK_K; ++j) y[j] = b.d * static_cast<float>(b.qs[j]);
      return;
    }
    default:
      GLM_CHECK(false);
  }
}

}  // namespace glm::kernels
