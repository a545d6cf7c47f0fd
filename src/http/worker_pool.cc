#include "http/worker_pool.h"

#include <algorithm>

namespace glm::http {

WorkerPool::WorkerPool(int n_threads, int max_queue) : max_queue_(max_queue) {
  workers_.reserve(static_cast<size_t>(n_threads));
  for (int i = 0; i < n_threads; ++i) {
    Worker& w = *workers_.emplace_back(std::make_unique<Worker>());
    w.thread = std::thread([this, &w] { loop(w); });
  }
}

WorkerPool::~WorkerPool() { shutdown(); }

bool WorkerPool::try_submit(std::function<void()> task) {
  Worker* w = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    if (!idle_.empty()) {
      w = idle_.back();
      idle_.pop_back();
      w->task = std::move(task);
      w->has_task = true;
      ++busy_;
    } else {
      // A thread that has not started yet is neither idle nor busy: it takes from the queue
      // first thing, so it counts as room here.
      const int waiting_room =
          static_cast<int>(workers_.size()) - busy_ - static_cast<int>(idle_.size());
      if (static_cast<int>(queue_.size()) >= waiting_room + max_queue_) return false;
      queue_.push_back(std::move(task));
    }
  }
  if (w != nullptr) w->wake.notify_one();
  return true;
}

void WorkerPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  for (auto& w : workers_) w->wake.notify_one();
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
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

void WorkerPool::loop(Worker& w) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    std::function<void()> task;
    if (w.has_task) {  // counted busy by try_submit
      task = std::move(w.task);
      w.has_task = false;
    } else if (!queue_.empty()) {
      task = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
    } else if (stopping_) {
      return;  // nothing left
    } else {
      idle_.push_back(&w);
      w.wake.wait(lock, [&] { return w.has_task || stopping_; });
      if (!w.has_task) idle_.erase(std::find(idle_.begin(), idle_.end(), &w));
      continue;
    }
    lock.unlock();
    task();
    task = nullptr;  // its captures die outside the lock
    lock.lock();
    --busy_;
  }
}

}  // namespace glm::http
