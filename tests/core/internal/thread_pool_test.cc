// Tests of ThreadPool and TaskGroup: every task runs exactly once, nested groups started from
// inside pool tasks finish on a pool of any size (no deadlock), a waiter runs its own group's
// tasks itself, and group tasks go ahead of plain queued work.
#include "gpsel/core/internal/thread_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpsel {
namespace {

TEST(TaskGroupTest, RunsEveryTaskOnceWithANullPoolInOrder) {
  std::vector<int> order;
  TaskGroup group(nullptr);
  for (int i = 0; i < 5; ++i) group.Schedule([&order, i] { order.push_back(i); });
  EXPECT_TRUE(order.empty());  // nothing runs before Wait()
  group.Wait();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

// A search-like shape: outer tasks (candidates) on the pool each start a group (their optimiser
// starts) on the same pool and wait for it, and each inner task starts a third level (the two
// fits of a score). With one worker this deadlocks unless waiters run queued group tasks.
TEST(TaskGroupTest, NestedGroupsOnTheSamePoolFinishForAnyPoolSize) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> runs(6 * 4 * 3);
    TaskGroup outer(&pool);
    for (int a = 0; a < 6; ++a) {
      outer.Schedule([&, a] {
        TaskGroup middle(&pool);
        for (int b = 0; b < 4; ++b) {
          middle.Schedule([&, a, b] {
            TaskGroup inner(&pool);
            for (int c = 0; c < 3; ++c) {
              inner.Schedule([&, a, b, c] { runs[(a * 4 + b) * 3 + c].fetch_add(1); });
            }
            inner.Wait();
          });
        }
        middle.Wait();
      });
    }
    outer.Wait();
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_EQ(runs[i].load(), 1) << "task " << i << " with " << threads << " threads";
    }
  }
}

// With the only worker blocked, the group still completes: its waiter runs the tasks.
TEST(TaskGroupTest, WaiterRunsItsOwnTasksWhenWorkersAreBusy) {
  ThreadPool pool(1);
  std::atomic<bool> release{false};
  std::atomic<bool> blocker_started{false};
  pool.Schedule([&] {
    blocker_started = true;
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!blocker_started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> ran_on(3);
  TaskGroup group(&pool);
  for (int i = 0; i < 3; ++i) {
    group.Schedule([&, i] { ran_on[i] = std::this_thread::get_id(); });
  }
  group.Wait();
  for (const std::thread::id& id : ran_on) EXPECT_EQ(id, caller);
  release = true;
}

// Group tasks are queued ahead of plain tasks, and in their own order among themselves.
TEST(TaskGroupTest, GroupTasksGoAheadOfPlainQueuedTasks) {
  ThreadPool pool(1);
  std::atomic<bool> release{false};
  std::atomic<bool> blocker_started{false};
  std::mutex mutex;
  std::vector<int> order;
  auto record = [&](int value) {
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back(value);
  };
  pool.Schedule([&] {
    blocker_started = true;
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!blocker_started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  pool.Schedule([&] { record(100); });  // plain, queued first
  std::atomic<bool> group_done{false};
  std::thread owner([&] {
    TaskGroup group(&pool);
    group.Schedule([&] { record(1); });
    group.Schedule([&] { record(2); });
    // Let the worker, not this thread, take them: wait until it is free, then let it run.
    release = true;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (order.size() >= 3) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    group.Wait();
    group_done = true;
  });
  owner.join();
  EXPECT_TRUE(group_done.load());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 100}));
}

// A group task that throws (std::bad_alloc from a fit too large for the machine) must not
// terminate the process: Wait() rethrows it in the waiter after the other tasks have finished,
// and the pool stays usable.
TEST(TaskGroupTest, WaitRethrowsAGroupTasksExceptionAfterEveryTaskFinished) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::atomic<int> finished{0};
    TaskGroup group(&pool);
    for (int i = 0; i < 8; ++i) {
      group.Schedule([&finished, i] {
        if (i == 2) throw std::bad_alloc();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++finished;
      });
    }
    EXPECT_THROW(group.Wait(), std::bad_alloc) << threads << " threads";
    EXPECT_EQ(finished.load(), 7);
    // The pool goes on, and the group's failure was consumed by the Wait() that threw.
    TaskGroup again(&pool);
    again.Schedule([&finished] { ++finished; });
    EXPECT_NO_THROW(again.Wait());
    EXPECT_EQ(finished.load(), 8);
  }
}

}  // namespace
}  // namespace gpsel
