// SQLite implementation of JobStore: one connection per store, a mutex, cached prepared
// statements, and BEGIN IMMEDIATE transactions for every write (multi-process safe).
#include "gpsel/server/store/job_store_sqlite.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpsel/server/store/job_store_internal.h"

namespace gpsel {
namespace {

namespace jsi = job_store_internal;

// Schema version 1. `seq` (AUTOINCREMENT: never reused, even after PurgeFinished) orders jobs by
// creation and anchors page tokens. Times are Unix microseconds. NULL idempotency keys are
// distinct for UNIQUE, so only non-empty keys (stored as non-NULL) deduplicate. The partial
// index over active jobs keeps Claim cheap however many finished jobs the table holds.
constexpr char kCreateVersionTableSql[] =
    "CREATE TABLE IF NOT EXISTS gpsel_schema_version (version INTEGER NOT NULL)";
constexpr char kCreateSchemaSql[] = R"sql(
CREATE TABLE IF NOT EXISTS gpsel_jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  request BLOB NOT NULL,
  result BLOB,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  progress REAL NOT NULL DEFAULT 0,
  progress_message TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  lease_owner TEXT NOT NULL DEFAULT '',
  lease_expires_us INTEGER,
  created_us INTEGER NOT NULL,
  started_us INTEGER,
  finished_us INTEGER,
  updated_us INTEGER NOT NULL,
  UNIQUE (kind, idempotency_key)
);
CREATE INDEX IF NOT EXISTS gpsel_jobs_state_seq ON gpsel_jobs (state, seq);
CREATE INDEX IF NOT EXISTS gpsel_jobs_active ON gpsel_jobs (seq)
  WHERE state IN ('QUEUED', 'RUNNING');
-- Keys name one job whatever its kind (Submit looks a key up without its kind). An index an
-- older gpsel does not know harms nothing, so it needs no schema version.
CREATE INDEX IF NOT EXISTS gpsel_jobs_by_key ON gpsel_jobs (idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- One row that CheckHealth(kWrite) rewrites: a write that needs disk space, as Claim's do.
CREATE TABLE IF NOT EXISTS gpsel_health_probe (
  id INTEGER PRIMARY KEY,
  written_us INTEGER NOT NULL,
  padding BLOB
);
)sql";

// Version 2: the task columns (server/store/job_store.h "Tasks"). A task has a parent_id; the unique
// index makes (job, batch, index) one task, so submitting a batch twice cannot double it.
constexpr char kMigrateToVersion2Sql[] = R"sql(
ALTER TABLE gpsel_jobs ADD COLUMN parent_id TEXT;
ALTER TABLE gpsel_jobs ADD COLUMN task_batch TEXT;
ALTER TABLE gpsel_jobs ADD COLUMN task_index INTEGER;
CREATE UNIQUE INDEX gpsel_jobs_tasks ON gpsel_jobs (parent_id, task_batch, task_index);
CREATE INDEX gpsel_jobs_claim_order ON gpsel_jobs ((parent_id IS NULL), seq)
  WHERE state IN ('QUEUED', 'RUNNING');
)sql";

// Column list read by ReadJob, in this order; the _WITHOUT_PAYLOADS form reads empty request
// and result bytes (for polling a job's tasks).
#define GPSEL_JOB_COLUMNS_WITH(request_and_result)                                          \
  "seq, id, kind, state, " request_and_result ", error_code, error_message, progress, "    \
  "progress_message, attempts, idempotency_key, cancel_requested, lease_owner, "           \
  "lease_expires_us, created_us, started_us, finished_us, updated_us, parent_id, "         \
  "task_batch, task_index"
#define GPSEL_JOB_COLUMNS GPSEL_JOB_COLUMNS_WITH("request, result")
#define GPSEL_JOB_COLUMNS_WITHOUT_PAYLOADS GPSEL_JOB_COLUMNS_WITH("x'', NULL")
// Jobs whose tasks may still run: a task of any other job (ended, or purged) is an orphan.
#define GPSEL_PARENT_IS_ACTIVE                                                              \
  "EXISTS (SELECT 1 FROM gpsel_jobs AS p WHERE p.id = gpsel_jobs.parent_id "               \
  "AND p.state IN ('QUEUED', 'RUNNING'))"

constexpr char kSelectJobById[] = "SELECT " GPSEL_JOB_COLUMNS " FROM gpsel_jobs WHERE id = ?1";
// The job an idempotency key names, whatever its kind (one key, one job); a job of the asked
// kind first, should a database written before keys were global hold several.
constexpr char kSelectByKey[] =
    "SELECT " GPSEL_JOB_COLUMNS " FROM gpsel_jobs WHERE idempotency_key = ?2 "
    "ORDER BY (kind = ?1) DESC, seq LIMIT 1";
constexpr char kCountQueued[] =
    "SELECT count(*) FROM gpsel_jobs WHERE state = 'QUEUED' AND parent_id IS NULL";
constexpr char kInsertJob[] =
    "INSERT INTO gpsel_jobs (id, kind, state, request, idempotency_key, created_us, updated_us) "
    "VALUES (?1, ?2, 'QUEUED', ?3, ?4, ?5, ?5) RETURNING " GPSEL_JOB_COLUMNS;
constexpr char kListAll[] = "SELECT " GPSEL_JOB_COLUMNS
                            " FROM gpsel_jobs WHERE seq > ?1 AND parent_id IS NULL "
                            "ORDER BY seq LIMIT ?2";
constexpr char kListByState[] = "SELECT " GPSEL_JOB_COLUMNS
                                " FROM gpsel_jobs WHERE state = ?3 AND seq > ?1 "
                                "AND parent_id IS NULL ORDER BY seq LIMIT ?2";
