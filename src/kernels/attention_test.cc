#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "kernels/isa.h"
#include "kernels/quant.h"
#include "kernels/test_util.h"

namespace glm::kernels {
namespace {

using testing::random_floats;
using testing::runnable_isas;
using testing::ScopedIsa;

struct Case {
  int n_tokens, n_past, n_head, n_head_kv, head_dim, block_tokens;
  DType type;
  int bidir = 0;     // AttentionShape::bidir_prefix
  int n_prefix = 0;  // KvView::n_prefix (P-Tuning v2 prefix rows, f32)
};

// A paged cache with its blocks in shuffled order, filled with random K/V rows.
struct Cache {
  std::vector<std::vector<uint8_t>> storage;
  std::vector<const void*> k, v;
  std::vector<float> k_values, v_values;  // [n_pos, row] as stored (after f16 rounding)
  std::vector<float> prefix_k, prefix_v;  // [n_prefix, row] f32
  KvView view;

  Cache(const Case& c, uint32_t seed) {
    const int n_pos = std::max(c.n_past + c.n_tokens, c.bidir);
    const int row = c.n_head_kv * c.head_dim;
    const int n_blocks = (n_pos + c.block_tokens - 1) / c.block_tokens + 1;  // one spare
    const size_t rb = row_bytes(c.type, row);
    storage.assign(2 * n_blocks, std::vector<uint8_t>(c.block_tokens * rb));
    k_values = random_floats(static_cast<size_t>(n_blocks) * c.block_tokens * row, seed, -2, 2);
    v_values = random_floats(k_values.size(), seed + 1, -3, 3);
    // Block i of the sequence lives in storage slot (i * 7) % n_blocks (a permutation when
    // n_blocks is not a multiple of 7), so the kernel must follow the block table.
    for (int b = 0; b < n_blocks; ++b) {
      const int slot = (b * 7) % n_blocks == b || n_blocks % 7 == 0 ? b : (b * 7) % n_blocks;
      k.push_back(storage[slot].data());
      v.push_back(storage[n_blocks + slot].data());
    }
    // Each row stored in the cache's type, then read back: the values as stored (rounded).
    for (int b = 0; b < n_blocks; ++b) {
      for (int t = 0; t < c.block_tokens; ++t) {
        const size_t gi = (static_cast<size_t>(b) * c.block_tokens + t) * row;
        for (int kv = 0; kv < 2; ++kv) {
          float* val = (kv == 0 ? k_values : v_values).data() + gi;
          uint8_t* dst = static_cast<uint8_t*>(const_cast<void*>(kv == 0 ? k[b] : v[b])) + t * rb;
          kv_store_row(val, c.type, dst, row);
          kv_read(dst, c.type, 0, row, val);
        }
      }
    }
    view.k_blocks = k.data();
    view.v_blocks = v.data();
    view.n_blocks = n_blocks;
    view.block_tokens = c.block_tokens;
    view.type = c.type;
    if (c.n_prefix > 0) {
      prefix_k = random_floats(static_cast<size_t>(c.n_prefix) * row, seed + 2, -2, 2);
      prefix_v = random_floats(prefix_k.size(), seed + 3, -3, 3);
      view.prefix_k = prefix_k.data();
      view.prefix_v = prefix_v.data();
      view.n_prefix = c.n_prefix;
    }
  }
};

AttentionShape shape_of(const Case& c) {
  AttentionShape s;
  s.n_tokens = c.n_tokens;
  s.n_past = c.n_past;
  s.n_head = c.n_head;
  s.n_head_kv = c.n_head_kv;
  s.head_dim = c.head_dim;
  s.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  s.bidir_prefix = c.bidir;
  return s;
}

// Error bound of an f32 computation against the double reference: a score of hd products
// carries at most ~hd * 2^-24 * sum|q_i k_i| rounding (x scale), a softmax weight then moves by
// at most a factor exp(2 e), and the output (a convex combination of V) by that times max|V|,
// plus the rounding of summing n_ctx weighted rows. Doubled for slack in the estimate.
float bound(const Case& c, const std::vector<float>& q, const Cache& cache) {
  const float u = std::ldexp(1.0f, -24);
  float qk = 0;
  float vmax = 0;
  for (float f : cache.v_values) vmax = std::max(vmax, std::fabs(f));
  for (float f : cache.prefix_v) vmax = std::max(vmax, std::fabs(f));
  float kmax = 0;
  for (float f : cache.k_values) kmax = std::max(kmax, std::fabs(f));
  for (float f : cache.prefix_k) kmax = std::max(kmax, std::fabs(f));
  float qmax = 0;
  for (float f : q) qmax = std::max(qmax, std::fabs(f));
  qk = c.head_dim * qmax * kmax / std::sqrt(static_cast<float>(c.head_dim));
  const float e = 2.0f * c.head_dim * u * qk;
  const int n_ctx = c.n_prefix + std::max(c.n_past + c.n_tokens, c.bidir);
  return 2.0f * (std::expm1(2 * e) + 4 * n_ctx * u + 8 * u) * vmax * 2.0f;
}

// The plans a case is run with besides plan_attention()'s: one token per tile, a tile of 3
// tokens (odd: tiles end inside the causal diagonal), all tokens in one tile, sliced heads, and
// 2 or 5 position splits (5 > the key steps of short cases: some splits are empty).
std::vector<AttentionPlan> plans_for(const Case& c) {
  const int g = c.n_head / c.n_head_kv;
  std::vector<AttentionPlan> plans = {{1, 1, 1}, {3, 1, 1}, {c.n_tokens, 1, 1},
                                      {2, 1, 2}, {1, 1, 5}, {5, 1, 3}};
  if (g > 1) plans.push_back({2, g, 1});
  if (g % 2 == 0) plans.push_back({3, 2, 2});
  return plans;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol,
                 const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol) << what << " i=" << i;
  }
}

