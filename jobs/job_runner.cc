// JobRunner; see job_runner.h.
#include "jobs/job_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpsel {
namespace {

std::string DefaultWorkerPrefix() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] ? host : "gpsel", "-", getpid());
}

// The store's status of a task that did not succeed, as the job's error: the task's own code,
// with its message naming it.
absl::Status TaskError(const Job& task) {
  absl::StatusCode code = task.error_code == 0 ? absl::StatusCode::kUnknown
                                               : static_cast<absl::StatusCode>(task.error_code);
  // A task abandoned after max_attempts carries ABORTED, which from the job's executor would
  // read as "this worker lost the job's lease" and leave the job to be re-run for nothing.
  if (code == absl::StatusCode::kAborted) code = absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat("task ", task.task_index, " of batch '", task.task_batch,
                                         "' (", task.kind, ", ", task.id, "): ",
                                         task.error_message));
}

}  // namespace

// JobTasks for one job run by one worker of this runner.
class JobRunner::Tasks final : public JobTasks {
 public:
  Tasks(JobRunner* runner, const Job& job, const std::string& worker_id)
      : runner_(runner), job_(job), worker_id_(worker_id) {}

  absl::StatusOr<std::vector<std::string>> Run(std::string_view batch, std::string_view kind,
                                               const std::vector<std::string>& requests,
                                               int local_parallelism,
                                               const ProgressCallback& progress) override {
    if (job_.is_task()) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", job_.id, " cannot split its work into tasks"));
    }
    if (local_parallelism < 1) {
      return absl::InvalidArgumentError("local_parallelism: must be at least 1");
    }
    JobStore* store = runner_->store_;
    absl::StatusOr<std::vector<Job>> submitted =
        store->SubmitTasks(job_.id, batch, kind, requests);
    if (!submitted.ok()) return submitted.status();
    const int n = static_cast<int>(requests.size());
    const std::string batch_name(batch);

    // Shared with the tasks this worker runs, each on a thread of its own.
    std::mutex mutex;
    std::condition_variable local_done;
    std::vector<double> fractions(n, 0.0);  // per task, never decreasing
    std::string message;                    // the batch's state, from the last listing
    int local_running = 0;
    absl::Status abandoned;  // non-OK once the job stops waiting: every local task stops with it
    std::vector<std::thread> local;
    struct JoinAll {
      std::vector<std::thread>& threads;
      ~JoinAll() {
        for (std::thread& t : threads) t.join();
      }
    } join_all{local};

    // The tasks' mean progress, told to the job's callback, whose answer stops the waiting.
    // Called with `mutex` held.
    auto report = [&](const std::string& text) -> absl::Status {
      if (!abandoned.ok()) return abandoned;
      if (!progress) return absl::OkStatus();
      Progress p;
      p.stage = "tasks";
      double sum = 0.0;
      for (double f : fractions) sum += f;
      p.fraction = sum / n;
      p.message = text;
      abandoned = progress(p);
      return abandoned;
    };
    // Returns `status`, the job's error, after telling the local tasks to stop as cancelled (the
    // job fails: its unfinished tasks have no use). When instead the job's progress callback
    // says stop, `report` has passed that status to them: cancelled, released at shutdown, or
    // left to their lease when this worker lost the job.
    auto stop_waiting = [&](absl::Status status) {
      std::lock_guard<std::mutex> lock(mutex);
      if (abandoned.ok()) {
        abandoned = absl::CancelledError(
            absl::StrCat("its job stopped waiting for it: ", std::string(status.message())));
      }
      return status;
    };

