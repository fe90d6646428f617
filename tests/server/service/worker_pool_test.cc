// BoundedWorkerPool (server/service/worker_pool.h): accepted tasks run; admission is bounded by
// threads + max_queued; busy()/queued() count running and waiting tasks; the observer hears of
// changes; destruction runs every accepted task before it returns.
#include "gpsel/server/service/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/test_timeout.h"

namespace gpsel {
namespace {

// Tasks that block until the test opens the latch.
class Latch {
 public:
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Polls `condition` until it holds or 10 s pass (scaled in slow builds, tests/test_timeout.h).
bool Eventually(const std::function<bool()>& condition) {
  const absl::Time deadline = absl::Now() + testing::Scaled(absl::Seconds(10));
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(BoundedWorkerPoolTest, AcceptedTasksRunOnThePoolsThreads) {
  std::atomic<int> ran{0};
  std::mutex mutex;
  std::set<std::thread::id> threads;
  {
    BoundedWorkerPool pool(3, 10);
    EXPECT_EQ(pool.num_threads(), 3);
    EXPECT_EQ(pool.max_queued(), 10);
    for (int i = 0; i < 13; ++i) {
      ASSERT_TRUE(pool.TrySubmit([&] {
        {
          std::lock_guard<std::mutex> lock(mutex);
          threads.insert(std::this_thread::get_id());
        }
        ran.fetch_add(1);
      }));
    }
    EXPECT_TRUE(Eventually([&] { return ran.load() == 13; }));
    EXPECT_TRUE(Eventually([&] { return pool.busy() == 0 && pool.queued() == 0; }));
  }
  EXPECT_EQ(ran.load(), 13);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);  // never on the caller's thread
  EXPECT_LE(threads.size(), 3u);
}

TEST(BoundedWorkerPoolTest, RejectsWhenEveryThreadIsBusyAndTheQueueIsFull) {
  Latch latch;
  std::atomic<int> ran{0};
  {
    BoundedWorkerPool pool(2, 3);  // capacity: 2 running + 3 waiting
    auto task = [&] {
      latch.Wait();
      ran.fetch_add(1);
    };
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(pool.TrySubmit(task)) << i;
    EXPECT_FALSE(pool.TrySubmit(task));  // full, whether or not the threads have started yet
    EXPECT_TRUE(Eventually([&] { return pool.busy() == 2; }));
    EXPECT_EQ(pool.queued(), 3);
    EXPECT_FALSE(pool.TrySubmit(task));
    latch.Open();
    EXPECT_TRUE(Eventually([&] { return pool.busy() == 0 && pool.queued() == 0; }));
    EXPECT_TRUE(pool.TrySubmit(task));  // room again
  }
  EXPECT_EQ(ran.load(), 6);  // the refused tasks never ran
}

TEST(BoundedWorkerPoolTest, WithoutAQueueOnlyIdleThreadsAccept) {
  Latch latch;
  BoundedWorkerPool pool(2, 0);
  std::atomic<int> started{0};
  auto task = [&] {
    started.fetch_add(1);
    latch.Wait();
  };
  EXPECT_TRUE(pool.TrySubmit(task));
  EXPECT_TRUE(Eventually([&] { return pool.busy() == 1; }));
  EXPECT_TRUE(pool.TrySubmit(task));
  EXPECT_TRUE(Eventually([&] { return pool.busy() == 2 && started.load() == 2; }));
  EXPECT_EQ(pool.queued(), 0);
  EXPECT_FALSE(pool.TrySubmit(task));
  latch.Open();
  EXPECT_TRUE(Eventually([&] { return pool.busy() == 0; }));
  EXPECT_EQ(started.load(), 2);
}

TEST(BoundedWorkerPoolTest, ObserverSeesEveryChangeOfBusyAndQueued) {
  Latch latch;
  std::mutex mutex;
  int max_busy = 0;
  int max_queued = 0;
  int last_busy = -1;
  int last_queued = -1;
  int calls = 0;
  auto pool = std::make_unique<BoundedWorkerPool>(1, 2);
  BoundedWorkerPool* p = pool.get();
  pool->SetObserver([&] {
    std::lock_guard<std::mutex> lock(mutex);
    ++calls;
    last_busy = p->busy();
    last_queued = p->queued();
    max_busy = std::max(max_busy, last_busy);
    max_queued = std::max(max_queued, last_queued);
  });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool->TrySubmit([&] { latch.Wait(); }));
  ASSERT_TRUE(Eventually([&] { return p->busy() == 1 && p->queued() == 2; }));
  latch.Open();
  pool.reset();
  // Per task: once when queued, once when it starts, once when it ends.
  EXPECT_EQ(calls, 9);
  EXPECT_EQ(max_busy, 1);
  EXPECT_GE(max_queued, 2);  // 3 when all were submitted before the thread took the first
  EXPECT_LE(max_queued, 3);
  EXPECT_EQ(last_busy, 0);
  EXPECT_EQ(last_queued, 0);
}

TEST(BoundedWorkerPoolTest, DestructionWaitsForRunningTasksAndDrainsTheQueue) {
  Latch latch;
  std::atomic<int> ran{0};
  auto pool = std::make_unique<BoundedWorkerPool>(1, 4);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(pool->TrySubmit([&] {
      latch.Wait();
      ran.fetch_add(1);
    }));
  }
  ASSERT_TRUE(Eventually([&] { return pool->busy() == 1; }));
  std::atomic<bool> destroyed{false};
  std::thread destroyer([&] {
    pool.reset();
    destroyed.store(true);
  });
  // The destructor cannot return while a task is blocked (a short look; not a synchronisation).
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(destroyed.load());
  EXPECT_EQ(ran.load(), 0);
  latch.Open();
  destroyer.join();
  EXPECT_TRUE(destroyed.load());
  EXPECT_EQ(ran.load(), 5);  // the queued tasks ran too, none dropped
}

}  // namespace
}  // namespace gpsel
