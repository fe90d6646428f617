// Scale-out tests with real processes: two gpsel-server binaries sharing one job queue.
//   * kill -9 of the server that holds a running evidence job: the other server takes the job
//     over once the lease expires and finishes it, once, with the result an uninterrupted run
//     gives; jobs queued around the kill are neither lost nor duplicated.
//   * an evidence job of four nested-sampling runs: its runs (tasks) spread over both servers;
//     kill -9 of the server holding the job and one of its runs: the other server runs what was
//     lost again, re-runs the job, which finds its finished runs, and the merged result is the
//     in-process one, bit for bit, with every run counted once.
//   * a search job: its candidates (tasks) spread over both servers; kill -9 of the server
//     holding the job: the survivor finishes it with the in-process search's result, every
//     candidate fitted and counted once.
//   * concurrent submitters sending the same idempotency keys to both servers: one job per key.
// The shared queue is PostgreSQL (GPSEL_TEST_POSTGRES_URL; skipped when unset, like the job
// store suite) and, since several processes on one host may share it too, a SQLite file.
#include <signal.h>
#include <sys/types.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/message_differencer.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/server/jobs/evidence_job.h"
#include "gpsel/server/jobs/search_job.h"
#include "gpsel/server/store/job_store.h"
#include "gtest/gtest.h"
#include "tests/server/service/server_test_util.h"
#include "tests/server/store/job_store_test_util.h"
#include "tests/test_timeout.h"