// Claimable jobs (QUEUED, or RUNNING with an expired lease) that must not run again: those
// with a cancel request, and those that have used up max_attempts.
constexpr char kReapExpired[] =
    "UPDATE gpsel_jobs SET "
    "  state = CASE WHEN cancel_requested THEN 'CANCELLED' ELSE 'FAILED' END, "
    "  error_code = CASE WHEN cancel_requested THEN ?3 ELSE ?4 END, "
    "  error_message = CASE WHEN cancel_requested THEN ?5 ELSE ?6 END, "
    "  lease_owner = '', lease_expires_us = NULL, finished_us = ?1, updated_us = ?1 "
    "WHERE state IN ('QUEUED', 'RUNNING') AND (state = 'QUEUED' OR lease_expires_us <= ?1) "
    "  AND (cancel_requested OR attempts >= ?2)";
// Claimable tasks whose job has ended (or is gone): cancelled, never started.
constexpr char kReapOrphanedTasks[] =
    "UPDATE gpsel_jobs SET state = 'CANCELLED', error_code = ?2, error_message = ?3, "
    "  lease_owner = '', lease_expires_us = NULL, finished_us = ?1, updated_us = ?1 "
    "WHERE state IN ('QUEUED', 'RUNNING') AND (state = 'QUEUED' OR lease_expires_us <= ?1) "
    "  AND parent_id IS NOT NULL AND NOT " GPSEL_PARENT_IS_ACTIVE;
// The oldest claimable task of a job that is still active, else the oldest claimable job, in
// the order of the partial index gpsel_jobs_claim_order. Tasks first: their job waits for them.
#define GPSEL_CLAIM_WHERE(extra)                                                            \
  "UPDATE gpsel_jobs SET state = 'RUNNING', attempts = attempts + 1, lease_owner = ?2, "    \
  "  lease_expires_us = ?3, started_us = ?1, updated_us = ?1, progress = 0, "               \
  "  progress_message = '' "                                                                \
  "WHERE seq = (SELECT seq FROM gpsel_jobs WHERE state IN ('QUEUED', 'RUNNING') "           \
  "  AND (state = 'QUEUED' OR lease_expires_us <= ?1) " extra                               \
  "  AND (parent_id IS NULL OR " GPSEL_PARENT_IS_ACTIVE ") "                                \
  "  ORDER BY parent_id IS NULL, seq LIMIT 1) "                                             \
  "RETURNING " GPSEL_JOB_COLUMNS
constexpr char kClaimOldest[] = GPSEL_CLAIM_WHERE("");
constexpr char kClaimTask[] = GPSEL_CLAIM_WHERE("AND parent_id = ?4 AND task_batch = ?5");
constexpr char kSelectParentOf[] =
    "SELECT state, parent_id, cancel_requested FROM gpsel_jobs WHERE id = ?1";
constexpr char kListTasks[] = "SELECT " GPSEL_JOB_COLUMNS
                              " FROM gpsel_jobs WHERE parent_id = ?1 AND task_batch = ?2 "
                              "ORDER BY task_index";
constexpr char kListTasksWithoutPayloads[] =
    "SELECT " GPSEL_JOB_COLUMNS_WITHOUT_PAYLOADS
    " FROM gpsel_jobs WHERE parent_id = ?1 AND task_batch = ?2 ORDER BY task_index";
constexpr char kInsertTask[] =
    "INSERT INTO gpsel_jobs (id, kind, state, request, created_us, updated_us, parent_id, "
    "  task_batch, task_index) "
    "VALUES (?1, ?2, 'QUEUED', ?3, ?4, ?4, ?5, ?6, ?7) RETURNING " GPSEL_JOB_COLUMNS;
constexpr char kHeartbeat[] =
    "UPDATE gpsel_jobs SET progress = ?3, progress_message = ?4, lease_expires_us = ?5, "
    "  updated_us = ?6 "
    "WHERE id = ?1 AND state = 'RUNNING' AND attempts = ?2 "
    "RETURNING cancel_requested, lease_expires_us, parent_id";
constexpr char kComplete[] =
    "UPDATE gpsel_jobs SET state = 'SUCCEEDED', result = ?3, progress = 1, lease_owner = '', "
    "  lease_expires_us = NULL, finished_us = ?4, updated_us = ?4 "
    "WHERE id = ?1 AND state = 'RUNNING' AND attempts = ?2";
// Fail and MarkCancelled: a terminal state with an error.
constexpr char kFinishWithError[] =
    "UPDATE gpsel_jobs SET state = ?3, error_code = ?4, error_message = ?5, lease_owner = '', "
    "  lease_expires_us = NULL, finished_us = ?6, updated_us = ?6 "
    "WHERE id = ?1 AND state = 'RUNNING' AND attempts = ?2";
constexpr char kSelectFence[] = "SELECT state, attempts FROM gpsel_jobs WHERE id = ?1";
constexpr char kCancelQueued[] =
    "UPDATE gpsel_jobs SET state = 'CANCELLED', error_code = ?3, error_message = ?4, "
    "  finished_us = ?2, updated_us = ?2 "
    "WHERE id = ?1 AND state = 'QUEUED'";
constexpr char kCancelRunning[] =
    "UPDATE gpsel_jobs SET cancel_requested = 1, updated_us = ?2 "
    "WHERE id = ?1 AND state = 'RUNNING' AND NOT cancel_requested";
// The same for the tasks of job ?1.
constexpr char kCancelQueuedTasks[] =
    "UPDATE gpsel_jobs SET state = 'CANCELLED', error_code = ?3, error_message = ?4, "
    "  finished_us = ?2, updated_us = ?2 "
    "WHERE parent_id = ?1 AND state = 'QUEUED'";
