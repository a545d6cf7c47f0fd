// ThreadPool: a fixed set of worker threads that run one parallel-for at a time.
// parallel_for(n, fn) calls fn(begin, end, thread_index) over disjoint ranges covering [0, n)
// and returns when all are done; the calling thread takes part. Not reentrant; one caller at a
// time (the engine's loop). No allocation and no lock per call (fn is not copied: a lambda that
// captures at most 16 bytes, e.g. one pointer, fits std::function's inline buffer).
#pragma once

#include <cstdint>
#include <functional>

namespace glm::kernels {

class ThreadPool {
 public:
  // n_threads total including the caller; 0 = number of physical cores.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const;
  // fn(begin, end, thread_index); ranges are the n_threads() contiguous chunks of [0, n), sizes
  // differing by at most one, thread_index = the chunk's index. Threads claim chunks, so one
  // thread may run several (the caller runs a late worker's chunk rather than wait for it):
  // thread_index is unique among concurrent calls (fine for per-thread scratch), not an OS
  // thread identity.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  struct Impl;
  Impl* impl_;
};

// Physical cores of this machine (falls back to logical CPUs).
int physical_cores();

}  // namespace glm::kernels