namespace gpsel::testing {
namespace {

// Short enough that the takeover happens within seconds, long enough (heartbeats every
// lease/3) that a loaded 2-core machine does not let a live worker's lease lapse.
constexpr int kLeaseSeconds = 2;

// The value of one exact series line ("name{labels} value") of a Prometheus text page.
std::optional<double> MetricValue(const std::string& page, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, series + " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return std::nullopt;
}

// Every job of the queue, through ListJobs pages.
std::vector<v1::Job> AllJobs(Client& client) {
  std::vector<v1::Job> jobs;
  v1::ListJobsRequest request;
  request.set_page_size(7);  // small pages: paging must not drop or repeat a job either
  do {
    absl::StatusOr<v1::ListJobsResponse> page = client.ListJobs(request);
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) break;
    for (const v1::Job& job : page->jobs()) jobs.push_back(job);
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  return jobs;
}

// A quick evidence job (about a tenth of a second).
v1::SubmitEvidenceRequest ShortRequest(const std::string& key, int seed) {
  v1::SubmitEvidenceRequest request;
  bridge::ToProto(LoadData("interpretable_linear.csv"), request.mutable_dataset());
  request.set_kernel("SE");
  request.set_request_id(key);
  request.mutable_options()->set_live_points(60);
  request.mutable_options()->set_dlogz(0.2);
  request.mutable_options()->set_seed(seed);
  request.mutable_options()->mutable_fit()->set_standardize(false);
  return request;
}

// Which of `servers` a lease owner ("HOST-PID-wN") belongs to; -1 for none.
int OwnerIndex(const std::string& owner, ServerProcess* const* servers, int count) {
  for (int i = 0; i < count; ++i) {
    if (absl::StrContains(owner, absl::StrCat("-", servers[i]->pid(), "-w"))) return i;
  }
  return -1;
}

// The moment both servers run tasks of job `id` at once (the job's own worker one, the other
// server's worker another): the job and its tasks as read then, which server holds the job (the
// victim of the kill that follows) and the tasks it was running.
struct BothServersBusy {
  Job job;
  std::vector<Job> tasks;
  int victim = -1;
  std::set<std::string> victims_tasks;
};
// `batches`: the job's task batches to watch. Fails the test (and returns nullopt) when the job
// ends first or the moment does not come within `limit`.
std::optional<BothServersBusy> WaitUntilBothServersRunTasks(JobStore& store, const std::string& id,
                                                            const std::vector<std::string>& batches,
                                                            ServerProcess* const* servers,
                                                            absl::Duration limit) {
  BothServersBusy seen;
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    absl::StatusOr<Job> job = store.GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return std::nullopt;
    seen.job = *job;
    if (IsTerminal(seen.job.state)) break;
    seen.tasks.clear();
    for (const std::string& batch : batches) {
      absl::StatusOr<std::vector<Job>> listed = store.ListTasks(id, batch, false);
      EXPECT_TRUE(listed.ok()) << listed.status();
      if (!listed.ok()) return std::nullopt;
      seen.tasks.insert(seen.tasks.end(), listed->begin(), listed->end());
    }
    std::set<int> busy;
    for (const Job& task : seen.tasks) {
      if (task.state == JobState::kRunning) busy.insert(OwnerIndex(task.lease_owner, servers, 2));
    }
    if (!busy.count(0) || !busy.count(1)) continue;
    seen.victim = OwnerIndex(seen.job.lease_owner, servers, 2);
    EXPECT_NE(seen.victim, -1) << seen.job.lease_owner;
    for (const Job& task : seen.tasks) {
      if (task.state == JobState::kRunning &&
          OwnerIndex(task.lease_owner, servers, 2) == seen.victim) {
        seen.victims_tasks.insert(task.id);
      }
    }
    return seen;
  }
  ADD_FAILURE() << "the tasks never ran on both servers at once; job "
                << JobStateName(seen.job.state) << ", " << seen.tasks.size() << " tasks";
  return std::nullopt;
}

class ScaleOutTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("gpsel-scale-out-test");
    if (GetParam() == Backend::kPostgres) {
      const char* url = PostgresUrlFromEnv();
      if (url == nullptr) GTEST_SKIP() << kPostgresSkipMessage;
      // A schema of its own, so ctest -j can run other PostgreSQL tests at the same time.
      absl::StatusOr<std::unique_ptr<PostgresTestDatabase>> db = PostgresTestDatabase::Create(url);
      ASSERT_TRUE(db.ok()) << db.status();
      postgres_ = *std::move(db);
      store_url_ = postgres_->url();
    } else {
      store_url_ = "sqlite:" + (dir_ / "jobs.db").string();
    }
  }
  void TearDown() override {
    servers_.clear();  // kill -9 whatever is left before the schema is dropped
    postgres_.reset();
    if (HasFailure()) {
      std::cerr << "server logs kept in " << dir_ << "\n";  // to see why
    } else {
      std::filesystem::remove_all(dir_);
    }
  }

  // Starts gpsel-server number `index` (its log is server-INDEX.log in the test directory).
  ServerProcess* StartServer(int index, int job_workers) {
    const std::vector<std::string> args = {
        "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--store", store_url_,
        "--workers", "1", "--job-workers", absl::StrCat(job_workers), "--job-lease",
        absl::StrCat(kLeaseSeconds), "--watch-poll-ms", "50"};
    const std::filesystem::path log = dir_ / absl::StrCat("server-", index, ".log");
    servers_.push_back(std::make_unique<ServerProcess>(args, log));
    EXPECT_GT(servers_.back()->port(), 0) << "gpsel-server did not start; see " << log;
    return servers_.back().get();
  }

  std::string ServerLog(int index) const {
    std::ifstream in(dir_ / absl::StrCat("server-", index, ".log"));
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  std::filesystem::path dir_;
  std::unique_ptr<PostgresTestDatabase> postgres_;
  std::string store_url_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
};

