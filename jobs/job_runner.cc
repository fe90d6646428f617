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

}  // namespace

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
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, absl::ToChronoMilliseconds(options_.poll_interval),
                   [this] { return stopping_.load() || wake_tokens_ > 0; });
    if (wake_tokens_ > 0) --wake_tokens_;
  }
}

void JobRunner::RunOne(const std::string& worker_id, const Job& job) {
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
    return absl::OkStatus();
  };

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
      result = kind->execute(job.request, progress);
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
  (void)worker_id;
}

}  // namespace gpsel
