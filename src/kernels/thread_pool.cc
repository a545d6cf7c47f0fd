// ThreadPool: persistent workers released by a generation counter. Each parallel_for publishes
// the job (a pointer to the caller's std::function, no copy), bumps the generation, runs its own
// share, then waits until every worker has decremented `pending_`. Workers and the caller spin
// for a short while before sleeping on the atomic (C++20 wait/notify = futex), so back-to-back
// calls of a decode step cost no system call, and an idle pool costs no CPU.
#include "kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GLM_CPU_RELAX() _mm_pause()
#else
#define GLM_CPU_RELAX() ((void)0)
#endif

namespace glm::kernels {
namespace {

// Spins of ~40-100 ns each before sleeping: a few tens of microseconds, longer than the gap
// between two matmuls of a decode step, much shorter than the gap between two requests.
constexpr int kSpinIterations = 1 << 12;

// Splits [0, n) into `parts` contiguous chunks whose sizes differ by at most one.
std::pair<int64_t, int64_t> chunk(int64_t n, int parts, int i) {
  const int64_t base = n / parts;
  const int64_t rem = n % parts;
  const int64_t begin = i * base + std::min<int64_t>(i, rem);
  return {begin, begin + base + (i < rem ? 1 : 0)};
}

}  // namespace

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> workers;
  // Written by the caller before the generation bump (release), read by workers after (acquire).
  const std::function<void(int64_t, int64_t, int)>* job = nullptr;
  int64_t job_n = 0;
  alignas(64) std::atomic<uint32_t> generation{0};
  alignas(64) std::atomic<int> pending{0};
  alignas(64) std::atomic<bool> stop{false};

  void worker_loop(int index) {
    uint32_t seen = 0;
    for (;;) {
      uint32_t g = generation.load(std::memory_order_acquire);
      for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
        GLM_CPU_RELAX();
        g = generation.load(std::memory_order_acquire);
      }
      while (g == seen) {
        generation.wait(seen, std::memory_order_acquire);
        g = generation.load(std::memory_order_acquire);
      }
      seen = g;
      if (stop.load(std::memory_order_acquire)) return;
      const auto [begin, end] = chunk(job_n, n_threads, index);
      if (begin < end) (*job)(begin, end, index);
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) pending.notify_one();
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl) {
  if (n_threads <= 0) n_threads = physical_cores();
  impl_->n_threads = std::max(1, n_threads);
  impl_->workers.reserve(impl_->n_threads - 1);
  for (int i = 1; i < impl_->n_threads; ++i) {
    impl_->workers.emplace_back([this, i] { impl_->worker_loop(i); });
  }
}

ThreadPool::~ThreadPool() {
  impl_->stop.store(true, std::memory_order_release);
  impl_->generation.fetch_add(1, std::memory_order_acq_rel);
  impl_->generation.notify_all();
  for (std::thread& t : impl_->workers) t.join();
  delete impl_;
}

int ThreadPool::n_threads() const { return impl_->n_threads; }

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  Impl& p = *impl_;
  if (p.n_threads == 1) {
    fn(0, n, 0);
    return;
  }
  p.job = &fn;
  p.job_n = n;
  p.pending.store(p.n_threads - 1, std::memory_order_relaxed);
  p.generation.fetch_add(1, std::memory_order_acq_rel);
  p.generation.notify_all();
  const auto [begin, end] = chunk(n, p.n_threads, 0);
  if (begin < end) fn(begin, end, 0);
  int left = p.pending.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations; ++spin) {
    GLM_CPU_RELAX();
    left = p.pending.load(std::memory_order_acquire);
  }
  while (left != 0) {
    p.pending.wait(left, std::memory_order_acquire);
    left = p.pending.load(std::memory_order_acquire);
  }
  p.job = nullptr;
}

int physical_cores() {
  // Count distinct (package, core) pairs; hyperthread siblings share one.
  std::set<std::pair<std::string, std::string>> cores;
  const unsigned logical = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned cpu = 0; cpu < logical; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core_file(dir + "core_id");
    std::ifstream pkg_file(dir + "physical_package_id");
    std::string core;
    std::string pkg;
    if (!(core_file >> core) || !(pkg_file >> pkg)) return static_cast<int>(logical);
    cores.emplace(pkg, core);
  }
  return cores.empty() ? static_cast<int>(logical) : static_cast<int>(cores.size());
}

}  // namespace glm::kernels