TEST_P(ScaleOutTest, OtherServerFinishesTheJobOfAKilledServerOnce) {
  ServerProcess* servers[2] = {StartServer(0, 1), StartServer(1, 1)};
  ASSERT_GT(servers[0]->port(), 0);
  ASSERT_GT(servers[1]->port(), 0);
  std::unique_ptr<Client> clients[2] = {Connect(servers[0]->port()), Connect(servers[1]->port())};
  // The test reads the lease owner straight from the shared store, as an operator would.
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(store_url_);
  ASSERT_TRUE(store.ok()) << store.status();

  // A job that runs for a few seconds (about 5 s alone on this 2-core machine), so that it is
  // killed in the middle, after its first heartbeat (lease/3) has reported progress.
  v1::SubmitEvidenceRequest long_request;
  bridge::ToProto(MaunaLoa(240), long_request.mutable_dataset());
  long_request.set_kernel("C*SE");
  long_request.set_request_id("scale-out-long");
  long_request.mutable_options()->set_live_points(400);
  long_request.mutable_options()->set_dlogz(0.05);
  long_request.mutable_options()->set_seed(3);
  absl::StatusOr<v1::SubmitEvidenceResponse> submitted = clients[0]->SubmitEvidence(long_request);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string name = submitted->job().name();
  const std::string id = std::string(absl::StripPrefix(name, "jobs/"));

  absl::Time deadline = absl::Now() + Scaled(absl::Seconds(30));
  Job claimed;
  do {
    absl::SleepFor(absl::Milliseconds(50));
    absl::StatusOr<Job> job = (*store)->GetJob(id);
    ASSERT_TRUE(job.ok()) << job.status();
    claimed = *job;
  } while (claimed.state == JobState::kQueued && absl::Now() < deadline);
  ASSERT_EQ(claimed.state, JobState::kRunning);
  ASSERT_EQ(claimed.attempts, 1);

  // Worker ids are "HOST-PID-wN": the owner's pid tells which process holds the job.
  const int victim = OwnerIndex(claimed.lease_owner, servers, 2);
  ASSERT_NE(victim, -1) << "lease owner " << claimed.lease_owner << " is neither server (pids "
                        << servers[0]->pid() << ", " << servers[1]->pid() << ")";
  const int survivor = 1 - victim;
  // The owner's own metrics agree: it is running an evidence job. The worker counts the job
  // just after its claim commits, so the gauge may lag the store by a moment on a loaded machine.
  std::optional<double> running_gauge;
  deadline = absl::Now() + Scaled(absl::Seconds(10));
  do {
    running_gauge = MetricValue(HttpGet(servers[victim]->metrics_port(), "/metrics"),
                                "gpsel_jobs_running{kind=\"evidence\"}");
    if (running_gauge == 1.0) break;
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < deadline);
  EXPECT_EQ(running_gauge, 1.0);

  // Jobs queued across the kill: some submitted before it (through both servers) ...
  std::vector<v1::SubmitEvidenceRequest> short_requests;
  std::vector<std::string> short_names;
  for (int i = 0; i < 6; ++i) {
    short_requests.push_back(ShortRequest(absl::StrCat("scale-out-short-", i), 10 + i));
  }
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<v1::SubmitEvidenceResponse> s =
        clients[i % 2]->SubmitEvidence(short_requests[i]);
    ASSERT_TRUE(s.ok()) << s.status();
    short_names.push_back(s->job().name());
  }

  // Kill it mid-run: once its worker has reported progress through a heartbeat.
  absl::StatusOr<Job> before_kill;
  deadline = absl::Now() + Scaled(absl::Seconds(30));
  do {
    absl::SleepFor(absl::Milliseconds(50));
    before_kill = (*store)->GetJob(id);
    ASSERT_TRUE(before_kill.ok()) << before_kill.status();
  } while (before_kill->state == JobState::kRunning && before_kill->progress == 0 &&
           absl::Now() < deadline);
  ASSERT_EQ(before_kill->state, JobState::kRunning) << "job too short to kill";
  ASSERT_EQ(before_kill->attempts, 1);
  ASSERT_EQ(before_kill->lease_owner, claimed.lease_owner);
  ASSERT_GT(before_kill->progress, 0.0);
  const std::string victim_owner = claimed.lease_owner;
  servers[victim]->Kill(SIGKILL);
  // Heartbeats only extend a lease, so the lease read before the kill ends no later than the
  // one the dead worker left behind.
  const absl::Time lease_seen = before_kill->lease_expires;

  // ... and some after it, through the survivor.
  for (int i = 3; i < 6; ++i) {
    absl::StatusOr<v1::SubmitEvidenceResponse> s =
        clients[survivor]->SubmitEvidence(short_requests[i]);
    ASSERT_TRUE(s.ok()) << s.status();
    short_names.push_back(s->job().name());
  }

  // Follow the job in the store until it ends: every later attempt is the survivor's.
  std::set<std::string> later_owners;
  deadline = absl::Now() + Scaled(absl::Seconds(60));
  Job last;
  while (absl::Now() < deadline) {
    absl::StatusOr<Job> job = (*store)->GetJob(id);
    ASSERT_TRUE(job.ok()) << job.status();
    last = *job;
    if (last.state == JobState::kRunning && last.attempts >= 2) {
      later_owners.insert(last.lease_owner);
    }
    if (IsTerminal(last.state)) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(IsTerminal(last.state)) << "job still " << JobStateName(last.state) << " after "
                                      << Scaled(absl::Seconds(60))
                                      << " (was the lease never reclaimed?)";
  EXPECT_EQ(last.state, JobState::kSucceeded) << last.error_message;
  EXPECT_GE(last.attempts, 2);
  // Taken over only once the dead worker's lease had run out (not released, not stolen early).
  EXPECT_GE(last.started, lease_seen);
  ASSERT_FALSE(later_owners.empty()) << "never saw the second attempt running";
  for (const std::string& owner : later_owners) {
    EXPECT_NE(owner, victim_owner);
    EXPECT_TRUE(absl::StrContains(owner, absl::StrCat("-", servers[survivor]->pid(), "-w")))
        << owner;
  }

  absl::StatusOr<v1::Job> done =
      clients[survivor]->WaitJob(name, nullptr, Scaled(absl::Seconds(60)));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED);
  // An uninterrupted run with the same seed gives the same bits: the takeover re-ran the job
  // from the start and published that run's result, not a mixture.
  absl::StatusOr<std::string> reference =
      RunEvidenceJob(long_request.SerializeAsString(), ServiceLimits(), nullptr);
  ASSERT_TRUE(reference.ok()) << reference.status();
  v1::EvidenceResult expected;
  ASSERT_TRUE(expected.ParseFromString(*reference));
  EXPECT_EQ(done->evidence_result().log_evidence(), expected.log_evidence());
  EXPECT_EQ(done->evidence_result().likelihood_calls(), expected.likelihood_calls());
  EXPECT_EQ(done->evidence_result().iterations(), expected.iterations());

  // No job lost, none twice: the queue holds exactly the seven submitted jobs, all finished.
  for (const std::string& short_name : short_names) {
    absl::StatusOr<v1::Job> job = clients[survivor]->WaitJob(short_name, nullptr,
                                                             Scaled(absl::Seconds(60)));
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << short_name << ": "
                                                     << job->error().message();
  }
  std::vector<v1::Job> jobs = AllJobs(*clients[survivor]);
  ASSERT_EQ(jobs.size(), 7u);
  std::map<std::string, std::string> name_by_key;
  for (const v1::Job& job : jobs) {
    EXPECT_TRUE(name_by_key.emplace(job.request_id(), job.name()).second)
        << "two jobs for key " << job.request_id();
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.name();
    EXPECT_TRUE(job.has_evidence_result()) << job.name();
  }
  EXPECT_EQ(name_by_key["scale-out-long"], name);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(name_by_key[short_requests[i].request_id()], short_names[i]);
  }
  // The one visible result is stable: a retried submit returns it unchanged.
  absl::StatusOr<v1::SubmitEvidenceResponse> again =
      clients[survivor]->SubmitEvidence(long_request);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created());
  EXPECT_EQ(again->job().name(), name);
  EXPECT_EQ(again->job().evidence_result().log_evidence(), expected.log_evidence());
  // The survivor never tried to publish without the lease (a live worker's lease must hold).
  EXPECT_FALSE(absl::StrContains(ServerLog(survivor), "no longer holds the lease"))
      << ServerLog(survivor);
}