    while (true) {
      absl::StatusOr<std::vector<Job>> tasks = store->ListTasks(job_.id, batch, false);
      if (!tasks.ok()) {
        if (!absl::IsUnavailable(tasks.status())) return stop_waiting(tasks.status());
        // The store is briefly unreachable: the heartbeat decides whether the job is lost.
        std::lock_guard<std::mutex> lock(mutex);
        if (absl::Status s = report("waiting for the job store"); !s.ok()) return s;
      } else {
        if (static_cast<int>(tasks->size()) != n) {
          return stop_waiting(absl::InternalError(absl::StrCat(
              "job ", job_.id, ": batch '", batch_name, "' has ", tasks->size(), " tasks, not ", n)));
        }
        int succeeded = 0, running = 0;
        for (const Job& task : *tasks) {
          if (task.state == JobState::kFailed || task.state == JobState::kCancelled) {
            CancelUnfinished(*tasks);
            return stop_waiting(TaskError(task));
          }
          succeeded += task.state == JobState::kSucceeded;
          running += task.state == JobState::kRunning;
        }
        if (succeeded == n) break;
        std::lock_guard<std::mutex> lock(mutex);
        for (const Job& task : *tasks) {
          double& f = fractions[task.task_index];
          f = std::max(f, task.state == JobState::kSucceeded ? 1.0 : task.progress);
        }
        message = absl::StrCat(batch_name, ": ", succeeded, " of ", n, " tasks done, ", running,
                               " running");
        // A cancelled job's tasks were cancelled with it (JobStore::RequestCancel); at shutdown
        // or with the job's lease lost they carry on elsewhere: nothing to cancel here.
        if (absl::Status s = report(message); !s.ok()) return s;
      }
      // Run tasks here, up to local_parallelism at once; each one's progress counts towards the
      // job's, and the job's cancellation (or lost lease, or shutdown) stops it.
      while (true) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (local_running >= local_parallelism) break;
        }
        absl::StatusOr<std::optional<Job>> mine =
            store->ClaimTask(job_.id, worker_id_, runner_->options_.lease);
        if (!mine.ok() && !absl::IsUnavailable(mine.status())) {
          return stop_waiting(mine.status());
        }
        if (!mine.ok() || !mine->has_value()) break;
        std::lock_guard<std::mutex> lock(mutex);
        ++local_running;
        local.emplace_back([&, task = **mine] {
          const int index = task.task_index;
          const ProgressCallback outer = [&](const Progress& p) -> absl::Status {
            std::lock_guard<std::mutex> lock(mutex);
            if (p.poll_only || index < 0 || index >= n) return report(message);
            fractions[index] = std::max(fractions[index], p.fraction);
            return report(absl::StrCat(message, "; here: task ", index, ": ",
                                       p.message.empty() ? p.stage : p.message));
          };
          runner_->RunOne(worker_id_, task, outer);
          {
            std::lock_guard<std::mutex> lock(mutex);
            --local_running;
          }
          local_done.notify_all();
        });
      }
      // Until a local task ends, or the poll interval passes (the rest run elsewhere).
      std::unique_lock<std::mutex> lock(mutex);
      const int running_now = local_running;
      local_done.wait_for(lock, absl::ToChronoMilliseconds(runner_->options_.poll_interval),
                          [&] { return local_running < running_now || runner_->stopping_.load(); });
    }
    absl::StatusOr<std::vector<Job>> done = store->ListTasks(job_.id, batch, true);
    if (!done.ok()) return stop_waiting(done.status());
    std::vector<std::string> results;
    results.reserve(n);
    for (Job& task : *done) {
      // A task finishes only once (fencing), so a SUCCEEDED task stays SUCCEEDED.
      if (task.state != JobState::kSucceeded) return stop_waiting(TaskError(task));
      results.push_back(std::move(task.result));
    }
    return results;
  }

 private:
  // Best effort: the store also stops a task whose job has ended (Heartbeat, Claim).
  void CancelUnfinished(const std::vector<Job>& tasks) {
    for (const Job& task : tasks) {
      if (!IsTerminal(task.state)) runner_->store_->RequestCancel(task.id).status().IgnoreError();
    }
  }

  JobRunner* runner_;
  const Job& job_;
  const std::string& worker_id_;
};

JobRunner::JobRunner(JobStore* store, std::shared_ptr<const JobKindRegistry> kinds,
                     JobRunnerOptions options, ServiceMetrics* metrics)
    : store_(store), kinds_(std::move(kinds)), options_(std::move(options)), metrics_(metrics) {
  if (options_.worker_prefix.empty()) options_.worker_prefix = DefaultWorkerPrefix();
}

JobRunner::~JobRunner() { Stop(); }

void JobRunner::Start() {
  for (int i = 0; i < options_.workers; ++i) {
    worker_ids_.push_back(absl::StrCat(options_.worker_prefix, "-w", i));
    threads_.emplace_back([this, id = worker_ids_.back()] { WorkerLoop(id); });
  }
}

void JobRunner::Wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++wake_tokens_;
  }
  wake_.notify_one();
}

void JobRunner::Stop() {
  if (stopping_.exchange(true)) return;
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  for (const std::string& id : worker_ids_) {
    absl::StatusOr<int64_t> released = store_->ReleaseLeases(id);
    if (!released.ok()) {
      std::cerr << "gpsel-server: releasing leases of " << id << ": " << released.status() << "\n";
    }
  }
}

void JobRunner::WorkerLoop(const std::string& worker_id) {
  while (!stopping_.load()) {
    absl::StatusOr<std::optional<Job>> claimed = store_->Claim(worker_id, options_.lease);
    if (claimed.ok() && claimed->has_value()) {
      RunOne(worker_id, **claimed);
      continue;  // more work may be waiting
    }
    if (!claimed.ok()) {
      std::cerr << "gpsel-server: claiming a job: " << claimed.status() << "\n";
    }
    IdleWait();
  }
}

