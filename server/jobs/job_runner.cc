// JobRunner; see job_runner.h.
#include "gpsel/server/jobs/job_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <mutex>
#include <iostream>
#include <new>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpsel/core/status_macros.h"

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

// A job store error met while a job waits for its tasks, as the job's error. ABORTED
// (PostgreSQL's serialization failures) and CANCELLED (a statement timeout) mean something else
// coming out of an executor — a lost lease, a cancelled job — so they become INTERNAL.
absl::Status StoreErrorForJob(const absl::Status& status) {
  if (!absl::IsAborted(status) && !absl::IsCancelled(status)) return status;
  return absl::InternalError(absl::StrCat("job store: ", std::string(status.message())));
}

}  // namespace

// JobTasks for one job run by one worker of this runner.
class JobRunner::Tasks final : public JobTasks {
 public:
  Tasks(JobRunner* runner, const Job& job, const std::string& worker_id)
      : runner_(runner), job_(job), worker_id_(worker_id) {}

  // Three phases: store the batch once, wait for its tasks while running some of them here,
  // then collect their results in request order.
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
    BatchRun run(*this, std::string(batch), static_cast<int>(requests.size()), local_parallelism,
                 progress);
    GPSEL_RETURN_IF_ERROR(run.Submit(kind, requests));
    GPSEL_RETURN_IF_ERROR(run.WaitForTasks());
    return run.Results();
  }

 private:
  // One call of Run: the state its waiting loop shares with the local tasks it runs, each on a
  // thread of its own. The destructor joins those threads before any of the state goes.
  class BatchRun {
   public:
    BatchRun(Tasks& tasks, std::string batch, int n, int local_parallelism,
             const ProgressCallback& progress)
        : tasks_(tasks),
          store_(tasks.runner_->store_),
          batch_(std::move(batch)),
          n_(n),
          local_parallelism_(local_parallelism),
          progress_(progress),
          fractions_(n, 0.0),
          message_(absl::StrCat(batch_, ": submitting ", n, " tasks")) {}
    ~BatchRun() { JoinLocal(/*all=*/true); }

    // The batch, stored once: a re-run of the job finds it with the results so far.
    absl::Status Submit(std::string_view kind, const std::vector<std::string>& requests) {
      while (true) {
        absl::StatusOr<std::vector<Job>> submitted =
            store_->SubmitTasks(tasks_.job_.id, batch_, kind, requests);
        if (submitted.ok()) return absl::OkStatus();
        if (absl::IsCancelled(submitted.status())) return submitted.status();  // job cancelled
        if (!absl::IsUnavailable(submitted.status())) {
          return StoreErrorForJob(submitted.status());
        }
        GPSEL_RETURN_IF_ERROR(WaitAWhile());
      }
    }

    // Until every task has succeeded: polls the store, reports the tasks' mean progress, and
    // runs tasks here up to local_parallelism at once.
    absl::Status WaitForTasks() {
      while (true) {
        JoinLocal(/*all=*/false);
        absl::StatusOr<std::vector<Job>> tasks = store_->ListTasks(tasks_.job_.id, batch_, false);
        if (!tasks.ok()) {
          // The store briefly unreachable: wait; the heartbeat decides whether the job is lost.
          if (!absl::IsUnavailable(tasks.status())) {
            return FailJob(StoreErrorForJob(tasks.status()));
          }
          GPSEL_RETURN_IF_ERROR(WaitAWhile());
          continue;
        }
        if (static_cast<int>(tasks->size()) != n_) {
          return FailJob(absl::InternalError(absl::StrCat("job ", tasks_.job_.id, ": batch '",
                                                          batch_, "' has ", tasks->size(),
                                                          " tasks, not ", n_)));
        }
        int succeeded = 0, running = 0;
        for (const Job& task : *tasks) {
          if (task.state == JobState::kFailed || task.state == JobState::kCancelled) {
            tasks_.CancelUnfinished(*tasks);
            return FailJob(TaskError(task));
          }
          succeeded += task.state == JobState::kSucceeded;
          running += task.state == JobState::kRunning;
        }
        if (succeeded == n_) return absl::OkStatus();
        {
          std::lock_guard<std::mutex> lock(mutex_);
          for (const Job& task : *tasks) {
            double& f = fractions_[task.task_index];
            f = std::max(f, task.state == JobState::kSucceeded ? 1.0 : task.progress);
          }
          message_ = absl::StrCat(batch_, ": ", succeeded, " of ", n_, " tasks done, ", running,
                                  " running");
          // A cancelled job's tasks were cancelled with it (JobStore::RequestCancel); at
          // shutdown or with the job's lease lost they carry on elsewhere: nothing to cancel.
          GPSEL_RETURN_IF_ERROR(Report(message_));
        }
        GPSEL_RETURN_IF_ERROR(RunLocalTasks());
        GPSEL_RETURN_IF_ERROR(WaitAWhile());
      }
    }

    // The tasks' results in request order, once all have succeeded.
    absl::StatusOr<std::vector<std::string>> Results() {
      while (true) {
        absl::StatusOr<std::vector<Job>> done = store_->ListTasks(tasks_.job_.id, batch_, true);
        if (!done.ok()) {
          if (!absl::IsUnavailable(done.status())) return StoreErrorForJob(done.status());
          GPSEL_RETURN_IF_ERROR(WaitAWhile());
          continue;
        }
        std::vector<std::string> results;
        results.reserve(n_);
        for (Job& task : *done) {
          // A task finishes only once (fencing), so a SUCCEEDED task stays SUCCEEDED.
          if (task.state != JobState::kSucceeded) return TaskError(task);
          results.push_back(std::move(task.result));
        }
        return results;
      }
    }

   private:
    struct LocalTask {
      std::thread thread;
      bool finished = false;
    };

    // Claims and starts tasks here while fewer than local_parallelism run; each one's progress
    // counts towards the job's, and the job's stop stops it (JobSays).
    absl::Status RunLocalTasks() {
      JobRunner* runner = tasks_.runner_;
      while (true) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (local_running_ >= local_parallelism_ || !abandoned_.ok() ||
              runner->stopping_.load()) {
            return absl::OkStatus();
          }
        }
        absl::StatusOr<std::optional<Job>> mine = store_->ClaimTask(
            tasks_.job_.id, batch_, tasks_.worker_id_, runner->options_.lease);
        if (!mine.ok() && !absl::IsUnavailable(mine.status())) {
          return FailJob(StoreErrorForJob(mine.status()));
        }
        if (!mine.ok() || !mine->has_value()) return absl::OkStatus();
        std::unique_lock<std::mutex> lock(mutex_);
        ++local_running_;
        LocalTask& slot = local_.emplace_back();
        auto body = [this, &slot, task = **mine] {  // list elements stay put
          const int index = task.task_index;
          const ProgressCallback outer = [this, index](const Progress& p) -> absl::Status {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!p.poll_only && index >= 0 && index < n_) {
              fractions_[index] = std::max(fractions_[index], p.fraction);
              if (abandoned_.ok()) {
                Report(absl::StrCat(message_, "; here: task ", index, ": ",
                                    p.message.empty() ? p.stage : p.message))
                    .IgnoreError();  // a stop reaches this task through JobSays
              }
            }
            return JobSays();
          };
          tasks_.runner_->RunOne(tasks_.worker_id_, task, outer);
          {
            std::lock_guard<std::mutex> lock(mutex_);
            --local_running_;
            slot.finished = true;
          }
          local_done_.notify_all();
        };
        try {
          slot.thread = std::thread(body);
        } catch (const std::system_error&) {
          // No thread to be had: this worker runs the task itself.
          slot.finished = true;
          --local_running_;
          lock.unlock();
          runner->RunOne(tasks_.worker_id_, **mine, [this](const Progress&) -> absl::Status {
            std::lock_guard<std::mutex> inner(mutex_);
            return JobSays();
          });
        }
      }
    }

    // The tasks' mean progress, told to the job's callback, whose answer (cancelled, server
    // stopping, lease lost) stops the waiting. Called with mutex_ held.
    absl::Status Report(const std::string& text) {
      if (!abandoned_.ok()) return abandoned_;
      if (!progress_) return absl::OkStatus();
      Progress p;
      p.stage = "tasks";
      double sum = 0.0;
      for (double f : fractions_) sum += f;
      p.fraction = sum / n_;
      p.message = text;
      abandoned_ = progress_(p);
      return abandoned_;
    }
    // What a local task hears from its job: nothing while the job waits; the job's stop
    // otherwise — cancelled, or released at shutdown — except when this worker lost the job's
    // lease: the task's own lease still holds and its result serves whoever re-runs the job.
    // Called with mutex_ held.
    absl::Status JobSays() const {
      return absl::IsAborted(abandoned_) ? absl::OkStatus() : abandoned_;
    }
    // The job ends with `status` (a failed task, a store error): its unfinished local tasks are
    // of no use any more and stop as cancelled.
    absl::Status FailJob(absl::Status status) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (abandoned_.ok()) {
        abandoned_ = absl::CancelledError(
            absl::StrCat("its job failed: ", std::string(status.message())));
      }
      return status;
    }
    // Waits up to the poll interval, less when a local task ends or the runner stops; reports
    // first, so that a cancellation or shutdown is heard while the store is unreachable too.
    absl::Status WaitAWhile() {
      std::unique_lock<std::mutex> lock(mutex_);
      GPSEL_RETURN_IF_ERROR(Report(message_));
      const int running_before = local_running_;
      JobRunner* runner = tasks_.runner_;
      local_done_.wait_for(lock, absl::ToChronoMilliseconds(runner->options_.poll_interval), [&] {
        return local_running_ < running_before || runner->stopping_.load();
      });
      return absl::OkStatus();
    }
    // Joins the local tasks that have finished (all of them with `all`, on the way out).
    void JoinLocal(bool all) {
      for (auto it = local_.begin(); it != local_.end();) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (!all && !it->finished) {
            ++it;
            continue;
          }
        }
        if (it->thread.joinable()) it->thread.join();
        it = local_.erase(it);
      }
    }

    Tasks& tasks_;
    JobStore* store_;
    const std::string batch_;
    const int n_;
    const int local_parallelism_;
    const ProgressCallback& progress_;

    std::mutex mutex_;
    std::condition_variable local_done_;
    std::vector<double> fractions_;  // per task, never decreasing
    std::string message_;
    absl::Status abandoned_;  // non-OK once the job stops waiting: the local tasks stop with it
    std::list<LocalTask> local_;
    int local_running_ = 0;
  };

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
    // Counted as what reached the store (issue 33: a result that could not be saved during a
    // PostgreSQL outage was counted as succeeded, and again when the re-run was): the job
    // stays RUNNING, is claimed again when its lease expires, and counted by that attempt.
    outcome = absl::IsAborted(published) ? "lost_lease" : "not_stored";
  }
  running_.fetch_sub(1);
  if (metrics_) {
    metrics_->JobFinished(
        job.kind, outcome,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

}  // namespace gpsel
