// BoundedWorkerPool: a fixed set of threads for CPU-heavy RPC work (scoring, search, predict)
// with a bounded admission queue. When the queue is full, TrySubmit refuses at once, so the
// service answers RESOURCE_EXHAUSTED instead of letting latency grow without bound. Jobs do not
// run here (server/jobs/job_runner.h has its own threads). Tested by tests/server/service/worker_pool_test.cc.
//
//   gpsel::BoundedWorkerPool pool(/*num_threads=*/4, /*max_queued=*/16);
//   if (!pool.TrySubmit([] { Work(); })) return ResourceExhausted();
#ifndef GPSEL_JOBS_WORKER_POOL_H_
#define GPSEL_JOBS_WORKER_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpsel {

class BoundedWorkerPool {
 public:
  // num_threads ≥ 1; max_queued ≥ 0 tasks may wait beyond the ones running.
  BoundedWorkerPool(int num_threads, int max_queued);
  // Runs every accepted task, then joins.
  ~BoundedWorkerPool();
  BoundedWorkerPool(const BoundedWorkerPool&) = delete;
  BoundedWorkerPool& operator=(const BoundedWorkerPool&) = delete;

  // False (and the task is dropped) when all threads are busy and the queue is full, or the
  // pool is shutting down.
  bool TrySubmit(std::function<void()> task);

  // Called (outside the pool's lock) whenever the number of queued or running tasks changed,
  // e.g. to update gauges. Set before submitting work.
  void SetObserver(std::function<void()> observer) { observer_ = std::move(observer); }

  int num_threads() const { return static_cast<int>(threads_.size()); }
  int max_queued() const { return max_queued_; }
  int queued() const;  // waiting, not yet running
  int busy() const;    // running now

 private:
  void WorkerLoop();

  const int max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable task_available_;
  std::deque<std::function<void()>> tasks_;
  int busy_ = 0;
  bool stopping_ = false;
  std::function<void()> observer_;
  std::vector<std::thread> threads_;
};

}  // namespace gpsel

#endif  // GPSEL_JOBS_WORKER_POOL_H_
