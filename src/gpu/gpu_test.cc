// The device, and the shaders against their CPU references (kernels::attention_ref,
// kv_store_row, the elementwise ops of model/ops.h; the matmuls' in matmul_test.cc),
// on whatever Vulkan device the machine has: Mesa's lavapipe in CI (installed by
// scripts/install-deps.sh), so every shader runs on every commit without a GPU. These tests fail
// (not skip) when no device can be opened: a machine set up by the project's scripts has one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "core/fp16.h"
#include "gpu/attention_test_util.h"
#include "gpu/device.h"
#include "gpu/gpu_test_util.h"
#include "gpu/matmul.h"
#include "gpu/ops.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "model/ops.h"

namespace glm::gpu {
namespace {

TEST(GpuDevice, ListsAUsableDevice) {
  StatusOr<std::vector<DeviceInfo>> list = list_devices();
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_FALSE(list->empty());
  bool usable = false;
  for (const DeviceInfo& d : *list) {
    std::printf("vulkan:%d %s (%s) %llu MiB, Vulkan %s, %s%s\n", d.index, d.name.c_str(),
                d.type.c_str(), static_cast<unsigned long long>(d.memory_bytes >> 20),
                d.api_version_string().c_str(), d.features().c_str(),
                d.unusable.empty() ? "" : (" unusable: " + d.unusable).c_str());
    usable |= d.unusable.empty();
    EXPECT_FALSE(d.name.empty());
    // Mesa's lavapipe offers computeFullSubgroups: the pipelines ask for full subgroups there
    // (the validation layer of validated.* checks that they may).
    if (d.name.rfind("llvmpipe", 0) == 0) {
      EXPECT_TRUE(d.full_subgroups);
    }
  }
  EXPECT_TRUE(usable);
}

TEST(GpuDevice, NamedDeviceOutOfRangeIsRefused) {
  StatusOr<std::unique_ptr<Device>> d = Device::open(97);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("vulkan:97 does not exist"), std::string::npos)
      << d.status().message();
}

// A process that opens and closes devices many times (a device a model: tests, several models,
// a draft) can still open one: NVIDIA's driver refused vkCreateInstance after ~32 instance
// cycles in one process (H200, driver 580), so the instance is the process's one.
// lavapipe has no such limit, so what CI can see is the mechanism: every device, open at the
// same time or one after another, is made on the same instance.
TEST(GpuDevice, OpensAgainAfterManyInOneProcess) {
  NEED_DEVICE();
  for (int i = 0; i < 48; ++i) {
    StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
    ASSERT_TRUE(d.ok()) << "open " << i << ": " << d.status().message();
    ASSERT_EQ((*d)->instance(), dev->instance()) << "open " << i << " made an instance";
    ASSERT_TRUE(list_devices().ok());
  }
  std::vector<float> v = random_floats(1000, 4);
  Buffer b = device_floats(dev, v);
  EXPECT_EQ(read_floats(dev, b, v.size()), v);
}

// What `glmserve devices` and the logs say a device offers (DeviceInfo::features).
TEST(GpuDevice, FeaturesSayWhatIsUsed) {
  DeviceInfo gpu;
  gpu.fp16_arithmetic = gpu.storage8 = gpu.int_dot = gpu.int_dot_fast = gpu.coop_matrix = true;
  gpu.subgroup_size = 32;
  gpu.full_subgroups = true;
  EXPECT_EQ(gpu.features(), "fp16 int8-storage int8-dot coopmat subgroup=32(full)");
  DeviceInfo lavapipe;
  lavapipe.fp16_arithmetic = lavapipe.storage8 = lavapipe.int_dot = true;
  lavapipe.subgroup_size = 8;
  EXPECT_EQ(lavapipe.features(), "fp16 int8-storage int8-dot(slow) subgroup=8");
  EXPECT_EQ(DeviceInfo{}.features(), "no-fp16 subgroup=0");
}

// The largest buffer the driver allocates in one piece (maxMemoryAllocationSize, at least 1 GiB
// by Vulkan's rules; maxBufferSize where offered), at most GLMSERVE_VULKAN_MAX_BUFFER_MB: a
// larger one is refused by name before the driver is asked (which may fail it without a word, or
// not at all: lavapipe allocates beyond what it says).
TEST(GpuDevice, ABufferLargerThanTheDriverAllocatesIsRefusedByName) {
  StatusOr<std::vector<DeviceInfo>> list = list_devices();
  ASSERT_TRUE(list.ok()) << list.status().message();
  for (const DeviceInfo& d : *list) {
    if (!d.unusable.empty()) continue;
    EXPECT_GE(d.max_buffer_bytes, uint64_t{1} << 30) << d.name;
    EXPECT_EQ(largest_buffer(d), std::min<size_t>(d.max_buffer_bytes, kMatrixBytesLimit - 1));
  }
  EXPECT_EQ(largest_buffer(DeviceInfo{}), kMatrixBytesLimit - 1);  // no limit said
  ScopedEnv cap("GLMSERVE_VULKAN_MAX_BUFFER_MB", "3");
  StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
  ASSERT_TRUE(d.ok()) << d.status().message();
  Device* dev = d->get();
  ASSERT_EQ(dev->info().max_buffer_bytes, uint64_t{3} << 20);
  StatusOr<Buffer> fits = dev->alloc(size_t{3} << 20, MemoryKind::kDevice);
  EXPECT_TRUE(fits.ok()) << fits.status().message();
  StatusOr<Buffer> over = dev->alloc((size_t{3} << 20) + 1, MemoryKind::kUpload);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), ErrorCode::kUnsupported);
  StatusOr<Buffer> big = dev->alloc(size_t{7} << 19, MemoryKind::kDevice);  // 3.5 MiB
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(), "vulkan: a 3.5 MiB buffer is larger than a buffer can be on " +
                                        dev->info().name + " (3.0 MiB)");
  // The stream's scratch grows by doubling, no larger than a buffer: 2 MiB, then 2.5 MiB asked
  // (4 MiB by doubling) is 3 MiB.
  Stream& s = dev->stream();
  s.begin();
  EXPECT_NE(s.scratch(size_t{2} << 20), 0u);
  EXPECT_NE(s.scratch(size_t{5} << 19), 0u);
  ASSERT_TRUE(s.submit_and_wait().ok());
  // A weight matrix over it fails its upload the same way; the device goes on.
  std::vector<float> rows(size_t{1} << 20);  // [1024, 1024] f32: 4 MiB
  StatusOr<Matrix> m = upload_matrix(dev, DType::kF32, rows.data(), 1024, 1024);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kUnsupported);
  std::vector<float> v = random_floats(1000, 5);
  Buffer b = device_floats(dev, v);
  EXPECT_EQ(read_floats(dev, b, v.size()), v);
}

