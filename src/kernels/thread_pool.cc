// ThreadPool: persistent workers released by a generation counter. Each parallel_for publishes
// the job (a pointer to the caller's std::function, no copy), resets the slot counter, bumps the
// generation; then every thread, the caller included, claims slots (chunks) with a CAS until none
// is left, and the caller waits until all slots are done. Workers and the caller spin for a
// short while before sleeping on the atomic (C++20 wait/notify = futex), so back-to-back calls of
// a decode step cost no system call, and an idle pool costs no CPU.
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

// One spin's pause; every kYieldEvery-th (some 2-5 us of spinning) offers the core to another
// runnable thread instead (sched_yield: about a microsecond when there is none). A thread that
// only pauses holds its core until the kernel preempts it: on a machine whose every core runs a
// pool thread, a thread woken meanwhile (the one that sends a token's event to the gateway or a
// client) waited up to 2 ms here, and a stream's tokens came in bursts (docs/performance.md).
constexpr int kYieldEvery = 128;

inline void relax(int spin) {
  if ((spin + 1) % kYieldEvery == 0) {
    std::this_thread::yield();
  } else {
    GLM_CPU_RELAX();
  }
}

}  // namespace

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> workers;
  // The current job. Written by the caller before `claim` is reset (release); read by a thread
  // only after it claimed a slot of that job (acquire), so a late thread never sees a stale job.
  const std::function<void(int64_t, int64_t, int)>* job = nullptr;
  int64_t job_n = 0;
  // (job generation << 32) | next unclaimed slot. Slots are the n_threads chunks of [0, n).
  alignas(64) std::atomic<uint64_t> claim{0};
  alignas(64) std::atomic<int> done{0};  // slots finished in the current job
  alignas(64) std::atomic<uint32_t> generation{0};
  alignas(64) std::atomic<bool> stop{false};

  // Claims and runs slots of job `gen` until none is left. Returns when the job has no
  // unclaimed slot (or is no longer the current one).
  void run_slots(uint32_t gen) {
    uint64_t s = claim.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(s >> 32) != gen) return;
      const uint32_t slot = static_cast<uint32_t>(s);
      if (slot >= static_cast<uint32_t>(n_threads)) return;
      if (!claim.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        continue;
      }
      const auto [begin, end] = chunk(job_n, n_threads, static_cast<int>(slot));
      if (begin < end) (*job)(begin, end, static_cast<int>(slot));
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == n_threads) done.notify_one();
      s = claim.load(std::memory_order_acquire);
    }
  }

  void worker_loop() {
    uint32_t seen = 0;
    for (;;) {
      uint32_t g = generation.load(std::memory_order_acquire);
      for (int spin = 0; g == seen && spin < kSpinIterations; ++spin) {
        relax(spin);
        g = generation.load(std::memory_order_acquire);
      }
      while (g == seen) {
        generation.wait(seen, std::memory_order_acquire);
        g = generation.load(std::memory_order_acquire);
      }
      seen = g;
      if (stop.load(std::memory_order_acquire)) return;
      run_slots(g);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl) {
  if (n_threads <= 0) n_threads = physical_cores();
  impl_->n_threads = std::max(1, n_threads);
  impl_->workers.reserve(impl_->n_threads - 1);
  for (int i = 1; i < impl_->n_threads; ++i) {
    impl_->workers.emplace_back([this] { impl_->worker_loop(); });
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

// The caller claims slots like the workers do: if a worker is slow to wake (a busy machine),
// the caller runs its slot too and never waits for a thread that has not started.
void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  Impl& p = *impl_;
  if (p.n_threads == 1) {
    fn(0, n, 0);
    return;
  }
  const uint32_t gen = p.generation.load(std::memory_order_relaxed) + 1;
  p.job = &fn;
  p.job_n = n;
  p.done.store(0, std::memory_order_relaxed);
  p.claim.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  p.generation.store(gen, std::memory_order_release);
  p.generation.notify_all();
  p.run_slots(gen);
  int d = p.done.load(std::memory_order_acquire);
  for (int spin = 0; d != p.n_threads && spin < kSpinIterations; ++spin) {
    relax(spin);
    d = p.done.load(std::memory_order_acquire);
  }
  while (d != p.n_threads) {
    p.done.wait(d, std::memory_order_acquire);
    d = p.done.load(std::memory_order_acquire);
  }
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