TEST_P(ScaleOutTest, RunsOfOneEvidenceJobSpreadOverServersAndSurviveAKill) {
  ServerProcess* servers[2] = {StartServer(0, 1), StartServer(1, 1)};
  ASSERT_GT(servers[0]->port(), 0);
  ASSERT_GT(servers[1]->port(), 0);
  std::unique_ptr<Client> clients[2] = {Connect(servers[0]->port()), Connect(servers[1]->port())};
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(store_url_);
  ASSERT_TRUE(store.ok()) << store.status();

  // Four runs of about two seconds each alone on this machine.
  constexpr int kRuns = 4;
  v1::SubmitEvidenceRequest request;
  bridge::ToProto(MaunaLoa(240), request.mutable_dataset());
  request.set_kernel("C*SE");
  request.set_request_id("scale-out-runs");
  request.mutable_options()->set_live_points(200);
  request.mutable_options()->set_dlogz(0.1);
  request.mutable_options()->set_seed(11);
  request.mutable_options()->set_runs(kRuns);
  absl::StatusOr<v1::SubmitEvidenceResponse> submitted = clients[0]->SubmitEvidence(request);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string name = submitted->job().name();
  const std::string id = std::string(absl::StripPrefix(name, "jobs/"));

  std::optional<BothServersBusy> busy = WaitUntilBothServersRunTasks(
      **store, id, {kNestedRunsBatch}, servers, Scaled(absl::Seconds(60)));
  ASSERT_TRUE(busy.has_value());
  ASSERT_EQ(busy->tasks.size(), static_cast<size_t>(kRuns));
  ASSERT_EQ(busy->job.state, JobState::kRunning);
  ASSERT_NE(busy->victim, -1);
  const int victim = busy->victim;
  const int survivor = 1 - victim;
  const std::set<std::string> victims_tasks = busy->victims_tasks;
  ASSERT_FALSE(victims_tasks.empty());
  servers[victim]->Kill(SIGKILL);

  // The survivor finishes everything: the lost run again, the job again after its lease ran out.
  absl::StatusOr<v1::Job> done = clients[survivor]->WaitJob(name, nullptr, Scaled(absl::Seconds(120)));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->error().message();
  EXPECT_GE(done->attempts(), 2);

  // The merged result is the one this process computes with all runs in-process.
  absl::StatusOr<std::string> reference =
      RunEvidenceJob(request.SerializeAsString(), ServiceLimits(), nullptr);
  ASSERT_TRUE(reference.ok()) << reference.status();
  v1::EvidenceResult expected;
  ASSERT_TRUE(expected.ParseFromString(*reference));
  // Every field but the wall times, bit for bit.
  v1::EvidenceResult got = done->evidence_result();
  for (v1::EvidenceResult* r : {&got, &expected}) {
    r->clear_seconds();
    for (v1::NestedSamplingRun& run : *r->mutable_runs()) run.clear_seconds();
  }
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, expected))
      << "merged over servers:\n" << got.DebugString() << "\nin-process:\n"
      << expected.DebugString();
  EXPECT_NE(got.log_evidence(), 0.0);
  // Every run counted once: four runs, the four seeds of the job.
  ASSERT_EQ(got.runs_size(), kRuns);
  std::set<uint64_t> seeds;
  for (const v1::NestedSamplingRun& run : got.runs()) seeds.insert(run.seed());
  std::set<uint64_t> expected_seeds;
  for (int k = 0; k < kRuns; ++k) expected_seeds.insert(NestedSamplingRunSeed(11, k));
  EXPECT_EQ(seeds, expected_seeds);

  // In the store: four tasks, each succeeded, none started more than twice, and what the victim
  // was running when it was seen was run again (unless it finished in the moment before the
  // kill; it cannot all have).
  absl::StatusOr<std::vector<Job>> after =
      (*store)->ListTasks(id, kNestedRunsBatch, /*with_payloads=*/false);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), static_cast<size_t>(kRuns));
  int rerun_of_victims = 0;
  for (const Job& task : *after) {
    EXPECT_EQ(task.state, JobState::kSucceeded) << task.id;
    EXPECT_GE(task.attempts, 1) << task.id;
    EXPECT_LE(task.attempts, 2) << task.id;
    rerun_of_victims += victims_tasks.count(task.id) && task.attempts == 2;
  }
  EXPECT_GE(rerun_of_victims, 1);
  // Tasks are not jobs: the queue shows the one job.
  std::vector<v1::Job> jobs = AllJobs(*clients[survivor]);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].name(), name);
}