TEST(GpuDevice, UploadDownloadRoundTrip) {
  NEED_DEVICE();
  std::vector<float> v = random_floats(100000, 3);
  Buffer b = device_floats(dev, v);
  EXPECT_EQ(read_floats(dev, b, v.size()), v);
}

// A matrix stacked from row ranges (upload_stacked: a llama file's q, k and v; each expert's
// gate then up) holds them in order, across the 64 MiB staging buffer's end (a part that
// straddles it, another that fills it to the byte) and with an empty part.
TEST(GpuDevice, StackedRowsLandInTheirOrder) {
  NEED_DEVICE();
  const int64_t n_cols = 4096;  // F32: 16 KiB a row, 4096 rows a staging buffer
  const std::vector<int64_t> rows = {2500, 0, 3000, 2692, 3};
  std::vector<std::vector<float>> parts;
  std::vector<MatrixRows> ranges;
  std::vector<float> all;
  for (size_t i = 0; i < rows.size(); ++i) {
    parts.push_back(random_floats(static_cast<size_t>(rows[i] * n_cols), 40 + i));
    ranges.push_back({parts.back().data(), rows[i]});
    all.insert(all.end(), parts.back().begin(), parts.back().end());
  }
  StatusOr<Matrix> m = upload_stacked(dev, DType::kF32, ranges, n_cols);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->n_rows, 2500 + 3000 + 2692 + 3);
  std::vector<float> got(all.size());
  ASSERT_TRUE(dev->download(m->buf, 0, got.size() * sizeof(float), got.data()).ok());
  EXPECT_TRUE(got == all) << "a part out of place";
}

