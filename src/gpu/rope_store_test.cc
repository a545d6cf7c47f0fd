// The K/V store with the rotary in the same dispatch (KvStoreArgs::n_rot) against the CPU's
// rotary (model::ops::rope_interleaved, rope_neox) followed by kernels::kv_store_row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/attention_test_util.h"
#include "gpu/device.h"
#include "gpu/gpu_test_util.h"
#include "gpu/ops.h"
#include "kernels/attention.h"
#include "kernels/quant.h"
#include "model/ops.h"

namespace glm::gpu {
namespace {

// Each cache type, both rotary kinds, a partial (ChatGLM2/3, GLM-4: half of a head) and a whole
// rotary: the query heads rotated in place, the key heads stored rotated (their source columns
// kept), the value heads stored as they are, each token in its own slot.
TEST(GpuKvStore, WithTheRotaryEqualsTheRotaryThenTheStore) {
  NEED_DEVICE();
  const int n_tokens = 5, n_head = 4, n_head_kv = 2, head_dim = 64, n_slots = 8;
  const int qd = n_head * head_dim, kd = n_head_kv * head_dim, w = qd + 2 * kd;
  const std::vector<float> src = random_floats(static_cast<size_t>(n_tokens) * w, 61);
  std::vector<int32_t> slots(n_tokens);
  for (int t = 0; t < n_tokens; ++t) slots[t] = (3 * t + 1) % n_slots;
  Buffer slots_b = device_ints(dev, slots);
  for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    for (RopeKind kind : {RopeKind::kInterleaved, RopeKind::kNeox}) {
      for (int n_rot : {head_dim / 2, head_dim}) {
        SCOPED_TRACE(std::string(dtype_name(type)) + " neox " +
                     std::to_string(kind == RopeKind::kNeox) + " n_rot " + std::to_string(n_rot));
        const int half = n_rot / 2;
        std::vector<float> cs(static_cast<size_t>(n_tokens) * half), sn(cs.size());
        for (int t = 0; t < n_tokens; ++t) {
          model::ops::rope_table(3 * t + 7, n_rot, 10000.0f, &cs[t * half], &sn[t * half]);
        }
        const size_t rb = row_bytes(type, kd);
        Buffer src_b = device_floats(dev, src), cs_b = device_floats(dev, cs),
               sn_b = device_floats(dev, sn);
        StatusOr<Buffer> kv = dev->alloc(2 * n_slots * rb, MemoryKind::kDevice);
        ASSERT_TRUE(kv.ok());
        const AttentionCaseShape shape{.type = type,
                                       .n_head = n_head,
                                       .n_head_kv = n_head_kv,
                                       .head_dim = head_dim,
                                       .n_tokens = n_tokens,
                                       .n_pos = n_tokens,
                                       .v_base = static_cast<uint32_t>(n_slots * rb)};
        KvStoreArgs a =
            attention_case(shape, src_b.address(), kv->address(), slots_b.address(), 0, 0).store;
        a.cs = cs_b.address();
        a.sn = sn_b.address();
        a.n_q_heads = n_head;
        a.head_dim = head_dim;
        a.n_rot = n_rot;
        a.rope = kind;
        Stream& s = dev->stream();
        s.begin();
        kv_store(s, type, a);
        ASSERT_TRUE(s.submit_and_wait().ok());

        // The CPU: the q and k heads rotated, then K and V stored.
        std::vector<float> want = src;
        for (int t = 0; t < n_tokens; ++t) {
          float* row = want.data() + static_cast<size_t>(t) * w;
          if (kind == RopeKind::kInterleaved) {
            model::ops::rope_interleaved(row, n_head + n_head_kv, head_dim, n_rot, &cs[t * half],
                                         &sn[t * half]);
          } else {
            model::ops::rope_neox(row, n_head + n_head_kv, head_dim, n_rot, &cs[t * half],
                                  &sn[t * half]);
          }
        }
        std::vector<float> want_kv(static_cast<size_t>(2) * n_tokens * kd);
        std::vector<uint8_t> bytes(rb);
        for (int t = 0; t < n_tokens; ++t) {
          for (int which = 0; which < 2; ++which) {
            const float* from = want.data() + static_cast<size_t>(t) * w + qd + which * kd;
            kernels::kv_store_row(from, type, bytes.data(), kd);
            kernels::dequantize_row_ref(
                type, bytes.data(),
                want_kv.data() + (static_cast<size_t>(which) * n_tokens + t) * kd, kd);
          }
        }
        // src: q rotated in place, k and v as they were.
        std::vector<float> want_src = src;
        for (int t = 0; t < n_tokens; ++t) {
          std::memcpy(want_src.data() + static_cast<size_t>(t) * w,
                      want.data() + static_cast<size_t>(t) * w, qd * sizeof(float));
        }
        EXPECT_LT(max_rel_err(read_floats(dev, src_b, src.size()), want_src), 1e-6);
        std::vector<uint8_t> got_bytes(2 * n_slots * rb);
        ASSERT_TRUE(dev->download(*kv, 0, got_bytes.size(), got_bytes.data()).ok());
        std::vector<float> got_kv(want_kv.size());
        for (int t = 0; t < n_tokens; ++t) {
          for (int which = 0; which < 2; ++which) {
            kernels::dequantize_row_ref(
                type, got_bytes.data() + (which * n_slots + slots[t]) * rb,
                got_kv.data() + (static_cast<size_t>(which) * n_tokens + t) * kd, kd);
          }
        }
        // f32 to rounding; f16 to one step of its rounding; q8_0 to one code where x / d lies on
        // a rounding boundary in one of the two float computations (|x| < 4.5 here: d < 0.04).
        const double tol = type == DType::kF32 ? 1e-6 : type == DType::kF16 ? 1e-3 : 0.04;
        EXPECT_LT(max_rel_err(got_kv, want_kv), tol);
      }
    }
  }
}

// GLM-4.7-Flash's K rows (KvStoreArgs::rot_col): one head of kv_lora + rope values, K rows only,
// its last 64 values rotated at column kv_lora, nothing in the source nor past the K rows
// changed; against rope_interleaved on that part, then kernels::kv_store_row.
TEST(GpuKvStore, LatentKRowsRotateTheirRotaryPartInTheStore) {
  NEED_DEVICE();
  const int n_tokens = 6, kl = 512, n_rot = 64, hd = kl + n_rot, n_slots = 8, stride = hd + 16;
  const int half = n_rot / 2, k_col = 16;
  const std::vector<float> src = random_floats(static_cast<size_t>(n_tokens) * stride, 62);
  std::vector<int32_t> slots(n_tokens);
  for (int t = 0; t < n_tokens; ++t) slots[t] = (5 * t + 3) % n_slots;
  std::vector<float> cs(static_cast<size_t>(n_tokens) * half), sn(cs.size());
  for (int t = 0; t < n_tokens; ++t) {
    model::ops::rope_table(7 * t + 1, n_rot, 10000.0f, &cs[t * half], &sn[t * half]);
  }
  Buffer slots_b = device_ints(dev, slots), cs_b = device_floats(dev, cs),
         sn_b = device_floats(dev, sn);
  for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    SCOPED_TRACE(dtype_name(type));
    const size_t rb = row_bytes(type, hd);
    Buffer src_b = device_floats(dev, src);
    // K rows, then as many bytes where a V store would go: they must stay as they were.
    const std::vector<uint8_t> before(2 * n_slots * rb, 0x5A);
    StatusOr<Buffer> kv = dev->alloc(before.size(), MemoryKind::kDevice);
    ASSERT_TRUE(kv.ok());
    ASSERT_TRUE(dev->upload(before.data(), before.size(), *kv, 0).ok());
    KvStoreArgs a = k_rows_store(src_b.address(), kv->address(), slots_b.address(), n_tokens,
                                 stride, k_col, hd, rb, static_cast<uint32_t>(n_slots * rb));
    a.cs = cs_b.address();
    a.sn = sn_b.address();
    a.head_dim = hd;
    a.n_rot = n_rot;
    a.rot_col = kl;
    Stream& s = dev->stream();
    s.begin();
    kv_store(s, type, a);
    ASSERT_TRUE(s.submit_and_wait().ok());

    std::vector<uint8_t> got(before.size());
    ASSERT_TRUE(dev->download(*kv, 0, got.size(), got.data()).ok());
    std::vector<float> want_rows(static_cast<size_t>(n_tokens) * hd), got_rows(want_rows.size());
    std::vector<uint8_t> bytes(rb);
    for (int t = 0; t < n_tokens; ++t) {
      std::vector<float> row(src.begin() + t * stride + k_col,
                             src.begin() + t * stride + k_col + hd);
      model::ops::rope_interleaved(row.data() + kl, 1, n_rot, n_rot, &cs[t * half], &sn[t * half]);
      kernels::kv_store_row(row.data(), type, bytes.data(), hd);
      kernels::dequantize_row_ref(type, bytes.data(), want_rows.data() + t * hd, hd);
      kernels::dequantize_row_ref(type, got.data() + slots[t] * rb, got_rows.data() + t * hd, hd);
    }
    const double tol = type == DType::kF32 ? 1e-6 : type == DType::kF16 ? 1e-3 : 0.04;
    EXPECT_LT(max_rel_err(got_rows, want_rows), tol);
    EXPECT_TRUE(std::equal(got.begin() + n_slots * rb, got.end(), before.begin() + n_slots * rb))
        << "a V row was stored";
    EXPECT_EQ(read_floats(dev, src_b, src.size()), src) << "the source changed";
  }
}

}  // namespace
}  // namespace glm::gpu
