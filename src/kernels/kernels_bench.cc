// Google Benchmark of the kernels on the ChatGLM3-6B shapes:
//   kernels_bench --benchmark_filter=Matmul/q4_0
// Reports weight GB/s (decode is memory-bound: compare with the machine's read bandwidth,
// shown by BM_ReadBandwidth) and tokens/s-equivalent GFLOP/s for prefill.
// Threads: GLMSERVE_BENCH_THREADS (default physical cores). Kernel variant: GLMSERVE_ISA.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <vector>

#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/bandwidth.h"
#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "kernels/quant.h"
#include "kernels/thread_pool.h"

namespace glm::kernels {
namespace {

ThreadPool& pool() {
  static ThreadPool p([] {
    const char* e = std::getenv("GLMSERVE_BENCH_THREADS");
    return e != nullptr ? std::atoi(e) : 0;
  }());
  return p;
}

struct Shape {
  int64_t rows, cols;
};
// qkv, attention output, ffn up (gate + up), ffn down of ChatGLM3-6B.
constexpr Shape kShapes[] = {{4608, 4096}, {4096, 4096}, {27392, 4096}, {4096, 13696}};
constexpr DType kTypes[] = {DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                            DType::kQ4_K, DType::kQ6_K, DType::kQ5_K, DType::kQ5_0};

void BM_Matmul(benchmark::State& state) {
  const DType type = kTypes[state.range(0)];
  const Shape shape = kShapes[state.range(1)];
  const int64_t n_tokens = state.range(2);
  // Random rows, quantized once and repeated (quantizing 100M values takes too long).
  const int64_t n_src = 64;
  std::vector<float> src(n_src * shape.cols);
  uint32_t s = 1;
  for (float& f : src)
    f = static_cast<float>((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
  const size_t rb = row_bytes(type, shape.cols);
  std::unique_ptr<uint8_t[]> w(new uint8_t[rb * shape.rows]);
  for (int64_t r = 0; r < n_src; ++r)
    quantize_row_ref(type, src.data() + r * shape.cols, w.get() + r * rb, shape.cols);
  for (int64_t r = n_src; r < shape.rows; ++r)
    std::memcpy(w.get() + r * rb, w.get() + (r % n_src) * rb, rb);
  std::vector<float> x(n_tokens * shape.cols, 0.25f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = src[i % src.size()];
  std::vector<float> y(n_tokens * shape.rows);
  WeightView view{type, w.get(), shape.rows, shape.cols};
  // Packed (packed.h, as the engine loads it) or straight from the row-major data.
  const PackedWeight packed = state.range(3) ? PackedWeight::pack(view, &pool()) : PackedWeight();
  if (state.range(3) && packed.empty()) {
    state.SkipWithError("no packed layout for this type on this CPU");
    return;
  }
  packed.attach(&view);
  for (auto _ : state) {
    matmul(view, x.data(), y.data(), n_tokens, &pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(dtype_name(type)) + " " + matmul_isa() +
                 (packed.empty() ? "" : " packed"));
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(rb * shape.rows) / 1e9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * shape.rows * shape.cols * n_tokens,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void matmul_args(benchmark::internal::Benchmark* b) {
  for (int t = 0; t < static_cast<int>(std::size(kTypes)); ++t) {
    for (int sh = 0; sh < 4; ++sh) {
      for (int n : {1, 64}) {
        b->Args({t, sh, n, 0});
        if (packed_layout_for(kTypes[t]) != PackedLayout::kNone) b->Args({t, sh, n, 1});
      }
    }
  }
}
BENCHMARK(BM_Matmul)->Apply(matmul_args)->UseRealTime()->Unit(benchmark::kMillisecond);

// A paged cache of n_pos positions (blocks of 16) with rows of n_kv * hd values, F16 or Q8_0.
struct BenchCache {
  std::vector<uint8_t> k, v;
  std::vector<const void*> kb, vb;
  KvView view;
  BenchCache(int n_pos, int n_kv, int hd, DType type) {
    const int bt = 16;
    const int n_blocks = (n_pos + bt - 1) / bt;
    const size_t rb = row_bytes(type, n_kv * hd);
    k.resize(static_cast<size_t>(n_blocks) * bt * rb);
    v.resize(k.size());
    std::vector<float> row(n_kv * hd);
    for (size_t r = 0; r < k.size() / rb; ++r) {
      for (size_t i = 0; i < row.size(); ++i) row[i] = 0.1f * static_cast<float>((r * 7 + i) % 13);
      kv_store_row(row.data(), type, k.data() + r * rb, n_kv * hd);
      kv_store_row(row.data(), type, v.data() + r * rb, n_kv * hd);
    }
    for (int b = 0; b < n_blocks; ++b) {
      kb.push_back(k.data() + static_cast<size_t>(b) * bt * rb);
      vb.push_back(v.data() + static_cast<size_t>(b) * bt * rb);
    }
    view = KvView{kb.data(), vb.data(), n_blocks, bt, type};
  }
};

using AttentionFn = void (*)(const float*, const KvView&, const AttentionShape&, float*,
                             ThreadPool*);
// Variant 0: attention_rows (the row-at-a-time kernel before the tiled one); 1: attention.
AttentionFn attention_variant(int64_t v) { return v == 0 ? attention_rows : attention; }
const char* variant_name(int64_t v) { return v == 0 ? "rows" : "tiled"; }

void BM_AttentionDecode(benchmark::State& state) {
  // One decode row against n_past positions of an F16 (type 0) or Q8_0 (type 1) cache, ChatGLM3
  // heads (32 q, 2 kv, 128; heads arg 1: the small preset's 8 q heads); variant 0 =
  // attention_rows, 1 = attention (tiled, split decode).
  const int n_past = static_cast<int>(state.range(0));
  const DType type = state.range(1) == 0 ? DType::kF16 : DType::kQ8_0;
  const int n_head = state.range(3) == 0 ? 32 : 8, n_kv = 2, hd = 128;
  const BenchCache cache(n_past + 1, n_kv, hd, type);
  const AttentionShape sh{1, n_past, n_head, n_kv, hd, 0.088f};
  std::vector<float> q(n_head * hd, 0.3f), out(n_head * hd);
  const AttentionFn fn = attention_variant(state.range(2));
  for (auto _ : state) {
    fn(q.data(), cache.view, sh, out.data(), &pool());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(variant_name(state.range(2)));
  state.counters["kv_GB/s"] =
      benchmark::Counter(2e-9 * static_cast<double>(n_past + 1) * row_bytes(type, n_kv * hd),
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{128, 512, 2048, 4096, 16384}, {0, 1}, {0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_AttentionPrefill(benchmark::State& state) {
  // A prompt chunk of 128 tokens after `depth` cached positions (one layer), F16 cache; heads of
  // the small preset (shape 0: 8 q, 2 kv, 128) or of ChatGLM3-6B (shape 1: 32 q, 2 kv, 128);
  // variant 0 = attention_rows, 1 = attention (tiled). Reports time per chunk; ms / 128 = the
  // attention cost per prompt token per layer.
  const int depth = static_cast<int>(state.range(0));
  const int n_head = state.range(1) == 0 ? 8 : 32, n_kv = 2, hd = 128, n_tokens = 128;
  const BenchCache cache(depth + n_tokens, n_kv, hd, DType::kF16);
  const AttentionShape sh{n_tokens, depth, n_head, n_kv, hd, 0.088f};
  std::vector<float> q(static_cast<size_t>(n_tokens) * n_head * hd), out(q.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.01f * static_cast<float>(i % 37);
  const AttentionFn fn = attention_variant(state.range(2));
  for (auto _ : state) {
    fn(q.data(), cache.view, sh, out.data(), &pool());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(state.range(1) == 0 ? "small " : "6b ") +
                 variant_name(state.range(2)));
  state.counters["GFLOP/s"] =
      benchmark::Counter(4e-9 * n_tokens * (depth + n_tokens / 2.0) * n_head * hd,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionPrefill)
    ->ArgsProduct({{4096, 16384}, {0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_ReadBandwidth(benchmark::State& state) {
  double gbs = 0;
  for (auto _ : state) gbs = measure_read_bandwidth(size_t{512} << 20, 3, &pool());
  state.counters["GB/s"] = gbs;
}
BENCHMARK(BM_ReadBandwidth)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace glm::kernels

BENCHMARK_MAIN();
