// A fixed pool of threads for request handlers, with a bounded queue: when every thread is busy
// and the queue is full, try_submit() refuses at once (the server answers 503) instead of
// letting waits grow. Handlers may block (a streaming answer holds its thread for its length).
// Thread-safety: all methods may be called from any thread. Cost: one mutex and one condition
// variable per task.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
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

  // Queues `task`; false (and `task` dropped) when n_threads tasks run and max_queue wait.
  bool try_submit(std::function<void()> task);
  // Runs what is queued, then joins the threads; later submissions are refused.
  void shutdown();

  int busy() const;    // tasks running
  int queued() const;  // tasks waiting for a thread

 private:
  void loop();

  const int max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  int busy_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace glm::http
