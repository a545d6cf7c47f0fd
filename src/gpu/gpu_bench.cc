// The GPU's ops timed on the device at ChatGLM3-6B's shapes, and GLM-4.5-Air's experts and router
// (google-benchmark, manual time): the
// time of a call is the device's, from the profile's timestamps (Device::enable_profile: the
// time between the timestamps around a dispatch, its barrier wait included), so each figure is
// what the op costs inside a step. Weights rotate among copies that together exceed the GPU's
// last-level cache several times (GPU_BENCH_ROTATE_MB, default 256), so the matmuls read device
// memory, as a model's step does. Counters: bytes_per_second = the weights' (matmul) or the
// K/V's (attention) bytes over the call's time; BM_Copy's, the bytes a copy reads and writes:
// the memory's speed to hold the others against. BM_Upload, a model's upload from a mapped file,
// is timed on the host's clock (wall time a call).
//
//   build/src/gpu/gpu_bench --benchmark_min_time=0.05 [--benchmark_filter=Matvec]
//
// scripts/bench-gpu.sh runs it on the GPU machine (docs/performance.md "On a GPU"). On lavapipe
// it runs (slowly): its figures are no GPU speed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/temp_dir.h"
#include "gpu/attention_test_util.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "kernels/quant.h"

namespace glm::gpu {
namespace {

// Stops the benchmark with `what` when `ok` is false.
void require(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "gpu_bench: %s\n", what.c_str());
    std::exit(1);
  }
}

Device* device() {
  static std::unique_ptr<Device> dev = [] {
    StatusOr<std::unique_ptr<Device>> d = Device::open(-1);
    require(d.ok(), d.status().message());
    // Before the profile starts: its dispatches are not a benchmark's.
    const Status coop = check_coop_matmul(d->get());
    require(coop.ok(), coop.message());
    require((*d)->enable_profile(), "the device's queue writes no timestamps");
    return std::move(*d);
  }();
  return dev.get();
}