constexpr char kCancelRunningTasks[] =
    "UPDATE gpsel_jobs SET cancel_requested = 1, updated_us = ?2 "
    "WHERE parent_id = ?1 AND state = 'RUNNING' AND NOT cancel_requested";
constexpr char kReleaseLeases[] =
    "UPDATE gpsel_jobs SET "
    "  state = CASE WHEN cancel_requested THEN 'CANCELLED' ELSE 'QUEUED' END, "
    "  error_code = CASE WHEN cancel_requested THEN ?3 ELSE 0 END, "
    "  error_message = CASE WHEN cancel_requested THEN ?4 ELSE '' END, "
    "  finished_us = CASE WHEN cancel_requested THEN ?2 ELSE NULL END, "
    "  lease_owner = '', lease_expires_us = NULL, updated_us = ?2 "
    "WHERE state = 'RUNNING' AND lease_owner = ?1";
constexpr char kCountByState[] =
    "SELECT state, count(*) FROM gpsel_jobs WHERE parent_id IS NULL GROUP BY state";
// typeof() reads each row's record, so a full scan of the table's pages (count(*) alone may
// use a smaller index).
constexpr char kCheckJobsTable[] = "SELECT count(typeof(request)) FROM gpsel_jobs";
// At most 3 problems are reported; quick_check skips index-content checks, O(pages).
constexpr char kQuickCheck[] = "PRAGMA quick_check(3)";
// The write probe: a page's worth of bytes, so that it needs room in the WAL as a job does.
constexpr char kWriteProbe[] =
    "INSERT INTO gpsel_health_probe (id, written_us, padding) VALUES (1, ?1, zeroblob(4000)) "
    "ON CONFLICT (id) DO UPDATE SET written_us = excluded.written_us, padding = excluded.padding";
// Tasks go with their job (first, while the job still names them), never before it: a running
// job needs its finished tasks' results.
#define GPSEL_PURGEABLE_JOBS                                                                \
  "SELECT id FROM gpsel_jobs WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') "          \
  "AND finished_us <= ?1 AND parent_id IS NULL"
constexpr char kPurgeFinishedTasks[] =
    "DELETE FROM gpsel_jobs WHERE parent_id IN (" GPSEL_PURGEABLE_JOBS ")";
constexpr char kPurgeFinished[] = "DELETE FROM gpsel_jobs WHERE id IN (" GPSEL_PURGEABLE_JOBS ")";
// Finished tasks whose job is gone (PostgreSQL: a job that finished between the two statements
// above), at the next purge.
constexpr char kPurgeOrphanedTasks[] =
    "DELETE FROM gpsel_jobs WHERE parent_id IS NOT NULL "
    "AND state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') "
    "AND NOT EXISTS (SELECT 1 FROM gpsel_jobs AS p WHERE p.id = gpsel_jobs.parent_id)";

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

// Maps an SQLite result code to a status; `what` names the operation.
absl::Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  const std::string message = absl::StrCat("sqlite: ", jsi::AsAbsl(what), ": ",
                                           db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc),
                                           " (", rc, ")");
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);  // another writer held the lock too long: retry
    case SQLITE_FULL:
      return StoreFullError(message);
    case SQLITE_NOMEM:
      return absl::ResourceExhaustedError(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(message);
    case SQLITE_CANTOPEN:
      return absl::FailedPreconditionError(message);
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

// A cached prepared statement in use. Binding errors are remembered and reported by Step; the
// destructor resets the statement, which ends any read it had open and makes it reusable.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& other) noexcept
      : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)),
        bind_status_(std::move(other.bind_status_)) {}
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& operator=(Statement&&) = delete;
  ~Statement() {
    if (stmt_ == nullptr) return;
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  // Text and blobs are copied (SQLITE_TRANSIENT). A null data pointer would bind SQL NULL, so an
  // empty view binds "" explicitly.
  void BindText(int index, std::string_view value) {
    Check(sqlite3_bind_text64(stmt_, index, value.empty() ? "" : value.data(), value.size(),
                              SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  void BindBlob(int index, std::string_view value) {
    Check(sqlite3_bind_blob64(stmt_, index, value.empty() ? "" : value.data(), value.size(),
                              SQLITE_TRANSIENT));
  }
  void BindTextOrNull(int index, std::string_view value) {
    if (value.empty()) {
      Check(sqlite3_bind_null(stmt_, index));
    } else {
      BindText(index, value);
    }
  }
  void BindInt64(int index, int64_t value) { Check(sqlite3_bind_int64(stmt_, index, value)); }
  void BindDouble(int index, double value) { Check(sqlite3_bind_double(stmt_, index, value)); }

  // True when a row is available, false when done.
  absl::StatusOr<bool> Step() {
    if (!bind_status_.ok()) return bind_status_;
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, sqlite3_sql(stmt_));
  }
  // Steps to completion (statements without rows, or whose rows are not needed).
  absl::Status Run() {
    while (true) {
      absl::StatusOr<bool> row = Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
    }
  }

  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t Int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const {
    const unsigned char* text = sqlite3_column_text(stmt_, col);
    const int size = sqlite3_column_bytes(stmt_, col);
    return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text), size);
  }
  std::string Blob(int col) const {
    const void* blob = sqlite3_column_blob(stmt_, col);
    const int size = sqlite3_column_bytes(stmt_, col);
    return blob == nullptr ? std::string() : std::string(static_cast<const char*>(blob), size);
  }
  absl::Time TimeOrPast(int col) const {
    return IsNull(col) ? absl::InfinitePast() : jsi::TimeFromMicros(Int64(col));
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_status_.ok()) bind_status_ = SqliteError(db_, rc, "bind");
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  absl::Status bind_status_;
};

