#include "http/worker_pool.h"

namespace glm::http {

WorkerPool::WorkerPool(int n_threads, int max_queue) : max_queue_(max_queue) {
  threads_.reserve(static_cast<size_t>(n_threads));
  for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() { shutdown(); }

bool WorkerPool::try_submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    const int idle = static_cast<int>(threads_.size()) - busy_;
    if (static_cast<int>(queue_.size()) >= idle + max_queue_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int WorkerPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

int WorkerPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

void WorkerPool::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    task();
    task = nullptr;  // its captures die outside the lock
    lock.lock();
    --busy_;
  }
}

}  // namespace glm::http
