// A fixed pool of threads for request handlers, with a bounded queue: when every thread is busy
// and the queue is full, try_submit() refuses at once (the server answers 503) instead of
// letting waits grow. Handlers may block (a streaming answer holds its thread for its length).
// A task goes to the thread that went idle last: its stack, its allocator's caches and its
// thread-locals are warm. (One condition variable shared by all threads wakes them in turn, so
// with 256 threads every request of a lone client ran on a thread untouched since 255 requests
// ago: 0.2-0.3 ms more to its first token, on this project's 2-vCPU VM.)
// Thread-safety: all methods may be called from any thread. Cost: one mutex and one condition
// variable wake per task.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace glm::http {

class WorkerPool {
 public:
  WorkerPool(int n_threads, int max_queue);
  ~WorkerPool();  // shutdown()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Hands `task` to the thread that went idle last, or queues it when none is idle; false (and
  // `task` dropped) when n_threads tasks run and max_queue wait.
  bool try_submit(std::function<void()> task);
  // Runs what is queued, then joins the threads; later submissions are refused.
  void shutdown();

  int busy() const;    // tasks running (a thread counted here is not idle, and the reverse)
  int queued() const;  // tasks waiting for a thread

 private:
  struct Worker {
    std::condition_variable wake;
    std::function<void()> task;  // handed over by try_submit while the thread was idle
    bool has_task = false;
    std::thread thread;  // runs loop(*this)
  };
  void loop(Worker& w);

  const int max_queue_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<Worker*> idle_;                // the last one went idle last
  std::deque<std::function<void()>> queue_;  // tasks that found no idle thread, oldest first
  int busy_ = 0;
  bool stopping_ = false;
};

}  // namespace glm::http
