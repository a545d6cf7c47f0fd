// ThreadPool: a fixed set of worker threads that run one parallel-for at a time.
// parallel_for(n, fn) calls fn(begin, end, thread_index) over disjoint ranges covering [0, n)
// and returns when all are done; the calling thread takes part. Not reentrant; one caller at a
// time (the engine's loop). No allocation per call.
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
  // fn(begin, end, thread_index); ranges are contiguous chunks of [0, n).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  struct Impl;
  Impl* impl_;
};

// Physical cores of this machine (falls back to logical CPUs).
int physical_cores();

}  // namespace glm::kernels
