// Internal to kernels/: how the ISA matmul variants cut y[n_tokens, n_rows] into work.
//   - Threads take chunks of rows from a shared atomic counter (dynamic: all finish together even
//     when a core is busy with something else), each chunk a multiple of the tile height.
//   - Within a chunk, rows are taken in cache blocks (about kCacheBlockBytes of weights); each
//     block is swept by every token tile while it stays in L2, so in prefill a weight byte comes
//     from memory once per call, not once per token tile.
//   - A tile is R rows x T tokens of register accumulators; `Kern::template tile<R, T>` computes
//     it. Edge tiles use smaller R and T (instantiated through the switch below).
// Included by the *_avx2.cc / *_avx512.cc files only; everything has internal linkage so each
// ISA's translation unit keeps its own copy (no ODR mixing of code built for different ISAs).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/internal.h"

// Fully unrolls a loop over tile rows/tokens, so the accumulator arrays live in registers
// (GCC keeps them on the stack otherwise).
#define GLM_UNROLL _Pragma("GCC unroll 16")

namespace glm::kernels::internal {
namespace {

constexpr int64_t kCacheBlockBytes = 192 * 1024;

template <class Kern, int R, int T>
void tile_dispatch_t(const typename Kern::Ctx& c, int64_t r0, int nr, int64_t t0, int nt) {
  if constexpr (T > 1) {
    if (nt < T) return tile_dispatch_t<Kern, R, T - 1>(c, r0, nr, t0, nt);
  }
  if constexpr (R > 1) {
    if (nr < R) return tile_dispatch_t<Kern, R - 1, T>(c, r0, nr, t0, nt);
  }
  Kern::template tile<R, T>(c, r0, t0);
}

// Rows [r_begin, r_end) for all tokens.
template <class Kern, int R, int T>
void run_rows(const typename Kern::Ctx& c, int64_t r_begin, int64_t r_end, int64_t n_tokens,
              int64_t row_bytes) {
  int64_t block = std::max<int64_t>(R, kCacheBlockBytes / std::max<int64_t>(row_bytes, 1));
  block = n_tokens <= T ? (r_end - r_begin) : block / R * R;
  for (int64_t rb = r_begin; rb < r_end; rb += block) {
    const int64_t re = std::min(rb + block, r_end);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += T) {
      const int nt = static_cast<int>(std::min<int64_t>(T, n_tokens - t0));
      for (int64_t r = rb; r < re; r += R) {
        const int nr = static_cast<int>(std::min<int64_t>(R, re - r));
        tile_dispatch_t<Kern, R, T>(c, r, nr, t0, nt);
      }
    }
  }
}

// Runs the whole product on the pool: dynamic chunks of rows.
template <class Kern, int R, int T>
void run_matmul(const typename Kern::Ctx& c, int64_t n_rows, int64_t n_tokens, int64_t row_bytes,
                ThreadPool* pool) {
  const int n_threads = pool != nullptr ? pool->n_threads() : 1;
  // About 8 chunks per thread, at least one cache block when prefilling.
  int64_t chunk = (n_rows + 8 * n_threads - 1) / (8 * n_threads);
  if (n_tokens > T)
    chunk = std::max<int64_t>(chunk, kCacheBlockBytes / std::max<int64_t>(row_bytes, 1));
  chunk = std::max<int64_t>(R, (chunk + R - 1) / R * R);
  claim_chunks(pool, n_rows, chunk, [&](int64_t r0, int64_t r1) {
    run_rows<Kern, R, T>(c, r0, r1, n_tokens, row_bytes);
  });
}

}  // namespace
}  // namespace glm::kernels::internal
