#include "kernels/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>

namespace glm::kernels {
namespace {

// Sums 8 independent lanes so the loads are not serialized; the compiler vectorizes the body.
uint64_t read_range(const uint64_t* p, size_t n) {
  uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) a[k] ^= p[i + k];
  }
  for (; i < n; ++i) a[0] ^= p[i];
  return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}

}  // namespace

double measure_read_bandwidth(size_t bytes, int reps, ThreadPool* pool) {
  const size_t n = std::max<size_t>(bytes / 8, 1024);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  // Touch every page (and give the values something to xor).
  for (size_t i = 0; i < n; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  struct Ctx {
    const uint64_t* p;
    size_t n;
    uint64_t sink[64];
  } ctx{buf.get(), n, {}};
  double best = 0;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto body = [c = &ctx](int64_t b, int64_t e, int ti) {
      const size_t per = c->n / 64;
      for (int64_t part = b; part < e; ++part) {
        const size_t lo = static_cast<size_t>(part) * per;
        const size_t hi = part == 63 ? c->n : lo + per;
        c->sink[part] = read_range(c->p + lo, hi - lo);
      }
    };
    if (pool != nullptr) {
      pool->parallel_for(64, body);
    } else {
      body(0, 64, 0);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * 8) / s / 1e9);
  }
  uint64_t x = 0;
  for (uint64_t v : ctx.sink) x ^= v;
  // Keeps the reads observable; the value itself means nothing.
  asm volatile("" : : "r"(x));
  return best;
}

}  // namespace glm::kernels