// KV rows stored by the shader equal kernels::kv_store_row's bytes, and attention over them
// equals attention_ref, for each KV type, GQA, several blocks in a scattered table, n_past > 0,
// a bidirectional prefix (ChatGLM-6B), a P-Tuning v2 prefix's keys ahead of the cache's.
// The KV cache's type, and the KV heads of 8 query heads: 4 (groups of 2: a workgroup takes 2
// heads x 4 tokens), 1 (one group of 8: 8 heads x 1 token), 8 (no groups: 8 tokens, and a
// decode step one row a workgroup).
class GpuAttention : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(GpuAttention, StoreAndAttendEqualReference) {
  NEED_DEVICE();
  const DType type = std::get<0>(GetParam());
  const int n_head = 8, n_head_kv = std::get<1>(GetParam()), head_dim = 64, bt = 16;
  const int kd = n_head_kv * head_dim, qd = n_head * head_dim;
  const size_t rb = row_bytes(type == DType::kQ8_0 ? DType::kQ8_0 : type, kd);
  // {n_past, n_tokens, bidir_prefix}: causal prefill and decode; ChatGLM-6B's prompt (every row
  // but the last sees the prompt but its last position); rows inside a longer bidirectional
  // prefix (they see positions ahead of them, already in the cache). The last three: few rows
  // over many keys, which split their keys across workgroups (gpu::kAttentionSplitRows) and
  // merge, the last with a tail of a chunk.
  // With n_prefix: a P-Tuning prefix of that many keys (across a chunk's end: 70; with
  // ChatGLM-6B's bidirectional prompt; before split keys).
  struct Rows {
    int n_past, n_tokens, bidir, n_prefix;
  };
  // Every other case also writes its output rows' 8-bit blocks (AttentionArgs::out_q8), split
  // (attention_merge.comp writes them) or not.
  const std::vector<Rows> cases = {Rows{0, 29, 0, 0},   Rows{37, 3, 0, 0},   Rows{0, 29, 28, 0},
                                   Rows{5, 4, 21, 0},   Rows{1000, 1, 0, 0}, Rows{597, 3, 700, 0},
                                   Rows{1234, 2, 0, 0}, Rows{0, 29, 0, 7},   Rows{37, 3, 0, 70},
                                   Rows{0, 29, 28, 3},  Rows{1000, 1, 0, 5}};
  for (size_t i_case = 0; i_case < cases.size(); ++i_case) {
    const Rows rows = cases[i_case];
    const bool q8 = i_case % 2 == 0;
    const int n_past = rows.n_past, n_tokens = rows.n_tokens, n_prefix = rows.n_prefix;
    SCOPED_TRACE("n_past " + std::to_string(n_past) + " bidir_prefix " +
                 std::to_string(rows.bidir) + " n_prefix " + std::to_string(n_prefix));
    const int n_pos = std::max(n_past + n_tokens, rows.bidir);
    // The sequence's blocks in a scattered order, one block of the cache left unused.
    const int n_blocks = (n_pos + bt - 1) / bt + 1;
    std::vector<int32_t> table(n_blocks - 1);
    int mul = 5;
    while (std::gcd(mul, n_blocks) != 1) ++mul;
    for (int b = 0; b < n_blocks - 1; ++b) table[b] = (b * mul + 3) % n_blocks;
    // Source rows: [n_pos, q | k | v], the K/V of every position, so both caches hold them all.
    const int w = qd + 2 * kd;
    const std::vector<float> src =
        random_floats(static_cast<size_t>(n_pos) * w, 9 + n_past + rows.bidir);
    // Host cache: [n_blocks, bt, kd] K then V.
    std::vector<uint8_t> hk(n_blocks * bt * rb), hv(n_blocks * bt * rb);
    std::vector<int32_t> slots(n_pos);
    for (int p = 0; p < n_pos; ++p) {
      slots[p] = table[p / bt] * bt + p % bt;
      kernels::kv_store_row(src.data() + static_cast<size_t>(p) * w + qd, type,
                            hk.data() + slots[p] * rb, kd);
      kernels::kv_store_row(src.data() + static_cast<size_t>(p) * w + qd + kd, type,
                            hv.data() + slots[p] * rb, kd);
    }
    const uint32_t v_base = static_cast<uint32_t>(n_blocks * bt * rb);
    StatusOr<Buffer> kv = dev->alloc(2 * v_base, MemoryKind::kDevice);
    ASSERT_TRUE(kv.ok());
    Buffer src_b = device_floats(dev, src);
    Buffer slots_b = device_ints(dev, slots), table_b = device_ints(dev, table);
    Buffer out_b = device_floats(dev, std::vector<float>(static_cast<size_t>(n_tokens) * qd));
    // The prefix's K rows then V rows in the cache's type, and the values they hold.
    std::vector<uint8_t> prefix_bytes(2 * n_prefix * rb);
    std::vector<float> prefix_k(static_cast<size_t>(n_prefix) * kd), prefix_v(prefix_k.size());
    const std::vector<float> prefix_src = random_floats(2 * prefix_k.size(), 77 + n_prefix);
    for (int i = 0; i < 2 * n_prefix; ++i) {
      kernels::kv_store_row(prefix_src.data() + static_cast<size_t>(i) * kd, type,
                            prefix_bytes.data() + i * rb, kd);
      float* dst = i < n_prefix ? prefix_k.data() + static_cast<size_t>(i) * kd
                                : prefix_v.data() + static_cast<size_t>(i - n_prefix) * kd;
      kernels::dequantize_row_ref(type, prefix_bytes.data() + i * rb, dst, kd);
    }
    StatusOr<Buffer> prefix =
        dev->alloc(std::max<size_t>(prefix_bytes.size(), 4), MemoryKind::kDevice);
    ASSERT_TRUE(prefix.ok());
    if (n_prefix > 0) {  // before the stream records: an upload submits on its own
      ASSERT_TRUE(dev->upload(prefix_bytes.data(), prefix_bytes.size(), *prefix, 0).ok());
    }
    Stream& s = dev->stream();
    s.begin();
    const AttentionCaseShape cs{.type = type,
                                .n_head = n_head,
                                .n_head_kv = n_head_kv,
                                .head_dim = head_dim,
                                .block_tokens = bt,
                                .n_past = n_past,
                                .n_tokens = n_tokens,
                                .n_pos = n_pos,
                                .v_base = v_base};
    AttentionCase ac = attention_case(cs, src_b.address(), kv->address(), slots_b.address(),
                                      table_b.address(), out_b.address());
    kv_store(s, type, ac.store);
    AttentionArgs aa = ac.attend;
    aa.bidir_prefix = rows.bidir;
    if (n_prefix > 0) {
      aa.prefix_kv = prefix->address();
      aa.n_prefix = n_prefix;
      aa.prefix_v_base = static_cast<uint32_t>(n_prefix * rb);
    }
    StatusOr<Buffer> split =
        dev->alloc(attention_scratch_floats(head_dim) * sizeof(float), MemoryKind::kDevice);
    ASSERT_TRUE(split.ok());
    aa.scratch = split->address();
    StatusOr<Buffer> out_q8 = dev->alloc(q8_bytes(n_tokens, qd), MemoryKind::kDevice);
    ASSERT_TRUE(out_q8.ok());
    if (q8) aa.out_q8 = out_q8->address();
    attention(s, type, aa);
    ASSERT_TRUE(s.submit_and_wait().ok());

    // The stored bytes: exact for f32 / f16; q8_0 may differ by one code where x / d lies on a
    // rounding boundary in one of the two float computations.
    std::vector<uint8_t> dk(hk.size()), dv(hv.size());
    ASSERT_TRUE(dev->download(*kv, 0, hk.size(), dk.data()).ok());
    ASSERT_TRUE(dev->download(*kv, v_base, hv.size(), dv.data()).ok());
    int diff_bytes = 0;
    for (int p = 0; p < n_pos; ++p) {
      for (size_t i = 0; i < rb; ++i) {
        const size_t o = slots[p] * rb + i;
        const int dkk = std::abs(int(dk[o]) - int(hk[o])), dvv = std::abs(int(dv[o]) - int(hv[o]));
        if (type != DType::kQ8_0) {
          ASSERT_EQ(dkk + dvv, 0) << "position " << p << " byte " << i;
        } else {
          diff_bytes += (dkk != 0) + (dvv != 0);
          ASSERT_TRUE(dkk <= 1 || dkk == 255) << "position " << p << " byte " << i;
          ASSERT_TRUE(dvv <= 1 || dvv == 255) << "position " << p << " byte " << i;
        }
      }
    }
    EXPECT_LE(diff_bytes, n_pos * 2) << "q8_0 rows differ in more than rare rounding ties";

    std::vector<const void*> kp, vp;
    for (int32_t b : table) {
      kp.push_back(hk.data() + static_cast<size_t>(b) * bt * rb);
      vp.push_back(hv.data() + static_cast<size_t>(b) * bt * rb);
    }
    kernels::KvView view;
    view.k_blocks = kp.data();
    view.v_blocks = vp.data();
    view.n_blocks = static_cast<int>(table.size());
    view.block_tokens = bt;
    view.type = type;
    view.prefix_k = prefix_k.data();
    view.prefix_v = prefix_v.data();
    view.n_prefix = n_prefix;
    kernels::AttentionShape shape;
    shape.n_tokens = n_tokens;
    shape.n_past = n_past;
    shape.n_head = n_head;
    shape.n_head_kv = n_head_kv;
    shape.head_dim = head_dim;
    shape.scale = aa.scale;
    shape.bidir_prefix = rows.bidir;
    std::vector<float> got;
    const double max_err = attention_error(dev, out_b, src, w, view, shape, &got);
    // q8_0: a one-code difference in a stored value moves an output by up to d = amax / 127.
    EXPECT_LT(max_err, type == DType::kQ8_0 ? 3e-2 : 2e-5);
    if (q8) {  // the blocks quantize_q8 makes of those rows
      std::vector<uint32_t> words(q8_bytes(n_tokens, qd) / 4);
      ASSERT_TRUE(dev->download(*out_q8, 0, words.size() * 4, words.data()).ok());
      EXPECT_EQ(words, device_q8_blocks(dev, got, n_tokens, qd));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, GpuAttention,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kQ8_0),
                                            ::testing::Values(4, 1, 8)),
                         [](const ::testing::TestParamInfo<std::tuple<DType, int>>& i) {
                           return std::string(dtype_name(std::get<0>(i.param))) + "_kv_heads_" +
                                  std::to_string(std::get<1>(i.param));
                         });

