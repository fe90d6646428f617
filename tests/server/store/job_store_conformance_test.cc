// JobStore conformance suite: one set of behaviours, run against every backend on a real
// database — SQLite (a temp file) and PostgreSQL (GPSEL_TEST_POSTGRES_URL; skipped when unset).
// Leases that must expire are 100 ms, so expiry tests stay fast.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpsel/server/store/job_store.h"
#include "gtest/gtest.h"
#include "tests/server/store/job_store_test_util.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::gpsel::testing::Backend;
using ::gpsel::testing::BackendName;
using ::gpsel::testing::MakeTestDatabase;
using ::gpsel::testing::TempDir;
using ::gpsel::testing::TestDatabase;

// Tests that need a lease to expire use kLease and sleep kPastLease; everything else uses
// kLongLease, which never expires during a test — so a slow, loaded machine (ctest -j) cannot
// make a lease lapse where a test assumes it holds.
constexpr absl::Duration kLease = absl::Milliseconds(100);
constexpr absl::Duration kPastLease = absl::Milliseconds(150);
constexpr absl::Duration kLongLease = absl::Seconds(60);
constexpr char kKind[] = "evidence";

// Bytes that a text-only layer would mangle: NUL, high bytes, quotes.
std::string BinaryPayload(int i) {
  std::string bytes = absl::StrCat("req-", i);
  bytes.push_back('\0');
  bytes.append("\xff\xfe'\"\\\x01", 6);
  return bytes;
}

class JobStoreConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    options_.max_attempts = 3;
    ASSERT_TRUE(scratch_.ok());
    absl::StatusOr<std::unique_ptr<TestDatabase>> db = MakeTestDatabase(GetParam());
    ASSERT_TRUE(db.ok()) << db.status();
    if (*db == nullptr) GTEST_SKIP() << ::gpsel::testing::kPostgresSkipMessage;
    db_ = *std::move(db);
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }

  // A new store instance on the test database: another "server" sharing the queue.
  std::unique_ptr<JobStore> Open() {
    absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(db_->url(), options_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  Job MustSubmit(JobStore& store, const std::string& request, const std::string& key = "") {
    absl::StatusOr<SubmitResult> r = store.Submit(kKind, request, key, /*max_queued=*/0);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->job : Job{};
  }

  std::optional<Job> MustClaim(JobStore& store, const std::string& worker,
                               absl::Duration lease = kLongLease) {
    absl::StatusOr<std::optional<Job>> r = store.Claim(worker, lease);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::nullopt;
  }

  Job MustGet(const std::string& id) {
    absl::StatusOr<Job> job = store_->GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job{};
  }

  JobStoreOptions options_;
  TempDir scratch_;
  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<JobStore> store_;
};

TEST_P(JobStoreConformanceTest, SubmitAndGetRoundTripBinaryRequest) {
  const absl::Time before = absl::Now();
  ASSERT_OK_AND_ASSIGN(SubmitResult submitted,
                       store_->Submit(kKind, BinaryPayload(1), "", /*max_queued=*/10));
  EXPECT_TRUE(submitted.created);
  const Job& job = submitted.job;
  EXPECT_EQ(job.id.size(), 26u);
  EXPECT_EQ(job.kind, kKind);
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.request, BinaryPayload(1));
  EXPECT_EQ(job.attempts, 0);
  EXPECT_FALSE(job.cancel_requested);
  EXPECT_EQ(job.idempotency_key, "");
  // PostgreSQL stamps times with its own clock; it runs on this host, so allow a little slack.
  EXPECT_GE(job.created, before - absl::Seconds(1));
  EXPECT_LE(job.created, absl::Now() + absl::Seconds(1));
  EXPECT_EQ(job.started, absl::InfinitePast());
  EXPECT_EQ(job.finished, absl::InfinitePast());

  const Job got = MustGet(job.id);
  EXPECT_EQ(got.id, job.id);
  EXPECT_EQ(got.request, BinaryPayload(1));
  EXPECT_EQ(got.state, JobState::kQueued);
  EXPECT_EQ(got.created, job.created);

  // An empty request is a valid payload too.
  const Job empty = MustSubmit(*store_, "");
  EXPECT_EQ(MustGet(empty.id).request, "");
  EXPECT_NE(empty.id, job.id);
}

