// Fixed-size thread pool: one mutex-protected FIFO queue, workers sleeping on a condition.
#include "core/thread_pool.h"

#include <utility>

namespace gpsel {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads < 1) num_threads = 1;
  workers_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  task_available_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::Schedule(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  task_available_.notify_one();
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      task_available_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      // Drain the queue before stopping so that every scheduled task runs exactly once.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void WaitGroup::Add(int count) {
  std::lock_guard<std::mutex> lock(mutex_);
  outstanding_ += count;
}

void WaitGroup::Done() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--outstanding_ <= 0) zero_.notify_all();
}

void WaitGroup::Wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  zero_.wait(lock, [this] { return outstanding_ <= 0; });
}

}  // namespace gpsel
