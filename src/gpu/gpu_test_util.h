// For the GPU module's tests (gpu_test.cc, moe_test.cc): the device they share (opened once a
// process; no device fails the test, never skips it), random activations, buffers up and down.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/scoped_env_test_util.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "gpu/validation_test_util.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace glm::gpu {

using glm::testing::ScopedEnv;

inline Device* device() {
  static std::unique_ptr<Device> dev = [] {
    StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
    if (!d.ok()) {
      ADD_FAILURE() << "no Vulkan device: " << d.status().message()
                    << " (scripts/install-deps.sh installs mesa-vulkan-drivers)";
      return std::unique_ptr<Device>();
    }
    return std::move(*d);
  }();
  return dev.get();
}

#define NEED_DEVICE()     \
  Device* dev = device(); \
  ASSERT_NE(dev, nullptr)

inline std::vector<float> random_floats(size_t n, uint32_t seed, float std = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, std);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline Buffer device_floats(Device* dev, const std::vector<float>& v) {
  StatusOr<Buffer> b = upload_floats(dev, v.data(), v.size());
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(*b) : Buffer();
}

// int32 values (slots, block tables, row indices, expert ids) in device memory.
inline Buffer device_ints(Device* dev, const std::vector<int32_t>& v) {
  StatusOr<Buffer> b = dev->alloc(v.size() * sizeof(int32_t), MemoryKind::kDevice);
  EXPECT_TRUE(b.ok());
  if (!b.ok()) return Buffer();
  EXPECT_TRUE(dev->upload(v.data(), v.size() * sizeof(int32_t), *b, 0).ok());
  return std::move(*b);
}

inline std::vector<float> read_floats(Device* dev, const Buffer& b, size_t n) {
  std::vector<float> v(n);
  EXPECT_TRUE(dev->download(b, 0, n * sizeof(float), v.data()).ok());
  return v;
}

// The largest |got - want| / (1 + |want|).
inline double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double m = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(got[i]) - want[i]) / (1 + std::fabs(want[i])));
  }
  return m;
}

// w [n_rows, n_cols] as GGUF rows of `type` (kernels::quantize_row_ref).
inline std::vector<uint8_t> quantize_rows(DType type, const float* w, int n_rows, int n_cols) {
  const size_t rb = row_bytes(type, n_cols);
  std::vector<uint8_t> q(rb * n_rows);
  for (int r = 0; r < n_rows; ++r) {
    kernels::quantize_row_ref(type, w + static_cast<size_t>(r) * n_cols, q.data() + rb * r, n_cols);
  }
  return q;
}

// kernels::matmul_ref of n_rows GGUF rows of `type` at q with x [n_tokens, n_cols]:
// [n_tokens, n_rows].
inline std::vector<float> matmul_reference(DType type, const void* q, const float* x, int n_rows,
                                           int n_cols, int n_tokens) {
  kernels::WeightView view;
  view.type = type;
  view.data = q;
  view.n_rows = n_rows;
  view.n_cols = n_cols;
  std::vector<float> y(static_cast<size_t>(n_tokens) * n_rows);
  kernels::matmul_ref(view, x, y.data(), n_tokens);
  return y;
}

// matmul_reference with each weight and activation rounded to fp16 first, as matmul_coop.comp
// multiplies them.
inline std::vector<float> fp16_matmul_ref(DType type, const uint8_t* q, const float* x, int n_rows,
                                          int n_cols, int n_tokens) {
  const auto fp16 = [](float v) { return fp16_to_fp32(fp32_to_fp16(v)); };
  std::vector<float> w(static_cast<size_t>(n_rows) * n_cols);
  std::vector<float> xh(x, x + static_cast<size_t>(n_tokens) * n_cols);
  for (int r = 0; r < n_rows; ++r) {
    kernels::dequantize_row_ref(type, q + row_bytes(type, n_cols) * r,
                                w.data() + static_cast<size_t>(r) * n_cols, n_cols);
  }
  for (float& v : w) v = fp16(v);
  for (float& v : xh) v = fp16(v);
  return matmul_reference(DType::kF32, w.data(), xh.data(), n_rows, n_cols, n_tokens);
}

