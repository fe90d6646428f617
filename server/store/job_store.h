// JobStore: the persistent, shared queue behind gpsel's asynchronous jobs (e.g. "evidence").
//
// Jobs carry opaque payloads (the service stores serialized protobuf request/result messages);
// this layer knows nothing about gRPC or the numerics. Two backends implement one contract:
//   sqlite:PATH            an embedded file (default; several processes on one host may share it)
//   postgresql://...       a shared queue for many server/worker replicas on many machines
//
// Delivery is at-least-once with leases and fencing:
//   * Claim() takes the oldest QUEUED job (or a RUNNING job whose lease expired because its worker
//     crashed), sets it RUNNING and increments `attempts`. `attempts` is the fencing token: every
//     later call of the worker (Heartbeat, Complete, Fail, MarkCancelled) passes it back and is
//     rejected with ABORTED once somebody else has claimed the job (or it was released/reaped),
//     so a stale worker can never overwrite the result of the current one. Exactly one result
//     becomes visible.
//   * A job is started at most `max_attempts` times: when it would be claimed again after that
//     (its lease expired, or it was released), it is marked FAILED instead (a job that kills its
//     worker must not crash the fleet forever, even when servers release jobs as they restart).
//
//   absl::StatusOr<std::unique_ptr<gpsel::JobStore>> store = gpsel::OpenJobStore("sqlite:jobs.db");
//   absl::StatusOr<gpsel::SubmitResult> s = (*store)->Submit("evidence", bytes, "client-key", 100);
//   // A worker loop:
//   absl::StatusOr<std::optional<gpsel::Job>> job = (*store)->Claim("worker-a", absl::Seconds(30));
//   if (job.ok() && job->has_value()) {
//     const gpsel::Job& j = **job;
//     // every few seconds: (*store)->Heartbeat(j.id, j.attempts, 0.4, "sampling", absl::Seconds(30))
//     (*store)->Complete(j.id, j.attempts, result_bytes);
//   }
//
// Tasks: a RUNNING job may split its work into tasks (SubmitTasks), child jobs that any worker of
// any process may claim, with the same leases, fencing and attempts as jobs. A job's tasks live
// in named batches ("runs", "step-2"), indexed from 0; submitting a batch again returns the
// tasks already there, so a job re-run after its worker died finds the tasks it made, and the
// results of those that finished. Claim hands out tasks before jobs (their job is running and
// waits for them); cancelling a job cancels its tasks, and a task whose job has ended is told to
// stop (Heartbeat) or is never started (Claim). ListJobs, CountByState and the queue limit see
// jobs only; PurgeFinished removes tasks with their job. server/jobs/job_runner.h runs them.
//
// All methods are thread-safe and never throw; errors are absl::Status:
//   INVALID_ARGUMENT    bad argument (empty kind, non-positive lease, bad page token, ...)
//   NOT_FOUND           unknown job id
//   RESOURCE_EXHAUSTED  Submit with the queue full; or the database's disk is full, which
//                       IsStoreFull tells apart (SQLITE_FULL, PostgreSQL's 53100 disk_full)
//   ABORTED             fencing failure: the caller no longer holds the job's lease
//   UNAVAILABLE         database busy / unreachable (retryable)
//   UNKNOWN             PostgreSQL connection lost during COMMIT: the change may or may not
//                       have been applied (re-read the job)
//   DATA_LOSS, INTERNAL, ... for anything else the database reports
// Strings are std::string_view. (Debian's Abseil has its own absl::string_view, which does not
// convert implicitly; pass std::string_view(s.data(), s.size()).)
#ifndef GPSEL_STORE_JOB_STORE_H_
#define GPSEL_STORE_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gpsel {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };

// "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED" (also the values stored in the databases).
std::string_view JobStateName(JobState state);
// Inverse of JobStateName (exact, upper case); nullopt for anything else.
std::optional<JobState> ParseJobState(std::string_view name);
// SUCCEEDED, FAILED and CANCELLED are terminal: nothing changes a terminal job any more.
bool IsTerminal(JobState state);