void JobRunner::IdleWait() {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, absl::ToChronoMilliseconds(options_.poll_interval),
                 [this] { return stopping_.load() || wake_tokens_ > 0; });
  if (wake_tokens_ > 0) --wake_tokens_;
}

void JobRunner::RunOne(const std::string& worker_id, const Job& job,
                       const ProgressCallback& outer) {
  const auto start = std::chrono::steady_clock::now();
  running_.fetch_add(1);
  if (metrics_) metrics_->JobStarted(job.kind);

  // Shared between the numerics (progress callback) and the heartbeat thread.
  struct Shared {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    double fraction = 0.0;
    std::string message;
    std::atomic<bool> cancel_requested{false};
    std::atomic<bool> lost_lease{false};
  } shared;

  std::thread heartbeat([&] {
    // At least every second: the heartbeat is how a cancel from any replica reaches this worker
    // (issue: a cancelled job frees its worker within about a second), and a lease survives two
    // missed heartbeats.
    const absl::Duration interval = std::min(options_.lease / 3, absl::Seconds(1));
    std::unique_lock<std::mutex> lock(shared.mutex);
    while (!shared.done) {
      shared.done_cv.wait_for(lock, absl::ToChronoMilliseconds(interval));
      if (shared.done) break;
      const double fraction = shared.fraction;
      const std::string message = shared.message;
      lock.unlock();
      absl::StatusOr<HeartbeatResponse> beat =
          store_->Heartbeat(job.id, job.attempts, fraction, message, options_.lease);
      lock.lock();
      if (beat.ok()) {
        if (beat->cancel_requested) shared.cancel_requested = true;
      } else if (absl::IsAborted(beat.status()) || absl::IsNotFound(beat.status())) {
        shared.lost_lease = true;  // someone else owns the job now: stop, publish nothing
      }
    }
  });

  ProgressCallback progress = [&](const Progress& p) -> absl::Status {
    if (!p.poll_only) {
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.fraction = p.fraction;
      shared.message = p.message.empty() ? p.stage : p.message;
    }
    if (stopping_.load()) return absl::UnavailableError("server shutting down");
    if (shared.lost_lease.load()) return absl::AbortedError("job lease lost");
    if (shared.cancel_requested.load()) return absl::CancelledError("job cancelled");
    return outer ? outer(p) : absl::OkStatus();
  };
  Tasks tasks(this, job, worker_id);

  absl::StatusOr<std::string> result;
  const JobKind* kind = kinds_ != nullptr ? kinds_->Find(job.kind) : nullptr;
  if (kind == nullptr) {
    // Permanent for this server: failing beats handing the job back to be claimed again and
    // again (each claim counts towards max_attempts anyway).
    const std::vector<std::string> known =
        kinds_ != nullptr ? kinds_->names() : std::vector<std::string>();
    result = absl::UnimplementedError(absl::StrCat(
        "job kind '", job.kind, "' is not registered in this server (known kinds: ",
        known.empty() ? std::string("none") : absl::StrJoin(known, ", "), ")"));
  } else {
    // std::bad_alloc fails this job (its allocations unwind with it), not the process with
    // every other job and call on it. Permanent: the same request would run out again.
    try {
      result = kind->execute(job.request, progress, tasks);
    } catch (const std::bad_alloc&) {
      result = absl::ResourceExhaustedError(
          "the server ran out of memory for this job; submit it with fewer likelihood calls or "
          "points, or run it on a replica with more memory");
    }
  }
  {
    std::lock_guard<std::mutex> lock(shared.mutex);
    shared.done = true;
  }
  shared.done_cv.notify_all();
  heartbeat.join();

  // Publish with the fencing token; a stale worker's publication is rejected (ABORTED).
  std::string outcome;
  absl::Status published = absl::OkStatus();
  if (result.ok()) {
    published = store_->Complete(job.id, job.attempts, *result);
    outcome = "succeeded";
  } else if (shared.lost_lease.load() || absl::IsAborted(result.status())) {
    outcome = "lost_lease";
  } else if (stopping_.load() && absl::IsUnavailable(result.status())) {
    outcome = "released";  // Stop() releases the lease; another worker re-runs it
  } else if (absl::IsCancelled(result.status())) {
    published = store_->MarkCancelled(job.id, job.attempts);
    outcome = "cancelled";
  } else {
    published = store_->Fail(job.id, job.attempts, result.status());
    outcome = "failed";
  }
  if (!published.ok()) {
    std::cerr << "gpsel-server: job " << job.id << " (" << outcome << "): " << published << "\n";
    if (absl::IsAborted(published)) outcome = "lost_lease";
  }
  running_.fetch_sub(1);
  if (metrics_) {
    metrics_->JobFinished(
        job.kind, outcome,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

}  // namespace gpsel