// RMSNorm against model::ops::rms_norm: rows of 4 rounds of 4 loads a thread (its 256 threads)
// and a tail (n = 4099), a short row (77), rows picked by index.
TEST(GpuOps, RmsNormEqualsReference) {
  NEED_DEVICE();
  for (int n : {77, 4099}) {
    SCOPED_TRACE(n);
    const int n_rows = 5;
    std::vector<float> x = random_floats(static_cast<size_t>(n_rows) * n, 31);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= static_cast<float>(i / n + 1);
    const std::vector<float> w = random_floats(n, 32);
    const std::vector<int32_t> idx = {4, 0, 2};
    Buffer xb = device_floats(dev, x), wb = device_floats(dev, w), ib = device_ints(dev, idx);
    Buffer all = device_floats(dev, std::vector<float>(x.size()));
    Buffer picked = device_floats(dev, std::vector<float>(idx.size() * n));
    Stream& s = dev->stream();
    s.begin();
    rms_norm(s, xb.address(), wb.address(), all.address(), n_rows, n, 1e-5f);
    rms_norm(s, xb.address(), wb.address(), picked.address(), static_cast<int>(idx.size()), n,
             1e-5f, ib.address());
    ASSERT_TRUE(s.submit_and_wait().ok());
    std::vector<float> want(x.size()), want_picked;
    for (int r = 0; r < n_rows; ++r) {
      model::ops::rms_norm(x.data() + static_cast<size_t>(r) * n, w.data(), 1e-5f,
                           want.data() + static_cast<size_t>(r) * n, n);
    }
    for (int32_t r : idx) {
      want_picked.insert(want_picked.end(), want.begin() + static_cast<size_t>(r) * n,
                         want.begin() + static_cast<size_t>(r + 1) * n);
    }
    EXPECT_LT(max_rel_err(read_floats(dev, all, x.size()), want), 2e-6);
    EXPECT_LT(max_rel_err(read_floats(dev, picked, want_picked.size()), want_picked), 2e-6);
  }
}