TEST_P(JobStoreConformanceTest, UnknownIdIsNotFoundEverywhere) {
  const std::string id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
  EXPECT_STATUS_CODE(store_->GetJob(id), absl::StatusCode::kNotFound);
  EXPECT_STATUS_CODE(store_->Heartbeat(id, 1, 0.5, "", kLease), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Complete(id, 1, "x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Fail(id, 1, absl::InternalError("x")).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->MarkCancelled(id, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_STATUS_CODE(store_->RequestCancel(id), absl::StatusCode::kNotFound);
}

TEST_P(JobStoreConformanceTest, ListJobsPagesInCreationOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(MustSubmit(*store_, BinaryPayload(i)).id);

  std::vector<std::string> listed;
  std::vector<size_t> page_sizes;
  ListJobsRequest request;
  request.page_size = 3;
  for (int pages = 0; pages < 10; ++pages) {
    ASSERT_OK_AND_ASSIGN(ListJobsResponse page, store_->ListJobs(request));
    page_sizes.push_back(page.jobs.size());
    for (const Job& job : page.jobs) {
      listed.push_back(job.id);
      EXPECT_EQ(job.request, BinaryPayload(static_cast<int>(listed.size()) - 1));
    }
    if (page.next_page_token.empty()) break;
    request.page_token = page.next_page_token;
  }
  EXPECT_EQ(listed, ids);
  EXPECT_EQ(page_sizes, (std::vector<size_t>{3, 3, 1}));

  // An exact multiple of the page size ends without an empty extra page.
  request = {};
  request.page_size = 7;
  ASSERT_OK_AND_ASSIGN(ListJobsResponse all, store_->ListJobs(request));
  EXPECT_EQ(all.jobs.size(), 7u);
  EXPECT_EQ(all.next_page_token, "");

  // Jobs added after a token was issued appear on later pages, in order.
  request.page_size = 5;
  ASSERT_OK_AND_ASSIGN(ListJobsResponse first, store_->ListJobs(request));
  const std::string late = MustSubmit(*store_, "late").id;
  request.page_token = first.next_page_token;
  ASSERT_OK_AND_ASSIGN(ListJobsResponse rest, store_->ListJobs(request));
  ASSERT_EQ(rest.jobs.size(), 3u);
  EXPECT_EQ(rest.jobs.back().id, late);
}

TEST_P(JobStoreConformanceTest, ListJobsFiltersByState) {
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(MustSubmit(*store_, BinaryPayload(i)).id);
  const std::optional<Job> a = MustClaim(*store_, "w");
  const std::optional<Job> b = MustClaim(*store_, "w");
  ASSERT_TRUE(a && b);
  ASSERT_OK(store_->Complete(b->id, b->attempts, "done"));

  ListJobsRequest request;
  request.state = JobState::kRunning;
  ASSERT_OK_AND_ASSIGN(ListJobsResponse running, store_->ListJobs(request));
  ASSERT_EQ(running.jobs.size(), 1u);
  EXPECT_EQ(running.jobs[0].id, ids[0]);

  request.state = JobState::kSucceeded;
  ASSERT_OK_AND_ASSIGN(ListJobsResponse succeeded, store_->ListJobs(request));
  ASSERT_EQ(succeeded.jobs.size(), 1u);
  EXPECT_EQ(succeeded.jobs[0].result, "done");

  // Paging within a filter.
  request.state = JobState::kQueued;
  request.page_size = 3;
  ASSERT_OK_AND_ASSIGN(ListJobsResponse queued1, store_->ListJobs(request));
  ASSERT_EQ(queued1.jobs.size(), 3u);
  ASSERT_FALSE(queued1.next_page_token.empty());
  request.page_token = queued1.next_page_token;
  ASSERT_OK_AND_ASSIGN(ListJobsResponse queued2, store_->ListJobs(request));
  ASSERT_EQ(queued2.jobs.size(), 1u);
  EXPECT_EQ(queued2.next_page_token, "");
  EXPECT_EQ(queued1.jobs[0].id, ids[2]);
  EXPECT_EQ(queued2.jobs[0].id, ids[5]);

  request = {};
  request.state = JobState::kCancelled;
  ASSERT_OK_AND_ASSIGN(ListJobsResponse none, store_->ListJobs(request));
  EXPECT_TRUE(none.jobs.empty());
}

TEST_P(JobStoreConformanceTest, ListJobsRejectsBadArguments) {
  MustSubmit(*store_, "x");
  ListJobsRequest request;
  request.page_size = -1;
  EXPECT_STATUS_CODE(store_->ListJobs(request), absl::StatusCode::kInvalidArgument);
  request.page_size = 0;
  for (const char* token : {"garbage", "p1.", "p1.-5", "p1.12x", "12"}) {
    request.page_token = token;
    EXPECT_STATUS_CODE(store_->ListJobs(request), absl::StatusCode::kInvalidArgument) << token;
  }
  // A huge page size is capped, not an error.
  request = {};
  request.page_size = 1 << 30;
  ASSERT_OK_AND_ASSIGN(ListJobsResponse page, store_->ListJobs(request));
  EXPECT_EQ(page.jobs.size(), 1u);
}

TEST_P(JobStoreConformanceTest, SameIdempotencyKeyReturnsSameJob) {
  ASSERT_OK_AND_ASSIGN(SubmitResult first, store_->Submit(kKind, "req-a", "key-1", 0));
  ASSERT_OK_AND_ASSIGN(SubmitResult again, store_->Submit(kKind, "req-a", "key-1", 0));
  EXPECT_TRUE(first.created);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.job.id, first.job.id);
  EXPECT_EQ(again.job.idempotency_key, "key-1");
  // The retry returns the stored job as it is now, not the retried request.
  ASSERT_OK_AND_ASSIGN(SubmitResult different_body, store_->Submit(kKind, "req-b", "key-1", 0));
  EXPECT_EQ(different_body.job.id, first.job.id);
  EXPECT_EQ(different_body.job.request, "req-a");

  ASSERT_OK_AND_ASSIGN(SubmitResult other_key, store_->Submit(kKind, "req-a", "key-2", 0));
  EXPECT_TRUE(other_key.created);
  EXPECT_NE(other_key.job.id, first.job.id);
  // One key names one job, whatever the kind (OneIdempotencyKeyNamesOneJobAcrossKinds).
  EXPECT_TRUE(IsIdempotencyKeyReused(store_->Submit("score", "req-a", "key-1", 0).status()));
  // No key: every submit is a new job.
  EXPECT_NE(MustSubmit(*store_, "same").id, MustSubmit(*store_, "same").id);

  // Still the same job once it has finished.
  const std::optional<Job> claimed = MustClaim(*store_, "w");
  ASSERT_TRUE(claimed);
  ASSERT_EQ(claimed->id, first.job.id);
  ASSERT_OK(store_->Complete(claimed->id, claimed->attempts, "result"));
  ASSERT_OK_AND_ASSIGN(SubmitResult after, store_->Submit(kKind, "req-a", "key-1", 0));
  EXPECT_FALSE(after.created);
  EXPECT_EQ(after.job.state, JobState::kSucceeded);
  EXPECT_EQ(after.job.result, "result");
}

TEST_P(JobStoreConformanceTest, ConcurrentSubmitsWithSameKeyCreateOneJob) {
  constexpr int kThreads = 8;
  // Half the threads have a store instance of their own (like separate servers), half share.
  std::vector<std::unique_ptr<JobStore>> own;
  for (int t = 0; t < kThreads / 2; ++t) own.push_back(Open());
  for (const auto& s : own) ASSERT_NE(s, nullptr);

  absl::Mutex mu;
  std::vector<std::string> ids;
  int created = 0;
  std::atomic<int> go{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    JobStore* store = t < kThreads / 2 ? own[t].get() : store_.get();
    threads.emplace_back([&, store] {
      go.fetch_add(1);
      while (go.load() < kThreads) std::this_thread::yield();  // start together
      for (int round = 0; round < 5; ++round) {
        absl::StatusOr<SubmitResult> r = store->Submit(kKind, "payload", "the-key", 0);
        EXPECT_TRUE(r.ok()) << r.status();
        if (!r.ok()) continue;
        absl::MutexLock lock(&mu);
        ids.push_back(r->job.id);
        if (r->created) ++created;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(created, 1);
  ASSERT_EQ(ids.size(), static_cast<size_t>(kThreads * 5));
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 1u);
  ASSERT_OK_AND_ASSIGN(JobCounts counts, store_->CountByState());
  EXPECT_EQ(counts[JobState::kQueued], 1);
}

// Issue 33 item 2: the same key on an evidence, a search and a score submit made three jobs.
// A key names one job: another kind is ALREADY_EXISTS naming that job, and writes nothing —
// also with a full queue, from another store instance, and when submits of several kinds race.
TEST_P(JobStoreConformanceTest, OneIdempotencyKeyNamesOneJobAcrossKinds) {
  ASSERT_OK_AND_ASSIGN(SubmitResult first, store_->Submit("evidence", "req", "shared-key", 0));
  ASSERT_TRUE(first.created);
  for (const char* kind : {"search", "score"}) {
    absl::StatusOr<SubmitResult> other = store_->Submit(kind, "req", "shared-key", 0);
    EXPECT_STATUS_CODE(other, absl::StatusCode::kAlreadyExists) << kind;
    EXPECT_TRUE(IsIdempotencyKeyReused(other.status())) << other.status();
    EXPECT_THAT(std::string(other.status().message()),
                ::testing::HasSubstr(first.job.id));
  }
  // A full queue does not hide the conflict (the key is looked up first), and a plain
  // ALREADY_EXISTS is not mistaken for it.
  EXPECT_TRUE(IsIdempotencyKeyReused(store_->Submit("score", "r", "shared-key", 1).status()));
  EXPECT_FALSE(IsIdempotencyKeyReused(absl::AlreadyExistsError("other")));
  // Another store instance (another server) sees the same.
  std::unique_ptr<JobStore> second = Open();
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(IsIdempotencyKeyReused(second->Submit("search", "r", "shared-key", 0).status()));
  ASSERT_OK_AND_ASSIGN(SubmitResult retry, second->Submit("evidence", "r", "shared-key", 0));
  EXPECT_FALSE(retry.created);
  EXPECT_EQ(retry.job.id, first.job.id);
  ASSERT_OK_AND_ASSIGN(JobCounts counts, store_->CountByState());
  EXPECT_EQ(counts[JobState::kQueued], 1);

  // Racing submits of three kinds under one fresh key, half on store instances of their own:
  // exactly one job, and every other submit is a retry of its kind or the conflict.
  constexpr int kThreads = 6;
  std::vector<std::unique_ptr<JobStore>> own;
  for (int t = 0; t < kThreads / 2; ++t) own.push_back(Open());
  for (const auto& s : own) ASSERT_NE(s, nullptr);
  const char* const kKinds[] = {"evidence", "search", "score"};
  absl::Mutex mu;
  std::set<std::string> ids;
  std::set<std::string> created_kinds;
  int created = 0, conflicts = 0;
  std::atomic<int> go{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    JobStore* store = t < kThreads / 2 ? own[t].get() : store_.get();
    const std::string kind = kKinds[t % 3];
    threads.emplace_back([&, store, kind] {
      go.fetch_add(1);
      while (go.load() < kThreads) std::this_thread::yield();
      for (int round = 0; round < 4; ++round) {
        absl::StatusOr<SubmitResult> r = store->Submit(kind, "payload", "raced-key", 0);
        absl::MutexLock lock(&mu);
        if (r.ok()) {
          ids.insert(r->job.id);
          if (r->created) {
            ++created;
            created_kinds.insert(kind);
          }
        } else {
          EXPECT_TRUE(IsIdempotencyKeyReused(r.status())) << r.status();
          ++conflicts;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(created, 1);
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(created_kinds.size(), 1u);
  // Two thirds of the threads asked for another kind than the winner's.
  EXPECT_EQ(conflicts, 4 * kThreads * 2 / 3);
  ASSERT_OK_AND_ASSIGN(counts, store_->CountByState());
  EXPECT_EQ(counts[JobState::kQueued], 2);
}

TEST_P(JobStoreConformanceTest, QueueFullIsResourceExhausted) {
  ASSERT_OK(store_->Submit(kKind, "1", "k1", 3).status());
  ASSERT_OK(store_->Submit(kKind, "2", "k2", 3).status());
  ASSERT_OK(store_->Submit(kKind, "3", "k3", 3).status());
  absl::StatusOr<SubmitResult> full = store_->Submit(kKind, "4", "k4", 3);
  EXPECT_THAT(full, StatusIs(absl::StatusCode::kResourceExhausted)) << full.status();
  // Nothing was half-stored.
  ASSERT_OK_AND_ASSIGN(JobCounts counts, store_->CountByState());
  EXPECT_EQ(counts[JobState::kQueued], 3);
  // Retrying an accepted submit still succeeds while the queue is full.
  ASSERT_OK_AND_ASSIGN(SubmitResult retry, store_->Submit(kKind, "1", "k1", 3));
  EXPECT_FALSE(retry.created);
  // Only QUEUED jobs count: claiming one makes room.
  ASSERT_TRUE(MustClaim(*store_, "w"));
  ASSERT_OK_AND_ASSIGN(SubmitResult fourth, store_->Submit(kKind, "4", "k4", 3));
  EXPECT_TRUE(fourth.created);
  EXPECT_STATUS_CODE(store_->Submit(kKind, "5", "", 3), absl::StatusCode::kResourceExhausted);
  // max_queued <= 0 means no limit.
  ASSERT_OK(store_->Submit(kKind, "5", "", 0).status());
  ASSERT_OK(store_->Submit(kKind, "6", "", -1).status());
}

TEST_P(JobStoreConformanceTest, ClaimTakesOldestFirst) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(MustSubmit(*store_, BinaryPayload(i)).id);
  const absl::Time before = absl::Now();
  for (int i = 0; i < 5; ++i) {
    const std::optional<Job> job = MustClaim(*store_, "worker-1", absl::Seconds(30));
    ASSERT_TRUE(job) << i;
    EXPECT_EQ(job->id, ids[i]);
    EXPECT_EQ(job->request, BinaryPayload(i));
    EXPECT_EQ(job->state, JobState::kRunning);
    EXPECT_EQ(job->attempts, 1);
    EXPECT_EQ(job->lease_owner, "worker-1");
    EXPECT_GT(job->lease_expires, before + absl::Seconds(25));
    EXPECT_LT(job->lease_expires, absl::Now() + absl::Seconds(35));
    EXPECT_GE(job->started, before - absl::Seconds(1));
  }
  EXPECT_FALSE(MustClaim(*store_, "worker-1"));
  const Job stored = MustGet(ids[0]);
  EXPECT_EQ(stored.state, JobState::kRunning);
  EXPECT_EQ(stored.lease_owner, "worker-1");
}

TEST_P(JobStoreConformanceTest, ConcurrentClaimersNeverShareAJob) {
  constexpr int kJobs = 60;
  constexpr int kThreads = 6;
  std::set<std::string> submitted;
  for (int i = 0; i < kJobs; ++i) submitted.insert(MustSubmit(*store_, BinaryPayload(i)).id);

  std::vector<std::unique_ptr<JobStore>> own;
  for (int t = 0; t < kThreads / 2; ++t) own.push_back(Open());
  for (const auto& s : own) ASSERT_NE(s, nullptr);

  absl::Mutex mu;
  std::map<std::string, int> claims;  // job id -> times claimed
  std::atomic<int> go{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    JobStore* store = t < kThreads / 2 ? own[t].get() : store_.get();
    threads.emplace_back([&, store, t] {
      go.fetch_add(1);
      while (go.load() < kThreads) std::this_thread::yield();
      const std::string worker = absl::StrCat("worker-", t);
      while (true) {
        // A long lease: nothing may expire and be legitimately re-claimed during this test.
        absl::StatusOr<std::optional<Job>> job = store->Claim(worker, kLongLease);
        EXPECT_TRUE(job.ok()) << job.status();
        if (!job.ok() || !job->has_value()) break;
        EXPECT_EQ((*job)->attempts, 1);
        absl::MutexLock lock(&mu);
        ++claims[(*job)->id];
      }
    });
  }
  for (std::thread& t : threads) t.join();

  ASSERT_EQ(claims.size(), submitted.size());
  for (const auto& [id, times] : claims) {
    EXPECT_EQ(times, 1) << id;
    EXPECT_TRUE(submitted.count(id)) << id;
  }
  ASSERT_OK_AND_ASSIGN(JobCounts counts, store_->CountByState());
  EXPECT_EQ(counts[JobState::kRunning], kJobs);
  EXPECT_EQ(counts[JobState::kQueued], 0);
}

// Like the threaded race, but the claimers are separate processes with their own stores: the
// deployment where several gpsel servers share one SQLite file or PostgreSQL database.
TEST_P(JobStoreConformanceTest, ClaimersInSeparateProcessesNeverShareAJob) {
  constexpr int kJobs = 40;
  constexpr int kProcesses = 3;
  std::set<std::string> submitted;
  for (int i = 0; i < kJobs; ++i) submitted.insert(MustSubmit(*store_, BinaryPayload(i)).id);

  const std::string url = db_->url();
  // Close this process's connection before forking: SQLite keeps per-process lock bookkeeping
  // for each open file, which a forked child must not inherit (sqlite.org/howtocorrupt.html,
  // on fork()). The children open their own stores.
  store_.reset();
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: its own store and connection; exits with _exit so that nothing inherited from
      // the parent (notably the parent's database connections) is torn down from here.
      int code = 0;
      {
        std::ofstream out(absl::StrCat(scratch_.path(), "/claimed.", p));
        absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(url, options_);
        if (!store.ok()) {
          code = 2;
        } else {
          while (true) {
            absl::StatusOr<std::optional<Job>> job =
                (*store)->Claim(absl::StrCat("proc-", p), kLongLease);
            if (!job.ok()) {
              code = 3;
              break;
            }
            if (!job->has_value()) break;
            out << (*job)->id << "\n";
          }
        }
        out.flush();
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }

  store_ = Open();
  ASSERT_NE(store_, nullptr);
  std::map<std::string, int> claims;
  for (int p = 0; p < kProcesses; ++p) {
    std::ifstream in(absl::StrCat(scratch_.path(), "/claimed.", p));
    std::string id;
    while (std::getline(in, id)) ++claims[id];
  }
  ASSERT_EQ(claims.size(), submitted.size());
  for (const auto& [id, times] : claims) EXPECT_EQ(times, 1) << id;
  ASSERT_OK_AND_ASSIGN(JobCounts counts, store_->CountByState());
  EXPECT_EQ(counts[JobState::kRunning], kJobs);
}

TEST_P(JobStoreConformanceTest, HeartbeatRecordsProgressAndKeepsLeaseAlive) {
  const std::string id = MustSubmit(*store_, "x").id;
  const std::optional<Job> job = MustClaim(*store_, "w1", kLease);
  ASSERT_TRUE(job);
  std::unique_ptr<JobStore> other = Open();
  ASSERT_NE(other, nullptr);

  // Heartbeats record progress and move the lease to now + lease. (No assertion here depends on
  // how fast the calls run: a loaded machine may stall any of them for a long time.)
  for (int i = 1; i <= 4; ++i) {
    const absl::Time before = absl::Now();
    ASSERT_OK_AND_ASSIGN(HeartbeatResponse hb,
                         store_->Heartbeat(id, job->attempts, 0.2 * i, absl::StrCat("step ", i),
                                           kLongLease));
    EXPECT_FALSE(hb.cancel_requested);
    EXPECT_GT(hb.lease_expires, before + kLongLease - absl::Seconds(1));
    EXPECT_LT(hb.lease_expires, absl::Now() + kLongLease + absl::Seconds(1));
  }
  Job stored = MustGet(id);
  EXPECT_DOUBLE_EQ(stored.progress, 0.8);
  EXPECT_EQ(stored.progress_message, "step 4");
  EXPECT_EQ(stored.attempts, 1);
  EXPECT_GT(stored.lease_expires, absl::Now() + kLongLease - absl::Seconds(5));

  // The claim's short lease has long passed, but the heartbeat extended it: nobody can take it.
  absl::SleepFor(kPastLease);
  EXPECT_FALSE(MustClaim(*other, "w2")) << "an extended lease was taken";

  // A heartbeat may also shorten the lease; once that lapses, another worker takes over.
  ASSERT_OK(store_->Heartbeat(id, job->attempts, 0.9, "", kLease).status());
  absl::SleepFor(kPastLease);
  const std::optional<Job> taken = MustClaim(*other, "w2");
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->id, id);
  EXPECT_EQ(taken->attempts, 2);
  EXPECT_DOUBLE_EQ(taken->progress, 0.0);  // a new attempt starts from scratch
  EXPECT_EQ(taken->progress_message, "");
  const Job current = *taken;

  // Progress is clamped into [0, 1]; NaN is rejected.
  ASSERT_OK(other->Heartbeat(id, current.attempts, 7.0, "", kLease).status());
  EXPECT_DOUBLE_EQ(MustGet(id).progress, 1.0);
  ASSERT_OK(other->Heartbeat(id, current.attempts, -3.0, "", kLease).status());
  EXPECT_DOUBLE_EQ(MustGet(id).progress, 0.0);
  EXPECT_STATUS_CODE(other->Heartbeat(id, current.attempts, std::nan(""), "", kLease),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(other->Heartbeat(id, current.attempts, 0.5, "", absl::ZeroDuration()),
                     absl::StatusCode::kInvalidArgument);
  // A wrong token is fenced off even while the lease is alive.
  EXPECT_STATUS_CODE(other->Heartbeat(id, current.attempts + 1, 0.5, "", kLease),
                     absl::StatusCode::kAborted);
}

TEST_P(JobStoreConformanceTest, ExpiredLeaseIsReclaimedAndStaleWorkerIsFenced) {
  const std::string id = MustSubmit(*store_, "x").id;
  std::unique_ptr<JobStore> server2 = Open();
  ASSERT_NE(server2, nullptr);

  const std::optional<Job> first = MustClaim(*store_, "stale-worker");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->attempts, 1);
  EXPECT_FALSE(MustClaim(*server2, "fresh-worker")) << "lease taken before it expired";

  // The worker's last heartbeat (a short lease), then it "crashes" and never renews.
  ASSERT_OK(store_->Heartbeat(id, first->attempts, 0.5, "", kLease).status());
  absl::SleepFor(kPastLease);
  const std::optional<Job> second = MustClaim(*server2, "fresh-worker");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->id, id);
  EXPECT_EQ(second->attempts, 2);
  EXPECT_EQ(second->lease_owner, "fresh-worker");

  // The stale worker wakes up: every fenced call is rejected.
  EXPECT_STATUS_CODE(store_->Heartbeat(id, first->attempts, 0.9, "", kLease),
                     absl::StatusCode::kAborted);
  EXPECT_EQ(store_->Complete(id, first->attempts, "stale result").code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(store_->Fail(id, first->attempts, absl::InternalError("stale")).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(store_->MarkCancelled(id, first->attempts).code(), absl::StatusCode::kAborted);

  ASSERT_OK(server2->Complete(id, second->attempts, "fresh result"));
  // Once finished, nobody can overwrite the result: not the stale worker, not the winner.
  EXPECT_EQ(store_->Complete(id, first->attempts, "stale result").code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(server2->Complete(id, second->attempts, "second result").code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(server2->Fail(id, second->attempts, absl::InternalError("late")).code(),
            absl::StatusCode::kAborted);

  const Job done = MustGet(id);
  EXPECT_EQ(done.state, JobState::kSucceeded);
  EXPECT_EQ(done.result, "fresh result");
  EXPECT_EQ(done.attempts, 2);
  EXPECT_EQ(done.lease_owner, "");
  EXPECT_DOUBLE_EQ(done.progress, 1.0);
  EXPECT_NE(done.finished, absl::InfinitePast());
  EXPECT_FALSE(MustClaim(*store_, "anyone"));
}

TEST_P(JobStoreConformanceTest, HeartbeatAfterExpiryButBeforeReclaimKeepsTheJob) {
  const std::string id = MustSubmit(*store_, "x").id;
  const std::optional<Job> job = MustClaim(*store_, "slow-worker", kLease);
  ASSERT_TRUE(job);
  absl::SleepFor(kPastLease);
  ASSERT_OK(store_->Heartbeat(id, job->attempts, 0.3, "late but alive", kLongLease).status());
  EXPECT_FALSE(MustClaim(*store_, "other"));
  ASSERT_OK(store_->Complete(id, job->attempts, "ok"));
  EXPECT_EQ(MustGet(id).attempts, 1);
}

TEST_P(JobStoreConformanceTest, CancelQueuedJobTakesEffectAtOnce) {
  const std::string id = MustSubmit(*store_, "x").id;
  ASSERT_OK_AND_ASSIGN(Job cancelled, store_->RequestCancel(id));
  EXPECT_EQ(cancelled.state, JobState::kCancelled);
  EXPECT_EQ(cancelled.error_code, static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_NE(cancelled.finished, absl::InfinitePast());
  EXPECT_FALSE(MustClaim(*store_, "w"));
  // Cancelling again is harmless and changes nothing.
  ASSERT_OK_AND_ASSIGN(Job again, store_->RequestCancel(id));
  EXPECT_EQ(again.state, JobState::kCancelled);
  EXPECT_EQ(again.finished, cancelled.finished);
}

TEST_P(JobStoreConformanceTest, CancelRunningJobReachesItsWorker) {
  const std::string id = MustSubmit(*store_, "x").id;
  const std::optional<Job> job = MustClaim(*store_, "w");
  ASSERT_TRUE(job);
  ASSERT_OK_AND_ASSIGN(HeartbeatResponse before,
                       store_->Heartbeat(id, job->attempts, 0.2, "", kLease));
  EXPECT_FALSE(before.cancel_requested);

  // Requested from another server instance.
  std::unique_ptr<JobStore> api_server = Open();
  ASSERT_NE(api_server, nullptr);
  ASSERT_OK_AND_ASSIGN(Job requested, api_server->RequestCancel(id));
  EXPECT_EQ(requested.state, JobState::kRunning);
  EXPECT_TRUE(requested.cancel_requested);

  ASSERT_OK_AND_ASSIGN(HeartbeatResponse after,
                       store_->Heartbeat(id, job->attempts, 0.3, "", kLease));
  EXPECT_TRUE(after.cancel_requested);
  ASSERT_OK(store_->MarkCancelled(id, job->attempts));
  const Job done = MustGet(id);
  EXPECT_EQ(done.state, JobState::kCancelled);
  EXPECT_EQ(done.error_code, static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_EQ(done.lease_owner, "");
  // The worker cannot publish a result afterwards.
  EXPECT_EQ(store_->Complete(id, job->attempts, "late").code(), absl::StatusCode::kAborted);
  EXPECT_EQ(MustGet(id).result, "");
}

TEST_P(JobStoreConformanceTest, CancellingAFinishedJobChangesNothing) {
  const std::string id = MustSubmit(*store_, "x").id;
  const std::optional<Job> job = MustClaim(*store_, "w");
  ASSERT_TRUE(job);
  ASSERT_OK(store_->Complete(id, job->attempts, "result"));
  ASSERT_OK_AND_ASSIGN(Job after, store_->RequestCancel(id));
  EXPECT_EQ(after.state, JobState::kSucceeded);
  EXPECT_EQ(after.result, "result");
  EXPECT_FALSE(after.cancel_requested);
}

TEST_P(JobStoreConformanceTest, CompletingAfterCancelRequestStillSucceeds) {
  const std::string id = MustSubmit(*store_, "x").id;
  const std::optional<Job> job = MustClaim(*store_, "w");
  ASSERT_TRUE(job);
  ASSERT_OK(store_->RequestCancel(id).status());
  ASSERT_OK(store_->Complete(id, job->attempts, "finished anyway"));
  EXPECT_EQ(MustGet(id).state, JobState::kSucceeded);
}

TEST_P(JobStoreConformanceTest, ExpiredJobWithCancelRequestBecomesCancelled) {
  const std::string id = MustSubmit(*store_, "x").id;
  const std::optional<Job> job = MustClaim(*store_, "doomed-worker", kLease);
  ASSERT_TRUE(job);
  ASSERT_OK(store_->RequestCancel(id).status());
  absl::SleepFor(kPastLease);  // the worker died before it saw the request
  EXPECT_FALSE(MustClaim(*store_, "w2")) << "a cancelled job must not be re-run";
  const Job done = MustGet(id);
  EXPECT_EQ(done.state, JobState::kCancelled);
  EXPECT_EQ(done.attempts, 1);
}

TEST_P(JobStoreConformanceTest, FailRecordsTheError) {
  const std::string id = MustSubmit(*store_, "x").id;
  const std::optional<Job> job = MustClaim(*store_, "w");
  ASSERT_TRUE(job);
  EXPECT_EQ(store_->Fail(id, job->attempts, absl::OkStatus()).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK(store_->Fail(id, job->attempts,
                         absl::InvalidArgumentError("kernel: cannot parse 'SE+'")));
  const Job failed = MustGet(id);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_EQ(failed.error_code, static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(failed.error_message, "kernel: cannot parse 'SE+'");
  EXPECT_EQ(failed.result, "");
  EXPECT_FALSE(MustClaim(*store_, "w"));
}

TEST_P(JobStoreConformanceTest, ReleaseLeasesRequeuesOnlyThatWorkersJobs) {
  const std::string a = MustSubmit(*store_, "a").id;
  const std::string b = MustSubmit(*store_, "b").id;
  const std::string c = MustSubmit(*store_, "c").id;
  const std::string d = MustSubmit(*store_, "d").id;
  const std::optional<Job> ja = MustClaim(*store_, "leaving", kLongLease);
  const std::optional<Job> jb = MustClaim(*store_, "leaving", kLongLease);
  const std::optional<Job> jc = MustClaim(*store_, "staying", kLongLease);
  const std::optional<Job> jd = MustClaim(*store_, "leaving", kLongLease);
  ASSERT_TRUE(ja && jb && jc && jd);
  ASSERT_OK(store_->RequestCancel(d).status());  // released with a cancel request: cancelled

  ASSERT_OK_AND_ASSIGN(int64_t released, store_->ReleaseLeases("leaving"));
  EXPECT_EQ(released, 3);
  for (const std::string& id : {a, b}) {
    const Job job = MustGet(id);
    EXPECT_EQ(job.state, JobState::kQueued) << id;
    EXPECT_EQ(job.attempts, 1) << id;  // kept: the fencing token must never go back
    EXPECT_EQ(job.lease_owner, "") << id;
  }
  EXPECT_EQ(MustGet(c).state, JobState::kRunning);
  EXPECT_EQ(MustGet(d).state, JobState::kCancelled);

  // The departed worker is fenced off; the staying one is unaffected.
  EXPECT_EQ(store_->Complete(a, ja->attempts, "x").code(), absl::StatusCode::kAborted);
  EXPECT_STATUS_CODE(store_->Heartbeat(b, jb->attempts, 0, "", kLease), absl::StatusCode::kAborted);
  ASSERT_OK(store_->Heartbeat(c, jc->attempts, 0.5, "", kLease).status());

  // Another worker picks the released jobs up at once, in order, with a new token.
  const std::optional<Job> again = MustClaim(*store_, "successor");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, a);
  EXPECT_EQ(again->attempts, 2);
  ASSERT_OK_AND_ASSIGN(int64_t none, store_->ReleaseLeases("nobody"));
  EXPECT_EQ(none, 0);
}

TEST_P(JobStoreConformanceTest, JobOutOfAttemptsIsMarkedFailed) {
  ASSERT_EQ(options_.max_attempts, 3);
  const std::string id = MustSubmit(*store_, "poison").id;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const std::optional<Job> job = MustClaim(*store_, absl::StrCat("victim-", attempt), kLease);
    ASSERT_TRUE(job) << attempt;
    EXPECT_EQ(job->attempts, attempt);
    absl::SleepFor(kPastLease);  // the job "kills" its worker every time
  }
  EXPECT_FALSE(MustClaim(*store_, "victim-4"));
  const Job failed = MustGet(id);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_EQ(failed.attempts, 3);
  EXPECT_EQ(failed.error_code, static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_NE(failed.error_message.find("3 times"), std::string::npos) << failed.error_message;
  EXPECT_EQ(failed.lease_owner, "");
  // The last worker is fenced off too.
  EXPECT_EQ(store_->Complete(id, 3, "too late").code(), absl::StatusCode::kAborted);
}

// A server that releases its jobs at every (crash-)restart must not re-run a poison job forever.
TEST_P(JobStoreConformanceTest, ReleasedJobOutOfAttemptsIsMarkedFailed) {
  ASSERT_EQ(options_.max_attempts, 3);
  const std::string id = MustSubmit(*store_, "poison").id;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const std::optional<Job> job = MustClaim(*store_, "restarting-server", kLongLease);
    ASSERT_TRUE(job) << attempt;
    EXPECT_EQ(job->attempts, attempt);
    ASSERT_OK_AND_ASSIGN(int64_t released, store_->ReleaseLeases("restarting-server"));
    EXPECT_EQ(released, 1);
  }
  EXPECT_EQ(MustGet(id).state, JobState::kQueued);
  EXPECT_FALSE(MustClaim(*store_, "restarting-server"));
  const Job failed = MustGet(id);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_EQ(failed.attempts, 3);
  EXPECT_EQ(failed.error_code, static_cast<int>(absl::StatusCode::kAborted));
}

TEST_P(JobStoreConformanceTest, JobsSurviveReopening) {
  const std::string succeeded = MustSubmit(*store_, BinaryPayload(1), "key-s").id;
  const std::string running = MustSubmit(*store_, BinaryPayload(2)).id;
  const std::string failed = MustSubmit(*store_, BinaryPayload(3)).id;
  const std::string queued = MustSubmit(*store_, BinaryPayload(4)).id;
  ASSERT_OK_AND_ASSIGN(std::optional<Job> c1, store_->Claim("w", kLongLease));
  ASSERT_TRUE(c1 && c1->id == succeeded);  // oldest first
  ASSERT_OK(store_->Complete(succeeded, c1->attempts, BinaryPayload(10)));
  ASSERT_OK_AND_ASSIGN(std::optional<Job> c2, store_->Claim("w", kLongLease));
  ASSERT_TRUE(c2 && c2->id == running);
  ASSERT_OK(store_->Heartbeat(running, c2->attempts, 0.25, "quarter", kLongLease).status());
  ASSERT_OK_AND_ASSIGN(std::optional<Job> c3, store_->Claim("w", kLongLease));
  ASSERT_TRUE(c3 && c3->id == failed);
  ASSERT_OK(store_->Fail(failed, c3->attempts, absl::DeadlineExceededError("too slow")));

  store_.reset();  // the server stops (closes its database connection / file)
  store_ = Open();
  ASSERT_NE(store_, nullptr);

  const Job s = MustGet(succeeded);
  EXPECT_EQ(s.state, JobState::kSucceeded);
  EXPECT_EQ(s.result, BinaryPayload(10));
  EXPECT_EQ(s.request, BinaryPayload(1));
  const Job r = MustGet(running);
  EXPECT_EQ(r.state, JobState::kRunning);
  EXPECT_EQ(r.progress_message, "quarter");
  EXPECT_DOUBLE_EQ(r.progress, 0.25);
  EXPECT_EQ(r.attempts, 1);
  const Job f = MustGet(failed);
  EXPECT_EQ(f.state, JobState::kFailed);
  EXPECT_EQ(f.error_code, static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(f.error_message, "too slow");
  EXPECT_EQ(MustGet(queued).state, JobState::kQueued);

  // A worker's token stays valid across a restart of the store.
  ASSERT_OK(store_->Complete(running, c2->attempts, "finished after restart"));
  // Idempotency survives, and claiming continues where it left off.
  ASSERT_OK_AND_ASSIGN(SubmitResult retry, store_->Submit(kKind, "x", "key-s", 0));
  EXPECT_FALSE(retry.created);
  EXPECT_EQ(retry.job.id, succeeded);
  const std::optional<Job> next = MustClaim(*store_, "w");
  ASSERT_TRUE(next);
  EXPECT_EQ(next->id, queued);
}

TEST_P(JobStoreConformanceTest, TwoStoresShareOneQueue) {
  std::unique_ptr<JobStore> server_a = std::move(store_);
  std::unique_ptr<JobStore> server_b = Open();
  ASSERT_NE(server_b, nullptr);

  const std::string id1 = MustSubmit(*server_a, "from a").id;
  const std::string id2 = MustSubmit(*server_b, "from b").id;
  ASSERT_OK_AND_ASSIGN(SubmitResult dup, server_b->Submit(kKind, "x", "shared-key", 0));
  ASSERT_OK_AND_ASSIGN(SubmitResult dup2, server_a->Submit(kKind, "x", "shared-key", 0));
  EXPECT_TRUE(dup.created);
  EXPECT_FALSE(dup2.created);
  EXPECT_EQ(dup.job.id, dup2.job.id);

  EXPECT_EQ(server_b->GetJob(id1)->request, "from a");
  const std::optional<Job> on_b = MustClaim(*server_b, "worker-b");
  const std::optional<Job> on_a = MustClaim(*server_a, "worker-a");
  ASSERT_TRUE(on_a && on_b);
  EXPECT_EQ(on_b->id, id1);
  EXPECT_EQ(on_a->id, id2);

  ASSERT_OK(server_a->RequestCancel(id1).status());
  ASSERT_OK_AND_ASSIGN(HeartbeatResponse hb,
                       server_b->Heartbeat(id1, on_b->attempts, 0.5, "", kLease));
  EXPECT_TRUE(hb.cancel_requested);
  ASSERT_OK(server_a->Complete(id2, on_a->attempts, "a's result"));
  EXPECT_EQ(server_b->GetJob(id2)->result, "a's result");

  ASSERT_OK_AND_ASSIGN(JobCounts counts_a, server_a->CountByState());
  ASSERT_OK_AND_ASSIGN(JobCounts counts_b, server_b->CountByState());
  EXPECT_EQ(counts_a, counts_b);
  store_ = std::move(server_a);
}

// Both depths pass on an empty and on a used store (the server reports SERVING from them);
// tests/server/service/reliability_test.cc corrupts an SQLite file for the failing case.
TEST_P(JobStoreConformanceTest, HealthChecksPassOnASoundStore) {
  ASSERT_OK(store_->CheckHealth(StoreCheck::kIntegrity));
  ASSERT_OK(store_->CheckHealth(StoreCheck::kConnection));
  for (int i = 0; i < 20; ++i) MustSubmit(*store_, BinaryPayload(i));
  std::optional<Job> job = MustClaim(*store_, "w", kLongLease);
  ASSERT_TRUE(job);
  ASSERT_OK(store_->Complete(job->id, job->attempts, "result"));
  EXPECT_OK(store_->CheckHealth(StoreCheck::kIntegrity));
  EXPECT_OK(store_->CheckHealth(StoreCheck::kConnection));
  // The write probe changes no job, however often it runs, and the other checks still pass.
  for (int i = 0; i < 3; ++i) EXPECT_OK(store_->CheckHealth(StoreCheck::kWrite));
  ASSERT_OK_AND_ASSIGN(JobCounts counts, store_->CountByState());
  EXPECT_EQ(counts[JobState::kQueued], 19);
  EXPECT_EQ(counts[JobState::kSucceeded], 1);
  ASSERT_OK_AND_ASSIGN(ListJobsResponse all, store_->ListJobs({}));
  EXPECT_EQ(all.jobs.size(), 20u);
  EXPECT_OK(store_->CheckHealth(StoreCheck::kIntegrity));
}

TEST_P(JobStoreConformanceTest, CountByStateCountsEveryState) {
  ASSERT_OK_AND_ASSIGN(JobCounts empty, store_->CountByState());
  EXPECT_EQ(empty.size(), 5u);
  for (const auto& [state, n] : empty) EXPECT_EQ(n, 0) << JobStateName(state);

  for (int i = 0; i < 6; ++i) MustSubmit(*store_, BinaryPayload(i));
  std::vector<Job> claimed;
  for (int i = 0; i < 4; ++i) {
    std::optional<Job> job = MustClaim(*store_, "w", kLongLease);
    ASSERT_TRUE(job);
    claimed.push_back(*job);
  }
  ASSERT_OK(store_->Complete(claimed[0].id, claimed[0].attempts, "r"));
  ASSERT_OK(store_->Fail(claimed[1].id, claimed[1].attempts, absl::InternalError("e")));
  ASSERT_OK(store_->MarkCancelled(claimed[2].id, claimed[2].attempts));
  ASSERT_OK_AND_ASSIGN(JobCounts counts, store_->CountByState());
  EXPECT_EQ(counts[JobState::kQueued], 2);
  EXPECT_EQ(counts[JobState::kRunning], 1);
  EXPECT_EQ(counts[JobState::kSucceeded], 1);
  EXPECT_EQ(counts[JobState::kFailed], 1);
  EXPECT_EQ(counts[JobState::kCancelled], 1);
}

TEST_P(JobStoreConformanceTest, PurgeFinishedDeletesOnlyOldTerminalJobs) {
  const std::string old_done = MustSubmit(*store_, "x", "purge-key").id;
  const std::string queued = MustSubmit(*store_, "y").id;
  const std::optional<Job> job = MustClaim(*store_, "w");
  ASSERT_TRUE(job && job->id == old_done);
  ASSERT_OK(store_->Complete(old_done, job->attempts, "r"));

  ASSERT_OK_AND_ASSIGN(int64_t none, store_->PurgeFinished(absl::Hours(1)));
  EXPECT_EQ(none, 0);
  EXPECT_STATUS_CODE(store_->PurgeFinished(-absl::Seconds(1)), absl::StatusCode::kInvalidArgument);
  absl::SleepFor(absl::Milliseconds(20));
  ASSERT_OK_AND_ASSIGN(int64_t purged, store_->PurgeFinished(absl::Milliseconds(10)));
  EXPECT_EQ(purged, 1);
  EXPECT_STATUS_CODE(store_->GetJob(old_done), absl::StatusCode::kNotFound);
  EXPECT_EQ(MustGet(queued).state, JobState::kQueued);

  // The key is free again; ids are never reused and order is kept.
  ASSERT_OK_AND_ASSIGN(SubmitResult fresh, store_->Submit(kKind, "x", "purge-key", 0));
  EXPECT_TRUE(fresh.created);
  EXPECT_NE(fresh.job.id, old_done);
  ASSERT_OK_AND_ASSIGN(ListJobsResponse all, store_->ListJobs({}));
  ASSERT_EQ(all.jobs.size(), 2u);
  EXPECT_EQ(all.jobs[0].id, queued);
  EXPECT_EQ(all.jobs[1].id, fresh.job.id);
}

TEST_P(JobStoreConformanceTest, RejectsInvalidArguments) {
  EXPECT_STATUS_CODE(store_->Submit("", "x", "", 0), absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->Submit(std::string(65, 'k'), "x", "", 0),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->Submit(kKind, "x", std::string(257, 'k'), 0),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->Claim("", kLease), absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->Claim("w", absl::ZeroDuration()), absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->Claim("w", -kLease), absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->Claim("w", absl::InfiniteDuration()),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->ReleaseLeases(""), absl::StatusCode::kInvalidArgument);
  // Nothing was stored by the rejected calls.
  ASSERT_OK_AND_ASSIGN(ListJobsResponse all, store_->ListJobs({}));
  EXPECT_TRUE(all.jobs.empty());
}

// ---- Tasks (server/store/job_store.h "Tasks") ----

constexpr char kTaskKind[] = "evidence_run";

// A RUNNING job with a batch "runs" of `n` tasks; returns (job, tasks).
std::pair<Job, std::vector<Job>> RunningJobWithTasks(JobStore& store, int n) {
  absl::StatusOr<SubmitResult> parent = store.Submit(kKind, "parent", "", 0);
  EXPECT_TRUE(parent.ok()) << parent.status();
  absl::StatusOr<std::optional<Job>> claimed = store.Claim("parent-worker", kLongLease);
  EXPECT_TRUE(claimed.ok() && claimed->has_value());
  std::vector<std::string> requests;
  for (int i = 0; i < n; ++i) requests.push_back(BinaryPayload(i));
  absl::StatusOr<std::vector<Job>> tasks =
      store.SubmitTasks(parent->job.id, "runs", kTaskKind, requests);
  EXPECT_TRUE(tasks.ok()) << tasks.status();
  return {claimed.ok() && claimed->has_value() ? **claimed : Job{},
          tasks.ok() ? *tasks : std::vector<Job>{}};
}

TEST_P(JobStoreConformanceTest, SubmitTasksStoresABatchOnceInIndexOrder) {
  auto [parent, tasks] = RunningJobWithTasks(*store_, 3);
  ASSERT_EQ(tasks.size(), 3u);
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(tasks[i].kind, kTaskKind);
    EXPECT_EQ(tasks[i].state, JobState::kQueued);
    EXPECT_EQ(tasks[i].parent_id, parent.id);
    EXPECT_EQ(tasks[i].task_batch, "runs");
    EXPECT_EQ(tasks[i].task_index, i);
    EXPECT_EQ(tasks[i].request, BinaryPayload(i));
    EXPECT_TRUE(tasks[i].is_task());
    ids.insert(tasks[i].id);
    EXPECT_EQ(MustGet(tasks[i].id).parent_id, parent.id);  // GetJob reads tasks too
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_FALSE(parent.is_task());
  EXPECT_EQ(parent.task_index, -1);

  // Submitting the batch again (the job re-run after a crash) returns the same tasks, from
  // another store instance too; a batch of another size is refused.
  std::unique_ptr<JobStore> other = Open();
  ASSERT_OK_AND_ASSIGN(std::vector<Job> again,
                       other->SubmitTasks(parent.id, "runs", kTaskKind, {"x", "y", "z"}));
  ASSERT_EQ(again.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(again[i].id, tasks[i].id);
    EXPECT_EQ(again[i].request, BinaryPayload(i));
  }
  EXPECT_STATUS_CODE(store_->SubmitTasks(parent.id, "runs", kTaskKind, {"x"}),
                     absl::StatusCode::kFailedPrecondition);
  // Another batch of the same job is separate.
  ASSERT_OK_AND_ASSIGN(std::vector<Job> step, store_->SubmitTasks(parent.id, "step-1", kTaskKind,
                                                                  {"s"}));
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].task_index, 0);

  ASSERT_OK_AND_ASSIGN(std::vector<Job> listed, store_->ListTasks(parent.id, "runs", true));
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[2].request, BinaryPayload(2));
  ASSERT_OK_AND_ASSIGN(std::vector<Job> light, store_->ListTasks(parent.id, "runs", false));
  ASSERT_EQ(light.size(), 3u);
  EXPECT_EQ(light[1].id, tasks[1].id);
  EXPECT_EQ(light[1].request, "");
  EXPECT_EQ(light[1].state, JobState::kQueued);
  ASSERT_OK_AND_ASSIGN(std::vector<Job> none, store_->ListTasks(parent.id, "nothing", false));
  EXPECT_TRUE(none.empty());

  // Tasks are not jobs: ListJobs, CountByState and the queue limit see the one job only.
  ASSERT_OK_AND_ASSIGN(ListJobsResponse all, store_->ListJobs({}));
  ASSERT_EQ(all.jobs.size(), 1u);
  EXPECT_EQ(all.jobs[0].id, parent.id);
  ASSERT_OK_AND_ASSIGN(JobCounts counts, store_->CountByState());
  EXPECT_EQ(counts[JobState::kQueued], 0);
  EXPECT_EQ(counts[JobState::kRunning], 1);
  ASSERT_OK_AND_ASSIGN(SubmitResult fits, store_->Submit(kKind, "next", "", /*max_queued=*/1));
  EXPECT_TRUE(fits.created);
}

TEST_P(JobStoreConformanceTest, SubmitTasksRefusesJobsThatCannotTakeTasks) {
  EXPECT_STATUS_CODE(store_->SubmitTasks("01ARZ3NDEKTSV4RRFFQ69G5FAV", "runs", kTaskKind, {"a"}),
                     absl::StatusCode::kNotFound);
  auto [parent, tasks] = RunningJobWithTasks(*store_, 1);
  ASSERT_EQ(tasks.size(), 1u);
  const Job queued = MustSubmit(*store_, "queued");
  EXPECT_STATUS_CODE(store_->SubmitTasks(queued.id, "runs", kTaskKind, {"a"}),
                     absl::StatusCode::kFailedPrecondition);
  EXPECT_STATUS_CODE(store_->SubmitTasks(tasks[0].id, "runs", kTaskKind, {"a"}),
                     absl::StatusCode::kFailedPrecondition);  // a task has no tasks
  // A job with a cancel request takes no more tasks: they would escape the cancellation.
  ASSERT_TRUE(store_->RequestCancel(parent.id).ok());
  EXPECT_STATUS_CODE(store_->SubmitTasks(parent.id, "more", kTaskKind, {"a"}),
                     absl::StatusCode::kCancelled);
  ASSERT_OK_AND_ASSIGN(std::vector<Job> none_added, store_->ListTasks(parent.id, "more", false));
  EXPECT_TRUE(none_added.empty());
  ASSERT_TRUE(store_->Complete(parent.id, parent.attempts, "done").ok());
  EXPECT_STATUS_CODE(store_->SubmitTasks(parent.id, "more", kTaskKind, {"a"}),
                     absl::StatusCode::kFailedPrecondition);
  // Argument checks name the field.
  EXPECT_STATUS_CODE(store_->SubmitTasks("", "runs", kTaskKind, {"a"}),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->SubmitTasks(parent.id, "", kTaskKind, {"a"}),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->SubmitTasks(parent.id, std::string(65, 'b'), kTaskKind, {"a"}),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->SubmitTasks(parent.id, "runs", "", {"a"}),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->SubmitTasks(parent.id, "runs", kTaskKind, {}),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->ListTasks(parent.id, "", false), absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->ClaimTask("", "runs", "w", kLease),
                     absl::StatusCode::kInvalidArgument);
  EXPECT_STATUS_CODE(store_->ClaimTask(parent.id, "", "w", kLease),
                     absl::StatusCode::kInvalidArgument);
}

TEST_P(JobStoreConformanceTest, ClaimTakesTasksBeforeJobsAndClaimTaskOnlyItsJobs) {
  const Job first = MustSubmit(*store_, "first job");
  const Job second = MustSubmit(*store_, "second job");
  const Job waiting = MustSubmit(*store_, "queued before any task exists");
  ASSERT_EQ(MustClaim(*store_, "w0")->id, first.id);
  ASSERT_EQ(MustClaim(*store_, "w0")->id, second.id);
  ASSERT_OK_AND_ASSIGN(std::vector<Job> first_tasks,
                       store_->SubmitTasks(first.id, "runs", kTaskKind, {"a0", "a1"}));
  ASSERT_OK_AND_ASSIGN(std::vector<Job> second_tasks,
                       store_->SubmitTasks(second.id, "runs", kTaskKind, {"b0"}));

  // ClaimTask takes only the tasks of the job it names.
  ASSERT_OK_AND_ASSIGN(std::optional<Job> mine,
                       store_->ClaimTask(second.id, "runs", "w1", kLongLease));
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(mine->id, second_tasks[0].id);
  EXPECT_EQ(mine->state, JobState::kRunning);
  EXPECT_EQ(mine->attempts, 1);
  EXPECT_EQ(mine->lease_owner, "w1");
  ASSERT_OK_AND_ASSIGN(std::optional<Job> no_more,
                       store_->ClaimTask(second.id, "runs", "w1", kLongLease));
  EXPECT_FALSE(no_more.has_value());
  // Nor does it take another batch's tasks.
  ASSERT_OK_AND_ASSIGN(std::vector<Job> other_batch,
                       store_->SubmitTasks(first.id, "other", kTaskKind, {"c0"}));
  ASSERT_OK_AND_ASSIGN(std::optional<Job> not_this_batch,
                       store_->ClaimTask(first.id, "runs", "w1", kLongLease));
  ASSERT_TRUE(not_this_batch.has_value());
  EXPECT_EQ(not_this_batch->id, first_tasks[0].id);
  ASSERT_OK_AND_ASSIGN(std::optional<Job> from_other,
                       store_->ClaimTask(first.id, "other", "w1", kLongLease));
  ASSERT_TRUE(from_other.has_value());
  EXPECT_EQ(from_other->id, other_batch[0].id);

  // Claim hands out the remaining task before the job that was queued first.
  EXPECT_EQ(MustClaim(*store_, "w2")->id, first_tasks[1].id);
  EXPECT_EQ(MustClaim(*store_, "w2")->id, waiting.id);
  EXPECT_FALSE(MustClaim(*store_, "w2").has_value());
}

TEST_P(JobStoreConformanceTest, TasksHaveLeasesFencingAndResults) {
  auto [parent, tasks] = RunningJobWithTasks(*store_, 2);
  ASSERT_EQ(tasks.size(), 2u);
  ASSERT_OK_AND_ASSIGN(std::optional<Job> first, store_->ClaimTask(parent.id, "runs", "a", kLease));
  ASSERT_TRUE(first.has_value());
  ASSERT_OK_AND_ASSIGN(HeartbeatResponse beat,
                       store_->Heartbeat(first->id, first->attempts, 0.5, "half", kLease));
  EXPECT_FALSE(beat.cancel_requested);
  // Its worker dies: the lease expires and the task is claimed again, with a new token.
  absl::SleepFor(kPastLease);
  ASSERT_OK_AND_ASSIGN(std::optional<Job> again,
                       store_->ClaimTask(parent.id, "runs", "b", kLongLease));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->id, first->id);
  EXPECT_EQ(again->attempts, 2);
  EXPECT_STATUS_CODE(store_->Complete(first->id, first->attempts, "stale"),
                     absl::StatusCode::kAborted);
  ASSERT_TRUE(store_->Complete(again->id, again->attempts, BinaryPayload(7)).ok());
  ASSERT_OK_AND_ASSIGN(std::vector<Job> listed, store_->ListTasks(parent.id, "runs", true));
  EXPECT_EQ(listed[0].state, JobState::kSucceeded);
  EXPECT_EQ(listed[0].result, BinaryPayload(7));
  EXPECT_EQ(listed[1].state, JobState::kQueued);
  ASSERT_OK_AND_ASSIGN(std::vector<Job> light, store_->ListTasks(parent.id, "runs", false));
  EXPECT_EQ(light[0].state, JobState::kSucceeded);
  EXPECT_EQ(light[0].result, "");
  EXPECT_DOUBLE_EQ(light[0].progress, 1.0);
}

TEST_P(JobStoreConformanceTest, CancellingAJobCancelsItsTasks) {
  auto [parent, tasks] = RunningJobWithTasks(*store_, 3);
  ASSERT_EQ(tasks.size(), 3u);
  ASSERT_OK_AND_ASSIGN(std::optional<Job> running,
                       store_->ClaimTask(parent.id, "runs", "w", kLongLease));
  ASSERT_TRUE(running.has_value());
  ASSERT_OK_AND_ASSIGN(std::optional<Job> done,
                       store_->ClaimTask(parent.id, "runs", "w", kLongLease));
  ASSERT_TRUE(done.has_value());
  ASSERT_TRUE(store_->Complete(done->id, done->attempts, "r").ok());

  ASSERT_OK_AND_ASSIGN(Job cancelled, store_->RequestCancel(parent.id));
  EXPECT_TRUE(cancelled.cancel_requested);
  ASSERT_OK_AND_ASSIGN(std::vector<Job> after, store_->ListTasks(parent.id, "runs", false));
  EXPECT_EQ(after[0].state, JobState::kRunning);  // told at its next heartbeat
  EXPECT_TRUE(after[0].cancel_requested);
  EXPECT_EQ(after[1].state, JobState::kSucceeded);  // finished stays finished
  EXPECT_EQ(after[2].state, JobState::kCancelled);  // queued: cancelled at once
  EXPECT_EQ(after[2].error_code, static_cast<int>(absl::StatusCode::kCancelled));
  ASSERT_OK_AND_ASSIGN(HeartbeatResponse beat,
                       store_->Heartbeat(running->id, running->attempts, 0.1, "", kLongLease));
  EXPECT_TRUE(beat.cancel_requested);
}

TEST_P(JobStoreConformanceTest, TasksOfAnEndedJobStopAndAreNotStarted) {
  auto [parent, tasks] = RunningJobWithTasks(*store_, 2);
  ASSERT_EQ(tasks.size(), 2u);
  ASSERT_OK_AND_ASSIGN(std::optional<Job> running,
                       store_->ClaimTask(parent.id, "runs", "w", kLongLease));
  ASSERT_TRUE(running.has_value());
  // The job fails (e.g. another of its tasks failed) without cancelling its tasks itself.
  ASSERT_TRUE(store_->Fail(parent.id, parent.attempts, absl::InternalError("boom")).ok());
  ASSERT_OK_AND_ASSIGN(HeartbeatResponse beat,
                       store_->Heartbeat(running->id, running->attempts, 0.3, "", kLongLease));
  EXPECT_TRUE(beat.cancel_requested);
  // The queued task is never handed out: the next Claim cancels it.
  EXPECT_FALSE(MustClaim(*store_, "w2").has_value());
  const Job orphan = MustGet(tasks[1].id);
  EXPECT_EQ(orphan.state, JobState::kCancelled);
  EXPECT_EQ(orphan.attempts, 0);
}

TEST_P(JobStoreConformanceTest, ReleasedJobKeepsItsTasksRunning) {
  // The job's worker shuts down gracefully: the job is queued again, its tasks carry on (they
  // are handed out first), and the job re-run finds its batch with the results so far.
  auto [parent, tasks] = RunningJobWithTasks(*store_, 2);
  ASSERT_EQ(tasks.size(), 2u);
  ASSERT_OK_AND_ASSIGN(std::optional<Job> t0,
                       store_->ClaimTask(parent.id, "runs", "w", kLongLease));
  ASSERT_TRUE(store_->Complete(t0->id, t0->attempts, "zero").ok());
  ASSERT_OK_AND_ASSIGN(int64_t released, store_->ReleaseLeases("parent-worker"));
  EXPECT_EQ(released, 1);
  std::optional<Job> t1 = MustClaim(*store_, "other");
  ASSERT_TRUE(t1.has_value());
  EXPECT_EQ(t1->id, tasks[1].id);
  std::optional<Job> rerun = MustClaim(*store_, "other");
  ASSERT_TRUE(rerun.has_value());
  EXPECT_EQ(rerun->id, parent.id);
  EXPECT_EQ(rerun->attempts, 2);
  ASSERT_OK_AND_ASSIGN(std::vector<Job> batch,
                       store_->SubmitTasks(parent.id, "runs", kTaskKind, {"p", "q"}));
  EXPECT_EQ(batch[0].state, JobState::kSucceeded);
  EXPECT_EQ(batch[0].result, "zero");
  EXPECT_EQ(batch[1].state, JobState::kRunning);
}

TEST_P(JobStoreConformanceTest, PurgeTakesTasksWithTheirJobOnly) {
  auto [parent, tasks] = RunningJobWithTasks(*store_, 1);
  ASSERT_OK_AND_ASSIGN(std::optional<Job> t, store_->ClaimTask(parent.id, "runs", "w", kLongLease));
  ASSERT_TRUE(store_->Complete(t->id, t->attempts, "r").ok());
  // The task finished long enough ago, but its job still runs: it stays.
  absl::SleepFor(absl::Milliseconds(20));
  ASSERT_OK_AND_ASSIGN(int64_t none, store_->PurgeFinished(absl::ZeroDuration()));
  EXPECT_EQ(none, 0);
  EXPECT_EQ(MustGet(t->id).state, JobState::kSucceeded);
  ASSERT_TRUE(store_->Complete(parent.id, parent.attempts, "all").ok());
  ASSERT_OK_AND_ASSIGN(int64_t both, store_->PurgeFinished(absl::ZeroDuration()));
  EXPECT_EQ(both, 2);
  EXPECT_STATUS_CODE(store_->GetJob(t->id), absl::StatusCode::kNotFound);
  EXPECT_STATUS_CODE(store_->GetJob(parent.id), absl::StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobStoreConformanceTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName);

}  // namespace
}  // namespace gpsel
