// JobRunner (server/jobs/job_runner.h) on a real job store — a SQLite file in a temp directory, and
// PostgreSQL when GPSEL_TEST_POSTGRES_URL is set (scripts/start-test-postgres.sh) — with test
// job kinds: "echo" returns its request, "slow" the same after 100 ms, "fail" returns an error,
// "wait" reports progress until the test opens its gate (or the progress callback says stop),
// and "split" ("KIND|a,b,c[|LOCAL]") runs a, b and c as tasks of kind KIND (LOCAL of them at
// once on the job's worker) and joins their results.
// Tests wait by polling the store with a deadline, not by sleeping.
#include "gpsel/server/jobs/job_runner.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gpsel/server/jobs/job_kind.h"
#include "gtest/gtest.h"
#include "tests/server/store/job_store_test_util.h"
#include "tests/test_timeout.h"

namespace gpsel {
namespace {

using ::gpsel::testing::Backend;
using ::gpsel::testing::BackendName;
using ::gpsel::testing::MakeTestDatabase;
using ::gpsel::testing::TestDatabase;
using ::testing::HasSubstr;

// What the "wait" kind's executor does and saw; shared with the executor.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> entered{0};  // executor calls so far
  absl::Status stopped_with;    // the non-OK status the progress callback returned, if any

  void Open() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      open = true;
    }
    cv.notify_all();
  }
  absl::Status StoppedWith() {
    std::lock_guard<std::mutex> lock(mutex);
    return stopped_with;
  }
};

constexpr double kWaitFraction = 0.25;
constexpr char kWaitMessage[] = "waiting for the gate";

class JobRunnerTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TestDatabase>> db = MakeTestDatabase(GetParam());
    ASSERT_TRUE(db.ok()) << db.status();
    if (*db == nullptr) GTEST_SKIP() << ::gpsel::testing::kPostgresSkipMessage;
    db_ = *std::move(db);
    store_ = Open();
    ASSERT_NE(store_, nullptr);
    kinds_ = MakeKinds(gate_);
  }

  // A new store instance on the test database: another "server" sharing the queue.
  std::unique_ptr<JobStore> Open() {
    absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(db_->url());
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // `runner` tags the echo executions of the runners given these kinds.
  std::shared_ptr<JobKindRegistry> MakeKinds(std::shared_ptr<Gate> gate,
                                             const std::string& runner = "a") {
    auto kinds = std::make_shared<JobKindRegistry>();
    for (const char* name : {"echo", "slow"}) {
      JobKind echo;
      echo.name = name;
      const bool slow = std::string(name) == "slow";
      echo.execute = [this, slow, runner](std::string_view request, const ProgressCallback&,
                                          JobTasks&) -> absl::StatusOr<std::string> {
        if (slow) absl::SleepFor(absl::Milliseconds(100));
        std::lock_guard<std::mutex> lock(echo_mutex_);
        ++echo_calls_[std::string(request)];
        ++echo_runners_[runner];
        return absl::StrCat("echo:", std::string(request));
      };
      EXPECT_TRUE(kinds->Register(std::move(echo)).ok());
    }

    JobKind split;
    split.name = "split";
    split.execute = [](std::string_view request, const ProgressCallback& progress,
                       JobTasks& tasks) -> absl::StatusOr<std::string> {
      // "KIND|a,b,c" or "KIND|a,b,c|LOCAL" (tasks this worker may run at once; default 1).
      const std::vector<std::string> fields =
          absl::StrSplit(absl::string_view(request.data(), request.size()), '|');
      int local = 1;
      if (fields.size() > 2 && !absl::SimpleAtoi(fields[2], &local)) local = 0;
      absl::StatusOr<std::vector<std::string>> results =
          tasks.Run("parts", fields.at(0), absl::StrSplit(fields.at(1), ','), local, progress);
      if (!results.ok()) return results.status();
      return absl::StrJoin(*results, "+");
    };
    EXPECT_TRUE(kinds->Register(std::move(split)).ok());

    JobKind fail;
    fail.name = "fail";
    fail.execute = [](std::string_view request, const ProgressCallback&,
                      JobTasks&) -> absl::StatusOr<std::string> {
      return absl::FailedPreconditionError(absl::StrCat("bad input: ", std::string(request)));
    };
    EXPECT_TRUE(kinds->Register(std::move(fail)).ok());

    JobKind wait;
    wait.name = "wait";
    wait.execute = [gate](std::string_view, const ProgressCallback& progress,
                          JobTasks&) -> absl::StatusOr<std::string> {
      gate->entered.fetch_add(1);
      Progress p;
      p.stage = "waiting";
      p.fraction = kWaitFraction;
      p.message = kWaitMessage;
      for (;;) {
        absl::Status status = progress(p);
        std::unique_lock<std::mutex> lock(gate->mutex);
        if (!status.ok()) {
          gate->stopped_with = status;
          return status;
        }
        if (gate->cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return gate->open; })) {
          return std::string("opened");
        }
      }
    };
    EXPECT_TRUE(kinds->Register(std::move(wait)).ok());
    return kinds;
  }

  std::unique_ptr<JobRunner> StartRunner(JobStore* store, std::shared_ptr<JobKindRegistry> kinds,
                                         const std::string& prefix, int workers = 1) {
    JobRunnerOptions options;
    options.workers = workers;
    options.lease = kLease;  // heartbeats (progress, cancellation) every lease/3
    options.poll_interval = absl::Milliseconds(20);
    options.worker_prefix = prefix;
    auto runner = std::make_unique<JobRunner>(store, std::move(kinds), options, nullptr);
    runner->Start();
    return runner;
  }

  Job Submit(const std::string& kind, const std::string& request) {
    absl::StatusOr<SubmitResult> submitted = store_->Submit(kind, request, "", 0);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    return submitted.ok() ? submitted->job : Job{};
  }

  // Polls the store until `done(job)` holds; fails the test (and returns the last read) after
  // `timeout` (scaled in slow builds, tests/test_timeout.h).
  Job WaitFor(const std::string& id, const std::function<bool(const Job&)>& done,
              const std::string& what,
              absl::Duration timeout = testing::Scaled(absl::Seconds(30))) {
    const absl::Time deadline = absl::Now() + timeout;
    Job last;
    for (;;) {
      absl::StatusOr<Job> job = store_->GetJob(id);
      if (job.ok()) {
        last = *job;
        if (done(last)) return last;
      }
      if (absl::Now() > deadline) {
        ADD_FAILURE() << "timed out waiting for job " << id << " to be " << what << "; state "
                      << JobStateName(last.state) << ", error " << last.error_message;
        return last;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  Job MustGetJob(const std::string& id) {
    absl::StatusOr<Job> job = store_->GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job{};
  }
  Job WaitForTerminal(const std::string& id) {
    return WaitFor(id, [](const Job& j) { return IsTerminal(j.state); }, "terminal");
  }
  // RUNNING, and the "wait" executor has been entered `calls` times.
  Job WaitForWaiting(const std::string& id, int calls = 1) {
    return WaitFor(
        id,
        [&](const Job& j) { return j.state == JobState::kRunning && gate_->entered >= calls; },
        "running in the wait executor");
  }

  static constexpr absl::Duration kLease = absl::Milliseconds(1500);

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<JobStore> store_;
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::shared_ptr<JobKindRegistry> kinds_;
  std::mutex echo_mutex_;
  std::map<std::string, int> echo_calls_;    // request -> executions
  std::map<std::string, int> echo_runners_;  // runner tag -> executions
};

TEST_P(JobRunnerTest, EachSubmittedJobRunsOnceAndItsResultIsPublished) {
  std::unique_ptr<JobRunner> runner = StartRunner(store_.get(), kinds_, "runner-a", 2);
  std::vector<Job> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(Submit("echo", absl::StrCat("hello-", i)));
    runner->Wake();
  }
  for (int i = 0; i < 6; ++i) {
    const Job done = WaitForTerminal(jobs[i].id);
    EXPECT_EQ(done.state, JobState::kSucceeded) << done.error_message;
    EXPECT_EQ(done.result, absl::StrCat("echo:hello-", i));
    EXPECT_EQ(done.attempts, 1);
    EXPECT_EQ(done.error_code, 0);
    EXPECT_EQ(done.lease_owner, "");
  }
  runner->Stop();  // joins the workers: nothing can still be running
  std::lock_guard<std::mutex> lock(echo_mutex_);
  ASSERT_EQ(echo_calls_.size(), 6u);
  for (const auto& [request, calls] : echo_calls_) EXPECT_EQ(calls, 1) << request;
}

TEST_P(JobRunnerTest, AFailingExecutorsErrorIsStored) {
  std::unique_ptr<JobRunner> runner = StartRunner(store_.get(), kinds_, "runner-a");
  const Job job = Submit("fail", "x");
  runner->Wake();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_EQ(done.error_code, static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(done.error_message, "bad input: x");
  EXPECT_EQ(done.result, "");
  EXPECT_EQ(done.attempts, 1);  // a failure is final, not retried
}

TEST_P(JobRunnerTest, AJobOfAnUnknownKindFailsWithAClearError) {
  std::unique_ptr<JobRunner> runner = StartRunner(store_.get(), kinds_, "runner-a");
  const Job job = Submit("mystery", "payload");
  runner->Wake();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_EQ(done.error_code, static_cast<int>(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(done.error_message, HasSubstr("job kind 'mystery' is not registered"));
  EXPECT_THAT(done.error_message, HasSubstr("echo, fail, slow, split, wait"));  // known kinds
  EXPECT_EQ(done.attempts, 1);
  // The runner goes on with known kinds.
  const Job next = Submit("echo", "after");
  runner->Wake();
  EXPECT_EQ(WaitForTerminal(next.id).state, JobState::kSucceeded);
}

TEST_P(JobRunnerTest, CancellationThroughTheStoreStopsARunningExecutorPromptly) {
  std::unique_ptr<JobRunner> runner = StartRunner(store_.get(), kinds_, "runner-a");
  const Job job = Submit("wait", "");
  runner->Wake();
  WaitForWaiting(job.id);
  const absl::Time asked = absl::Now();
  absl::StatusOr<Job> cancelling = store_->RequestCancel(job.id);
  ASSERT_TRUE(cancelling.ok()) << cancelling.status();
  EXPECT_EQ(cancelling->state, JobState::kRunning);
  EXPECT_TRUE(cancelling->cancel_requested);
  const Job done = WaitForTerminal(job.id);
  // The next heartbeat (every lease/3) brings the request; the executor stops at its next
  // progress call. Allow generous slack for a loaded machine.
  EXPECT_LT(absl::Now() - asked, kLease * 4);
  EXPECT_EQ(done.state, JobState::kCancelled);
  EXPECT_EQ(done.error_code, static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_EQ(gate_->StoppedWith().code(), absl::StatusCode::kCancelled) << gate_->StoppedWith();
  EXPECT_EQ(gate_->entered.load(), 1);
}

TEST_P(JobRunnerTest, StopReleasesTheLeaseAndAnotherRunnerFinishesTheJob) {
  std::unique_ptr<JobRunner> first = StartRunner(store_.get(), kinds_, "runner-a");
  const Job job = Submit("wait", "");
  first->Wake();
  const Job running = WaitForWaiting(job.id);
  EXPECT_EQ(running.lease_owner, "runner-a-w0");
  EXPECT_EQ(first->running(), 1);

  first->Stop();  // returns once the executor has stopped and the lease is released
  EXPECT_EQ(first->running(), 0);
  EXPECT_EQ(gate_->StoppedWith().code(), absl::StatusCode::kUnavailable) << gate_->StoppedWith();
  absl::StatusOr<Job> released = store_->GetJob(job.id);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(released->state, JobState::kQueued);  // at once: no lease expiry to wait for
  EXPECT_EQ(released->lease_owner, "");
  EXPECT_EQ(released->attempts, 1);
  EXPECT_EQ(released->result, "");

  // Another server (its own store instance) takes the job over and finishes it.
  std::unique_ptr<JobStore> other_store = Open();
  ASSERT_NE(other_store, nullptr);
  gate_->Open();
  std::unique_ptr<JobRunner> second = StartRunner(other_store.get(), kinds_, "runner-b");
  second->Wake();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.error_message;
  EXPECT_EQ(done.result, "opened");
  EXPECT_EQ(done.attempts, 2);
  EXPECT_EQ(gate_->entered.load(), 2);
  second->Stop();
}

TEST_P(JobRunnerTest, ProgressReportedByTheExecutorReachesTheStore) {
  std::unique_ptr<JobRunner> runner = StartRunner(store_.get(), kinds_, "runner-a");
  const Job job = Submit("wait", "");
  runner->Wake();
  const Job reported = WaitFor(
      job.id,
      [](const Job& j) {
        return j.state == JobState::kRunning && j.progress == kWaitFraction &&
               j.progress_message == kWaitMessage;
      },
      "reporting its progress");
  EXPECT_EQ(reported.progress, kWaitFraction);
  EXPECT_EQ(reported.progress_message, kWaitMessage);
  gate_->Open();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.error_message;
  EXPECT_EQ(done.result, "opened");
  EXPECT_TRUE(gate_->StoppedWith().ok()) << gate_->StoppedWith();
}

// ---- Jobs split into tasks (JobTasks) ----

TEST_P(JobRunnerTest, ASplitJobsTasksRunOnceEachAcrossRunnersAndItsResultIsInOrder) {
  std::unique_ptr<JobStore> other_store = Open();
  ASSERT_NE(other_store, nullptr);
  std::unique_ptr<JobRunner> a = StartRunner(store_.get(), kinds_, "runner-a");
  std::unique_ptr<JobRunner> b = StartRunner(other_store.get(), MakeKinds(gate_, "b"), "runner-b");
  const Job job = Submit("split", "slow|t0,t1,t2,t3,t4,t5");
  a->Wake();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.error_message;
  EXPECT_EQ(done.result, "echo:t0+echo:t1+echo:t2+echo:t3+echo:t4+echo:t5");
  EXPECT_EQ(done.attempts, 1);
  a->Stop();
  b->Stop();
  absl::StatusOr<std::vector<Job>> tasks = store_->ListTasks(job.id, "parts", false);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 6u);
  for (const Job& task : *tasks) {
    EXPECT_EQ(task.state, JobState::kSucceeded);
    EXPECT_EQ(task.attempts, 1);
  }
  std::lock_guard<std::mutex> lock(echo_mutex_);
  ASSERT_EQ(echo_calls_.size(), 6u);
  for (const auto& [request, calls] : echo_calls_) EXPECT_EQ(calls, 1) << request;
  // The job's own runner helped, and the idle one took tasks too.
  EXPECT_GT(echo_runners_["a"], 0);
  EXPECT_GT(echo_runners_["b"], 0);
}

TEST_P(JobRunnerTest, TheJobsWorkerRunsUpToLocalParallelismOfItsTasksAtOnce) {
  std::unique_ptr<JobRunner> runner = StartRunner(store_.get(), kinds_, "runner-a");
  const Job job = Submit("split", "wait|a,b,c|2");
  runner->Wake();
  // The only worker runs two tasks at once (both wait at the closed gate), not a third.
  const Job waiting = WaitFor(
      job.id, [&](const Job& j) { return j.state == JobState::kRunning && gate_->entered >= 2; },
      "running two tasks at once");
  ASSERT_EQ(waiting.state, JobState::kRunning);
  absl::SleepFor(absl::Milliseconds(300));  // several poll intervals: no third task starts
  EXPECT_EQ(gate_->entered.load(), 2);
  absl::StatusOr<std::vector<Job>> tasks = store_->ListTasks(job.id, "parts", false);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  int running = 0;
  for (const Job& task : *tasks) running += task.state == JobState::kRunning;
  EXPECT_EQ(running, 2);
  gate_->Open();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.error_message;
  EXPECT_EQ(done.result, "opened+opened+opened");
  EXPECT_EQ(gate_->entered.load(), 3);
  runner->Stop();
  // Bad parallelism is the job's error.
  std::unique_ptr<JobRunner> again = StartRunner(store_.get(), kinds_, "runner-b");
  const Job bad = Submit("split", "echo|a|0");
  again->Wake();
  const Job failed = WaitForTerminal(bad.id);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_EQ(failed.error_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
}

TEST_P(JobRunnerTest, AFailedTaskFailsItsJobNamingTheTask) {
  std::unique_ptr<JobRunner> runner = StartRunner(store_.get(), kinds_, "runner-a");
  const Job job = Submit("split", "fail|x,y");
  runner->Wake();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_EQ(done.error_code, static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(done.error_message, HasSubstr("task 0 of batch 'parts'"));
  EXPECT_THAT(done.error_message, HasSubstr("bad input: x"));
  EXPECT_EQ(done.attempts, 1);
  runner->Stop();
  // The other task was cancelled, or never started.
  absl::StatusOr<std::vector<Job>> tasks = store_->ListTasks(job.id, "parts", false);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_TRUE(IsTerminal((*tasks)[1].state));
  EXPECT_NE((*tasks)[1].state, JobState::kSucceeded);
}

TEST_P(JobRunnerTest, CancellingASplitJobStopsItsRunningTaskAndCancelsTheRest) {
  std::unique_ptr<JobRunner> runner = StartRunner(store_.get(), kinds_, "runner-a");
  const Job job = Submit("split", "wait|a,b");
  runner->Wake();
  // The job's worker runs task 0 itself, in the wait executor.
  WaitFor(job.id, [&](const Job& j) { return j.state == JobState::kRunning && gate_->entered >= 1; },
          "running its first task");
  const absl::Time asked = absl::Now();
  ASSERT_TRUE(store_->RequestCancel(job.id).ok());
  const Job done = WaitForTerminal(job.id);
  EXPECT_LT(absl::Now() - asked, kLease * 4);
  EXPECT_EQ(done.state, JobState::kCancelled) << done.error_message;
  EXPECT_EQ(done.error_code, static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_EQ(gate_->StoppedWith().code(), absl::StatusCode::kCancelled) << gate_->StoppedWith();
  runner->Stop();
  absl::StatusOr<std::vector<Job>> tasks = store_->ListTasks(job.id, "parts", false);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2u);
  for (const Job& task : *tasks) EXPECT_EQ(task.state, JobState::kCancelled);
  EXPECT_EQ(gate_->entered.load(), 1);  // task 1 never started
}

TEST_P(JobRunnerTest, ARerunSplitJobKeepsItsFinishedTasksAndRunsOnlyTheRest) {
  // A first attempt of the job made its tasks, finished task 0, and its server went away
  // (here: by hand, through the store).
  const Job job = Submit("split", "echo|t0,t1");
  absl::StatusOr<std::optional<Job>> first = store_->Claim("gone-w0", absl::Seconds(60));
  ASSERT_TRUE(first.ok() && first->has_value());
  absl::StatusOr<std::vector<Job>> tasks =
      store_->SubmitTasks(job.id, "parts", "echo", {"t0", "t1"});
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  absl::StatusOr<std::optional<Job>> t0 =
      store_->ClaimTask(job.id, "parts", "gone-w0", absl::Seconds(60));
  ASSERT_TRUE(t0.ok() && t0->has_value());
  ASSERT_TRUE(store_->Complete((*t0)->id, (*t0)->attempts, "done before").ok());
  ASSERT_TRUE(store_->ReleaseLeases("gone-w0").ok());

  std::unique_ptr<JobRunner> runner = StartRunner(store_.get(), kinds_, "runner-a");
  runner->Wake();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.error_message;
  EXPECT_EQ(done.result, "done before+echo:t1");
  EXPECT_EQ(done.attempts, 2);
  runner->Stop();
  std::lock_guard<std::mutex> lock(echo_mutex_);
  EXPECT_EQ(echo_calls_.count("t0"), 0u);
  EXPECT_EQ(echo_calls_["t1"], 1);
}

TEST_P(JobRunnerTest, ATaskAbandonedByItsWorkersFailsItsJobAsInternalNotAsALostLease) {
  // Every worker of task 0 went away twice; with max_attempts 2 the next claim gives it up
  // (FAILED, ABORTED). The job must then fail for good, not read that ABORTED as "my lease is
  // lost" and wait to be re-run.
  JobStoreOptions two_attempts;
  two_attempts.max_attempts = 2;
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(db_->url(), two_attempts);
  ASSERT_TRUE(store.ok()) << store.status();
  const Job job = Submit("split", "echo|t0,t1");
  absl::StatusOr<std::optional<Job>> claimed = (*store)->Claim("gone-w0", absl::Seconds(60));
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  ASSERT_TRUE((*store)->SubmitTasks(job.id, "parts", "echo", {"t0", "t1"}).ok());
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::optional<Job>> t0 =
        (*store)->ClaimTask(job.id, "parts", "gone-w1", absl::Seconds(60));
    ASSERT_TRUE(t0.ok() && t0->has_value() && (*t0)->task_index == 0);
    ASSERT_TRUE((*store)->ReleaseLeases("gone-w1").ok());
  }
  ASSERT_TRUE((*store)->ReleaseLeases("gone-w0").ok());  // the job: attempts 1 of 2

  std::unique_ptr<JobRunner> runner = StartRunner(store->get(), kinds_, "runner-a");
  runner->Wake();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kFailed);
  EXPECT_EQ(done.error_code, static_cast<int>(absl::StatusCode::kInternal)) << done.error_message;
  EXPECT_THAT(done.error_message, HasSubstr("task 0 of batch 'parts'"));
  EXPECT_THAT(done.error_message, HasSubstr("abandoned"));
  EXPECT_EQ(done.attempts, 2);
  runner->Stop();
}

TEST_P(JobRunnerTest, StopWhileAJobRunsItsTasksReleasesThemForAnotherRunner) {
  std::unique_ptr<JobRunner> first = StartRunner(store_.get(), kinds_, "runner-a");
  const Job job = Submit("split", "wait|a,b|2");
  first->Wake();
  WaitFor(job.id, [&](const Job& j) { return j.state == JobState::kRunning && gate_->entered >= 2; },
          "running both tasks");
  first->Stop();
  // The job and both tasks are queued again (released, not cancelled).
  const Job released = MustGetJob(job.id);
  EXPECT_EQ(released.state, JobState::kQueued) << released.error_message;
  absl::StatusOr<std::vector<Job>> tasks = store_->ListTasks(job.id, "parts", false);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  for (const Job& task : *tasks) EXPECT_EQ(task.state, JobState::kQueued) << task.error_message;
  gate_->Open();
  std::unique_ptr<JobRunner> second = StartRunner(store_.get(), kinds_, "runner-b");
  second->Wake();
  const Job done = WaitForTerminal(job.id);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.error_message;
  EXPECT_EQ(done.result, "opened+opened");
  EXPECT_EQ(done.attempts, 2);
  second->Stop();
}

INSTANTIATE_TEST_SUITE_P(Backends, JobRunnerTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName);

}  // namespace
}  // namespace gpsel
