// JobRunner (jobs/job_runner.h) on a real job store — a SQLite file in a temp directory, and
// PostgreSQL when GPSEL_TEST_POSTGRES_URL is set (scripts/start-test-postgres.sh) — with test
// job kinds: "echo" returns its request, "fail" returns an error, "wait" reports progress until
// the test opens its gate (or the progress callback says stop). Tests wait by polling the store
// with a deadline, not by sleeping.
#include "jobs/job_runner.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobs/job_kind.h"
#include "tests/jobstore/job_store_test_util.h"
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

  std::shared_ptr<JobKindRegistry> MakeKinds(std::shared_ptr<Gate> gate) {
    auto kinds = std::make_shared<JobKindRegistry>();
    JobKind echo;
    echo.name = "echo";
    echo.execute = [this](std::string_view request,
                          const ProgressCallback&) -> absl::StatusOr<std::string> {
      std::lock_guard<std::mutex> lock(echo_mutex_);
      ++echo_calls_[std::string(request)];
      return absl::StrCat("echo:", std::string(request));
    };
    EXPECT_TRUE(kinds->Register(std::move(echo)).ok());

    JobKind fail;
    fail.name = "fail";
    fail.execute = [](std::string_view request,
                      const ProgressCallback&) -> absl::StatusOr<std::string> {
      return absl::FailedPreconditionError(absl::StrCat("bad input: ", std::string(request)));
    };
    EXPECT_TRUE(kinds->Register(std::move(fail)).ok());

    JobKind wait;
    wait.name = "wait";
    wait.execute = [gate](std::string_view,
                          const ProgressCallback& progress) -> absl::StatusOr<std::string> {
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
  std::map<std::string, int> echo_calls_;  // request -> executions
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
  EXPECT_THAT(done.error_message, HasSubstr("echo, fail, wait"));  // the kinds it knows
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

INSTANTIATE_TEST_SUITE_P(Backends, JobRunnerTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName);

}  // namespace
}  // namespace gpsel