// Reads a row selected with GPSEL_JOB_COLUMNS; `seq` (optional) receives the sequence number.
absl::StatusOr<Job> ReadJob(const Statement& st, int64_t* seq = nullptr) {
  Job job;
  if (seq != nullptr) *seq = st.Int64(0);
  job.id = st.Text(1);
  job.kind = st.Text(2);
  const std::string state = st.Text(3);
  std::optional<JobState> parsed = ParseJobState(state);
  if (!parsed) {
    return absl::DataLossError(absl::StrCat("job ", job.id, ": unknown state '", state, "'"));
  }
  job.state = *parsed;
  job.request = st.Blob(4);
  job.result = st.Blob(5);
  job.error_code = static_cast<int>(st.Int64(6));
  job.error_message = st.Text(7);
  job.progress = st.Double(8);
  job.progress_message = st.Text(9);
  job.attempts = static_cast<int>(st.Int64(10));
  job.idempotency_key = st.Text(11);
  job.cancel_requested = st.Int64(12) != 0;
  job.lease_owner = st.Text(13);
  job.lease_expires = st.TimeOrPast(14);
  job.created = st.TimeOrPast(15);
  job.started = st.TimeOrPast(16);
  job.finished = st.TimeOrPast(17);
  job.updated = st.TimeOrPast(18);
  job.parent_id = st.Text(19);
  job.task_batch = st.Text(20);
  job.task_index = st.IsNull(21) ? -1 : static_cast<int>(st.Int64(21));
  return job;
}

class SqliteJobStore final : public JobStore {
 public:
  SqliteJobStore(sqlite3* db, const JobStoreOptions& options) : db_(db), options_(options) {}
  ~SqliteJobStore() override {
    absl::MutexLock lock(&mu_);
    for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }

  absl::Status Initialize(bool in_memory) {
    absl::MutexLock lock(&mu_);
    const int64_t busy_ms = std::min<int64_t>(
        absl::ToInt64Milliseconds(options_.sqlite_busy_timeout), std::numeric_limits<int>::max());
    if (int rc = sqlite3_busy_timeout(db_, static_cast<int>(busy_ms)); rc != SQLITE_OK) {
      return SqliteError(db_, rc, "busy_timeout");
    }
    // WAL lets readers proceed while a writer commits, and lets several processes share the
    // file. synchronous=FULL syncs the WAL at every commit: a submitted job whose id the client
    // has received must survive a power loss too ("no job lost"); NORMAL would only survive a
    // process crash. Job-queue commits are few (submit, claim, heartbeat, finish), so the extra
    // fsync costs nothing that matters next to minutes of nested sampling.
    absl::StatusOr<std::string> mode = SwitchToWalRetryingWhileBusy();
    if (!mode.ok()) return mode.status();
    if (!in_memory && *mode != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("sqlite: cannot switch the job store to WAL mode (mode is ", *mode, ")"));
    }
    if (absl::Status s = ExecScript("PRAGMA synchronous=FULL"); !s.ok()) return s;