// RESOURCE_EXHAUSTED marked as "the store's disk is full" (not a full queue: an operator must
// free space), and the test for it.
absl::Status StoreFullError(std::string_view message);
bool IsStoreFull(const absl::Status& status);

struct Job;
// ALREADY_EXISTS marked as "this idempotency key already names another job" (a job of another
// kind: one key names one job, whatever its kind), and the test for it. The service turns it
// into google.rpc.ErrorInfo reason IDEMPOTENCY_KEY_REUSED.
absl::Status IdempotencyKeyReusedError(std::string_view key, const Job& existing,
                                       std::string_view kind);
bool IsIdempotencyKeyReused(const absl::Status& status);

struct Job {
  std::string id;    // ULID: 26 Crockford base-32 characters, roughly sortable by creation time
  std::string kind;  // e.g. "evidence"; chosen by the caller
  JobState state = JobState::kQueued;
  std::string request;  // opaque bytes, as submitted
  std::string result;   // opaque bytes; set only when SUCCEEDED
  // When FAILED or CANCELLED: an absl::StatusCode value (as int) and a message; 0 / "" otherwise.
  int error_code = 0;
  std::string error_message;
  double progress = 0.0;  // in [0, 1], as last reported by the worker of the current attempt
  std::string progress_message;
  int attempts = 0;  // number of claims so far; the fencing token of the current attempt
  std::string idempotency_key;  // "" when none was given
  bool cancel_requested = false;  // RUNNING job asked to stop (the worker sees it in Heartbeat)
  std::string lease_owner;        // worker id while RUNNING; "" otherwise
  // Times; absl::InfinitePast() when the event has not happened (yet). `started` is the start of
  // the current (latest) attempt. SQLite uses the host clock, PostgreSQL the database's now().
  absl::Time lease_expires = absl::InfinitePast();
  absl::Time created = absl::InfinitePast();
  absl::Time started = absl::InfinitePast();
  absl::Time finished = absl::InfinitePast();
  absl::Time updated = absl::InfinitePast();
  // Tasks only: the job whose work this is, the batch of that job it belongs to, and its index
  // in the batch (from 0). "", "" and -1 for a job.
  std::string parent_id;
  std::string task_batch;
  int task_index = -1;

  bool is_task() const { return !parent_id.empty(); }
};

struct SubmitResult {
  Job job;
  bool created = false;  // false: the idempotency key matched an existing job, which is returned
};

struct ListJobsRequest {
  std::optional<JobState> state;  // only jobs in this state; all when unset
  int page_size = 0;               // 0 → kDefaultPageSize; larger than kMaxPageSize is capped
  std::string page_token;          // "" for the first page, else a previous next_page_token

  static constexpr int kDefaultPageSize = 50;
  static constexpr int kMaxPageSize = 1000;
};

struct ListJobsResponse {
  std::vector<Job> jobs;         // oldest first (creation order, stable across pages)
  std::string next_page_token;  // "" on the last page
};

struct HeartbeatResponse {
  bool cancel_requested = false;  // the worker should stop and call MarkCancelled
  absl::Time lease_expires = absl::InfinitePast();
};

struct JobStoreOptions {
  // A job is started at most this many times: a claimable job (lease expired, or released)
  // with attempts ≥ max_attempts is marked FAILED (code ABORTED) by the next Claim instead of
  // being handed out again. Graceful releases count too, so allow for rolling restarts. ≥ 1.
  int max_attempts = 5;
  // SQLite: how long a writer waits for another process's write lock before UNAVAILABLE.
  absl::Duration sqlite_busy_timeout = absl::Seconds(5);
  // PostgreSQL: connections per store (opened lazily; one is opened eagerly to create the schema).
  int postgres_max_connections = 4;

  absl::Status Validate() const;
};

// How deeply JobStore::CheckHealth looks.
enum class StoreCheck {
  kConnection,  // cheap, for every few seconds: the store answers and its jobs table reads
  kIntegrity,   // at start, and while unhealthy: SQLite reads every page (PRAGMA quick_check)
  // A small write transaction (one probe row, rewritten): notices what reads do not — a full
  // disk, a read-only file or database. RESOURCE_EXHAUSTED (IsStoreFull) for a full disk.
  kWrite,
};

