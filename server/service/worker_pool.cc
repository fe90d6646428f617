// BoundedWorkerPool; see worker_pool.h.
#include "gpsel/server/service/worker_pool.h"

#include <algorithm>
#include <utility>

namespace gpsel {

BoundedWorkerPool::BoundedWorkerPool(int num_threads, int max_queued)
    : max_queued_(std::max(0, max_queued)) {
  num_threads = std::max(1, num_threads);
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

BoundedWorkerPool::~BoundedWorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  task_available_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool BoundedWorkerPool::TrySubmit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    // Capacity = running + waiting: every thread busy and max_queued tasks waiting is full.
    if (busy_ + static_cast<int>(tasks_.size()) >= num_threads() + max_queued_) return false;
    tasks_.push_back(std::move(task));
  }
  task_available_.notify_one();
  if (observer_) observer_();
  return true;
}

int BoundedWorkerPool::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(tasks_.size());
}

int BoundedWorkerPool::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return busy_;
}

void BoundedWorkerPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      task_available_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++busy_;
    }
    if (observer_) observer_();
    task();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_;
    }
    if (observer_) observer_();
  }
}

}  // namespace gpsel