void run_case(const Case& c, ThreadPool* pool) {
  SCOPED_TRACE(::testing::Message()
               << "n_tokens=" << c.n_tokens << " n_past=" << c.n_past << " n_head=" << c.n_head
               << " n_head_kv=" << c.n_head_kv << " head_dim=" << c.head_dim
               << " block=" << c.block_tokens << " type=" << dtype_name(c.type)
               << " bidir=" << c.bidir << " n_prefix=" << c.n_prefix);
  Cache cache(c, 17 + c.n_past * 3 + c.head_dim);
  const AttentionShape s = shape_of(c);
  const auto q = random_floats(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim, 5, -2, 2);
  std::vector<float> want(q.size());
  attention_ref(q.data(), cache.view, s, want.data());
  const float tol = bound(c, q, cache);
  for (Isa isa : runnable_isas()) {
    ScopedIsa scoped(isa);
    const std::string name = isa_name(isa);
    std::vector<float> got(q.size(), NAN);
    attention(q.data(), cache.view, s, got.data(), pool);
    expect_near(got, want, tol, name + " attention");
    if (c.bidir == 0) {
      std::fill(got.begin(), got.end(), NAN);
      attention_rows(q.data(), cache.view, s, got.data(), pool);
      expect_near(got, want, tol, name + " attention_rows");
    }
    for (const AttentionPlan& p : plans_for(c)) {
      std::fill(got.begin(), got.end(), NAN);
      attention_planned(q.data(), cache.view, s, p, got.data(), pool);
      expect_near(got, want, tol,
                  name + " plan tile=" + std::to_string(p.tile_tokens) + " slices=" +
                      std::to_string(p.n_slices) + " splits=" + std::to_string(p.n_splits));
    }
  }
}

