// JobRunner: the job workers of one server process, separate from the RPC worker pool. Each
// worker claims a job from the JobStore, runs it with the `execute` of its kind from a
// JobKindRegistry (server/jobs/job_kind.h), and publishes the outcome with the fencing token it
// claimed it with; a heartbeat thread per running job extends the lease, reports progress and
// notices cancellation requests. A worker that dies (kill -9) simply stops heartbeating: its
// lease expires and another worker (after a restart, or on another replica) claims the job
// again, so no job is lost and exactly one result becomes visible.
//
// Outcomes (the `outcome` label of gpsel_jobs_finished_total): succeeded; failed (the executor's
// error is stored; a kind the registry does not know fails with UNIMPLEMENTED naming the known
// kinds); cancelled (the executor stopped on a cancellation request: CANCELLED); released
// (Stop(): the job goes back to QUEUED); lost_lease (another worker owns the job: nothing is
// published); not_stored (the store refused the outcome, e.g. during an outage: the job stays
// RUNNING, is claimed again after its lease and counted by that attempt). Tested by
// tests/server/jobs/job_runner_test.cc and job_outcome_metrics_test.cc.
//
// Tasks: every job gets a JobTasks (server/jobs/job_kind.h) to split its work into tasks in the store.
// Claim hands tasks out before jobs, so idle workers of every replica pick them up; the worker
// of the job itself runs its tasks too while it waits (ClaimTask), so a job never waits on
// workers that are all busy with jobs that wait in turn.
//
//   auto kinds = std::make_shared<gpsel::JobKindRegistry>();
//   gpsel::RegisterEvidenceJobKind(kinds.get(), limits);
//   gpsel::JobRunner runner(store, kinds, options, &metrics);
//   runner.Start();
//   ...
//   runner.Stop();   // stops running jobs without publishing; releases their leases
#ifndef GPSEL_JOBS_JOB_RUNNER_H_
#define GPSEL_JOBS_JOB_RUNNER_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gpsel/server/jobs/job_kind.h"
#include "gpsel/server/metrics/metrics.h"
#include "gpsel/server/store/job_store.h"

namespace gpsel {

struct JobRunnerOptions {
  int workers = 1;                                 // concurrent jobs in this process (0 = none)
  absl::Duration lease = absl::Seconds(30);        // renewed every lease/3
  absl::Duration poll_interval = absl::Milliseconds(500);  // idle wait between claims
  std::string worker_prefix;                       // "" = hostname-pid
};

class JobRunner {
 public:
  // `store` must outlive the runner; `metrics` may be null.
  JobRunner(JobStore* store, std::shared_ptr<const JobKindRegistry> kinds,
            JobRunnerOptions options, ServiceMetrics* metrics);
  ~JobRunner();  // Stop()

  void Start();
  // Wakes an idle worker (a job was just submitted).
  void Wake();
  // Graceful stop: running jobs are asked to stop (nothing is published for them), then every
  // worker's leases are released so the jobs go back to QUEUED at once.
  void Stop();

  int running() const { return running_.load(); }

 private:
  class Tasks;

  void WorkerLoop(const std::string& worker_id);
  // Runs a claimed job or task and publishes its outcome. `outer` (for a task run by the worker
  // of its job) hears the task's progress and can stop it with its answer.
  void RunOne(const std::string& worker_id, const Job& job,
              const ProgressCallback& outer = nullptr);
  // Waits up to the poll interval, or less when stopping or woken.
  void IdleWait();

  JobStore* store_;
  std::shared_ptr<const JobKindRegistry> kinds_;
  JobRunnerOptions options_;
  ServiceMetrics* metrics_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> running_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  int wake_tokens_ = 0;
  std::vector<std::string> worker_ids_;
  std::vector<std::thread> threads_;
};

}  // namespace gpsel

#endif  // GPSEL_JOBS_JOB_RUNNER_H_