// GLM-4.5's Q/K norms against model::ops::rms_norm_heads: the q heads with w's first row, the k
// heads after them with its second, in place in rows wider than the heads (the V columns after
// them stay as they were); heads of 128 (two values a thread) and of 40 (threads idle); a prefill
// of 700 tokens x 104 heads (more workgroups than one axis dispatches).
TEST(GpuOps, HeadNormEqualsReference) {
  NEED_DEVICE();
  struct Shape {
    int n_tokens, n_q, n_kv, head_dim;
  };
  for (Shape sh : {Shape{3, 4, 2, 128}, Shape{2, 3, 1, 40}, Shape{700, 96, 8, 32}}) {
    SCOPED_TRACE(sh.n_tokens);
    const int n_head = sh.n_q + sh.n_kv, stride = (n_head + sh.n_kv) * sh.head_dim;
    std::vector<float> x = random_floats(static_cast<size_t>(sh.n_tokens) * stride, 51);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= static_cast<float>(i % 7 + 1);
    const std::vector<float> w = random_floats(2 * static_cast<size_t>(sh.head_dim), 52);
    Buffer xb = device_floats(dev, x), wb = device_floats(dev, w);
    Stream& s = dev->stream();
    s.begin();
    head_norm(s, xb.address(), wb.address(), sh.n_tokens, stride, n_head, sh.n_q, sh.head_dim,
              1e-5f);
    ASSERT_TRUE(s.submit_and_wait().ok());
    std::vector<float> want = x;
    for (int t = 0; t < sh.n_tokens; ++t) {
      float* row = want.data() + static_cast<size_t>(t) * stride;
      model::ops::rms_norm_heads(row, sh.n_q, sh.head_dim, w.data(), 1e-5f);
      model::ops::rms_norm_heads(row + static_cast<size_t>(sh.n_q) * sh.head_dim, sh.n_kv,
                                 sh.head_dim, w.data() + sh.head_dim, 1e-5f);
    }
    EXPECT_LT(max_rel_err(read_floats(dev, xb, x.size()), want), 2e-6);
  }
}