TEST(AttentionTest, MatchesReferenceOverShapes) {
  ThreadPool pool(2);
  const std::vector<Case> cases = {
      {1, 0, 1, 1, 8, 4, DType::kF32},
      {1, 0, 4, 2, 16, 16, DType::kF16},
      {1, 37, 32, 2, 128, 16, DType::kF16},
      {1, 37, 32, 2, 128, 16, DType::kF32},
      {3, 5, 4, 4, 24, 5, DType::kF16},
      {17, 0, 8, 2, 40, 16, DType::kF16},
      {9, 100, 6, 3, 64, 32, DType::kF16},
      {5, 3, 2, 1, 7, 3, DType::kF32},
      {2, 64, 16, 1, 256, 64, DType::kF16},
      // Decode of 4 query heads a KV head (the small preset): scores from the key rows, 4 rows x
      // 4 keys a block (2 x 4 on AVX2), a tail of keys; 3 heads a KV head: a tail of rows.
      {1, 300, 8, 2, 128, 16, DType::kF16},
      {1, 301, 6, 2, 128, 16, DType::kF32},
      {2, 130, 6, 2, 48, 16, DType::kQ8_0},
      {1, 77, 8, 2, 40, 16, DType::kF16},
      // Prefill: many tokens (several tiles and key steps, tails of both), odd head dims.
      {70, 0, 4, 4, 24, 16, DType::kF16},
      {131, 7, 32, 2, 128, 16, DType::kF16},
      {67, 61, 6, 2, 33, 5, DType::kF32},
      {100, 0, 1, 1, 17, 16, DType::kF32},
      // Q8_0 rows (n_head_kv * head_dim a multiple of 32): heads of whole blocks, heads inside
      // one block (head_dim 8 and 16, like stories260K), heads that start mid-block (48), and
      // odd block sizes and tails of positions.
      {1, 37, 32, 2, 128, 16, DType::kQ8_0},
      {3, 5, 4, 4, 8, 5, DType::kQ8_0},
      {5, 3, 2, 2, 16, 3, DType::kQ8_0},
      {17, 0, 8, 2, 48, 16, DType::kQ8_0},
      {9, 100, 6, 3, 64, 32, DType::kQ8_0},
      {4, 20, 8, 4, 96, 7, DType::kQ8_0},
      {2, 64, 16, 1, 256, 64, DType::kQ8_0},
      {1, 300, 16, 2, 128, 16, DType::kQ8_0},
      {77, 45, 32, 2, 128, 16, DType::kQ8_0},
      // Bidirectional prefix (ChatGLM-6B's prompt: bidir = prompt length - 1), the whole prompt
      // in one call, then rows after it, and a prefix past the rows' own positions.
      {9, 0, 4, 4, 16, 4, DType::kF32, 8},
      {70, 0, 4, 4, 32, 16, DType::kF16, 69},
      {33, 0, 2, 2, 64, 16, DType::kQ8_0, 20},
      {3, 10, 4, 4, 16, 4, DType::kF16, 11},
      // A P-Tuning v2 prefix (f32 rows before the cache): shorter and longer than a key step
      // and a block, with a prefill, a chunk and decode rows, over every KV type.
      {1, 0, 4, 2, 16, 4, DType::kF32, 0, 3},
      {9, 0, 4, 4, 16, 4, DType::kF16, 0, 5},
      {17, 0, 8, 2, 48, 16, DType::kQ8_0, 0, 70},
      {70, 0, 4, 4, 24, 16, DType::kF16, 0, 128},
      {3, 37, 32, 2, 128, 16, DType::kF16, 0, 16},
      {1, 300, 16, 2, 128, 16, DType::kQ8_0, 0, 33},
      {1, 300, 8, 2, 128, 16, DType::kF16, 0, 33},  // a key step of prefix and cache keys
      {67, 61, 6, 2, 33, 5, DType::kF32, 0, 7},
  };
  for (const Case& c : cases) {
    run_case(c, &pool);
    run_case(c, nullptr);
  }
}

