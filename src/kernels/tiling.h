// Internal to kernels/: how the ISA matmul variants cut y[n_tokens, n_rows] into work, written
// once for every ISA (the CTranslate2 way: the loops and the threading here, the register tiles
// in each *_avx2.cc / *_avx512.cc file).
//   - Threads take chunks of rows from a shared atomic counter (dynamic: all finish together even
//     when a core is busy with something else), each chunk a multiple of the tile height.
//   - Within a chunk, rows are taken in cache blocks (about kCacheBlockBytes of weights); each
//     block is swept by every token tile while it stays in L2, so in prefill a weight byte comes
//     from memory once per call, not once per token tile.
//   - A tile is R rows x T tokens of register accumulators; `Kern::template tile<R, T>` computes
//     it. Edge tiles use smaller R and T (instantiated through the switch below).
//   - A "row" is whatever unit the kernel tiles: a matrix row (row-major kernels) or a group of
//     16 interleaved rows (packed.h layouts, packed_tiling.h); row_bytes is that unit's size.
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

// Rows per chunk that the pool's threads claim, for tiles of R rows x T tokens: about 8 chunks
// per thread, at least one cache block when more than one token tile sweeps the rows (prefill),
// a multiple of R.
template <int R, int T>
int64_t chunk_rows(int64_t n_rows, int64_t n_tokens, int64_t row_bytes, ThreadPool* pool) {
  const int n_threads = pool != nullptr ? pool->n_threads() : 1;
  int64_t chunk = (n_rows + 8 * n_threads - 1) / (8 * n_threads);
  if (n_tokens > T)
    chunk = std::max<int64_t>(chunk, kCacheBlockBytes / std::max<int64_t>(row_bytes, 1));
  return std::max<int64_t>(R, (chunk + R - 1) / R * R);
}

// Runs the whole product on the pool: dynamic chunks of rows.
template <class Kern, int R, int T>
void run_matmul(const typename Kern::Ctx& c, int64_t n_rows, int64_t n_tokens, int64_t row_bytes,
                ThreadPool* pool) {
  const int64_t chunk = chunk_rows<R, T>(n_rows, n_tokens, row_bytes, pool);
  claim_chunks(pool, n_rows, chunk, [&](int64_t r0, int64_t r1) {
    run_rows<Kern, R, T>(c, r0, r1, n_tokens, row_bytes);
  });
}

// run_matmul with the kernel's own tile shapes, Kern (besides Ctx and tile<R, T>) giving:
//   kDecodeRows: rows of a decode tile (rows x 1 token, one token in the call);
//   kRows, kTokens: the prefill tile (rows x tokens, two tokens or more).
template <class Kern>
void run_tiles(const typename Kern::Ctx& c, int64_t n_rows, int64_t n_tokens, int64_t row_bytes,
               ThreadPool* pool) {
  if (n_tokens == 1) {
    run_matmul<Kern, Kern::kDecodeRows, 1>(c, n_rows, n_tokens, row_bytes, pool);
  } else {
    run_matmul<Kern, Kern::kRows, Kern::kTokens>(c, n_rows, n_tokens, row_bytes, pool);
  }
}

// Runs fn(t) for every token t of [0, n_tokens) (the integer kernels' activation quantization,
// one token at a time): on the pool's threads from 4 tokens on, else on the caller.
template <typename Fn>
void for_each_token(ThreadPool* pool, int64_t n_tokens, const Fn& fn) {
  // One captured pointer keeps the std::function in its small buffer: no allocation.
  auto run = [f = &fn](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) (*f)(t);
  };
  if (pool != nullptr && n_tokens >= 4) {
    pool->parallel_for(n_tokens, run);
  } else {
    run(0, n_tokens, 0);
  }
}

}  // namespace
}  // namespace glm::kernels::internal