// The norms, SwiGLU and GELU with their 8-bit rows (the next matmul's input for the integer-dot
// shaders): the f32 rows as without them, the 8-bit rows exactly quantize_q8's of those rows.
// Rows of 160 values (5 blocks) and 8224 (257: more blocks than the RMS norm's 256 threads).
TEST(GpuOps, NormAndSwigluAlsoWriteTheir8BitRows) {
  NEED_DEVICE();
  for (int n : {160, 8224}) {
    SCOPED_TRACE(n);
    const int n_rows = 3;
    const std::vector<float> x = random_floats(static_cast<size_t>(n_rows) * n, 41);
    const std::vector<float> w = random_floats(n, 42);
    const std::vector<float> up = random_floats(static_cast<size_t>(n_rows) * 2 * n, 43);
    Buffer xb = device_floats(dev, x), wb = device_floats(dev, w), ub = device_floats(dev, up);
    const size_t rows_floats = static_cast<size_t>(n_rows) * n;
    Buffer norm_plain = device_floats(dev, std::vector<float>(rows_floats));
    Buffer norm = device_floats(dev, std::vector<float>(rows_floats));
    Buffer act_plain = device_floats(dev, std::vector<float>(rows_floats));
    Buffer act = device_floats(dev, std::vector<float>(rows_floats));
    StatusOr<Buffer> norm_q8 = dev->alloc(q8_bytes(n_rows, n), MemoryKind::kDevice);
    StatusOr<Buffer> act_q8 = dev->alloc(q8_bytes(n_rows, n), MemoryKind::kDevice);
    StatusOr<Buffer> ln_q8 = dev->alloc(q8_bytes(n_rows, n), MemoryKind::kDevice);
    StatusOr<Buffer> gelu_q8 = dev->alloc(q8_bytes(n_rows, n), MemoryKind::kDevice);
    ASSERT_TRUE(norm_q8.ok() && act_q8.ok() && ln_q8.ok() && gelu_q8.ok());
    // LayerNorm (ChatGLM-6B's, with a bias) and GELU in place on copies of x.
    const std::vector<float> ln_b = random_floats(n, 44);
    Buffer lnb = device_floats(dev, ln_b);
    Buffer ln_plain = device_floats(dev, std::vector<float>(rows_floats));
    Buffer ln = device_floats(dev, std::vector<float>(rows_floats));
    Buffer gelu_plain = device_floats(dev, x), gelu_rows = device_floats(dev, x);
    Stream& s = dev->stream();
    s.begin();
    rms_norm(s, xb.address(), wb.address(), norm_plain.address(), n_rows, n, 1e-5f);
    rms_norm(s, xb.address(), wb.address(), norm.address(), n_rows, n, 1e-5f, 0,
             norm_q8->address());
    swiglu(s, ub.address(), act_plain.address(), n_rows, n, 2 * n, 0, n);
    swiglu(s, ub.address(), act.address(), n_rows, n, 2 * n, 0, n, act_q8->address());
    layer_norm(s, xb.address(), wb.address(), lnb.address(), ln_plain.address(), n_rows, n, 1e-5f);
    layer_norm(s, xb.address(), wb.address(), lnb.address(), ln.address(), n_rows, n, 1e-5f, 0,
               ln_q8->address());
    gelu(s, gelu_plain.address(), static_cast<int64_t>(rows_floats));
    gelu(s, gelu_rows.address(), static_cast<int64_t>(rows_floats), gelu_q8->address());
    ASSERT_TRUE(s.submit_and_wait().ok());
    std::vector<float> want_act(rows_floats);
    for (int r = 0; r < n_rows; ++r) {
      const float* gate = up.data() + static_cast<size_t>(r) * 2 * n;
      model::ops::swiglu(gate, gate + n, want_act.data() + static_cast<size_t>(r) * n, n);
    }
    EXPECT_LT(max_rel_err(read_floats(dev, act_plain, rows_floats), want_act), 1e-5);
    for (auto [plain, with_q8, q8] :
         {std::tuple{&norm_plain, &norm, &*norm_q8}, std::tuple{&act_plain, &act, &*act_q8},
          std::tuple{&ln_plain, &ln, &*ln_q8}, std::tuple{&gelu_plain, &gelu_rows, &*gelu_q8}}) {
      const std::vector<float> rows = read_floats(dev, *with_q8, rows_floats);
      EXPECT_EQ(rows, read_floats(dev, *plain, rows_floats));
      std::vector<uint32_t> words(q8_bytes(n_rows, n) / 4);
      ASSERT_TRUE(dev->download(*q8, 0, words.size() * 4, words.data()).ok());
      EXPECT_EQ(words, device_q8_blocks(dev, rows, n_rows, n));
    }
    // The final norms of rows picked by an index (the LM head's input): output row r's blocks
    // are row r's of the picked rows.
    const std::vector<int32_t> idx = {2, 0};
    Buffer ib = device_ints(dev, idx);
    const size_t picked_floats = idx.size() * static_cast<size_t>(n);
    for (bool layer : {false, true}) {
      SCOPED_TRACE(layer ? "layer_norm picked" : "rms_norm picked");
      Buffer picked = device_floats(dev, std::vector<float>(picked_floats));
      StatusOr<Buffer> picked_q8 =
          dev->alloc(q8_bytes(static_cast<int>(idx.size()), n), MemoryKind::kDevice);
      ASSERT_TRUE(picked_q8.ok());
      s.begin();
      if (layer) {
        layer_norm(s, xb.address(), wb.address(), lnb.address(), picked.address(),
                   static_cast<int>(idx.size()), n, 1e-5f, ib.address(), picked_q8->address());
      } else {
        rms_norm(s, xb.address(), wb.address(), picked.address(), static_cast<int>(idx.size()), n,
                 1e-5f, ib.address(), picked_q8->address());
      }
      ASSERT_TRUE(s.submit_and_wait().ok());
      const std::vector<float> all = read_floats(dev, layer ? ln_plain : norm_plain, rows_floats);
      std::vector<float> want;
      for (int32_t r : idx) {
        want.insert(want.end(), all.begin() + static_cast<size_t>(r) * n,
                    all.begin() + static_cast<size_t>(r + 1) * n);
      }
      EXPECT_EQ(read_floats(dev, picked, picked_floats), want);
      std::vector<uint32_t> words(q8_bytes(static_cast<int>(idx.size()), n) / 4);
      ASSERT_TRUE(dev->download(*picked_q8, 0, words.size() * 4, words.data()).ok());
      EXPECT_EQ(words, device_q8_blocks(dev, want, static_cast<int>(idx.size()), n));
    }
  }
}

// LayerNorm with bias (ChatGLM-6B) against model::ops::layer_norm: rows of a length that is not
// a multiple of the 64 threads (shorter, and 10 values a thread or 9), a mean far from 0 (the
// two-pass variance), and rows picked by an index (the final norm of the output rows).
TEST(GpuOps, LayerNormEqualsReference) {
  NEED_DEVICE();
  for (int n : {77, 600}) {
    SCOPED_TRACE(n);
    const int n_rows = 5;
    std::vector<float> x = random_floats(static_cast<size_t>(n_rows) * n, 21);
    for (size_t i = 0; i < x.size(); ++i) x[i] += static_cast<float>(i / n) * 3.0f;
    const std::vector<float> w = random_floats(n, 22), b = random_floats(n, 23);
    const std::vector<int32_t> idx = {4, 0, 2};
    Buffer xb = device_floats(dev, x), wb = device_floats(dev, w), bb = device_floats(dev, b);
    Buffer ib = device_ints(dev, idx);
    Buffer all = device_floats(dev, std::vector<float>(x.size()));
    Buffer picked = device_floats(dev, std::vector<float>(idx.size() * n));
    Stream& s = dev->stream();
    s.begin();
    layer_norm(s, xb.address(), wb.address(), bb.address(), all.address(), n_rows, n, 1e-5f);
    layer_norm(s, xb.address(), wb.address(), bb.address(), picked.address(),
               static_cast<int>(idx.size()), n, 1e-5f, ib.address());
    ASSERT_TRUE(s.submit_and_wait().ok());
    std::vector<float> want(x.size()), want_picked;
    for (int r = 0; r < n_rows; ++r) {
      model::ops::layer_norm(x.data() + r * n, w.data(), b.data(), 1e-5f, want.data() + r * n, n);
    }
    for (int32_t r : idx)
      want_picked.insert(want_picked.end(), want.begin() + r * n, want.begin() + (r + 1) * n);
    EXPECT_LT(max_rel_err(read_floats(dev, all, x.size()), want), 2e-6);
    EXPECT_LT(max_rel_err(read_floats(dev, picked, want_picked.size()), want_picked), 2e-6);
  }
}