TEST(AttentionTest, DecodeAtDepthSplitsPositionsAcrossThreads) {
  // One decode row (and a short chunk) over a long cache, ChatGLM3's heads: plan_attention
  // splits the positions for 2 threads, and the merged result equals the reference.
  ThreadPool pool(2);
  for (DType type : {DType::kF16, DType::kF32, DType::kQ8_0}) {
    for (int n_tokens : {1, 2}) {
      const Case c{n_tokens, 1531, 32, 2, 128, 16, type};
      const AttentionPlan plan = plan_attention(shape_of(c), pool.n_threads());
      EXPECT_GT(plan.n_splits, 1) << dtype_name(type);
      run_case(c, &pool);
    }
  }
  // Short caches are not split.
  EXPECT_EQ(plan_attention(shape_of(Case{1, 300, 32, 2, 128, 16, DType::kF16}), 2).n_splits, 1);
  EXPECT_EQ(plan_attention(shape_of(Case{1, 5000, 32, 2, 128, 16, DType::kF16}), 1).n_splits, 1);
}

TEST(AttentionTest, PrefixEqualsTheSameRowsCachedAheadOfPositionZero) {
  // The P-Tuning prefix as the reference model has it: its K/V are concatenated before the
  // sequence's own and every query row sees all of them. So with an f32 cache, attention over
  // (prefix, n_past) must equal plain causal attention over a cache holding the prefix rows at
  // positions [0, n_prefix) and the sequence's rows after them, queried at n_past + n_prefix
  // (the path without a prefix, unchanged by it).
  ThreadPool pool(2);
  for (const Case& c :
       {Case{5, 0, 4, 2, 16, 4, DType::kF32, 0, 6}, Case{1, 9, 8, 2, 32, 16, DType::kF32, 0, 20},
        Case{70, 3, 4, 4, 24, 16, DType::kF32, 0, 65}}) {
    SCOPED_TRACE(::testing::Message() << "n_tokens=" << c.n_tokens << " n_prefix=" << c.n_prefix);
    Cache with(c, 23);
    const int row = c.n_head_kv * c.head_dim;
    // The same rows, prefix first, in a plain cache (no prefix view).
    Case flat = c;
    flat.n_past = c.n_past + c.n_prefix;
    flat.n_prefix = 0;
    Cache plain(flat, 99);
    const int n_own = c.n_past + c.n_tokens;
    for (int j = 0; j < c.n_prefix + n_own; ++j) {
      const float* ks = j < c.n_prefix
                            ? with.prefix_k.data() + static_cast<size_t>(j) * row
                            : with.k_values.data() + static_cast<size_t>(j - c.n_prefix) * row;
      const float* vs = j < c.n_prefix
                            ? with.prefix_v.data() + static_cast<size_t>(j) * row
                            : with.v_values.data() + static_cast<size_t>(j - c.n_prefix) * row;
      const int b = j / c.block_tokens, slot = j % c.block_tokens;
      const size_t rb = row_bytes(c.type, row);
      kv_store_row(ks, c.type, static_cast<uint8_t*>(const_cast<void*>(plain.k[b])) + slot * rb,
                   row);
      kv_store_row(vs, c.type, static_cast<uint8_t*>(const_cast<void*>(plain.v[b])) + slot * rb,
                   row);
    }
    const auto q = random_floats(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim, 8, -2, 2);
    std::vector<float> want(q.size());
    attention_ref(q.data(), plain.view, shape_of(flat), want.data());
    std::vector<float> got(q.size());
    attention_ref(q.data(), with.view, shape_of(c), got.data());
    expect_near(got, want, 1e-6f, "attention_ref with prefix");
    for (Isa isa : runnable_isas()) {
      ScopedIsa scoped(isa);
      std::fill(got.begin(), got.end(), NAN);
      attention(q.data(), with.view, shape_of(c), got.data(), &pool);
      expect_near(got, want, bound(c, q, with), std::string(isa_name(isa)) + " attention");
      std::fill(got.begin(), got.end(), NAN);
      attention_rows(q.data(), with.view, shape_of(c), got.data(), &pool);
      expect_near(got, want, bound(c, q, with), std::string(isa_name(isa)) + " attention_rows");
    }
  }
}