// A search job's candidates spread over both servers; kill -9 of the server holding the job
// while both run candidates: the survivor runs what was lost again, re-runs the job (which finds
// the steps and outcomes stored so far), and the result is the in-process search's, field for
// field, with every candidate fitted and counted once.
TEST_P(ScaleOutTest, SearchCandidatesSpreadOverServersAndSurviveAKill) {
  ServerProcess* servers[2] = {StartServer(0, 1), StartServer(1, 1)};
  ASSERT_GT(servers[0]->port(), 0);
  ASSERT_GT(servers[1]->port(), 0);
  std::unique_ptr<Client> clients[2] = {Connect(servers[0]->port()), Connect(servers[1]->port())};
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(store_url_);
  ASSERT_TRUE(store.ok()) << store.status();

  // Two steps of a few candidates, each fit a fraction of a second to a second here.
  v1::SubmitSearchRequest request;
  bridge::ToProto(MaunaLoa(240), request.mutable_search()->mutable_dataset());
  for (const char* base : {"SE", "PER", "LIN"}) request.mutable_search()->add_base_kernels(base);
  request.mutable_search()->set_max_depth(2);
  request.mutable_search()->set_threads(1);  // one candidate at a time on the job's worker
  request.mutable_search()->mutable_fit()->set_restarts(3);
  request.mutable_search()->mutable_fit()->set_seed(7);
  request.set_request_id("scale-out-search");
  absl::StatusOr<v1::SubmitSearchResponse> submitted = clients[0]->SubmitSearch(request);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string name = submitted->job().name();
  const std::string id = std::string(absl::StripPrefix(name, "jobs/"));

  std::optional<BothServersBusy> busy = WaitUntilBothServersRunTasks(
      **store, id, {"step-1", "step-2"}, servers, Scaled(absl::Seconds(90)));
  ASSERT_TRUE(busy.has_value());
  ASSERT_NE(busy->victim, -1);
  const int victim = busy->victim;
  const int survivor = 1 - victim;
  const std::set<std::string> victims_tasks = busy->victims_tasks;
  ASSERT_FALSE(victims_tasks.empty());
  servers[victim]->Kill(SIGKILL);

  absl::StatusOr<v1::Job> done =
      clients[survivor]->WaitJob(name, nullptr, Scaled(absl::Seconds(180)));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->error().message();
  EXPECT_GE(done->attempts(), 2);

  // The search this process makes on its own threads, with no store and no other replica.
  absl::StatusOr<std::string> reference =
      RunSearchJob(request.SerializeAsString(), ServiceLimits(), nullptr);
  ASSERT_TRUE(reference.ok()) << reference.status();
  v1::SearchResult expected;
  ASSERT_TRUE(expected.ParseFromString(*reference));
  const v1::SearchResult got = WithoutSeconds(done->search_result());
  expected = WithoutSeconds(expected);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, expected))
      << "over servers:\n" << got.DebugString() << "\nin-process:\n" << expected.DebugString();
  ASSERT_EQ(got.steps_size(), 2);

  // Every candidate fitted is one task that succeeded; none started more than twice, and what
  // the victim was running when it was killed ran again (unless it finished in that moment; it
  // cannot all have).
  std::vector<Job> after;
  for (int step = 1; step <= 2; ++step) {
    absl::StatusOr<std::vector<Job>> batch =
        (*store)->ListTasks(id, absl::StrCat("step-", step), /*with_payloads=*/false);
    ASSERT_TRUE(batch.ok()) << batch.status();
    after.insert(after.end(), batch->begin(), batch->end());
  }
  EXPECT_EQ(static_cast<int>(after.size()), got.candidates_scored());
  int rerun_of_victims = 0;
  for (const Job& task : after) {
    EXPECT_EQ(task.state, JobState::kSucceeded) << task.id;
    EXPECT_LE(task.attempts, 2) << task.id;
    rerun_of_victims += victims_tasks.count(task.id) && task.attempts == 2;
  }
  EXPECT_GE(rerun_of_victims, 1);
  std::vector<v1::Job> jobs = AllJobs(*clients[survivor]);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].name(), name);
  EXPECT_EQ(jobs[0].kind(), "search");
}

