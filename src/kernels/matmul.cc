// matmul(): dispatch to the ISA variant (packed_avx512.cc / packed_avx2.cc for packed weights,
// matmul_avx512.cc, matmul_avx2.cc), else the generic
// path: each thread takes a contiguous range of rows, dequantizes one weight row at a time into
// a per-thread buffer (quant.h) and dots it with every token, so a row is decoded once per call.
#include "kernels/matmul.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/internal.h"
#include "kernels/isa.h"
#include "kernels/quant.h"

namespace glm::kernels {
namespace {

// Row r of w as f32 into dst (n_cols floats); returns a pointer to the f32 values.
const float* row_f32(const WeightView& w, int64_t r, float* dst) {
  const size_t rb = row_bytes(w.type, w.n_cols);
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * rb;
  switch (w.type) {
    case DType::kF32:
      return reinterpret_cast<const float*>(row);
    case DType::kF16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
      for (int64_t c = 0; c < w.n_cols; ++c) dst[c] = fp16_to_fp32(h[c]);
      return dst;
    }
    case DType::kBF16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
      for (int64_t c = 0; c < w.n_cols; ++c) dst[c] = bf16_to_fp32(h[c]);
      return dst;
    }
    default:
      dequantize_row_ref(w.type, row, dst, w.n_cols);
      return dst;
  }
}

void matmul_generic(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                    ThreadPool* pool) {
  internal::split_rows(pool, w.n_rows, 1, [&](int64_t r0, int64_t r1) {
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>(w.n_cols)) buf.resize(w.n_cols);
    for (int64_t r = r0; r < r1; ++r) {
      const float* wr = row_f32(w, r, buf.data());
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * w.n_cols;
        // Four partial sums: lets the compiler vectorize without -ffast-math.
        float s[4] = {0, 0, 0, 0};
        int64_t c = 0;
        for (; c + 4 <= w.n_cols; c += 4) {
          for (int k = 0; k < 4; ++k) s[k] += wr[c + k] * xt[c + k];
        }
        for (; c < w.n_cols; ++c) s[0] += wr[c] * xt[c];
        y[t * w.n_rows + r] = (s[0] + s[1]) + (s[2] + s[3]);
      }
    }
  });
}

void check_weight(const WeightView& w) {
  GLM_CHECK(w.data != nullptr || w.n_rows == 0);
  GLM_CHECK(w.n_cols % dtype_info(w.type).block_size == 0);
}

// Rows [packed_rows, n_rows) of y (the few after a packed copy's last full group of 16) with
// the row-major kernel `fn` of the same ISA, which quantizes activations the same way as the
// packed one.
void matmul_tail(internal::MatmulFn fn, const WeightView& w, const float* x, float* y,
                 int64_t n_tokens, ThreadPool* pool) {
  const int64_t tail = w.n_rows - w.packed_rows;
  const WeightView sub{
      w.type, static_cast<const uint8_t*>(w.data) + w.packed_rows * row_bytes(w.type, w.n_cols),
      tail, w.n_cols};
  thread_local std::vector<float> out;  // [n_tokens, tail]
  if (out.size() < static_cast<size_t>(n_tokens * tail)) out.resize(n_tokens * tail);
  GLM_CHECK(fn(sub, x, out.data(), n_tokens, pool));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < tail; ++r) y[t * w.n_rows + w.packed_rows + r] = out[t * tail + r];
  }
}

}  // namespace

void matmul(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool* pool) {
  check_weight(w);
  if (n_tokens <= 0 || w.n_rows == 0) return;
  const Isa isa = active_isa();
  // The packed layouts are the same for both ISAs (packed.h); scalar reads the row-major data.
  if (w.packed != nullptr && isa != Isa::kScalar) {
    const bool avx512 = isa == Isa::kAvx512;
    if (avx512) {
      internal::matmul_packed_avx512(w, x, y, n_tokens, pool);
    } else if (avxvnni_active()) {
      internal::matmul_packed_avxvnni(w, x, y, n_tokens, pool);
    } else {
      internal::matmul_packed_avx2(w, x, y, n_tokens, pool);
    }
    if (w.packed_rows < w.n_rows) {
      matmul_tail(avx512 ? internal::matmul_avx512 : internal::matmul_avx2, w, x, y, n_tokens,
                  pool);
    }
    return;
  }
  switch (isa) {
    case Isa::kAvx512:
      if (internal::matmul_avx512(w, x, y, n_tokens, pool)) return;
      break;
    case Isa::kAvx2:
      if (internal::matmul_avx2(w, x, y, n_tokens, pool)) return;
      break;
    case Isa::kScalar:
      break;
  }
  matmul_generic(w, x, y, n_tokens, pool);
}

void matmul_ref(const WeightView& w, const float* x, float* y, int64_t n_tokens) {
  check_weight(w);
  const size_t rb = row_bytes(w.type, w.n_cols);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < w.n_rows; ++r) {
      const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * rb;
      y[t * w.n_rows + r] = dot_row_ref(w.type, row, x + t * w.n_cols, w.n_cols);
    }
  }
}

namespace internal {

void quantize_act_ref(const float* x, int64_t n, int block, int8_t* q, float* d) {
  for (int64_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    float amax = 0.0f;
    for (int i = 0; i < block; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    d[b] = amax / 127.0f;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < block; ++i) {
      q[b * block + i] = static_cast<int8_t>(std::nearbyint(xb[i] * id));
    }
  }
}

int act_block(Isa isa, DType t) {
  int b = -1;
  if (isa == Isa::kAvx512) b = act_block_avx512(t);
  if (isa == Isa::kAvx2) b = act_block_avx2(t);
  return b < 0 ? 0 : b;
}

}  // namespace internal

const char* matmul_isa() { return avxvnni_active() ? "avx2+avxvnni" : isa_name(active_isa()); }

}  // namespace glm::kernels