// Counts per state; every state is present (possibly 0).
using JobCounts = std::map<JobState, int64_t>;

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Enqueues a new QUEUED job. With a non-empty `idempotency_key`, a job of the same `kind` with
  // that key (in any state, until purged) is returned instead, with created=false, even when the
  // queue is full — so a client can safely retry a submit. One key names one job whatever its
  // kind: a key that names a job of another kind is ALREADY_EXISTS (IsIdempotencyKeyReused),
  // and nothing is written. The request bytes of a retry are not compared (serialized protobufs
  // are not canonical; the service compares the parsed messages).
  // RESOURCE_EXHAUSTED when `max_queued` > 0 and at least `max_queued` jobs (tasks not
  // counted) are QUEUED;
  // max_queued ≤ 0 means no limit. INVALID_ARGUMENT for an empty kind.
  virtual absl::StatusOr<SubmitResult> Submit(std::string_view kind, std::string_view request,
                                              std::string_view idempotency_key,
                                              int64_t max_queued) = 0;

  // NOT_FOUND for an unknown id.
  virtual absl::StatusOr<Job> GetJob(std::string_view id) = 0;

  // Pages through jobs (not tasks) in creation order. INVALID_ARGUMENT for a negative page
  // size or a token that this store did not produce.
  virtual absl::StatusOr<ListJobsResponse> ListJobs(const ListJobsRequest& request) = 0;

  // Atomically takes the oldest claimable task, or else the oldest claimable job: QUEUED, or
  // RUNNING with an expired lease (its worker died). It becomes RUNNING with attempts+1,
  // lease_owner=`worker_id`, lease until now+`lease`, progress reset. nullopt when nothing is
  // claimable. Before choosing, claimable jobs that used up max_attempts become FAILED (code
  // ABORTED), and claimable jobs with a cancel request and claimable tasks whose job has ended
  // become CANCELLED. Safe across threads, store instances, processes and (PostgreSQL) hosts.
  virtual absl::StatusOr<std::optional<Job>> Claim(std::string_view worker_id,
                                                   absl::Duration lease) = 0;

  // Records progress (clamped to [0, 1]) and extends the lease to now+`lease`, provided the job is
  // RUNNING and `attempt` is still its fencing token. ABORTED otherwise ("you lost the lease":
  // stop working, publish nothing). cancel_requested is also set for a task whose job has ended. A heartbeat after the lease expired but before anybody
  // re-claimed the job succeeds: nobody else has it.
  virtual absl::StatusOr<HeartbeatResponse> Heartbeat(std::string_view id, int attempt,
                                                      double progress,
                                                      std::string_view progress_message,
                                                      absl::Duration lease) = 0;

  // RUNNING → SUCCEEDED with `result`. ABORTED unless RUNNING with fencing token `attempt`.
  // A completed job stays SUCCEEDED even if cancellation had been requested meanwhile.
  virtual absl::Status Complete(std::string_view id, int attempt, std::string_view result) = 0;

  // RUNNING → FAILED with `error` (must not be OK: INVALID_ARGUMENT). ABORTED as for Complete.
  virtual absl::Status Fail(std::string_view id, int attempt, const absl::Status& error) = 0;

  // Asks a job to stop, and its tasks with it. QUEUED → CANCELLED at once (error code CANCELLED); RUNNING → flag
  // cancel_requested, which the worker sees in its next Heartbeat (it then calls MarkCancelled;
  // if it dies instead, the next Claim after lease expiry marks the job CANCELLED). A terminal
  // job is returned unchanged with OK: cancellation is best-effort and idempotent (as in
  // google.longrunning.Operations.CancelOperation). Returns the job after the change.
  // NOT_FOUND for an unknown id.
  virtual absl::StatusOr<Job> RequestCancel(std::string_view id) = 0;

  // RUNNING → CANCELLED (error code CANCELLED), called by the worker holding `attempt`.
  // ABORTED as for Complete. Allowed without a prior RequestCancel (e.g. the client went away).
  virtual absl::Status MarkCancelled(std::string_view id, int attempt) = 0;

  // Graceful shutdown of worker `worker_id`: its RUNNING jobs go back to QUEUED (attempts kept,
  // lease cleared; their jobs with a cancel request become CANCELLED instead), so another worker
  // picks them up without waiting for the lease to expire. Returns how many jobs changed.
  // With a worker id that is stable across restarts (e.g. host name + slot), calling this at
  // startup too requeues at once the jobs a crashed predecessor held.
  virtual absl::StatusOr<int64_t> ReleaseLeases(std::string_view worker_id) = 0;

  // Number of jobs per state, for metrics (tasks are not counted).
  virtual absl::StatusOr<JobCounts> CountByState() = 0;

  // Adds batch `batch` of tasks to the RUNNING job `parent_id`: one QUEUED task of kind `kind`
  // per request, with task_index = its position, all in one transaction. When the batch exists
  // already (the job was re-run), its tasks are returned as they are, whatever state they are in.
  // Returns the batch's tasks by index. INVALID_ARGUMENT for an empty kind or batch, a batch
  // name longer than 64 bytes, no requests or more than kMaxTasksPerBatch; NOT_FOUND for an
  // unknown job; FAILED_PRECONDITION when `parent_id` is a task itself, is not RUNNING, or the
  // existing batch has another number of tasks; CANCELLED when the job has a cancel request
  // (its tasks would escape the cancellation).
  virtual absl::StatusOr<std::vector<Job>> SubmitTasks(std::string_view parent_id,
                                                       std::string_view batch,
                                                       std::string_view kind,
                                                       const std::vector<std::string>& requests) = 0;

  // The tasks of batch `batch` of job `parent_id`, by index; empty when there are none. Without
  // `with_payloads` their request and result are left empty (cheap enough to poll).
  virtual absl::StatusOr<std::vector<Job>> ListTasks(std::string_view parent_id,
                                                     std::string_view batch,
                                                     bool with_payloads) = 0;

  // Claim, restricted to the tasks of batch `batch` of job `parent_id`: how the worker running a
  // job helps with its tasks instead of only waiting for them.
  virtual absl::StatusOr<std::optional<Job>> ClaimTask(std::string_view parent_id,
                                                       std::string_view batch,
                                                       std::string_view worker_id,
                                                       absl::Duration lease) = 0;

  static constexpr int kMaxTasksPerBatch = 4096;

  // OK when the store works: it answers (PostgreSQL: a connection and a query) and, with
  // kIntegrity, its pages are sound (SQLite: PRAGMA quick_check). DATA_LOSS for corruption,
  // naming what the check found; UNAVAILABLE when the store cannot be reached. gpsel-server
  // reports NOT_SERVING on the gRPC health service while this fails.
  virtual absl::Status CheckHealth(StoreCheck depth) = 0;

  // Deletes terminal jobs that finished at least `min_age` ago (retention), with their tasks;
  // their idempotency keys become free again. Returns how many jobs and tasks were deleted.
  virtual absl::StatusOr<int64_t> PurgeFinished(absl::Duration min_age) = 0;
};

// Opens (creating the schema if absent) the store named by `url`:
//   "sqlite:PATH" or "sqlite://PATH" (so "sqlite:///abs/path.db" is an absolute path);
//   "sqlite::memory:" is a private in-memory database (one store instance only; for tests).
//   "postgresql://..." or "postgres://..." — a libpq connection URI, passed on unchanged.
// INVALID_ARGUMENT for an unknown scheme, an empty path or a malformed PostgreSQL URI;
// UNAVAILABLE when the database cannot be reached; FAILED_PRECONDITION when its schema was
// written by a newer gpsel.
absl::StatusOr<std::unique_ptr<JobStore>> OpenJobStore(std::string_view url,
                                                       const JobStoreOptions& options = {});

// `url` fit for a log line: a PostgreSQL password, in the user-info part
// ("postgresql://user:SECRET@host/db") or as a "password=SECRET" parameter, becomes "***".
std::string RedactStoreUrl(std::string_view url);

}  // namespace gpsel

#endif  // GPSEL_STORE_JOB_STORE_H_