TEST_P(ScaleOutTest, ConcurrentSubmittersGetOneJobPerIdempotencyKey) {
  ServerProcess* servers[2] = {StartServer(0, 1), StartServer(1, 1)};
  ASSERT_GT(servers[0]->port(), 0);
  ASSERT_GT(servers[1]->port(), 0);

  constexpr int kSubmitters = 8;
  constexpr int kKeys = 5;
  std::vector<v1::SubmitEvidenceRequest> requests;
  for (int k = 0; k < kKeys; ++k) requests.push_back(ShortRequest(absl::StrCat("key-", k), k));

  struct Outcome {
    absl::Status status;
    std::string name;
    bool created = false;
  };
  // outcomes[submitter][key]
  std::vector<std::vector<Outcome>> outcomes(kSubmitters, std::vector<Outcome>(kKeys));
  absl::Barrier* start = new absl::Barrier(kSubmitters);  // deletes itself (Block returns true)
  std::vector<std::thread> threads;
  for (int s = 0; s < kSubmitters; ++s) {
    threads.emplace_back([&, s] {
      // Each submitter has its own connections, like separate client processes.
      std::unique_ptr<Client> clients[2] = {Connect(servers[0]->port()),
                                            Connect(servers[1]->port())};
      if (start->Block()) delete start;
      for (int i = 0; i < kKeys; ++i) {
        // Submitters start at different keys and alternate servers, so every key is sent to
        // both servers at about the same moment.
        const int k = (s + i) % kKeys;
        absl::StatusOr<v1::SubmitEvidenceResponse> r =
            clients[(s + i) % 2]->SubmitEvidence(requests[k]);
        Outcome& out = outcomes[s][k];
        out.status = r.status();
        if (r.ok()) {
          out.name = r->job().name();
          out.created = r->created();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();

  std::map<int, std::string> name_of_key;
  for (int k = 0; k < kKeys; ++k) {
    int created = 0;
    for (int s = 0; s < kSubmitters; ++s) {
      const Outcome& out = outcomes[s][k];
      ASSERT_TRUE(out.status.ok()) << "submitter " << s << ", key " << k << ": " << out.status;
      if (s == 0) name_of_key[k] = out.name;
      EXPECT_EQ(out.name, name_of_key[k]) << "submitter " << s << " got another job for key " << k;
      created += out.created ? 1 : 0;
    }
    EXPECT_EQ(created, 1) << "key " << k << " reported created " << created << " times";
  }

  // Both servers list the same kKeys jobs, one per key.
  for (int i = 0; i < 2; ++i) {
    std::unique_ptr<Client> client = Connect(servers[i]->port());
    std::vector<v1::Job> jobs = AllJobs(*client);
    EXPECT_EQ(jobs.size(), static_cast<size_t>(kKeys)) << "listed through server " << i;
    std::map<std::string, int> per_key;
    for (const v1::Job& job : jobs) ++per_key[job.request_id()];
    for (int k = 0; k < kKeys; ++k) {
      EXPECT_EQ(per_key[requests[k].request_id()], 1) << "key " << k << " via server " << i;
    }
  }
  // And each of those jobs runs to one result.
  std::unique_ptr<Client> client = Connect(servers[0]->port());
  for (const auto& [k, name] : name_of_key) {
    absl::StatusOr<v1::Job> job = client->WaitJob(name, nullptr, Scaled(absl::Seconds(60)));
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->error().message();
    EXPECT_EQ(job->attempts(), 1) << "nobody died, so nothing ran twice";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ScaleOutTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName);

}  // namespace
}  // namespace gpsel::testing
