// A small fixed-size thread pool for coarse, independent tasks (kernel-search candidates).
//
// Tasks run in FIFO order on `num_threads` workers; the destructor finishes every task already
// scheduled and joins the workers. Tasks must not throw. Whoever needs to know when a batch is
// done waits on its own condition (see WaitGroup below) — the pool itself has no notion of
// batches, so several independent batches may share one pool.
//
//   gpsel::ThreadPool pool(4);
//   gpsel::WaitGroup done;
//   for (int i = 0; i < 10; ++i) {
//     done.Add(1);
//     pool.Schedule([&, i] { Work(i); done.Done(); });
//   }
//   done.Wait();
#ifndef GPSEL_CORE_THREAD_POOL_H_
#define GPSEL_CORE_THREAD_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpsel {

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
  void WorkerLoop();

  std::mutex mutex_;
  std::condition_variable task_available_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Counts outstanding work; Wait() blocks until the count returns to zero.
class WaitGroup {
 public:
  void Add(int count);
  void Done();
  void Wait();

 private:
  std::mutex mutex_;
  std::condition_variable zero_;
  int outstanding_ = 0;
};

}  // namespace gpsel

#endif  // GPSEL_CORE_THREAD_POOL_H_