// The device milliseconds of every op profiled so far, or of the ops named `only`.
double device_ms(const char* only = nullptr) {
  double ms = 0;
  for (const OpTime& t : device()->profile()) {
    if (only == nullptr || t.name == only) ms += t.ms;
  }
  return ms;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Buffer floats_on_device(const std::vector<float>& v) {
  StatusOr<Buffer> b = upload_floats(device(), v.data(), v.size());
  require(b.ok(), b.status().message());
  return std::move(*b);
}

Buffer zeros_on_device(size_t n) { return floats_on_device(std::vector<float>(n, 0.0f)); }

// Records `calls` times what `op(i)` records, submits, and sets the iteration's time to the
// device time of one call (of its ops named `only`, where given).
template <typename Op>
void run_calls(benchmark::State& st, int calls, const Op& op, const char* only = nullptr) {
  for (auto _ : st) {
    const double before = device_ms(only);
    Stream& s = device()->stream();
    s.begin();
    for (int i = 0; i < calls; ++i) op(s, i);
    GLM_CHECK(s.submit_and_wait().ok());
    st.SetIterationTime((device_ms(only) - before) / 1e3 / calls);
  }
}

constexpr DType kTypes[] = {DType::kQ4_0, DType::kF16, DType::kQ4_K, DType::kQ6_K, DType::kQ8_0};

size_t rotate_bytes() {
  const char* mb = std::getenv("GPU_BENCH_ROTATE_MB");
  return (mb != nullptr ? std::strtoull(mb, nullptr, 10) : 256) << 20;
}

// Copies of a [rows, cols] matrix of `type` (64 random rows repeated) whose bytes together reach
// rotate_bytes(), at least one; made once a shape and kept (the variants of a shape share them).
const std::vector<Matrix>& weight_copies(DType type, int64_t rows, int64_t cols) {
  static std::map<std::tuple<DType, int64_t, int64_t>, std::vector<Matrix>> made;
  std::vector<Matrix>& copies = made[{type, rows, cols}];
  if (!copies.empty()) return copies;
  const size_t rb = row_bytes(type, cols);
  const int sample = 64;
  const std::vector<float> w = random_floats(static_cast<size_t>(sample) * cols, 7);
  std::vector<uint8_t> q(rb * rows);
  for (int r = 0; r < sample; ++r) {
    kernels::quantize_row_ref(type, w.data() + static_cast<size_t>(r) * cols, q.data() + rb * r,
                              cols);
  }
  for (int64_t r = sample; r < rows; ++r) {
    std::memcpy(q.data() + rb * r, q.data() + rb * (r % sample), rb);
  }
  const size_t n = std::clamp<size_t>(rotate_bytes() / q.size() + 1, 1, 32);
  for (size_t i = 0; i < n; ++i) {
    StatusOr<Matrix> m = upload_matrix(device(), type, q.data(), rows, cols);
    require(m.ok(), m.status().message());
    copies.push_back(std::move(*m));
  }
  return copies;
}

// Args: type (index into kTypes), rows, cols, tokens, team rows (0: the default; -1: the tiled
// shader whatever the tokens; -2: the few-token one whatever the tokens), the integer-dot choice
// (MatmulTuning::int_dot), the tiled shader's split (MatmulTuning::tiled_split), its tensor
// cores (MatmulTuning::coop: -1 where check_coop_matmul verified them, 0 never).
void BM_Matmul(benchmark::State& st) {
  const DType type = kTypes[st.range(0)];
  const int64_t rows = st.range(1), cols = st.range(2);
  const int tokens = static_cast<int>(st.range(3)), team_rows = static_cast<int>(st.range(4));
  MatmulTuning tuning;
  if (team_rows > 0) tuning.team_rows_one = tuning.team_rows_few = team_rows;
  if (team_rows == -1) tuning.tiled_min_tokens = 2;
  if (team_rows == -2) tuning.tiled_min_tokens = 1 << 30;
  tuning.int_dot = static_cast<int>(st.range(5));
  tuning.tiled_split = static_cast<int>(st.range(6));
  tuning.coop = static_cast<int>(st.range(7));
  const char* shader = tokens >= tuning.tiled_min_tokens ? "tiled" : tokens == 1 ? "one" : "few";
  const std::vector<Matrix>& w = weight_copies(type, rows, cols);
  st.SetLabel(
      std::string(dtype_name(type)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
      " t" + std::to_string(tokens) + " " + shader +
      (team_rows > 0 ? " team_rows " + std::to_string(team_rows) : std::string()) +
      (uses_int_dot(*device(), w[0], tokens, tuning) ? " int8 dot" : "") +
      (std::string(shader) == "tiled"
           ? " splits " + std::to_string(tiled_splits(w[0], tokens, tuning)) +
                 (tiled_shader(*device(), w[0], tuning) == w[0].shaders.coop ? " tensor cores" : "")
           : std::string()));
  const Buffer x = floats_on_device(random_floats(static_cast<size_t>(tokens) * cols, 3));
  const Buffer y = zeros_on_device(static_cast<size_t>(tokens) * rows);
  const int calls = std::max<int>(8, static_cast<int>(w.size()));
  run_calls(st, calls, [&](Stream& s, int i) {
    matmul(s, w[i % w.size()], x.address(), y.address(), tokens, static_cast<int>(rows), 0, {},
           tuning);
  });
  st.counters["bytes_per_second"] = benchmark::Counter(
      static_cast<double>(w[0].buf.size()) * st.iterations(), benchmark::Counter::kIsRate);
}

// ChatGLM3-6B's matrices: qkv, dense (o), the two halves of the MLP (up, gate as one), down;
// the output head.
// The quantized types each with and without integer dot products (int_dot 1 and 0); the tiled
// shader with and without tensor cores (coop -1 and 0).
void MatmulShapes(benchmark::internal::Benchmark* b, const std::vector<int64_t>& tokens,
                  const std::vector<int64_t>& team_rows) {
  const int64_t shapes[][2] = {
      {4608, 4096}, {4096, 4096}, {27392, 4096}, {4096, 13696}, {65024, 4096}};
  for (int64_t t = 0; t < static_cast<int64_t>(std::size(kTypes)); ++t) {
    MatmulShaders shaders{};
    const bool quantized = matmul_shaders(kTypes[t], &shaders) && shaders.one_dot != Shader::kCount;
    for (const auto& sh : shapes) {
      for (int64_t n : tokens) {
        for (int64_t r : team_rows) {
          b->Args({t, sh[0], sh[1], n, r, 0, 1, 0});
          if (quantized && n < MatmulTuning{}.tiled_min_tokens) {
            b->Args({t, sh[0], sh[1], n, r, 1, 1, 0});
          }
          if (n >= MatmulTuning{}.tiled_min_tokens) b->Args({t, sh[0], sh[1], n, r, 0, 1, -1});
        }
      }
    }
  }
}
BENCHMARK(BM_Matmul)
    ->Name("Matvec")
    ->Apply([](benchmark::internal::Benchmark* b) {
      MatmulShapes(b, {1}, {1, 2, 4});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Matmul)
    ->Name("MatmulFew")
    ->Apply([](benchmark::internal::Benchmark* b) {
      MatmulShapes(b, {4}, {1, 2});
    })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Matmul)
    ->Name("MatmulTiled")
    ->Apply([](benchmark::internal::Benchmark* b) { MatmulShapes(b, {512}, {0}); })
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// Where the tiled shader should take over from the few-token one (MatmulTuning::
// tiled_min_tokens): both at 8, 16, 32 and 64 tokens, Q4_0 and F16, a square and a wide
// matrix, the tiled one with and without tensor cores.
BENCHMARK(BM_Matmul)
    ->Name("MatmulCrossover")
    ->ArgsProduct({{0, 1}, {4096, 27392}, {4096}, {8, 16, 32, 64}, {-2}, {-1}, {1}, {0}})
    ->ArgsProduct({{0, 1}, {4096, 27392}, {4096}, {8, 16, 32, 64}, {-1}, {-1}, {1}, {-1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// A short prompt (the latency study's question: 17 tokens) through the tiled shader, its row
// length split over more workgroups (1) or not (0), with and without tensor cores, Q4_0 and
// F16, ChatGLM3-6B's matrices.
BENCHMARK(BM_Matmul)
    ->Name("MatmulShortPrompt")
    ->ArgsProduct({{0, 1}, {4608, 4096, 27392}, {4096}, {17}, {0}, {-1}, {1, 0}, {-1, 0}})
    ->ArgsProduct({{0, 1}, {4096}, {13696}, {17}, {0}, {-1}, {1, 0}, {-1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The cost of a dispatch and its barrier: y += x over n values (n = 1: nothing but that).
void BM_Add(benchmark::State& st) {
  const int64_t n = st.range(0);
  const Buffer x = floats_on_device(random_floats(static_cast<size_t>(n), 1));
  const Buffer y = zeros_on_device(static_cast<size_t>(n));
  run_calls(st, 64, [&](Stream& s, int) { add(s, x.address(), y.address(), n); });
}
BENCHMARK(BM_Add)->Arg(1)->Arg(4096)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The device memory's speed, to hold the matmuls' bytes_per_second against: one buffer copied
// into another (vkCmdCopyBuffer), st.range(0) MiB read and as many written a call.
void BM_Copy(benchmark::State& st) {
  const size_t bytes = static_cast<size_t>(st.range(0)) << 20;
  StatusOr<Buffer> a = device()->alloc(bytes, MemoryKind::kDevice);
  StatusOr<Buffer> b = device()->alloc(bytes, MemoryKind::kDevice);
  require(a.ok() && b.ok(), "no device memory for the copy");
  const Buffer one = zeros_on_device(1);
  run_calls(
      st, 4,
      [&](Stream& s, int i) {
        // The profile leaves out steps of copies alone; the add is not timed.
        if (i == 0) add(s, one.address(), one.address(), 1);
        s.copy(*a, 0, *b, 0, bytes);
      },
      "copy");
  st.counters["bytes_per_second"] = benchmark::Counter(
      2.0 * static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Copy)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);

// A model's load: st.range(0) MiB of a file, mapped afresh each call as a model's is, uploaded
// into a device buffer (Device::upload: host time, wall clock), read from the mapping
// (st.range(1) = 0: memcpy, each page faulted in) or from the file (1: MappedFile::copy_out).
void BM_Upload(benchmark::State& st) {
  const size_t bytes = static_cast<size_t>(st.range(0)) << 20;
  const TempDir dir("/tmp/glm_bench_upload.");
  const std::string path = dir.path() + "/weights.bin";
  {
    // In writes of 1 MiB, as gen-model's and a download's: how a file is written decides the
    // size of its pages in the page cache (one write of the whole file may leave large ones,
    // which a mapping then takes a fault each 2 MiB to map, not each 4 KiB).
    const std::vector<float> v = random_floats(bytes / sizeof(float), 3);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    require(f != nullptr, "cannot write " + path);
    const size_t piece = size_t{1} << 20;
    for (size_t at = 0; at < bytes; at += piece) {
      const size_t n = std::min(piece, bytes - at);
      require(std::fwrite(reinterpret_cast<const char*>(v.data()) + at, 1, n, f) == n &&
                  std::fflush(f) == 0,
              "cannot write " + path);
    }
    require(std::fclose(f) == 0, "cannot write " + path);
  }
  StatusOr<Buffer> dst = device()->alloc(bytes, MemoryKind::kDevice);
  require(dst.ok(), "no device memory for the upload");
  const bool from_file = st.range(1) == 1;
  {
    // Untimed: a driver whose device memory is the host's (lavapipe) touches its pages first.
    const std::vector<uint8_t> zeros(bytes);
    require(device()->upload(zeros.data(), bytes, *dst, 0).ok(), "the first upload failed");
  }
  for (auto _ : st) {
    StatusOr<MappedFile> map = MappedFile::open(path);
    require(map.ok(), map.status().message());
    const Status up =
        device()->upload({{map->data(), bytes, from_file ? &*map : nullptr}}, *dst, 0);
    require(up.ok(), up.message());
  }
  st.counters["bytes_per_second"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Upload)
    ->Args({256, 0})
    ->Args({256, 1})
    ->MinTime(0.5)  // (wall time: a call or two would be noise)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_RmsNorm(benchmark::State& st) {
  const int rows = static_cast<int>(st.range(0)), n = 4096;
  const Buffer x = floats_on_device(random_floats(static_cast<size_t>(rows) * n, 1));
  const Buffer w = floats_on_device(random_floats(n, 2));
  const Buffer y = zeros_on_device(static_cast<size_t>(rows) * n);
  run_calls(st, 32, [&](Stream& s, int) {
    rms_norm(s, x.address(), w.address(), y.address(), rows, n, 1e-5f);
  });
}
BENCHMARK(BM_RmsNorm)->Arg(1)->Arg(512)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The qkv row's rotary (32 query heads and 2 key heads of 128, half of each rotated).
void BM_Rope(benchmark::State& st) {
  const int tokens = static_cast<int>(st.range(0)), stride = 4608, n_rot = 64;
  const Buffer x = floats_on_device(random_floats(static_cast<size_t>(tokens) * stride, 1));
  const Buffer cs = floats_on_device(random_floats(static_cast<size_t>(tokens) * n_rot / 2, 2));
  const Buffer sn = floats_on_device(random_floats(static_cast<size_t>(tokens) * n_rot / 2, 3));
  run_calls(st, 32, [&](Stream& s, int) {
    rope(s, x.address(), cs.address(), sn.address(), tokens, stride, 0, 34, 128, n_rot);
  });
}
BENCHMARK(BM_Rope)->Arg(1)->Arg(512)->UseManualTime()->Unit(benchmark::kMicrosecond);

// A layer's rotary and K/V store (f16 cache) at ChatGLM3-6B's shape: args tokens, then 0: the
// rotary's dispatch and the store's (as before KvStoreArgs::n_rot), 1: the store rotating.
void BM_RopeKvStore(benchmark::State& st) {
  const int tokens = static_cast<int>(st.range(0)), stride = 4608, n_rot = 64, head_dim = 128;
  const int kd = 2 * head_dim;
  const bool fused = st.range(1) != 0;
  const Buffer x = floats_on_device(random_floats(static_cast<size_t>(tokens) * stride, 1));
  const Buffer cs = floats_on_device(random_floats(static_cast<size_t>(tokens) * n_rot / 2, 2));
  const Buffer sn = floats_on_device(random_floats(static_cast<size_t>(tokens) * n_rot / 2, 3));
  std::vector<float> slots(static_cast<size_t>(tokens));
  for (int t = 0; t < tokens; ++t) {
    const int32_t slot = t;
    std::memcpy(&slots[t], &slot, sizeof slot);
  }
  const Buffer slots_b = floats_on_device(slots);
  const size_t rb = row_bytes(DType::kF16, kd);
  StatusOr<Buffer> kv = device()->alloc(2 * rb * tokens, MemoryKind::kDevice);
  require(kv.ok(), kv.status().message());
  const AttentionCaseShape shape{.type = DType::kF16,
                                 .n_head = 32,
                                 .n_head_kv = 2,
                                 .head_dim = head_dim,
                                 .n_tokens = tokens,
                                 .n_pos = tokens,
                                 .v_base = static_cast<uint32_t>(rb * tokens)};
  KvStoreArgs a = attention_case(shape, x.address(), kv->address(), slots_b.address(), 0, 0).store;
  if (fused) {
    a.cs = cs.address();
    a.sn = sn.address();
    a.n_q_heads = 32;
    a.head_dim = head_dim;
    a.n_rot = n_rot;
  }
  run_calls(st, 32, [&](Stream& s, int) {
    if (!fused) rope(s, x.address(), cs.address(), sn.address(), tokens, stride, 0, 34, 128, n_rot);
    kv_store(s, DType::kF16, a);
  });
}
BENCHMARK(BM_RopeKvStore)
    ->ArgsProduct({{1, 512}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// A decode step's norm before the QKV matmul (4608 x 4096), or SwiGLU after the gate-and-up
// matmul (2 x 13696 x 4096), at ChatGLM3-6B's shape, on the float shaders (int_dot 0): args
// weight type (index into kTypes), op (0: the norm, 1: SwiGLU), then 0: its dispatch beside
// the matmul's, 1: inside the matmul (gpu::MatmulInput::rms_normed, gpu::MatmulAct::kSwigluPairs).
void BM_FusedOps(benchmark::State& st) {
  const DType type = kTypes[st.range(0)];
  const bool norm = st.range(1) == 0, fused = st.range(2) != 0;
  const int64_t rows = norm ? 4608 : 2 * 13696, cols = 4096;
  const int n_out = static_cast<int>(norm ? rows : rows / 2);
  MatmulTuning tuning;
  tuning.int_dot = 0;
  const std::vector<Matrix>& w = weight_copies(type, rows, cols);
  st.SetLabel(std::string(dtype_name(type)) + (norm ? " rms_norm" : " swiglu") +
              (fused ? " inside the matmul" : (norm ? " then the matmul" : " after the matmul")));
  const Buffer x = floats_on_device(random_floats(static_cast<size_t>(cols), 3));
  const Buffer norm_w = floats_on_device(random_floats(static_cast<size_t>(cols), 4));
  const Buffer normed = zeros_on_device(static_cast<size_t>(cols));
  const Buffer y = zeros_on_device(static_cast<size_t>(rows));
  const Buffer act = zeros_on_device(static_cast<size_t>(n_out));
  const int calls = std::max<int>(8, static_cast<int>(w.size()));
  run_calls(st, calls, [&](Stream& s, int i) {
    const Matrix& m = w[i % w.size()];
    if (norm && fused) {
      matmul(s, m, MatmulInput::rms_normed(x.address(), norm_w.address(), 1e-5f), y.address(), 1,
             n_out, 0, {}, tuning);
    } else if (norm) {
      rms_norm(s, x.address(), norm_w.address(), normed.address(), 1, static_cast<int>(cols),
               1e-5f);
      matmul(s, m, normed.address(), y.address(), 1, n_out, 0, {}, tuning);
    } else if (fused) {
      matmul(s, m, x.address(), act.address(), 1, n_out, 0, {0, false, MatmulAct::kSwigluPairs},
             tuning);
    } else {
      matmul(s, m, x.address(), y.address(), 1, static_cast<int>(rows), 0, {}, tuning);
      swiglu(s, y.address(), act.address(), 1, n_out, static_cast<int>(rows), 0, n_out);
    }
  });
  st.counters["bytes_per_second"] = benchmark::Counter(
      static_cast<double>(w[0].buf.size()) * st.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FusedOps)
    ->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})  // Q4_0, F16; the norm, SwiGLU; apart, inside
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_Swiglu(benchmark::State& st) {
  const int tokens = static_cast<int>(st.range(0)), n = 13696;
  const Buffer in = floats_on_device(random_floats(static_cast<size_t>(tokens) * 2 * n, 1));
  const Buffer out = zeros_on_device(static_cast<size_t>(tokens) * n);
  run_calls(st, 32, [&](Stream& s, int) {
    swiglu(s, in.address(), out.address(), tokens, n, 2 * n, 0, n);
  });
}
BENCHMARK(BM_Swiglu)->Arg(1)->Arg(512)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Attention of `tokens` new rows at depth `n_past` over an f16 cache in blocks of 16 positions
// (ChatGLM3-6B: 32 query heads, 2 K/V heads of 128), the blocks in a scattered order; third
// argument 1: with the scratch that lets few rows split their keys (gpu::AttentionArgs).
void BM_Attention(benchmark::State& st) {
  const int n_past = static_cast<int>(st.range(0)), tokens = static_cast<int>(st.range(1));
  const int n_head = 32, n_head_kv = 2, hd = 128, bt = 16, kd = n_head_kv * hd;
  const int w = n_head * hd + 2 * kd;
  const int n_pos = n_past + tokens, n_blocks = (n_pos + bt - 1) / bt;
  const size_t rb = row_bytes(DType::kF16, kd);
  const uint32_t v_base = static_cast<uint32_t>(static_cast<size_t>(n_blocks) * bt * rb);
  StatusOr<Buffer> kv = device()->alloc(2 * static_cast<size_t>(v_base), MemoryKind::kDevice);
  GLM_CHECK(kv.ok());
  std::vector<int32_t> table(n_blocks);
  for (int b = 0; b < n_blocks; ++b) table[b] = b;
  std::mt19937 rng(5);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<float> table_f(n_blocks), slot_f(n_pos);
  std::memcpy(table_f.data(), table.data(), table.size() * 4);
  for (int p = 0; p < n_pos; ++p) {
    const int32_t slot = table[p / bt] * bt + p % bt;
    std::memcpy(&slot_f[p], &slot, 4);
  }
  const Buffer src = floats_on_device(random_floats(static_cast<size_t>(n_pos) * w, 1));
  const Buffer slots = floats_on_device(slot_f), blocks = floats_on_device(table_f);
  const Buffer out = zeros_on_device(static_cast<size_t>(tokens) * n_head * hd);
  const AttentionCaseShape shape{.n_head = n_head,
                                 .n_head_kv = n_head_kv,
                                 .head_dim = hd,
                                 .block_tokens = bt,
                                 .n_past = n_past,
                                 .n_tokens = tokens,
                                 .n_pos = n_pos,
                                 .v_base = v_base};
  const AttentionCase ac = attention_case(shape, src.address(), kv->address(), slots.address(),
                                          blocks.address(), out.address());
  Stream& s = device()->stream();
  s.begin();
  kv_store(s, DType::kF16, ac.store);  // every position's K/V, once
  GLM_CHECK(s.submit_and_wait().ok());
  AttentionArgs aa = ac.attend;
  StatusOr<Buffer> split = device()->alloc(attention_scratch_floats(shape.head_dim) * sizeof(float),
                                           MemoryKind::kDevice);
  require(split.ok(), "no memory for the attention's splits");
  if (st.range(2) != 0) aa.scratch = split->address();  // few rows over many keys split them
  run_calls(st, 16, [&](Stream& s2, int) { attention(s2, DType::kF16, aa); });
  st.counters["bytes_per_second"] =
      benchmark::Counter(2.0 * static_cast<double>(n_pos) * static_cast<double>(rb) *
                             static_cast<double>(st.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Attention)
    ->Args({512, 1, 0})
    ->Args({512, 1, 1})
    ->Args({4096, 1, 0})
    ->Args({4096, 1, 1})
    ->Args({0, 512, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// GLM-4.5-Air's routed experts (128 of [1408, 4096], top-8): `tokens` tokens' gate matmul
// over their chosen experts (random, distinct per token). One token: a slot at a time
// (matvec_id_*: 8 experts' rows read); more: the slots grouped by expert (moe_group, timed
// with them) and each expert's tiles over its slots (matmul_tiled_id_*). bytes_per_second: the
// chosen experts' bytes (each distinct expert once) over the time. Args: type (kTypes), tokens,
// the grouped tiles' tensor cores (MatmulTuning::coop: -1 where checked, 0 never).
void BM_Experts(benchmark::State& st) {
  const DType type = kTypes[st.range(0)];
  const int tokens = static_cast<int>(st.range(1));
  MatmulTuning tuning;
  tuning.coop = static_cast<int>(st.range(2));
  const int n_expert = 128, k = 8, rows = 1408, cols = 4096, slots = tokens * k;
  const std::vector<Matrix>& w = weight_copies(type, int64_t{n_expert} * rows, cols);
  const bool tensor_cores =
      tokens > 1 && tiled_shader(*device(), w[0], tuning, true) == w[0].shaders.experts_coop;
  st.SetLabel(std::string(dtype_name(type)) + " 128 x " + std::to_string(rows) + "x" +
              std::to_string(cols) + " top-8 t" + std::to_string(tokens) +
              (tokens == 1 ? " matvec_id" : " grouped") + (tensor_cores ? " tensor cores" : ""));
  std::mt19937 rng(9);
  std::vector<int32_t> ids(slots);
  std::vector<int> order(n_expert);
  std::vector<bool> used(n_expert, false);
  for (int t = 0; t < tokens; ++t) {
    for (int e = 0; e < n_expert; ++e) order[e] = e;
    std::shuffle(order.begin(), order.end(), rng);
    for (int j = 0; j < k; ++j) {
      ids[t * k + j] = order[j];
      used[order[j]] = true;
    }
  }
  std::vector<float> ids_f(slots);
  std::memcpy(ids_f.data(), ids.data(), ids.size() * 4);
  const Buffer ids_b = floats_on_device(ids_f);
  const Buffer x = floats_on_device(random_floats(static_cast<size_t>(tokens) * cols, 3));
  const Buffer y = zeros_on_device(static_cast<size_t>(slots) * rows);
  const Buffer counts = zeros_on_device(n_expert);
  const Buffer lists = zeros_on_device(static_cast<size_t>(n_expert) * tokens);
  ExpertGroups g;
  g.slots = lists.address();
  g.counts = counts.address();
  g.n_expert = n_expert;
  g.cap = tokens;
  const int calls = std::max<int>(8, static_cast<int>(w.size()));
  run_calls(st, calls, [&](Stream& s, int i) {
    const Matrix& m = w[i % w.size()];
    if (tokens == 1) {
      matmul_experts(s, m, rows, ids_b.address(), x.address(), k, y.address(), slots, rows, 0);
    } else {
      moe_group(s, ids_b.address(), slots, g);
      matmul_experts_grouped(s, m, rows, g, x.address(), k, y.address(), rows, 0, tuning);
    }
  });
  const double expert_bytes = static_cast<double>(w[0].buf.size()) / n_expert;
  const double chosen = static_cast<double>(std::count(used.begin(), used.end(), true));
  st.counters["bytes_per_second"] = benchmark::Counter(
      chosen * expert_bytes * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Experts)
    ->ArgsProduct({{0, 2}, {1}, {0}})
    ->ArgsProduct({{0, 2}, {512}, {-1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The router of 1 or 512 tokens over 128 experts, top-8 (moe_route.comp).
void BM_MoeRoute(benchmark::State& st) {
  const int tokens = static_cast<int>(st.range(0)), n_expert = 128, k = 8;
  const Buffer logits = floats_on_device(random_floats(static_cast<size_t>(tokens) * n_expert, 4));
  const Buffer bias = floats_on_device(random_floats(n_expert, 5));
  const Buffer ids = zeros_on_device(static_cast<size_t>(tokens) * k);
  const Buffer weights = zeros_on_device(static_cast<size_t>(tokens) * k);
  MoeRouteArgs a;
  a.logits = logits.address();
  a.bias = bias.address();
  a.ids = ids.address();
  a.weights = weights.address();
  a.n_tokens = tokens;
  a.n_expert = n_expert;
  a.k = k;
  a.norm = true;
  a.scale = 2.5f;
  run_calls(st, 16, [&](Stream& s, int) { moe_route(s, a); });
}
BENCHMARK(BM_MoeRoute)->Arg(1)->Arg(512)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace glm::gpu

BENCHMARK_MAIN();
