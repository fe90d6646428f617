// PostgreSQL implementation of JobStore (libpqxx 6.4): a small connection pool, prepared
// statements, READ COMMITTED transactions, SKIP LOCKED claims and database-side time.
// Every pqxx exception is caught here and turned into an absl::Status.
#include "gpsel/server/store/job_store_postgres.h"

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpsel/server/store/job_store_internal.h"

namespace gpsel {
namespace {

namespace jsi = job_store_internal;

// Advisory-lock keys: a class id ("gpsl" / "gpsu" in ASCII) and a hash of the current schema,
// so independent queues in different schemas do not serialise against each other.
#define GPSEL_LOCK_KEY(class_id) \
  "pg_advisory_xact_lock(" class_id ", hashtext(coalesce(current_schema(), '')))"
constexpr char kLockSchemaSql[] = "SELECT " GPSEL_LOCK_KEY("1735422828");

// Schema version 1; see job_store_sqlite.cc for the meaning of the columns. Times are
// timestamptz written with now(). The partial index over active jobs keeps Claim cheap however
// many finished jobs accumulate.
constexpr char kCreateVersionTableSql[] =
    "CREATE TABLE IF NOT EXISTS gpsel_schema_version (version integer NOT NULL)";
constexpr char kCreateSchemaSql[] = R"sql(
CREATE TABLE IF NOT EXISTS gpsel_jobs (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id text NOT NULL UNIQUE,
  kind text NOT NULL,
  state text NOT NULL
    CHECK (state IN ('QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  request bytea NOT NULL,
  result bytea,
  error_code integer NOT NULL DEFAULT 0,
  error_message text NOT NULL DEFAULT '',
  progress double precision NOT NULL DEFAULT 0,
  progress_message text NOT NULL DEFAULT '',
  attempts integer NOT NULL DEFAULT 0,
  idempotency_key text,
  cancel_requested boolean NOT NULL DEFAULT false,
  lease_owner text NOT NULL DEFAULT '',
  lease_expires timestamptz,
  created timestamptz NOT NULL DEFAULT now(),
  started timestamptz,
  finished timestamptz,
  updated timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT gpsel_jobs_idempotency UNIQUE (kind, idempotency_key)
);
CREATE INDEX IF NOT EXISTS gpsel_jobs_state_seq ON gpsel_jobs (state, seq);
CREATE INDEX IF NOT EXISTS gpsel_jobs_active ON gpsel_jobs (seq)
  WHERE state IN ('QUEUED', 'RUNNING');
-- Submit looks a key up without its kind (one key names one job); see job_store_sqlite.cc.
CREATE INDEX IF NOT EXISTS gpsel_jobs_by_key ON gpsel_jobs (idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- One row per database that CheckHealth(kWrite) rewrites (a write, as Claim's are).
CREATE TABLE IF NOT EXISTS gpsel_health_probe (
  id integer PRIMARY KEY,
  written timestamptz NOT NULL
);
)sql";

// Version 2: the task columns; see job_store_sqlite.cc.
constexpr char kMigrateToVersion2Sql[] = R"sql(
ALTER TABLE gpsel_jobs ADD COLUMN parent_id text;
ALTER TABLE gpsel_jobs ADD COLUMN task_batch text;
ALTER TABLE gpsel_jobs ADD COLUMN task_index integer;
CREATE UNIQUE INDEX gpsel_jobs_tasks ON gpsel_jobs (parent_id, task_batch, task_index);
CREATE INDEX gpsel_jobs_claim_order ON gpsel_jobs ((parent_id IS NULL), seq)
  WHERE state IN ('QUEUED', 'RUNNING');
)sql";

// Unix microseconds of a timestamptz column (NULL stays NULL).
#define GPSEL_US(col) "(extract(epoch from " col ") * 1000000)::bigint"
// Column list read by ReadJob, in this order; the _WITHOUT_PAYLOADS form reads empty request
// and result bytes (for polling a job's tasks).
#define GPSEL_JOB_COLUMNS_WITH(request_and_result)                                              \
  "seq, id, kind, state, " request_and_result ", error_code, error_message, progress, "        \
  "progress_message, attempts, coalesce(idempotency_key, ''), cancel_requested, lease_owner, " \
  GPSEL_US("lease_expires") ", " GPSEL_US("created") ", " GPSEL_US("started") ", "             \
  GPSEL_US("finished") ", " GPSEL_US("updated") ", coalesce(parent_id, ''), "                  \
  "coalesce(task_batch, ''), task_index"
#define GPSEL_JOB_COLUMNS GPSEL_JOB_COLUMNS_WITH("request, result")
#define GPSEL_JOB_COLUMNS_WITHOUT_PAYLOADS GPSEL_JOB_COLUMNS_WITH("''::bytea, NULL::bytea")
// Jobs whose tasks may still run: a task of any other job (ended, or purged) is an orphan.
#define GPSEL_PARENT_IS_ACTIVE                                                              \
  "EXISTS (SELECT 1 FROM gpsel_jobs AS p WHERE p.id = gpsel_jobs.parent_id "               \
  "AND p.state IN ('QUEUED', 'RUNNING'))"
#define GPSEL_LEASE_UNTIL(param) "now() + " param "::bigint * interval '1 microsecond'"

// Prepared statements: name and SQL. All are prepared on every pooled connection.
struct PreparedSql {
  const char* name;
  const char* sql;
};

constexpr PreparedSql kLockSubmit = {
    "gpsel_lock_submit",
    "SELECT " GPSEL_LOCK_KEY("1735422837")};
constexpr PreparedSql kSelectJobById = {
    "gpsel_select_job", "SELECT " GPSEL_JOB_COLUMNS " FROM gpsel_jobs WHERE id = $1"};
constexpr PreparedSql kSelectByKey = {
    "gpsel_select_by_key",
    // The job a key names, whatever its kind (one key, one job); one of kind $1 first, should
    // a database written before keys were global hold several.
    "SELECT " GPSEL_JOB_COLUMNS " FROM gpsel_jobs WHERE idempotency_key = $2 "
    "ORDER BY (kind = $1) DESC, seq LIMIT 1"};
constexpr PreparedSql kCountQueued = {
    "gpsel_count_queued",
    "SELECT count(*) FROM gpsel_jobs WHERE state = 'QUEUED' AND parent_id IS NULL"};
constexpr PreparedSql kInsertJob = {
    "gpsel_insert_job",
    "INSERT INTO gpsel_jobs (id, kind, state, request, idempotency_key) "
    "VALUES ($1, $2, 'QUEUED', $3, NULLIF($4, '')) "
    "ON CONFLICT ON CONSTRAINT gpsel_jobs_idempotency DO NOTHING "
    "RETURNING " GPSEL_JOB_COLUMNS};
constexpr PreparedSql kListAll = {"gpsel_list_all",
                                  "SELECT " GPSEL_JOB_COLUMNS
                                  " FROM gpsel_jobs WHERE seq > $1::bigint "
                                  "AND parent_id IS NULL ORDER BY seq LIMIT $2::bigint"};
constexpr PreparedSql kListByState = {"gpsel_list_by_state",
                                      "SELECT " GPSEL_JOB_COLUMNS
                                      " FROM gpsel_jobs WHERE state = $3 AND seq > $1::bigint "
                                      "AND parent_id IS NULL ORDER BY seq LIMIT $2::bigint"};
// Claimable jobs (QUEUED, or RUNNING with an expired lease) that must not run again: those
// with a cancel request, and those that have used up max_attempts.
constexpr PreparedSql kReapExpired = {
    "gpsel_reap_expired",
    "UPDATE gpsel_jobs SET "
    "  state = CASE WHEN cancel_requested THEN 'CANCELLED' ELSE 'FAILED' END, "
    "  error_code = CASE WHEN cancel_requested THEN $2::integer ELSE $3::integer END, "
    "  error_message = CASE WHEN cancel_requested THEN $4::text ELSE $5::text END, "
    "  lease_owner = '', lease_expires = NULL, finished = now(), updated = now() "
    "WHERE seq IN (SELECT seq FROM gpsel_jobs WHERE state IN ('QUEUED', 'RUNNING') "
    "  AND (state = 'QUEUED' OR lease_expires <= now()) "
    "  AND (cancel_requested OR attempts >= $1::integer) "
    "  FOR UPDATE SKIP LOCKED)"};
// Claimable tasks whose job has ended (or is gone): cancelled, never started.
constexpr PreparedSql kReapOrphanedTasks = {
    "gpsel_reap_orphaned_tasks",
    "UPDATE gpsel_jobs SET state = 'CANCELLED', error_code = $1::integer, error_message = $2, "
    "  lease_owner = '', lease_expires = NULL, finished = now(), updated = now() "
    "WHERE seq IN (SELECT seq FROM gpsel_jobs WHERE state IN ('QUEUED', 'RUNNING') "
    "  AND (state = 'QUEUED' OR lease_expires <= now()) "
    "  AND parent_id IS NOT NULL AND NOT " GPSEL_PARENT_IS_ACTIVE " FOR UPDATE SKIP LOCKED)"};
// The oldest claimable task of a job that is still active, else the oldest claimable job, in
// the order of the partial index gpsel_jobs_claim_order. Tasks first: their job waits for them.
// The job's state is read in the claim itself: under READ COMMITTED a job that ended after the
// reaping above is seen ended here, so its tasks are not started. SKIP LOCKED: a row another
// claimer has locked is passed over rather than waited for, and a locked row is re-checked
// against the WHERE clause, so a job just claimed by a committed transaction is never taken
// twice.
#define GPSEL_CLAIM_WHERE(extra)                                                            \
  "UPDATE gpsel_jobs SET state = 'RUNNING', attempts = attempts + 1, lease_owner = $1, "    \
  "  lease_expires = " GPSEL_LEASE_UNTIL("$2") ", started = now(), updated = now(), "       \
  "  progress = 0, progress_message = '' "                                                  \
  "WHERE seq = (SELECT seq FROM gpsel_jobs WHERE state IN ('QUEUED', 'RUNNING') "           \
  "  AND (state = 'QUEUED' OR lease_expires <= now()) " extra                               \
  "  AND (parent_id IS NULL OR " GPSEL_PARENT_IS_ACTIVE ") "                                \
  "  ORDER BY parent_id IS NULL, seq LIMIT 1 FOR UPDATE SKIP LOCKED) "                      \
  "RETURNING " GPSEL_JOB_COLUMNS
constexpr PreparedSql kClaimOldest = {"gpsel_claim", GPSEL_CLAIM_WHERE("")};
constexpr PreparedSql kClaimTask = {"gpsel_claim_task",
                                    GPSEL_CLAIM_WHERE("AND parent_id = $3 AND task_batch = $4")};
// FOR UPDATE: a job cannot end (or be re-claimed) while a batch of its tasks is being added,
// and two workers adding the same batch (a stale one and the current one) take turns.
constexpr PreparedSql kSelectParentOf = {
    "gpsel_select_parent_of",
    "SELECT state, parent_id, cancel_requested FROM gpsel_jobs WHERE id = $1 FOR UPDATE"};
constexpr PreparedSql kSelectParentState = {
    "gpsel_select_parent_state", "SELECT state FROM gpsel_jobs WHERE id = $1"};
constexpr PreparedSql kListTasks = {
    "gpsel_list_tasks", "SELECT " GPSEL_JOB_COLUMNS
                        " FROM gpsel_jobs WHERE parent_id = $1 AND task_batch = $2 "
                        "ORDER BY task_index"};
constexpr PreparedSql kListTasksWithoutPayloads = {
    "gpsel_list_tasks_without_payloads",
    "SELECT " GPSEL_JOB_COLUMNS_WITHOUT_PAYLOADS
    " FROM gpsel_jobs WHERE parent_id = $1 AND task_batch = $2 ORDER BY task_index"};
constexpr PreparedSql kInsertTask = {
    "gpsel_insert_task",
    "INSERT INTO gpsel_jobs (id, kind, state, request, parent_id, task_batch, task_index) "
    "VALUES ($1, $2, 'QUEUED', $3, $4, $5, $6::integer) RETURNING " GPSEL_JOB_COLUMNS};
constexpr PreparedSql kHeartbeat = {
    "gpsel_heartbeat",
    "UPDATE gpsel_jobs SET progress = $3::double precision, progress_message = $4, "
    "  lease_expires = " GPSEL_LEASE_UNTIL("$5") ", updated = now() "
    "WHERE id = $1 AND state = 'RUNNING' AND attempts = $2::integer "
    "RETURNING cancel_requested, " GPSEL_US("lease_expires") ", coalesce(parent_id, '')"};
constexpr PreparedSql kComplete = {
    "gpsel_complete",
    "UPDATE gpsel_jobs SET state = 'SUCCEEDED', result = $3, progress = 1, lease_owner = '', "
    "  lease_expires = NULL, finished = now(), updated = now() "
    "WHERE id = $1 AND state = 'RUNNING' AND attempts = $2::integer"};
constexpr PreparedSql kFinishWithError = {
    "gpsel_finish_with_error",
    "UPDATE gpsel_jobs SET state = $3, error_code = $4::integer, error_message = $5, "
    "  lease_owner = '', lease_expires = NULL, finished = now(), updated = now() "
    "WHERE id = $1 AND state = 'RUNNING' AND attempts = $2::integer"};
constexpr PreparedSql kSelectFence = {"gpsel_select_fence",
                                      "SELECT state, attempts FROM gpsel_jobs WHERE id = $1"};
constexpr PreparedSql kCancelQueued = {
    "gpsel_cancel_queued",
    "UPDATE gpsel_jobs SET state = 'CANCELLED', error_code = $2::integer, error_message = $3, "
    "  finished = now(), updated = now() "
    "WHERE id = $1 AND state = 'QUEUED'"};
constexpr PreparedSql kCancelRunning = {
    "gpsel_cancel_running",
    "UPDATE gpsel_jobs SET cancel_requested = true, updated = now() "
    "WHERE id = $1 AND state = 'RUNNING' AND NOT cancel_requested"};
// The same for the tasks of job $1.
constexpr PreparedSql kCancelQueuedTasks = {
    "gpsel_cancel_queued_tasks",
    "UPDATE gpsel_jobs SET state = 'CANCELLED', error_code = $2::integer, error_message = $3, "
    "  finished = now(), updated = now() "
    "WHERE parent_id = $1 AND state = 'QUEUED'"};
constexpr PreparedSql kCancelRunningTasks = {
    "gpsel_cancel_running_tasks",
    "UPDATE gpsel_jobs SET cancel_requested = true, updated = now() "
    "WHERE parent_id = $1 AND state = 'RUNNING' AND NOT cancel_requested"};
constexpr PreparedSql kReleaseLeases = {
    "gpsel_release_leases",
    "UPDATE gpsel_jobs SET "
    "  state = CASE WHEN cancel_requested THEN 'CANCELLED' ELSE 'QUEUED' END, "
    "  error_code = CASE WHEN cancel_requested THEN $2::integer ELSE 0 END, "
    "  error_message = CASE WHEN cancel_requested THEN $3::text ELSE '' END, "
    "  finished = CASE WHEN cancel_requested THEN now() ELSE NULL END, "
    "  lease_owner = '', lease_expires = NULL, updated = now() "
    "WHERE state = 'RUNNING' AND lease_owner = $1"};
constexpr PreparedSql kCountByState = {
    "gpsel_count_by_state",
    "SELECT state, count(*) FROM gpsel_jobs WHERE parent_id IS NULL GROUP BY state"};
// Tasks go with their job (first, while the job still names them), never before it.
#define GPSEL_PURGEABLE_JOBS                                                                \
  "SELECT id FROM gpsel_jobs WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') "          \
  "AND finished <= now() - $1::bigint * interval '1 microsecond' AND parent_id IS NULL"
constexpr PreparedSql kPurgeFinishedTasks = {
    "gpsel_purge_finished_tasks",
    "DELETE FROM gpsel_jobs WHERE parent_id IN (" GPSEL_PURGEABLE_JOBS ")"};
constexpr PreparedSql kPurgeFinished = {
    "gpsel_purge_finished", "DELETE FROM gpsel_jobs WHERE id IN (" GPSEL_PURGEABLE_JOBS ")"};
// Finished tasks whose job is gone (a job that finished between the two statements above, under
// READ COMMITTED), at the next purge.
constexpr PreparedSql kPurgeOrphanedTasks = {
    "gpsel_purge_orphaned_tasks",
    "DELETE FROM gpsel_jobs WHERE parent_id IS NOT NULL "
    "AND state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') "
    "AND NOT EXISTS (SELECT 1 FROM gpsel_jobs AS p WHERE p.id = gpsel_jobs.parent_id)"};

constexpr PreparedSql kAllStatements[] = {
    kLockSubmit,   kSelectJobById, kSelectByKey,     kCountQueued,   kInsertJob,
    kListAll,      kListByState,   kReapExpired,     kClaimOldest,   kHeartbeat,
    kComplete,     kFinishWithError, kSelectFence,   kCancelQueued,  kCancelRunning,
    kReleaseLeases, kCountByState, kPurgeFinished, kReapOrphanedTasks, kClaimTask,
    kSelectParentOf, kSelectParentState, kListTasks, kListTasksWithoutPayloads, kInsertTask,
    kCancelQueuedTasks, kCancelRunningTasks, kPurgeFinishedTasks, kPurgeOrphanedTasks};

// Maps a SQLSTATE (https://www.postgresql.org/docs/15/errcodes-appendix.html) to a status code.
absl::StatusCode CodeForSqlState(std::string_view state) {
  if (state.size() != 5) return absl::StatusCode::kInternal;
  const std::string_view cls = state.substr(0, 2);
  if (state == "40001" || state == "40P01") return absl::StatusCode::kAborted;
  if (state == "57014") return absl::StatusCode::kCancelled;  // statement timeout / cancel
  if (state == "42501") return absl::StatusCode::kPermissionDenied;
  if (state == "23505") return absl::StatusCode::kAlreadyExists;
  if (cls == "08" || cls == "57") return absl::StatusCode::kUnavailable;  // connection, shutdown
  if (cls == "53") return absl::StatusCode::kResourceExhausted;           // disk full, memory
  if (cls == "28") return absl::StatusCode::kUnauthenticated;
  if (cls == "3D" || cls == "3F") return absl::StatusCode::kFailedPrecondition;  // no db/schema
  if (cls == "XX") return absl::StatusCode::kDataLoss;  // data_corrupted, index_corrupted
  return absl::StatusCode::kInternal;
}

// libpq reports a failed connection only as text (pqxx::broken_connection). Parse errors in the
// URI happen before any network traffic and have recognisable wording; everything else about
// reaching the server is UNAVAILABLE, except refused credentials.
absl::Status ConnectError(std::string_view message_in) {
  const absl::string_view message = jsi::AsAbsl(message_in);
  const std::string text = absl::StrCat("postgres: cannot connect: ", message);
  if (absl::StrContains(message, "authentication failed") ||
      absl::StrContains(message, "no password supplied") ||
      absl::StrContains(message, "no pg_hba.conf entry")) {
    return absl::UnauthenticatedError(text);
  }
  if (absl::StrContains(message, "does not exist")) {  // database or role
    return absl::FailedPreconditionError(text);
  }
  for (absl::string_view parse_error :
       {"invalid URI", "invalid percent-encoded", "forbidden value", "unexpected character",
        "end of string reached", "may not be empty", "key/value separator",
        "invalid connection option", "invalid integer value", "invalid port number",
        "missing \"=\"", "unterminated quoted string", "invalid value for parameter",
        "invalid sslmode value", "invalid target_session_attrs value"}) {
    if (absl::StrContains(message, parse_error)) return absl::InvalidArgumentError(text);
  }
  return absl::UnavailableError(text);
}

int64_t Int64OrZero(const pqxx::field& f) { return f.is_null() ? 0 : f.as<int64_t>(); }

absl::Time TimeOrPast(const pqxx::field& f) {
  return f.is_null() ? absl::InfinitePast() : jsi::TimeFromMicros(f.as<int64_t>());
}

std::string Bytes(const pqxx::field& f) {
  if (f.is_null()) return std::string();
  return pqxx::binarystring(f).str();  // bytea arrives hex-escaped; binarystring decodes it
}

// Reads a row selected with GPSEL_JOB_COLUMNS; `seq` (optional) receives the sequence number.
absl::StatusOr<Job> ReadJob(const pqxx::row& row, int64_t* seq = nullptr) {
  Job job;
  if (seq != nullptr) *seq = row[0].as<int64_t>();
  job.id = row[1].as<std::string>();
  job.kind = row[2].as<std::string>();
  const std::string state = row[3].as<std::string>();
  std::optional<JobState> parsed = ParseJobState(state);
  if (!parsed) {
    return absl::DataLossError(absl::StrCat("job ", job.id, ": unknown state '", state, "'"));
  }
  job.state = *parsed;
  job.request = Bytes(row[4]);
  job.result = Bytes(row[5]);
  job.error_code = static_cast<int>(Int64OrZero(row[6]));
  job.error_message = row[7].as<std::string>();
  job.progress = row[8].as<double>();
  job.progress_message = row[9].as<std::string>();
  job.attempts = static_cast<int>(Int64OrZero(row[10]));
  job.idempotency_key = row[11].as<std::string>();
  job.cancel_requested = row[12].as<bool>();
  job.lease_owner = row[13].as<std::string>();
  job.lease_expires = TimeOrPast(row[14]);
  job.created = TimeOrPast(row[15]);
  job.started = TimeOrPast(row[16]);
  job.finished = TimeOrPast(row[17]);
  job.updated = TimeOrPast(row[18]);
  job.parent_id = row[19].as<std::string>();
  job.task_batch = row[20].as<std::string>();
  job.task_index = row[21].is_null() ? -1 : row[21].as<int>();
  return job;
}

absl::StatusOr<std::optional<Job>> FirstJob(const pqxx::result& result) {
  if (result.empty()) return std::optional<Job>();
  absl::StatusOr<Job> job = ReadJob(result[0]);
  if (!job.ok()) return job.status();
  return std::optional<Job>(std::move(*job));
}

absl::StatusOr<std::vector<Job>> ReadJobs(const pqxx::result& result) {
  std::vector<Job> jobs;
  for (const pqxx::row& row : result) {
    absl::StatusOr<Job> job = ReadJob(row);
    if (!job.ok()) return job.status();
    jobs.push_back(std::move(*job));
  }
  return jobs;
}

// Explains why a fenced update (matching id, RUNNING and attempts) changed nothing.
absl::Status FencingFailure(pqxx::work& txn, std::string_view id, int attempt) {
  const pqxx::result r = txn.exec_prepared(kSelectFence.name, std::string(id));
  if (r.empty()) return jsi::JobNotFoundError(id);
  const JobState state =
      ParseJobState(r[0][0].as<std::string>()).value_or(JobState::kFailed);
  return jsi::LostLeaseError(id, attempt, state, r[0][1].as<int>());
}

class PostgresJobStore final : public JobStore {
 public:
  PostgresJobStore(std::string url, const JobStoreOptions& options)
      : url_(std::move(url)), options_(options) {}

  // Opens the first connection and creates the schema if absent.
  absl::Status Initialize() {
    return InTransaction("create schema", [&](pqxx::work& txn) -> absl::Status {
      // IF NOT EXISTS still logs NOTICEs ("already exists, skipping") that libpqxx would print.
      txn.exec("SET LOCAL client_min_messages = warning");
      // Two replicas starting at once must not both run CREATE TABLE (it is not race-free).
      txn.exec(kLockSchemaSql);
      txn.exec(kCreateVersionTableSql);
      const pqxx::result r = txn.exec("SELECT max(version) FROM gpsel_schema_version");
      const bool fresh = r[0][0].is_null();
      if (!fresh && r[0][0].as<int>() > jsi::kSchemaVersion) {
        // Leave a newer gpsel's schema alone (the transaction is rolled back).
        return absl::FailedPreconditionError(
            absl::StrCat("postgres: job store schema version ", r[0][0].as<int>(),
                         " is newer than this gpsel (", jsi::kSchemaVersion, ")"));
      }
      txn.exec(kCreateSchemaSql);
      // kCreateSchemaSql is version 1; each migration takes it one version further.
      const int version = fresh ? 1 : r[0][0].as<int>();
      if (version < 2) txn.exec(kMigrateToVersion2Sql);
      if (fresh) {
        txn.exec(absl::StrCat("INSERT INTO gpsel_schema_version (version) VALUES (",
                              jsi::kSchemaVersion, ")"));
      } else if (version < jsi::kSchemaVersion) {
        txn.exec(absl::StrCat("UPDATE gpsel_schema_version SET version = ", jsi::kSchemaVersion));
      }
      return absl::OkStatus();
    });
  }

  absl::StatusOr<SubmitResult> Submit(std::string_view kind, std::string_view request,
                                      std::string_view idempotency_key,
                                      int64_t max_queued) override {
    if (absl::Status s = jsi::ValidateSubmit(kind, idempotency_key); !s.ok()) return s;
    SubmitResult out;
    absl::Status status = InTransaction("submit", [&](pqxx::work& txn) -> absl::Status {
      // Submits serialise on a transaction-scoped advisory lock, which makes "count QUEUED, then
      // insert" exact under concurrency (READ COMMITTED alone would let two submitters both see
      // room for one more), and makes `seq` order equal commit order, so a ListJobs page token
      // can never skip a job that committed late. Submits are rare next to the work they start.
      txn.exec_prepared(kLockSubmit.name);
      const std::string kind_str(kind);
      const std::string key_str(idempotency_key);
      if (!key_str.empty()) {
        absl::StatusOr<std::optional<Job>> existing =
            FirstJob(txn.exec_prepared(kSelectByKey.name, kind_str, key_str));
        if (!existing.ok()) return existing.status();
        // Exact under the advisory lock: no submit of another kind can slip in between.
        if (existing->has_value() && (*existing)->kind != kind_str) {
          return IdempotencyKeyReusedError(idempotency_key, **existing, kind);
        }
        if (existing->has_value()) {
          out.job = std::move(**existing);
          out.created = false;
          return absl::OkStatus();
        }
      }
      if (max_queued > 0) {
        const int64_t queued = txn.exec_prepared(kCountQueued.name)[0][0].as<int64_t>();
        if (queued >= max_queued) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "job queue full: ", queued, " jobs queued (limit ", max_queued, ")"));
        }
      }
      // ON CONFLICT: the UNIQUE (kind, idempotency_key) constraint is the real guarantee of
      // one job per key, even for writers that do not take the advisory lock.
      const pqxx::binarystring request_bytes(request.data(), request.size());
      absl::StatusOr<std::optional<Job>> inserted = FirstJob(txn.exec_prepared(
          kInsertJob.name, jsi::NewJobId(), kind_str, request_bytes, key_str));
      if (!inserted.ok()) return inserted.status();
      if (inserted->has_value()) {
        out.job = std::move(**inserted);
        out.created = true;
        return absl::OkStatus();
      }
      absl::StatusOr<std::optional<Job>> existing =
          FirstJob(txn.exec_prepared(kSelectByKey.name, kind_str, key_str));
      if (!existing.ok()) return existing.status();
      if (!existing->has_value()) {
        return absl::AbortedError("postgres: idempotent submit raced with a purge; retry");
      }
      out.job = std::move(**existing);
      out.created = false;
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return out;
  }

  absl::StatusOr<Job> GetJob(std::string_view id) override {
    std::optional<Job> job;
    absl::Status status = InTransaction("get job", [&](pqxx::work& txn) -> absl::Status {
      absl::StatusOr<std::optional<Job>> found =
          FirstJob(txn.exec_prepared(kSelectJobById.name, std::string(id)));
      if (!found.ok()) return found.status();
      if (!found->has_value()) return jsi::JobNotFoundError(id);
      job = std::move(*found);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return std::move(*job);
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
    ListJobsResponse out;
    absl::Status status = InTransaction("list jobs", [&](pqxx::work& txn) -> absl::Status {
      // One extra row tells whether another page exists.
      const int64_t limit = *page_size + 1;
      const pqxx::result r =
          request.state
              ? txn.exec_prepared(kListByState.name, after, limit,
                                  std::string(JobStateName(*request.state)))
              : txn.exec_prepared(kListAll.name, after, limit);
      int64_t last_seq = 0;
      for (const pqxx::row& row : r) {
        if (static_cast<int>(out.jobs.size()) == *page_size) {
          out.next_page_token = jsi::EncodePageToken(last_seq);
          break;
        }
        absl::StatusOr<Job> job = ReadJob(row, &last_seq);
        if (!job.ok()) return job.status();
        out.jobs.push_back(std::move(*job));
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return out;
  }

  absl::StatusOr<std::optional<Job>> Claim(std::string_view worker_id,
                                           absl::Duration lease) override {
    return ClaimWhere("", "", worker_id, lease);
  }

  absl::StatusOr<std::optional<Job>> ClaimTask(std::string_view parent_id,
                                               std::string_view batch,
                                               std::string_view worker_id,
                                               absl::Duration lease) override {
    if (absl::Status s = jsi::ValidateListTasks(parent_id, batch); !s.ok()) return s;
    return ClaimWhere(parent_id, batch, worker_id, lease);
  }

  absl::StatusOr<std::vector<Job>> SubmitTasks(std::string_view parent_id, std::string_view batch,
                                               std::string_view kind,
                                               const std::vector<std::string>& requests) override {
    if (absl::Status s = jsi::ValidateSubmitTasks(parent_id, batch, kind, requests); !s.ok())
      return s;
    std::vector<Job> tasks;
    absl::Status status = InTransaction("submit tasks", [&](pqxx::work& txn) -> absl::Status {
      const std::string parent_str(parent_id);
      const std::string batch_str(batch);
      const pqxx::result parent = txn.exec_prepared(kSelectParentOf.name, parent_str);
      if (parent.empty()) return jsi::JobNotFoundError(parent_id);
      if (!parent[0][1].is_null()) return jsi::TasksOfTaskError(parent_id);
      const JobState state =
          ParseJobState(parent[0][0].as<std::string>()).value_or(JobState::kFailed);
      if (state != JobState::kRunning) return jsi::TasksOfIdleJobError(parent_id, state);
      if (parent[0][2].as<bool>()) return jsi::TasksOfCancelledJobError(parent_id);
      absl::StatusOr<std::vector<Job>> existing =
          ReadJobs(txn.exec_prepared(kListTasks.name, parent_str, batch_str));
      if (!existing.ok()) return existing.status();
      if (!existing->empty()) {
        if (existing->size() != requests.size()) {
          return jsi::TaskBatchSizeError(parent_id, batch, existing->size(), requests.size());
        }
        tasks = *std::move(existing);
        return absl::OkStatus();
      }
      const std::string kind_str(kind);
      for (size_t i = 0; i < requests.size(); ++i) {
        const pqxx::binarystring request_bytes(requests[i].data(), requests[i].size());
        absl::StatusOr<std::optional<Job>> inserted =
            FirstJob(txn.exec_prepared(kInsertTask.name, jsi::NewJobId(), kind_str, request_bytes,
                                       parent_str, batch_str, static_cast<int>(i)));
        if (!inserted.ok()) return inserted.status();
        if (!inserted->has_value()) return absl::InternalError("postgres: insert returned no row");
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
    std::vector<Job> tasks;
    absl::Status status = InTransaction("list tasks", [&](pqxx::work& txn) -> absl::Status {
      absl::StatusOr<std::vector<Job>> rows = ReadJobs(txn.exec_prepared(
          with_payloads ? kListTasks.name : kListTasksWithoutPayloads.name,
          std::string(parent_id), std::string(batch)));
      if (!rows.ok()) return rows.status();
      tasks = *std::move(rows);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return tasks;
  }

  absl::StatusOr<HeartbeatResponse> Heartbeat(std::string_view id, int attempt, double progress,
                                              std::string_view progress_message,
                                              absl::Duration lease) override {
    if (absl::Status s = jsi::ValidateHeartbeat(id, progress, lease); !s.ok()) return s;
    HeartbeatResponse out;
    absl::Status status = InTransaction("heartbeat", [&](pqxx::work& txn) -> absl::Status {
      const pqxx::result r = txn.exec_prepared(
          kHeartbeat.name, std::string(id), attempt, jsi::ClampProgress(progress),
          std::string(progress_message), jsi::DurationMicros(lease));
      if (r.empty()) return FencingFailure(txn, id, attempt);
      out.cancel_requested = r[0][0].as<bool>();
      out.lease_expires = TimeOrPast(r[0][1]);
      const std::string parent_id = r[0][2].as<std::string>();
      if (!parent_id.empty() && !out.cancel_requested) {
        // A task whose job has ended (or was purged) has nobody to deliver its result to.
        const pqxx::result parent = txn.exec_prepared(kSelectParentState.name, parent_id);
        out.cancel_requested =
            parent.empty() ||
            IsTerminal(ParseJobState(parent[0][0].as<std::string>()).value_or(JobState::kFailed));
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return out;
  }

  absl::Status Complete(std::string_view id, int attempt, std::string_view result) override {
    return InTransaction("complete", [&](pqxx::work& txn) -> absl::Status {
      const pqxx::binarystring result_bytes(result.data(), result.size());
      const pqxx::result r =
          txn.exec_prepared(kComplete.name, std::string(id), attempt, result_bytes);
      if (r.affected_rows() == 1) return absl::OkStatus();
      return FencingFailure(txn, id, attempt);
    });
  }

  absl::Status Fail(std::string_view id, int attempt, const absl::Status& error) override {
    if (absl::Status s = jsi::ValidateFail(error); !s.ok()) return s;
    return FinishWithError(id, attempt, JobState::kFailed, error.code(),
                           jsi::AsStd(error.message()));
  }

  absl::Status MarkCancelled(std::string_view id, int attempt) override {
    return FinishWithError(id, attempt, JobState::kCancelled, absl::StatusCode::kCancelled,
                           jsi::kCancelledMessage);
  }

  absl::StatusOr<Job> RequestCancel(std::string_view id) override {
    std::optional<Job> job;
    absl::Status status = InTransaction("request cancel", [&](pqxx::work& txn) -> absl::Status {
      const std::string id_str(id);
      // Two statements, each re-evaluated on the row's latest version (READ COMMITTED): if a
      // claim commits in between, the first matches nothing and the second flags the job.
      txn.exec_prepared(kCancelQueued.name, id_str,
                        static_cast<int>(absl::StatusCode::kCancelled),
                        std::string(jsi::kCancelledMessage));
      txn.exec_prepared(kCancelRunning.name, id_str);
      txn.exec_prepared(kCancelQueuedTasks.name, id_str,
                        static_cast<int>(absl::StatusCode::kCancelled),
                        std::string(jsi::kCancelledMessage));
      txn.exec_prepared(kCancelRunningTasks.name, id_str);
      absl::StatusOr<std::optional<Job>> found =
          FirstJob(txn.exec_prepared(kSelectJobById.name, id_str));
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
    int64_t changed = 0;
    absl::Status status = InTransaction("release leases", [&](pqxx::work& txn) -> absl::Status {
      const pqxx::result r = txn.exec_prepared(
          kReleaseLeases.name, std::string(worker_id),
          static_cast<int>(absl::StatusCode::kCancelled), std::string(jsi::kCancelledMessage));
      changed = static_cast<int64_t>(r.affected_rows());
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return changed;
  }

  absl::Status CheckHealth(StoreCheck depth) override {
    // A connection from the pool and a query on the jobs table; PostgreSQL checks its own pages
    // (a corrupt one surfaces as SQLSTATE class XX, DATA_LOSS). The integrity check reads the
    // whole table rather than counting from statistics.
    if (depth == StoreCheck::kWrite) {
      // The probe row goes into a new, empty file (TRUNCATE gives the table a fresh one), so the
      // write must extend a file on disk, which PostgreSQL does at once: a full disk is SQLSTATE
      // 53100 here. An update of the row in place did not notice one — its WAL record went into
      // a pre-allocated segment and its page stayed in shared buffers (issue 33).
      return InTransaction("health write probe", [&](pqxx::work& txn) -> absl::Status {
        txn.exec("TRUNCATE gpsel_health_probe");
        txn.exec("INSERT INTO gpsel_health_probe (id, written) VALUES (1, now())");
        return absl::OkStatus();
      });
    }
    const char* sql = depth == StoreCheck::kIntegrity
                          ? "SELECT count(*) FROM gpsel_jobs WHERE request IS NOT NULL"
                          : "SELECT 1 FROM gpsel_jobs LIMIT 1";
    return InTransaction("health check", [&](pqxx::work& txn) -> absl::Status {
      txn.exec(sql);
      return absl::OkStatus();
    });
  }

  absl::StatusOr<JobCounts> CountByState() override {
    JobCounts counts;
    for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
                       JobState::kFailed, JobState::kCancelled}) {
      counts[s] = 0;
    }
    absl::Status status = InTransaction("count jobs", [&](pqxx::work& txn) -> absl::Status {
      for (const pqxx::row& row : txn.exec_prepared(kCountByState.name)) {
        std::optional<JobState> state = ParseJobState(row[0].as<std::string>());
        if (!state) return absl::DataLossError("postgres: unknown job state in gpsel_jobs");
        counts[*state] = row[1].as<int64_t>();
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return counts;
  }

  absl::StatusOr<int64_t> PurgeFinished(absl::Duration min_age) override {
    if (min_age < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("min_age: must not be negative");
    }
    int64_t deleted = 0;
    absl::Status status = InTransaction("purge", [&](pqxx::work& txn) -> absl::Status {
      const int64_t min_age_us = absl::ToInt64Microseconds(min_age);
      for (const PreparedSql& purge : {kPurgeFinishedTasks, kPurgeFinished}) {
        deleted += static_cast<int64_t>(txn.exec_prepared(purge.name, min_age_us).affected_rows());
      }
      deleted += static_cast<int64_t>(txn.exec_prepared(kPurgeOrphanedTasks.name).affected_rows());
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return deleted;
  }

 private:
  // Claim and ClaimTask (a non-empty `parent_id`, with `batch`): reaps what must not run again,
  // then claims.
  absl::StatusOr<std::optional<Job>> ClaimWhere(std::string_view parent_id, std::string_view batch,
                                                std::string_view worker_id, absl::Duration lease) {
    if (absl::Status s = jsi::ValidateClaim(worker_id, lease); !s.ok()) return s;
    std::optional<Job> claimed;
    absl::Status status = InTransaction("claim", [&](pqxx::work& txn) -> absl::Status {
      txn.exec_prepared(kReapExpired.name, options_.max_attempts,
                        static_cast<int>(absl::StatusCode::kCancelled),
                        static_cast<int>(absl::StatusCode::kAborted),
                        std::string(jsi::kCancelledMessage),
                        jsi::AbandonedMessage(options_.max_attempts));
      txn.exec_prepared(kReapOrphanedTasks.name, static_cast<int>(absl::StatusCode::kCancelled),
                        std::string(jsi::kOrphanedTaskMessage));
      const pqxx::result r =
          parent_id.empty()
              ? txn.exec_prepared(kClaimOldest.name, std::string(worker_id),
                                  jsi::DurationMicros(lease))
              : txn.exec_prepared(kClaimTask.name, std::string(worker_id),
                                  jsi::DurationMicros(lease), std::string(parent_id),
                                  std::string(batch));
      absl::StatusOr<std::optional<Job>> job = FirstJob(r);
      if (!job.ok()) return job.status();
      claimed = std::move(*job);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return claimed;
  }

  absl::Status FinishWithError(std::string_view id, int attempt, JobState state,
                               absl::StatusCode code, std::string_view message) {
    return InTransaction("finish job", [&](pqxx::work& txn) -> absl::Status {
      const pqxx::result r = txn.exec_prepared(
          kFinishWithError.name, std::string(id), attempt, std::string(JobStateName(state)),
          static_cast<int>(code), std::string(message));
      if (r.affected_rows() == 1) return absl::OkStatus();
      return FencingFailure(txn, id, attempt);
    });
  }

  // Runs `body` in a READ COMMITTED transaction on a pooled connection; commits when it returns
  // OK, rolls back otherwise. Converts every exception to a status; a connection that broke is
  // dropped from the pool (the next call opens a fresh one).
  template <typename Fn>
  absl::Status InTransaction(std::string_view what, Fn&& body) {
    absl::StatusOr<std::unique_ptr<pqxx::connection>> conn = Acquire();
    if (!conn.ok()) return conn.status();
    absl::Status status;
    bool broken = false;
    try {
      pqxx::work txn(**conn);
      status = body(txn);
      if (status.ok()) txn.commit();
    } catch (const pqxx::broken_connection& e) {
      broken = true;
      status = absl::UnavailableError(
          absl::StrCat("postgres: ", jsi::AsAbsl(what), ": connection lost: ", e.what()));
    } catch (const pqxx::in_doubt_error& e) {
      // The commit may or may not have happened; the connection state is unknown too.
      broken = true;
      status = absl::UnknownError(
          absl::StrCat("postgres: ", jsi::AsAbsl(what), ": commit outcome unknown: ", e.what()));
    } catch (const pqxx::sql_error& e) {
      const std::string message = absl::StrCat("postgres: ", jsi::AsAbsl(what), ": ", e.what(),
                                               " (SQLSTATE ", e.sqlstate(), ")");
      status = e.sqlstate() == "53100" ? StoreFullError(message)  // disk_full
                                       : absl::Status(CodeForSqlState(e.sqlstate()), message);
    } catch (const std::exception& e) {
      status = absl::InternalError(absl::StrCat("postgres: ", jsi::AsAbsl(what), ": ", e.what()));
    } catch (...) {
      status = absl::InternalError(absl::StrCat("postgres: ", jsi::AsAbsl(what), ": unknown error"));
    }
    Release(std::move(*conn), broken);
    return status;
  }

  bool CanAcquire() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool_mu_) {
    return !idle_.empty() || open_ < options_.postgres_max_connections;
  }

  // Takes an idle connection, or opens a new one while under the limit, or waits for one.
  absl::StatusOr<std::unique_ptr<pqxx::connection>> Acquire() ABSL_LOCKS_EXCLUDED(pool_mu_) {
    std::unique_ptr<pqxx::connection> stale;  // closed outside the lock
    {
      absl::MutexLock lock(&pool_mu_);
      pool_mu_.Await(absl::Condition(this, &PostgresJobStore::CanAcquire));
      if (!idle_.empty()) {
        std::unique_ptr<pqxx::connection> conn = std::move(idle_.back());
        idle_.pop_back();
        if (conn->is_open()) return conn;
        stale = std::move(conn);  // its slot (counted in open_) is reused below
      } else {
        ++open_;
      }
    }
    absl::StatusOr<std::unique_ptr<pqxx::connection>> conn = Connect();
    if (!conn.ok()) {
      absl::MutexLock lock(&pool_mu_);
      --open_;
    }
    return conn;
  }

  void Release(std::unique_ptr<pqxx::connection> conn, bool broken) ABSL_LOCKS_EXCLUDED(pool_mu_) {
    if (broken || !conn->is_open()) {
      conn.reset();
      absl::MutexLock lock(&pool_mu_);
      --open_;
      return;
    }
    absl::MutexLock lock(&pool_mu_);
    idle_.push_back(std::move(conn));
  }

  absl::StatusOr<std::unique_ptr<pqxx::connection>> Connect() {
    try {
      auto conn = std::make_unique<pqxx::connection>(url_);
      for (const PreparedSql& p : kAllStatements) conn->prepare(p.name, p.sql);
      return conn;
    } catch (const pqxx::broken_connection& e) {
      return ConnectError(e.what());
    } catch (const pqxx::sql_error& e) {
      return absl::Status(CodeForSqlState(e.sqlstate()),
                          absl::StrCat("postgres: connect: ", e.what()));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("postgres: connect: ", e.what()));
    }
  }

  const std::string url_;
  const JobStoreOptions options_;
  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_ ABSL_GUARDED_BY(pool_mu_);
  int open_ ABSL_GUARDED_BY(pool_mu_) = 0;  // connections in use or idle
};

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> OpenPostgresJobStore(std::string_view url,
                                                               const JobStoreOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (url.empty()) return absl::InvalidArgumentError("postgres job store: empty URL");
  auto store = std::make_unique<PostgresJobStore>(std::string(url), options);
  if (absl::Status s = store->Initialize(); !s.ok()) return s;
  return std::unique_ptr<JobStore>(std::move(store));
}

}  // namespace gpsel