    // Schema check and creation in one write transaction, so that processes opening a new
    // file at the same time do not interleave. A schema written by a newer gpsel is left alone.
    return InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      if (absl::Status s = ExecScript(kCreateVersionTableSql); !s.ok()) return s;
      absl::StatusOr<std::optional<int64_t>> version =
          QueryOptionalInt("SELECT max(version) FROM gpsel_schema_version");
      if (!version.ok()) return version.status();
      if (version->has_value() && **version > jsi::kSchemaVersion) {
        return absl::FailedPreconditionError(absl::StrCat(
            "sqlite: job store schema version ", **version, " is newer than this gpsel (",
            jsi::kSchemaVersion, ")"));
      }
      if (absl::Status s = ExecScript(kCreateSchemaSql); !s.ok()) return s;
      // kCreateSchemaSql is version 1; each migration takes it one version further.
      if (version->value_or(1) < 2) {
        if (absl::Status s = ExecScript(kMigrateToVersion2Sql); !s.ok()) return s;
      }
      if (!version->has_value()) {
        return ExecScript(absl::StrCat("INSERT INTO gpsel_schema_version (version) VALUES (",
                                       jsi::kSchemaVersion, ")"));
      }
      if (**version < jsi::kSchemaVersion) {
        return ExecScript(absl::StrCat("UPDATE gpsel_schema_version SET version = ",
                                       jsi::kSchemaVersion));
      }
      return absl::OkStatus();
    });
  }

  // The journal-mode switch needs an exclusive lock for a moment, and SQLite returns SQLITE_BUSY
  // for it at once, without calling the busy handler, while another process is opening the same
  // new file (seen with several servers starting together). So it is retried here, with short
  // sleeps, for as long as the configured busy timeout would have waited.
  absl::StatusOr<std::string> SwitchToWalRetryingWhileBusy() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time deadline = absl::Now() + options_.sqlite_busy_timeout;
    absl::Duration pause = absl::Milliseconds(1);
    while (true) {
      absl::StatusOr<std::string> mode = QueryText("PRAGMA journal_mode=WAL");
      if (mode.ok() || !absl::IsUnavailable(mode.status()) || absl::Now() + pause > deadline) {
        return mode;
      }
      absl::SleepFor(pause);
      pause = std::min(pause * 2, absl::Milliseconds(50));
    }
  }

  absl::StatusOr<SubmitResult> Submit(std::string_view kind, std::string_view request,
                                      std::string_view idempotency_key,
                                      int64_t max_queued) override {
    if (absl::Status s = jsi::ValidateSubmit(kind, idempotency_key); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    SubmitResult out;
    absl::Status status = InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      // Inside the write lock, so check-then-insert is atomic across processes too.
      if (!idempotency_key.empty()) {
        absl::StatusOr<std::optional<Job>> existing = SelectOne(kSelectByKey, [&](Statement& st) {
          st.BindText(1, kind);
          st.BindText(2, idempotency_key);
        });
        if (!existing.ok()) return existing.status();
        if (existing->has_value() && (*existing)->kind != kind) {
          return IdempotencyKeyReusedError(idempotency_key, **existing, kind);
        }
        if (existing->has_value()) {
          out.job = std::move(**existing);
          out.created = false;
          return absl::OkStatus();
        }
      }
      if (max_queued > 0) {
        absl::StatusOr<std::optional<int64_t>> queued = QueryOptionalInt(kCountQueued);
        if (!queued.ok()) return queued.status();
        if (queued->value_or(0) >= max_queued) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "job queue full: ", queued->value_or(0), " jobs queued (limit ", max_queued, ")"));
        }
      }
      const int64_t now = NowMicros();
      absl::StatusOr<std::optional<Job>> inserted = SelectOne(kInsertJob, [&](Statement& st) {
        st.BindText(1, jsi::NewJobId());
        st.BindText(2, kind);
        st.BindBlob(3, request);
        st.BindTextOrNull(4, idempotency_key);
        st.BindInt64(5, now);
      });
      if (!inserted.ok()) return inserted.status();
      if (!inserted->has_value()) return absl::InternalError("sqlite: insert returned no row");
      out.job = std::move(**inserted);
      out.created = true;
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return out;
  }

  absl::StatusOr<Job> GetJob(std::string_view id) override {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<std::optional<Job>> job =
        SelectOne(kSelectJobById, [&](Statement& st) { st.BindText(1, id); });
    if (!job.ok()) return job.status();
    if (!job->has_value()) return jsi::JobNotFoundError(id);
    return std::move(**job);
  }

  absl::StatusOr<ListJobsResponse> ListJobs(const ListJobsRequest& request) override {
    absl::StatusOr<int> page_size = jsi::EffectivePageSize(request.page_size);
    if (!page_size.ok()) return page_size.status();
    int64_t after = 0;
    if (!request.page_token.empty()) {
      absl::StatusOr<int64_t> decoded = jsi::DecodePageToken(request.page_token);
      if (!decoded.ok()) return decoded.status();
      after = *decoded;
    }
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Statement> st = Prepare(request.state ? kListByState : kListAll);
    if (!st.ok()) return st.status();
    st->BindInt64(1, after);
    st->BindInt64(2, *page_size + 1);  // one extra row tells whether another page exists
    if (request.state) st->BindText(3, JobStateName(*request.state));
    ListJobsResponse out;
    int64_t last_seq = 0;
    while (true) {
      absl::StatusOr<bool> row = st->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      if (static_cast<int>(out.jobs.size()) == *page_size) {
        out.next_page_token = jsi::EncodePageToken(last_seq);
        break;
      }
      absl::StatusOr<Job> job = ReadJob(*st, &last_seq);
      if (!job.ok()) return job.status();
      out.jobs.push_back(std::move(*job));
    }
    return out;
  }

  absl::StatusOr<std::optional<Job>> Claim(std::string_view worker_id,
                                           absl::Duration lease) override {
    return ClaimWhere(kClaimOldest, "", "", worker_id, lease);
  }

  absl::StatusOr<std::optional<Job>> ClaimTask(std::string_view parent_id,
                                               std::string_view batch,
                                               std::string_view worker_id,
                                               absl::Duration lease) override {
    if (absl::Status s = jsi::ValidateListTasks(parent_id, batch); !s.ok()) return s;
    return ClaimWhere(kClaimTask, parent_id, batch, worker_id, lease);
  }

  absl::StatusOr<std::vector<Job>> SubmitTasks(std::string_view parent_id, std::string_view batch,
                                               std::string_view kind,
                                               const std::vector<std::string>& requests) override {
    if (absl::Status s = jsi::ValidateSubmitTasks(parent_id, batch, kind, requests); !s.ok())
      return s;
    absl::MutexLock lock(&mu_);
    std::vector<Job> tasks;
    absl::Status status = InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      {
        absl::StatusOr<Statement> st = Prepare(kSelectParentOf);
        if (!st.ok()) return st.status();
        st->BindText(1, parent_id);
        absl::StatusOr<bool> row = st->Step();
        if (!row.ok()) return row.status();
        if (!*row) return jsi::JobNotFoundError(parent_id);
        if (!st->IsNull(1)) return jsi::TasksOfTaskError(parent_id);
        const JobState state = ParseJobState(st->Text(0)).value_or(JobState::kFailed);
        if (state != JobState::kRunning) return jsi::TasksOfIdleJobError(parent_id, state);
        if (st->Int64(2) != 0) return jsi::TasksOfCancelledJobError(parent_id);
      }
      absl::StatusOr<std::vector<Job>> existing = SelectTasks(kListTasks, parent_id, batch);
      if (!existing.ok()) return existing.status();
      if (!existing->empty()) {
        if (existing->size() != requests.size()) {
          return jsi::TaskBatchSizeError(parent_id, batch, existing->size(), requests.size());
        }
        tasks = *std::move(existing);
        return absl::OkStatus();
      }
      const int64_t now = NowMicros();
      for (size_t i = 0; i < requests.size(); ++i) {
        absl::StatusOr<std::optional<Job>> inserted = SelectOne(kInsertTask, [&](Statement& st) {
          st.BindText(1, jsi::NewJobId());
          st.BindText(2, kind);
          st.BindBlob(3, requests[i]);
          st.BindInt64(4, now);
          st.BindText(5, parent_id);
          st.BindText(6, batch);
          st.BindInt64(7, static_cast<int64_t>(i));
        });
        if (!inserted.ok()) return inserted.status();
        if (!inserted->has_value()) return absl::InternalError("sqlite: insert returned no row");
        tasks.push_back(std::move(**inserted));
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return tasks;
  }

  absl::StatusOr<std::vector<Job>> ListTasks(std::string_view parent_id, std::string_view batch,
                                             bool with_payloads) override {
    if (absl::Status s = jsi::ValidateListTasks(parent_id, batch); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    return SelectTasks(with_payloads ? kListTasks : kListTasksWithoutPayloads, parent_id, batch);
  }

  absl::StatusOr<HeartbeatResponse> Heartbeat(std::string_view id, int attempt, double progress,
                                              std::string_view progress_message,
                                              absl::Duration lease) override {
    if (absl::Status s = jsi::ValidateHeartbeat(id, progress, lease); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    HeartbeatResponse out;
    absl::Status status = InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      const int64_t now = NowMicros();
      absl::StatusOr<Statement> st = Prepare(kHeartbeat);
      if (!st.ok()) return st.status();
      st->BindText(1, id);
      st->BindInt64(2, attempt);
      st->BindDouble(3, jsi::ClampProgress(progress));
      st->BindText(4, progress_message);
      st->BindInt64(5, now + jsi::DurationMicros(lease));
      st->BindInt64(6, now);
      absl::StatusOr<bool> row = st->Step();
      if (!row.ok()) return row.status();
      if (!*row) return FencingFailure(id, attempt);
      out.cancel_requested = st->Int64(0) != 0;
      out.lease_expires = st->TimeOrPast(1);
      const std::string parent_id = st->Text(2);
      if (absl::Status s = st->Run(); !s.ok()) return s;
      if (!parent_id.empty() && !out.cancel_requested) {
        // A task whose job has ended (or was purged) has nobody to deliver its result to.
        absl::StatusOr<Statement> parent = Prepare(kSelectParentOf);
        if (!parent.ok()) return parent.status();
        parent->BindText(1, parent_id);
        absl::StatusOr<bool> found = parent->Step();
        if (!found.ok()) return found.status();
        out.cancel_requested =
            !*found || IsTerminal(ParseJobState(parent->Text(0)).value_or(JobState::kFailed));
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return out;
  }

  absl::Status Complete(std::string_view id, int attempt, std::string_view result) override {
    absl::MutexLock lock(&mu_);
    return InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      absl::StatusOr<Statement> st = Prepare(kComplete);
      if (!st.ok()) return st.status();
      st->BindText(1, id);
      st->BindInt64(2, attempt);
      st->BindBlob(3, result);
      st->BindInt64(4, NowMicros());
      return ChangedOneOrFenced(*st, id, attempt);
    });
  }

  absl::Status Fail(std::string_view id, int attempt, const absl::Status& error) override {
    if (absl::Status s = jsi::ValidateFail(error); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    return FinishWithError(id, attempt, JobState::kFailed, error.code(),
                           jsi::AsStd(error.message()));
  }

  absl::Status MarkCancelled(std::string_view id, int attempt) override {
    absl::MutexLock lock(&mu_);
    return FinishWithError(id, attempt, JobState::kCancelled, absl::StatusCode::kCancelled,
                           jsi::kCancelledMessage);
  }

  absl::StatusOr<Job> RequestCancel(std::string_view id) override {
    absl::MutexLock lock(&mu_);
    std::optional<Job> job;
    absl::Status status = InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      const int64_t now = NowMicros();
      // The job, then its tasks: queued ones are cancelled, running ones flagged.
      for (const char* sql : {kCancelQueued, kCancelQueuedTasks}) {
        absl::StatusOr<Statement> st = Prepare(sql);
        if (!st.ok()) return st.status();
        st->BindText(1, id);
        st->BindInt64(2, now);
        st->BindInt64(3, static_cast<int>(absl::StatusCode::kCancelled));
        st->BindText(4, jsi::kCancelledMessage);
        if (absl::Status s = st->Run(); !s.ok()) return s;
      }
      for (const char* sql : {kCancelRunning, kCancelRunningTasks}) {
        absl::StatusOr<Statement> st = Prepare(sql);
        if (!st.ok()) return st.status();
        st->BindText(1, id);
        st->BindInt64(2, now);
        if (absl::Status s = st->Run(); !s.ok()) return s;
      }
      absl::StatusOr<std::optional<Job>> found =
          SelectOne(kSelectJobById, [&](Statement& st) { st.BindText(1, id); });
      if (!found.ok()) return found.status();
      if (!found->has_value()) return jsi::JobNotFoundError(id);
      job = std::move(*found);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return std::move(*job);
  }

  absl::StatusOr<int64_t> ReleaseLeases(std::string_view worker_id) override {
    if (absl::Status s = jsi::ValidateWorkerId(worker_id); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    int64_t changed = 0;
    absl::Status status = InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      absl::StatusOr<Statement> st = Prepare(kReleaseLeases);
      if (!st.ok()) return st.status();
      st->BindText(1, worker_id);
      st->BindInt64(2, NowMicros());
      st->BindInt64(3, static_cast<int>(absl::StatusCode::kCancelled));
      st->BindText(4, jsi::kCancelledMessage);
      if (absl::Status s = st->Run(); !s.ok()) return s;
      changed = sqlite3_changes64(db_);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return changed;
  }

  absl::Status CheckHealth(StoreCheck depth) override {
    absl::MutexLock lock(&mu_);
    if (depth == StoreCheck::kWrite) {
      return InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        absl::StatusOr<Statement> st = Prepare(kWriteProbe);
        if (!st.ok()) return st.status();
        st->BindInt64(1, NowMicros());
        return st->Run();
      });
    }
    if (depth == StoreCheck::kConnection) {
      // Reads every row of the jobs table (its B-tree pages): a corrupt page there fails.
      absl::StatusOr<Statement> st = Prepare(kCheckJobsTable);
      if (!st.ok()) return st.status();
      absl::StatusOr<bool> row = st->Step();
      return row.ok() ? absl::OkStatus() : row.status();
    }
    // Drop this connection's cached pages first: pages overwritten under a running server
    // (issue 33) must be read from the file, not from memory.
    sqlite3_db_release_memory(db_);
    absl::StatusOr<Statement> st = Prepare(kQuickCheck);
    if (!st.ok()) return st.status();
    std::vector<std::string> problems;
    while (true) {
      absl::StatusOr<bool> row = st->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      std::string line = st->Text(0);
      if (line != "ok" && problems.size() < 3) problems.push_back(std::move(line));
    }
    if (problems.empty()) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat("sqlite: PRAGMA quick_check found corruption: ",
                                            absl::StrJoin(problems, "; ")));
  }

  absl::StatusOr<JobCounts> CountByState() override {
    absl::MutexLock lock(&mu_);
    JobCounts counts;
    for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
                       JobState::kFailed, JobState::kCancelled}) {
      counts[s] = 0;
    }
    absl::StatusOr<Statement> st = Prepare(kCountByState);
    if (!st.ok()) return st.status();
    while (true) {
      absl::StatusOr<bool> row = st->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      std::optional<JobState> state = ParseJobState(st->Text(0));
      if (!state) return absl::DataLossError("sqlite: unknown job state in the jobs table");
      counts[*state] = st->Int64(1);
    }
    return counts;
  }

  absl::StatusOr<int64_t> PurgeFinished(absl::Duration min_age) override {
    if (min_age < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("min_age: must not be negative");
    }
    absl::MutexLock lock(&mu_);
    int64_t deleted = 0;
    absl::Status status = InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      const int64_t cutoff = NowMicros() - absl::ToInt64Microseconds(min_age);
      for (const char* sql : {kPurgeFinishedTasks, kPurgeFinished, kPurgeOrphanedTasks}) {
        absl::StatusOr<Statement> st = Prepare(sql);
        if (!st.ok()) return st.status();
        if (sql != kPurgeOrphanedTasks) st->BindInt64(1, cutoff);
        if (absl::Status s = st->Run(); !s.ok()) return s;
        deleted += sqlite3_changes64(db_);
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return deleted;
  }

 private:
  // Claim and ClaimTask: reaps what must not run again, then takes the first row of
  // `claim_sql` (kClaimTask binds `parent_id` and `batch` as ?4 and ?5).
  absl::StatusOr<std::optional<Job>> ClaimWhere(const char* claim_sql, std::string_view parent_id,
                                                std::string_view batch,
                                                std::string_view worker_id, absl::Duration lease) {
    if (absl::Status s = jsi::ValidateClaim(worker_id, lease); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    std::optional<Job> claimed;
    absl::Status status = InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      const int64_t now = NowMicros();
      {
        absl::StatusOr<Statement> reap = Prepare(kReapExpired);
        if (!reap.ok()) return reap.status();
        reap->BindInt64(1, now);
        reap->BindInt64(2, options_.max_attempts);
        reap->BindInt64(3, static_cast<int>(absl::StatusCode::kCancelled));
        reap->BindInt64(4, static_cast<int>(absl::StatusCode::kAborted));
        reap->BindText(5, jsi::kCancelledMessage);
        reap->BindText(6, jsi::AbandonedMessage(options_.max_attempts));
        if (absl::Status s = reap->Run(); !s.ok()) return s;
      }
      {
        absl::StatusOr<Statement> reap = Prepare(kReapOrphanedTasks);
        if (!reap.ok()) return reap.status();
        reap->BindInt64(1, now);
        reap->BindInt64(2, static_cast<int>(absl::StatusCode::kCancelled));
        reap->BindText(3, jsi::kOrphanedTaskMessage);
        if (absl::Status s = reap->Run(); !s.ok()) return s;
      }
      absl::StatusOr<std::optional<Job>> job = SelectOne(claim_sql, [&](Statement& st) {
        st.BindInt64(1, now);
        st.BindText(2, worker_id);
        st.BindInt64(3, now + jsi::DurationMicros(lease));
        if (!parent_id.empty()) {
          st.BindText(4, parent_id);
          st.BindText(5, batch);
        }
      });
      if (!job.ok()) return job.status();
      claimed = std::move(*job);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return claimed;
  }

  // The rows of a task listing (kListTasks or kListTasksWithoutPayloads).
  absl::StatusOr<std::vector<Job>> SelectTasks(const char* sql, std::string_view parent_id,
                                               std::string_view batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<Statement> st = Prepare(sql);
    if (!st.ok()) return st.status();
    st->BindText(1, parent_id);
    st->BindText(2, batch);
    std::vector<Job> tasks;
    while (true) {
      absl::StatusOr<bool> row = st->Step();
      if (!row.ok()) return row.status();
      if (!*row) return tasks;
      absl::StatusOr<Job> job = ReadJob(*st);
      if (!job.ok()) return job.status();
      tasks.push_back(std::move(*job));
    }
  }

  // Returns the cached prepared statement for `sql`, preparing it on first use.
  absl::StatusOr<Statement> Prepare(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = statements_.find(sql);
    if (it == statements_.end()) {
      sqlite3_stmt* stmt = nullptr;
      const int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) return SqliteError(db_, rc, absl::StrCat("prepare: ", sql));
      it = statements_.emplace(sql, stmt).first;
    }
    return Statement(db_, it->second);
  }

  // Runs SQL without parameters or wanted rows (DDL, pragmas) via sqlite3_exec.
  absl::Status ExecScript(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    char* error = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    sqlite3_free(error);  // sqlite3_errmsg still has the message
    if (rc != SQLITE_OK) return SqliteError(db_, rc, sql);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> QueryText(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<Statement> st = Prepare(sql);
    if (!st.ok()) return st.status();
    absl::StatusOr<bool> row = st->Step();
    if (!row.ok()) return row.status();
    return *row ? st->Text(0) : std::string();
  }

  absl::StatusOr<std::optional<int64_t>> QueryOptionalInt(const char* sql)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<Statement> st = Prepare(sql);
    if (!st.ok()) return st.status();
    absl::StatusOr<bool> row = st->Step();
    if (!row.ok()) return row.status();
    if (!*row || st->IsNull(0)) return std::optional<int64_t>();
    return std::optional<int64_t>(st->Int64(0));
  }

  // Runs `sql` (bound by `bind`) and reads at most one job row; the statement runs to
  // completion, so UPDATE/INSERT ... RETURNING are fully applied.
  template <typename BindFn>
  absl::StatusOr<std::optional<Job>> SelectOne(const char* sql, BindFn&& bind)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<Statement> st = Prepare(sql);
    if (!st.ok()) return st.status();
    bind(*st);
    absl::StatusOr<bool> row = st->Step();
    if (!row.ok()) return row.status();
    if (!*row) return std::optional<Job>();
    absl::StatusOr<Job> job = ReadJob(*st);
    if (!job.ok()) return job.status();
    if (absl::Status s = st->Run(); !s.ok()) return s;
    return std::optional<Job>(std::move(*job));
  }

  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT: the write lock is taken before anything is
  // read, so concurrent writers (threads with their own store, or other processes) serialise on
  // it — waiting up to busy_timeout — instead of failing with SQLITE_BUSY on upgrade. A non-OK
  // status from `body` rolls everything back, so nothing is half-stored.
  template <typename Fn>
  absl::Status InWriteTransaction(Fn&& body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    {
      absl::StatusOr<Statement> begin = Prepare("BEGIN IMMEDIATE");
      if (!begin.ok()) return begin.status();
      if (absl::Status s = begin->Run(); !s.ok()) return s;
    }
    absl::Status status = body();
    if (status.ok()) {
      absl::StatusOr<Statement> commit = Prepare("COMMIT");
      status = commit.ok() ? commit->Run() : commit.status();
      if (status.ok()) return status;
    }
    // SQLite may already have rolled back by itself after some errors; that is fine.
    if (!sqlite3_get_autocommit(db_)) {
      absl::StatusOr<Statement> rollback = Prepare("ROLLBACK");
      if (rollback.ok()) rollback->Run().IgnoreError();
    }
    return status;
  }

  // For a fenced UPDATE: OK when it changed the job, else NOT_FOUND / ABORTED.
  absl::Status ChangedOneOrFenced(Statement& st, std::string_view id, int attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (absl::Status s = st.Run(); !s.ok()) return s;
    if (sqlite3_changes64(db_) == 1) return absl::OkStatus();
    return FencingFailure(id, attempt);
  }

  // Explains why a fenced update matched no row.
  absl::Status FencingFailure(std::string_view id, int attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<Statement> st = Prepare(kSelectFence);
    if (!st.ok()) return st.status();
    st->BindText(1, id);
    absl::StatusOr<bool> row = st->Step();
    if (!row.ok()) return row.status();
    if (!*row) return jsi::JobNotFoundError(id);
    const JobState state = ParseJobState(st->Text(0)).value_or(JobState::kFailed);
    return jsi::LostLeaseError(id, attempt, state, static_cast<int>(st->Int64(1)));
  }

  absl::Status FinishWithError(std::string_view id, int attempt, JobState state,
                               absl::StatusCode code, std::string_view message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return InWriteTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
      absl::StatusOr<Statement> st = Prepare(kFinishWithError);
      if (!st.ok()) return st.status();
      st->BindText(1, id);
      st->BindInt64(2, attempt);
      st->BindText(3, JobStateName(state));
      st->BindInt64(4, static_cast<int>(code));
      st->BindText(5, message);
      st->BindInt64(6, NowMicros());
      return ChangedOneOrFenced(*st, id, attempt);
    });
  }

  absl::Mutex mu_;
  sqlite3* const db_ ABSL_GUARDED_BY(mu_);
  const JobStoreOptions options_;
  // Prepared statements by SQL text, prepared on first use and kept for the store's lifetime.
  std::unordered_map<std::string, sqlite3_stmt*> statements_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> OpenSqliteJobStore(std::string_view path,
                                                             const JobStoreOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (path.empty()) return absl::InvalidArgumentError("sqlite job store: empty path");
  const std::string file(path);
  sqlite3* db = nullptr;
  // NOMUTEX: the store's own mutex serialises all use of the connection.
  const int rc = sqlite3_open_v2(file.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteError(db, rc, absl::StrCat("open ", file));
    sqlite3_close_v2(db);  // a handle is returned even on failure
    return status;
  }
  auto store = std::make_unique<SqliteJobStore>(db, options);
  if (absl::Status s = store->Initialize(file == ":memory:"); !s.ok()) return s;
  return std::unique_ptr<JobStore>(std::move(store));
}

}  // namespace gpsel
