// Fixed-size thread pool: one mutex-protected FIFO queue, workers sleeping on a condition.
#include "gpsel/core/internal/thread_pool.h"

#include <algorithm>
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
    tasks_.push_back(Task{std::move(task), nullptr});
  }
  task_available_.notify_one();
}

void ThreadPool::RunTask(Task& task) {
  std::exception_ptr thrown;
  if (task.group == nullptr) {
    task.run();  // plain tasks must not throw (an exception here terminates, as in std::thread)
  } else {
    try {
      task.run();
    } catch (...) {
      thrown = std::current_exception();
    }
  }
  // Destroy the task (and its captures) before the group can see it finished: the waiter may
  // return and unwind the stack those captures refer to right after.
  task.run = nullptr;
  if (task.group == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (thrown && !task.group->failure_) task.group->failure_ = thrown;
    --task.group->pending_;
  }
  // Waiters re-check their own group; there are at most a few groups at a time.
  group_work_changed_.notify_all();
}

void ThreadPool::WorkerLoop() {
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      task_available_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      // Drain the queue before stopping so that every scheduled task runs exactly once.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    RunTask(task);
  }
}

void TaskGroup::Schedule(std::function<void()> task) {
  if (pool_ == nullptr) {
    inline_tasks_.push_back(std::move(task));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(pool_->mutex_);
    ++pending_;
    // Behind the group tasks already queued (so a group's tasks start in order), ahead of
    // plain tasks: with candidates as plain tasks, a running batch is finished before a new
    // candidate starts, which also bounds how many (and their memory) are alive at once.
    auto position = pool_->tasks_.begin();
    while (position != pool_->tasks_.end() && position->group != nullptr) ++position;
    pool_->tasks_.insert(position, ThreadPool::Task{std::move(task), this});
  }
  pool_->task_available_.notify_one();
  pool_->group_work_changed_.notify_all();  // a waiting group may help with it
}

void TaskGroup::Wait() {
  if (pool_ == nullptr) {
    while (!inline_tasks_.empty()) {
      std::function<void()> task = std::move(inline_tasks_.front());
      inline_tasks_.pop_front();
      task();  // an exception propagates at once; the tasks after it are dropped
    }
    return;
  }
  if (std::exception_ptr failure = WaitForTasks()) std::rethrow_exception(failure);
}

std::exception_ptr TaskGroup::WaitForTasks() {
  std::unique_lock<std::mutex> lock(pool_->mutex_);
  while (pending_ > 0) {
    // Our own queued tasks first; when all of ours are running elsewhere, another group's
    // (with only innermost batches as groups — see the header — these are small pieces of a
    // running batch, so no new outer batch starts here); else sleep until one of ours
    // finishes or new group work arrives.
    auto next = std::find_if(pool_->tasks_.begin(), pool_->tasks_.end(),
                             [this](const ThreadPool::Task& t) { return t.group == this; });
    if (next == pool_->tasks_.end() && !pool_->tasks_.empty() &&
        pool_->tasks_.front().group != nullptr) {
      next = pool_->tasks_.begin();
    }
    if (next == pool_->tasks_.end()) {
      pool_->group_work_changed_.wait(lock);
      continue;
    }
    ThreadPool::Task task = std::move(*next);
    pool_->tasks_.erase(next);
    lock.unlock();
    pool_->RunTask(task);
    lock.lock();
  }
  std::exception_ptr failure = std::move(failure_);
  failure_ = nullptr;
  return failure;
}

}  // namespace gpsel