TEST(AttentionTest, FirstRowAttendsOnlyToItselfAndIgnoresLaterPositions) {
  // With n_past = 0 the first query row sees only position 0: the output is exactly V[0]
  // whatever the later rows of the cache hold (causality).
  const Case c{4, 0, 2, 1, 16, 4, DType::kF32};
  Cache cache(c, 3);
  const AttentionShape s = shape_of(c);
  const auto q = random_floats(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim, 9);
  for (Isa isa : runnable_isas()) {
    ScopedIsa scoped(isa);
    std::vector<float> out(q.size());
    attention(q.data(), cache.view, s, out.data(), nullptr);
    for (int h = 0; h < c.n_head; ++h) {
      for (int i = 0; i < c.head_dim; ++i) {
        EXPECT_FLOAT_EQ(out[h * c.head_dim + i], cache.v_values[i]) << isa_name(isa);
      }
    }
  }
}

TEST(AttentionTest, ExtremeScoresStayFinite) {
  // Large scores (|q.k| ~ 1e4) must not overflow exp: the online max subtraction keeps them
  // finite and the result matches the reference.
  const Case c{2, 20, 4, 2, 32, 8, DType::kF32};
  Cache cache(c, 11);
  for (float& f : cache.k_values) f *= 1.0f;
  AttentionShape s = shape_of(c);
  s.scale = 30.0f;
  const auto q = random_floats(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim, 2, -4, 4);
  std::vector<float> want(q.size());
  attention_ref(q.data(), cache.view, s, want.data());
  for (Isa isa : runnable_isas()) {
    ScopedIsa scoped(isa);
    std::vector<float> got(q.size());
    attention(q.data(), cache.view, s, got.data(), nullptr);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i]));
      // Scores here are ~1e3 apart: the softmax is nearly one-hot; a rounding of 1e3 * 2^-24
      // * 32 in a score changes weights by < 1e-2 relative at worst.
      ASSERT_NEAR(got[i], want[i], 0.05f) << isa_name(isa);
    }
  }
}

TEST(AttentionTest, Q8_0RowsAreGgufQ8_0Blocks) {
  // kv_store_row writes the bytes GGUF's Q8_0 quantizer writes (quant.cc, the model-file path),
  // kv_elem / kv_read read them back as its dequantizer does, and each value is within half a
  // step (its block's max |x| / 127 / 2) of the original.
  const int n = 96;
  const auto x = random_floats(n, 41, -5, 5);
  std::vector<uint8_t> ours(row_bytes(DType::kQ8_0, n)), gguf(ours.size());
  kv_store_row(x.data(), DType::kQ8_0, ours.data(), n);
  quantize_row_ref(DType::kQ8_0, x.data(), gguf.data(), n);
  EXPECT_EQ(ours, gguf);
  std::vector<float> want(n), got(n);
  dequantize_row_ref(DType::kQ8_0, gguf.data(), want.data(), n);
  kv_read(ours.data(), DType::kQ8_0, 0, n, got.data());
  for (int b = 0; b < n / kQK; ++b) {
    float amax = 0;
    for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[b * kQK + i]));
    for (int i = b * kQK; i < (b + 1) * kQK; ++i) {
      EXPECT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(kv_elem(ours.data(), DType::kQ8_0, i), want[i]) << i;
      EXPECT_NEAR(got[i], x[i], amax / 127 / 2 * 1.001f) << i;
    }
  }
  std::vector<float> mid(20);
  kv_read(ours.data(), DType::kQ8_0, 37, 20, mid.data());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(mid[i], want[37 + i]);
}

}  // namespace
}  // namespace glm::kernels