// GELU (tanh) against model::ops::gelu_tanh, with arguments far in both tails (where an exp-based
// tanh would overflow to NaN) and an odd count.
TEST(GpuOps, GeluEqualsReference) {
  NEED_DEVICE();
  std::vector<float> x = random_floats(1001, 31, 3.0f);
  x[0] = 40.0f;
  x[1] = -40.0f;
  x[2] = 0.0f;
  Buffer xb = device_floats(dev, x);
  Stream& s = dev->stream();
  s.begin();
  gelu(s, xb.address(), static_cast<int64_t>(x.size()));
  ASSERT_TRUE(s.submit_and_wait().ok());
  std::vector<float> want = x;
  model::ops::gelu_tanh(want.data(), static_cast<int>(want.size()));
  const std::vector<float> got = read_floats(dev, xb, x.size());
  for (float v : got) ASSERT_TRUE(std::isfinite(v));
  EXPECT_LT(max_rel_err(got, want), 2e-6);
}

// y = y * scale + x (ChatGLM-6B's residual) against model::ops::scale_add; scale 1 is add.
TEST(GpuOps, ScaleAddEqualsReference) {
  NEED_DEVICE();
  const std::vector<float> x = random_floats(1001, 41), y = random_floats(1001, 42);
  for (float scale : {7.483315f, 1.0f}) {
    Buffer xb = device_floats(dev, x), yb = device_floats(dev, y);
    Stream& s = dev->stream();
    s.begin();
    scale_add(s, xb.address(), scale, yb.address(), static_cast<int64_t>(x.size()));
    ASSERT_TRUE(s.submit_and_wait().ok());
    std::vector<float> want = y;
    model::ops::scale_add(x.data(), scale, want.data(), static_cast<int>(want.size()));
    // One rounding apart at most (the shader may fuse the multiply-add).
    EXPECT_LT(max_rel_err(read_floats(dev, yb, y.size()), want), 1e-6) << "scale " << scale;
  }
}

// Rotary against model::ops: interleaved pairs on the first n_rot dims of each head
// (rope_interleaved), and ChatGLM-6B's 2D rotary (rope_neox on each half of a head, with a
// table row per half); heads at a column offset inside wider rows, left outside untouched.
TEST(GpuOps, RopeEqualsReference) {
  NEED_DEVICE();
  const int n_tokens = 5, n_head = 3, head_dim = 12, col0 = 4,
            stride = col0 + n_head * head_dim + 3;
  const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * stride, 51);
  for (RopeKind kind : {RopeKind::kInterleaved, RopeKind::kNeox2D, RopeKind::kNeox}) {
    const bool two_d = kind == RopeKind::kNeox2D;
    const int n_parts = two_d ? 2 : 1, n_rot = two_d ? head_dim / 2 : 8, half = n_rot / 2;
    // Tables [n_tokens, n_parts, n_rot / 2] of positions 3 t (+ 1 for the second part).
    std::vector<float> cs(static_cast<size_t>(n_tokens) * n_parts * half), sn(cs.size());
    for (int t = 0; t < n_tokens; ++t) {
      for (int part = 0; part < n_parts; ++part) {
        model::ops::rope_table(3 * t + part, n_rot, 10000.0f, &cs[(t * n_parts + part) * half],
                               &sn[(t * n_parts + part) * half]);
      }
    }
    Buffer xb = device_floats(dev, x), cb = device_floats(dev, cs), sb = device_floats(dev, sn);
    Stream& s = dev->stream();
    s.begin();
    rope(s, xb.address(), cb.address(), sb.address(), n_tokens, stride, col0, n_head, head_dim,
         n_rot, kind);
    ASSERT_TRUE(s.submit_and_wait().ok());
    std::vector<float> want = x;
    for (int t = 0; t < n_tokens; ++t) {
      float* row = want.data() + static_cast<size_t>(t) * stride + col0;
      if (kind == RopeKind::kInterleaved) {
        model::ops::rope_interleaved(row, n_head, head_dim, n_rot, &cs[t * half], &sn[t * half]);
        continue;
      }
      if (kind == RopeKind::kNeox) {  // GLM-4.5: rotate-half over the first n_rot dims
        model::ops::rope_neox(row, n_head, head_dim, n_rot, &cs[t * half], &sn[t * half]);
        continue;
      }
      for (int h = 0; h < n_head; ++h) {
        for (int part = 0; part < 2; ++part) {
          model::ops::rope_neox(row + h * head_dim + part * head_dim / 2, 1, head_dim / 2, n_rot,
                                &cs[(t * 2 + part) * half], &sn[(t * 2 + part) * half]);
        }
      }
    }
    EXPECT_LT(max_rel_err(read_floats(dev, xb, x.size()), want), 1e-6) << static_cast<int>(kind);
  }
}

