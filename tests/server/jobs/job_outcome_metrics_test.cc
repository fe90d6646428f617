// gpsel_jobs_finished_total counts a job's outcome once, when the store has it (issue 33 item 6):
// a result the store refuses — here a SQLite file whose write lock another process (the sqlite3
// shell) holds longer than the store's busy timeout, as an outage would — is counted as
// not_stored, and the job, claimed again after its lease, is counted as succeeded once.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gpsel/server/jobs/job_runner.h"
#include "gpsel/server/metrics/metrics.h"
#include "gpsel/server/store/job_store.h"
#include "gtest/gtest.h"
#include "tests/server/store/job_store_test_util.h"
#include "tests/test_timeout.h"

namespace gpsel {
namespace {

using ::testing::HasSubstr;

std::string Scrape(ServiceMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.registry()->Collect());
}

TEST(JobOutcomeMetricsTest, AResultTheStoreRefusedIsNotCountedAsSucceeded) {
  if (std::system("command -v sqlite3 >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "the sqlite3 shell is not installed";
  }
  ::gpsel::testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string file = dir.path() + "/jobs.db";
  JobStoreOptions store_options;
  store_options.sqlite_busy_timeout = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore("sqlite:" + file, store_options);
  ASSERT_TRUE(store.ok()) << store.status();

  // The first attempt makes another process take the write lock for 2 s just before it
  // returns its result; the second returns at once.
  std::atomic<int> attempts{0};
  auto kinds = std::make_shared<JobKindRegistry>();
  JobKind kind;
  kind.name = "blocked";
  kind.execute = [&](std::string_view, const ProgressCallback&,
                     JobTasks&) -> absl::StatusOr<std::string> {
    if (attempts.fetch_add(1) == 0) {
      const std::string lock = absl::StrCat(
          "(echo 'BEGIN IMMEDIATE;'; echo 'SELECT 1;'; sleep 2; echo 'COMMIT;') | sqlite3 ", file,
          " >/dev/null 2>&1 &");
      EXPECT_EQ(std::system(lock.c_str()), 0);
      absl::SleepFor(absl::Milliseconds(500));  // the shell has started and holds the lock
    }
    return std::string("result");
  };
  ASSERT_TRUE(kinds->Register(std::move(kind)).ok());

  ServiceMetrics metrics("test");
  JobRunnerOptions options;
  options.workers = 1;
  options.lease = absl::Seconds(1);
  options.poll_interval = absl::Milliseconds(100);
  absl::StatusOr<SubmitResult> submitted = (*store)->Submit("blocked", "request", "", 0);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  {
    JobRunner runner(store->get(), kinds, options, &metrics);
    runner.Start();
    const absl::Time deadline = absl::Now() + ::gpsel::testing::Scaled(absl::Seconds(30));
    absl::StatusOr<Job> job = (*store)->GetJob(submitted->job.id);
    while (absl::Now() < deadline && (!job.ok() || job->state != JobState::kSucceeded)) {
      absl::SleepFor(absl::Milliseconds(100));
      job = (*store)->GetJob(submitted->job.id);
    }
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(job->state, JobState::kSucceeded);
    EXPECT_EQ(job->result, "result");
    EXPECT_EQ(job->attempts, 2);
    runner.Stop();
  }
  EXPECT_EQ(attempts.load(), 2);
  const std::string scraped = Scrape(metrics);
  EXPECT_THAT(scraped,
              HasSubstr("gpsel_jobs_finished_total{kind=\"blocked\",outcome=\"succeeded\"} 1\n"));
  EXPECT_THAT(scraped,
              HasSubstr("gpsel_jobs_finished_total{kind=\"blocked\",outcome=\"not_stored\"} 1\n"));
}

}  // namespace
}  // namespace gpsel