// quantize_q8's blocks of x ([n_rows, n_cols]) as the device writes them: 8 words of int8 and
// the f32 scale a 32-value block.
inline std::vector<uint32_t> device_q8_blocks(Device* dev, const std::vector<float>& x, int n_rows,
                                              int n_cols) {
  Buffer xb = device_floats(dev, x);
  StatusOr<Buffer> yb = dev->alloc(q8_bytes(n_rows, n_cols), MemoryKind::kDevice);
  EXPECT_TRUE(yb.ok());
  if (!yb.ok()) return {};
  Stream& s = dev->stream();
  s.begin();
  quantize_q8(s, xb.address(), yb->address(), n_rows, n_cols);
  EXPECT_TRUE(s.submit_and_wait().ok());
  std::vector<uint32_t> words(q8_bytes(n_rows, n_cols) / 4);
  EXPECT_TRUE(dev->download(*yb, 0, words.size() * 4, words.data()).ok());
  return words;
}

// The activations the integer-dot shaders multiply by (matmul.comp's IDOT): x quantized by the
// device (quantize_q8), as floats d * q.
inline std::vector<float> device_q8_values(Device* dev, const std::vector<float>& x, int n_rows,
                                           int n_cols) {
  const std::vector<uint32_t> words = device_q8_blocks(dev, x, n_rows, n_cols);
  std::vector<float> v(x.size());
  for (size_t b = 0; b < v.size() / 32 && 9 * b + 8 < words.size(); ++b) {
    float d;
    std::memcpy(&d, &words[9 * b + 8], sizeof(d));
    for (size_t e = 0; e < 32; ++e) {
      const auto q = static_cast<int8_t>(words[9 * b + e / 4] >> (8 * (e % 4)));
      v[32 * b + e] = d * q;
    }
  }
  return v;
}

// The matmul tests' output rule: y [n_tokens, stride] was filled with -7 and written at columns
// 2 .. 2 + n_out - 1. Reads it back, expects the other columns untouched, and returns the largest
// |y - want| over the written ones (want [n_tokens, n_out], plus add[r] where given: the bias
// and residual asked for) with the largest |want + add|, for a tolerance of the test's.
struct OutputError {
  double max_err = 0, max_abs = 0;
};
inline OutputError output_error(Device* dev, const Buffer& yb, int n_tokens, int stride,
                                const std::vector<float>& want, int n_out,
                                const std::vector<float>& add = {}) {
  const std::vector<float> got = read_floats(dev, yb, static_cast<size_t>(n_tokens) * stride);
  OutputError e;
  for (int t = 0; t < n_tokens; ++t) {
    for (int r = 0; r < n_out; ++r) {
      const float g = got[static_cast<size_t>(t) * stride + 2 + r];
      const float w = want[static_cast<size_t>(t) * n_out + r] + (add.empty() ? 0.0f : add[r]);
      e.max_err = std::max(e.max_err, static_cast<double>(std::fabs(g - w)));
      e.max_abs = std::max(e.max_abs, static_cast<double>(std::fabs(w)));
    }
    for (int col : {0, 1, stride - 1}) {
      EXPECT_EQ(got[static_cast<size_t>(t) * stride + col], -7.0f) << "wrote outside";
    }
  }
  return e;
}

// The device's attention output rows `out` ([n_tokens, n_head * v_dims] of shape s; v_dims 0:
// head_dim) against the first v_dims dims of each head of kernels::attention_ref over `view` of
// the query rows n_past .. of src ([*, src_stride]: each row's q heads first): the rows read
// back into *got, the largest |got - want| returned.
inline double attention_error(Device* dev, const Buffer& out, const std::vector<float>& src,
                              int src_stride, const kernels::KvView& view,
                              const kernels::AttentionShape& s, std::vector<float>* got,
                              int v_dims = 0) {
  const size_t qd = static_cast<size_t>(s.n_head) * s.head_dim;
  const size_t vd = v_dims > 0 ? static_cast<size_t>(v_dims) : s.head_dim;  // out's of a head
  std::vector<float> q(s.n_tokens * qd);
  for (int t = 0; t < s.n_tokens; ++t) {
    std::memcpy(q.data() + t * qd, src.data() + static_cast<size_t>(s.n_past + t) * src_stride,
                qd * sizeof(float));
  }
  std::vector<float> want(q.size());
  kernels::attention_ref(q.data(), view, s, want.data());
  const size_t rows = static_cast<size_t>(s.n_tokens) * s.n_head;  // (token, head)
  *got = read_floats(dev, out, rows * vd);
  double max_err = 0;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t d = 0; d < vd; ++d) {
      const float g = (*got)[r * vd + d], w = want[r * s.head_dim + d];
      max_err = std::max(max_err, static_cast<double>(std::fabs(g - w)));
    }
  }
  return max_err;
}

}  // namespace glm::gpu
