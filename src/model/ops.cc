#include "model/ops.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/quant.h"

namespace glm::model::ops {

void rms_norm(const float* x, const float* w, float eps, float* out, int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / n + eps));
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void rms_norm_heads(float* row, int n_head, int head_dim, const float* w, float eps) {
  for (int h = 0; h < n_head; ++h) {
    float* x = row + static_cast<int64_t>(h) * head_dim;
    rms_norm(x, w, eps, x, head_dim);
  }
}

void layer_norm(const float* x, const float* w, const float* b, float eps, float* out, int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / n;
  double var = 0;
  for (int i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const float inv = static_cast<float>(1.0 / std::sqrt(var / n + eps));
  const float m = static_cast<float>(mean);
  for (int i = 0; i < n; ++i) out[i] = (x[i] - m) * inv * w[i] + b[i];
}

void rope_table(int pos, int n_rot, float base, float* cos_out, float* sin_out, float freq_scale) {
  const double p = static_cast<double>(pos) * static_cast<double>(freq_scale);
  for (int i = 0; i < n_rot / 2; ++i) {
    const double angle = p * std::pow(static_cast<double>(base), -2.0 * i / n_rot);
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

void rope_interleaved(float* row, int n_head, int head_dim, int n_rot, const float* cos,
                      const float* sin) {
  for (int h = 0; h < n_head; ++h) {
    float* x = row + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < n_rot / 2; ++i) {
      const float x0 = x[2 * i];
      const float x1 = x[2 * i + 1];
      x[2 * i] = x0 * cos[i] - x1 * sin[i];
      x[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

void rope_neox(float* row, int n_head, int head_dim, int n_rot, const float* cos,
               const float* sin) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_head; ++h) {
    float* x = row + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float x0 = x[i];
      const float x1 = x[i + half];
      x[i] = x0 * cos[i] - x1 * sin[i];
      x[i + half] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

void swiglu(const float* gate, const float* up, float* out, int n) {
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu_tanh(float* x, int n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

void add(const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += x[i];
}

void scale_add(const float* x, float scale, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = y[i] * scale + x[i];
}

void get_row(DType type, const void* data, int64_t row, int64_t n, float* out) {
  const uint8_t* p = static_cast<const uint8_t*>(data) + row_bytes(type, n) * row;
  if (type == DType::kF32) {
    std::memcpy(out, p, n * sizeof(float));
    return;
  }
  kernels::dequantize_row_ref(type, p, out, n);
}

void store_row(const float* src, DType type, void* dst, int n) {
  kernels::kv_store_row(src, type, dst, n);
}

}  // namespace glm::model::ops