// The rotary written elsewhere (RopeTo, GLM-4.7-Flash's query heads): each head's rotary part
// (at a column inside its head of 12) rotated into rows of another layout, the rest of y and
// all of x untouched; against the same rotary in place.
TEST(GpuOps, RopeToAnotherBufferWritesOnlyTheRotatedDims) {
  NEED_DEVICE();
  const int n_tokens = 4, n_head = 3, head_dim = 12, nope = 4, n_rot = 8, half = n_rot / 2;
  const int stride = n_head * head_dim, y_head = 10, y_col = 2, y_stride = n_head * y_head + 5;
  const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * stride, 52);
  const std::vector<float> y0 = random_floats(static_cast<size_t>(n_tokens) * y_stride, 53);
  for (RopeKind kind : {RopeKind::kInterleaved, RopeKind::kNeox}) {
    std::vector<float> cs(static_cast<size_t>(n_tokens) * half), sn(cs.size());
    for (int t = 0; t < n_tokens; ++t) {
      model::ops::rope_table(5 * t + 2, n_rot, 10000.0f, &cs[t * half], &sn[t * half]);
    }
    Buffer xb = device_floats(dev, x), yb = device_floats(dev, y0), cb = device_floats(dev, cs),
           sb = device_floats(dev, sn);
    Stream& s = dev->stream();
    s.begin();
    const RopeTo to{yb.address(), y_stride, y_col, y_head};
    rope(s, xb.address(), cb.address(), sb.address(), n_tokens, stride, nope, n_head, head_dim,
         n_rot, kind, &to);
    ASSERT_TRUE(s.submit_and_wait().ok());
    std::vector<float> want = y0;
    for (int t = 0; t < n_tokens; ++t) {
      for (int h = 0; h < n_head; ++h) {
        float part[n_rot];
        std::memcpy(part, &x[t * stride + h * head_dim + nope], sizeof(part));
        if (kind == RopeKind::kInterleaved) {
          model::ops::rope_interleaved(part, 1, n_rot, n_rot, &cs[t * half], &sn[t * half]);
        } else {
          model::ops::rope_neox(part, 1, n_rot, n_rot, &cs[t * half], &sn[t * half]);
        }
        std::memcpy(&want[t * y_stride + y_col + h * y_head], part, sizeof(part));
      }
    }
    EXPECT_LT(max_rel_err(read_floats(dev, yb, y0.size()), want), 1e-6) << static_cast<int>(kind);
    EXPECT_EQ(read_floats(dev, xb, x.size()), x) << "x changed";
  }
}

TEST(GpuFailure, InjectedLossFailsEverySubmitAfterIt) {
  // A device of its own: a lost one stays lost.
  StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
  ASSERT_TRUE(d.ok()) << d.status().message();
  Device* dev = d->get();
  Buffer b = device_floats(dev, std::vector<float>(16, 1.0f));
  dev->inject_failure_after(2);
  Stream& s = dev->stream();
  s.begin();
  add(s, b.address(), b.address(), 16);
  ASSERT_TRUE(s.submit_and_wait().ok());  // the first submit still runs
  s.begin();
  add(s, b.address(), b.address(), 16);
  Status st = s.submit_and_wait();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kUnavailable);
  EXPECT_NE(st.message().find("VK_ERROR_DEVICE_LOST"), std::string::npos) << st.message();
  EXPECT_TRUE(dev->lost());
  std::vector<float> v(16);
  Status again = dev->download(b, 0, 64, v.data());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("was lost"), std::string::npos) << again.message();
}

// The profile (GLMSERVE_VULKAN_PROFILE): each dispatch counted under its shader, a large op's
// time larger than a tiny one's, steps of copies alone (uploads, downloads) left out.
TEST(GpuProfile, TimesEachShaderOfTheStepsRun) {
  StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
  ASSERT_TRUE(d.ok()) << d.status().message();
  Device* dev = d->get();
  ASSERT_TRUE(dev->enable_profile()) << dev->info().name << " writes no timestamps";
  Buffer small = device_floats(dev, std::vector<float>(16, 1.0f));
  const int64_t n_big = int64_t{1} << 22;
  Buffer big = device_floats(dev, random_floats(static_cast<size_t>(n_big), 5));
  EXPECT_TRUE(dev->profile().empty());  // the uploads are not steps
  Stream& s = dev->stream();
  s.begin();
  for (int i = 0; i < 3; ++i) add(s, small.address(), small.address(), 16);
  gelu(s, big.address(), n_big);
  ASSERT_TRUE(s.submit_and_wait().ok());
  s.begin();
  gelu(s, big.address(), n_big);
  gelu(s, big.address(), n_big);
  ASSERT_TRUE(s.submit_and_wait().ok());
  (void)read_floats(dev, small, 16);
  const std::vector<OpTime> ops = dev->profile();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].name, "gelu");
  EXPECT_EQ(ops[0].calls, 3u);
  EXPECT_EQ(ops[1].name, "add");
  EXPECT_EQ(ops[1].calls, 3u);
  EXPECT_GT(ops[0].ms, ops[1].ms);
  EXPECT_GT(ops[1].ms, 0.0);
  const std::string report = dev->profile_report();
  EXPECT_NE(report.find("2 steps"), std::string::npos) << report;
  EXPECT_NE(report.find("gelu"), std::string::npos) << report;
  EXPECT_NE(report.find("ms recording"), std::string::npos) << report;  // the host's side
}

}  // namespace
}  // namespace glm::gpu
