// A small fixed-size thread pool, and task groups whose waiter helps.
//
// ThreadPool: plain tasks run in FIFO order on `num_threads` workers (group tasks, below, go
// ahead of them); the destructor finishes every task already scheduled and joins the workers.
// Plain tasks must not throw. Several independent batches may share one pool.
//
// TaskGroup: a batch of tasks on a pool (fork-join). A group task may throw (std::bad_alloc
// from a fit too large for the machine): the first exception is kept and Wait() rethrows it in
// the waiting thread once every task of the group has finished, so the request that owns the
// batch can answer RESOURCE_EXHAUSTED instead of the process terminating. Wait() runs the group's own queued tasks in
// the calling thread (then other groups' tasks) and blocks only when none is queued, until the
// ones that workers took have finished. So a task
// running on the pool may itself start a group on the same pool and wait for it without
// deadlocking, and the group's tasks go ahead of older queued work, so idle workers help a
// running batch before starting new ones. This is how a kernel search lets the optimiser starts
// of its last candidates fill workers that would otherwise idle at the end of a step.
//
// Invariant for bounded nesting: only the innermost batches should be groups (the search
// schedules candidates as plain tasks and their optimiser starts as groups). A waiter helps any
// queued group task, so with groups as outer batches too it could start whole outer tasks
// inside its Wait() and nesting would grow with their number; correct, but not intended.
//
//   gpsel::ThreadPool pool(4);
//   gpsel::TaskGroup group(&pool);
//   for (int i = 0; i < 10; ++i) group.Schedule([&, i] { Work(i); });
//   group.Wait();
#ifndef GPSEL_CORE_THREAD_POOL_H_
#define GPSEL_CORE_THREAD_POOL_H_

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpsel {

class TaskGroup;

// Fixed-size thread pool: one mutex-protected queue, workers sleeping on a condition.
class ThreadPool {
 public:
  // num_threads < 1 is treated as 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> task);
  int num_threads() const { return static_cast<int>(workers_.size()); }

 private:
  friend class TaskGroup;
  struct Task {
    std::function<void()> run;
    TaskGroup* group = nullptr;  // null for plain Schedule()
  };
  void WorkerLoop();
  // Runs `task` and, for a group task, counts it done and wakes the group's waiter.
  void RunTask(Task& task);

  std::mutex mutex_;
  std::condition_variable task_available_;
  std::condition_variable group_work_changed_;  // a group task was queued or finished
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// A batch of tasks on a pool; see the file comment. With a null pool, Wait() runs every task
// in the calling thread in scheduling order. Not copyable. The destructor waits for tasks on a
// pool (they may refer to the caller's stack); with a null pool, tasks never waited for (an
// early return) are dropped, never run.
class TaskGroup {
 public:
  explicit TaskGroup(ThreadPool* pool) : pool_(pool) {}
  ~TaskGroup() {
    if (pool_ != nullptr) WaitForTasks();  // an exception not waited for is dropped
  }
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Queues `task` ahead of every task not in a group (tasks must not throw).
  void Schedule(std::function<void()> task);
  // Returns once every task scheduled so far has run; runs queued ones itself meanwhile.
  // Rethrows the first exception a task threw.
  void Wait();

 private:
  friend class ThreadPool;
  // Wait() without the rethrow; returns the first exception a task threw, if any.
  std::exception_ptr WaitForTasks();

  ThreadPool* const pool_;
  int pending_ = 0;  // guarded by pool_->mutex_
  std::exception_ptr failure_;  // guarded by pool_->mutex_
  std::deque<std::function<void()>> inline_tasks_;  // pool_ == nullptr only
};

}  // namespace gpsel

#endif  // GPSEL_CORE_THREAD_POOL_H_
