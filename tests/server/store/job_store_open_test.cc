// OpenJobStore URL handling, options validation, state names, job ids, and backend-specific
// properties of the stored databases (SQLite WAL mode and schema version; newer schemas refused).
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpsel/server/store/job_store.h"
#include "gtest/gtest.h"
#include "tests/server/store/job_store_test_util.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::gpsel::testing::PostgresTestDatabase;
using ::gpsel::testing::PostgresUrlFromEnv;
using ::gpsel::testing::TempDir;

// Runs one SQL statement on a SQLite file with the plain C API; returns the first column of the
// first row as text ("" when none).
std::string SqliteQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
      if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != nullptr) {
        out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      }
      sqlite3_finalize(stmt);
    }
  }
  sqlite3_close(db);
  return out;
}

TEST(JobStateTest, NamesRoundTrip) {
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
                     JobState::kFailed, JobState::kCancelled}) {
    EXPECT_EQ(ParseJobState(JobStateName(s)), s);
  }
  EXPECT_EQ(JobStateName(JobState::kCancelled), "CANCELLED");
  EXPECT_FALSE(ParseJobState("queued").has_value());
  EXPECT_FALSE(ParseJobState("").has_value());
  EXPECT_FALSE(IsTerminal(JobState::kQueued));
  EXPECT_FALSE(IsTerminal(JobState::kRunning));
  EXPECT_TRUE(IsTerminal(JobState::kSucceeded));
  EXPECT_TRUE(IsTerminal(JobState::kFailed));
  EXPECT_TRUE(IsTerminal(JobState::kCancelled));
}

TEST(OpenJobStoreTest, RejectsUnknownSchemesAndEmptyPaths) {
  for (const char* url : {"", "jobs.db", "mysql://localhost/db", "sqlite:", "sqlite://",
                          "SQLITE:/tmp/x.db", "postgresq://user:secret@host/db"}) {
    absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(url);
    EXPECT_THAT(store, StatusIs(absl::StatusCode::kInvalidArgument)) << url;
    // A mistyped URL may carry a password: it must not be echoed into logs.
    EXPECT_EQ(std::string(store.status().message()).find("secret"), std::string::npos);
  }
}

TEST(OpenJobStoreTest, RejectsInvalidOptions) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  JobStoreOptions options;
  options.max_attempts = 0;
  EXPECT_THAT(OpenJobStore(absl::StrCat("sqlite:", dir.path(), "/a.db"), options),
              StatusIs(absl::StatusCode::kInvalidArgument));
  options = {};
  options.postgres_max_connections = 0;
  EXPECT_THAT(OpenJobStore("postgresql://127.0.0.1:1/x", options),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(OpenJobStoreTest, MalformedPostgresUrlIsInvalidArgument) {
  for (const char* url : {"postgresql://[::1/db", "postgresql://host:notaport/db",
                          "postgres://localhost/db?nonsense_option=1"}) {
    absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(url);
    EXPECT_THAT(store, StatusIs(absl::StatusCode::kInvalidArgument))
        << url << ": " << store.status();
  }
}

TEST(OpenJobStoreTest, UnreachablePostgresIsUnavailable) {
  // Port 1 on loopback: nobody listens, the connection is refused at once.
  absl::StatusOr<std::unique_ptr<JobStore>> store =
      OpenJobStore("postgresql://gpsel@127.0.0.1:1/gpsel?connect_timeout=5");
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kUnavailable)) << store.status();
}

TEST(OpenJobStoreTest, SqliteInMissingDirectoryFails) {
  absl::StatusOr<std::unique_ptr<JobStore>> store =
      OpenJobStore("sqlite:/nonexistent-gpsel-dir/sub/jobs.db");
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kFailedPrecondition)) << store.status();
}

TEST(OpenJobStoreTest, SqliteInMemoryWorks) {
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore("sqlite::memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<SubmitResult> s = (*store)->Submit("evidence", "req", "", 0);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<Job> job = (*store)->GetJob(s->job.id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->request, "req");
}

TEST(OpenJobStoreTest, SqliteFileIsWalWithSchemaVersion) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.path() + "/jobs.db";
  {
    // The "sqlite://" form with an absolute path: sqlite:///tmp/.../jobs.db.
    absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore("sqlite://" + path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Submit("evidence", "r", "", 0).ok());
  }
  EXPECT_EQ(SqliteQuery(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(SqliteQuery(path, "SELECT max(version) FROM gpsel_schema_version"), "2");
  EXPECT_EQ(SqliteQuery(path, "SELECT count(*) FROM gpsel_jobs"), "1");
  // Reopening does not add a second version row or touch the data.
  ASSERT_TRUE(OpenJobStore("sqlite:" + path).ok());
  EXPECT_EQ(SqliteQuery(path, "SELECT count(*) FROM gpsel_schema_version"), "1");
  EXPECT_EQ(SqliteQuery(path, "SELECT count(*) FROM gpsel_jobs"), "1");
}

// Several servers starting at once on a file that does not exist yet: every one of them must
// open it (WAL switch and schema creation race), and the schema must be created exactly once.
TEST(OpenJobStoreTest, SqliteConcurrentFirstOpenFromSeveralProcesses) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.path() + "/fresh.db";
  constexpr int kProcesses = 6;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      {
        absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore("sqlite:" + path);
        if (!store.ok()) {
          std::fprintf(stderr, "child %d: open: %s\n", p, store.status().ToString().c_str());
          code = 2;
        } else if (absl::Status s = (*store)->Submit("evidence", "r", absl::StrCat("k", p), 0).status();
                   !s.ok()) {
          std::fprintf(stderr, "child %d: submit: %s\n", p, s.ToString().c_str());
          code = 3;
        }
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
  EXPECT_EQ(SqliteQuery(path, "SELECT count(*) FROM gpsel_schema_version"), "1");
  EXPECT_EQ(SqliteQuery(path, "SELECT count(*) FROM gpsel_jobs"), std::to_string(kProcesses));
}

// A job store written by the gpsel before tasks (schema version 1: no task columns) is
// migrated when opened: its jobs stay, and its running jobs can add tasks.
TEST(OpenJobStoreTest, SqliteMigratesVersion1) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.path() + "/jobs.db";
  std::string job_id;
  {
    absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore("sqlite:" + path);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<SubmitResult> s = (*store)->Submit("evidence", "old", "key", 0);
    ASSERT_TRUE(s.ok()) << s.status();
    job_id = s->job.id;
  }
  // Version 1 as it was: the task columns and their index did not exist.
  SqliteQuery(path, "DROP INDEX gpsel_jobs_tasks");
  SqliteQuery(path, "DROP INDEX gpsel_jobs_claim_order");
  for (const char* column : {"parent_id", "task_batch", "task_index"}) {
    SqliteQuery(path, absl::StrCat("ALTER TABLE gpsel_jobs DROP COLUMN ", column));
  }
  SqliteQuery(path, "UPDATE gpsel_schema_version SET version = 1");
  ASSERT_EQ(SqliteQuery(path, "SELECT count(*) FROM pragma_table_info('gpsel_jobs') "
                              "WHERE name = 'parent_id'"),
            "0");

  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore("sqlite:" + path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(SqliteQuery(path, "SELECT max(version) FROM gpsel_schema_version"), "2");
  EXPECT_EQ(SqliteQuery(path, "SELECT count(*) FROM gpsel_schema_version"), "1");
  absl::StatusOr<SubmitResult> again = (*store)->Submit("evidence", "old", "key", 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, job_id);
  EXPECT_FALSE(again->job.is_task());
  absl::StatusOr<std::optional<Job>> claimed = (*store)->Claim("w", absl::Seconds(60));
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << claimed.status();
  absl::StatusOr<std::vector<Job>> tasks =
      (*store)->SubmitTasks(job_id, "runs", "evidence_run", {"a", "b"});
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_EQ(tasks->size(), 2u);
}

TEST(OpenJobStoreTest, SqliteRefusesNewerSchema) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.path() + "/jobs.db";
  ASSERT_TRUE(OpenJobStore("sqlite:" + path).ok());
  SqliteQuery(path, "UPDATE gpsel_schema_version SET version = 99");
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore("sqlite:" + path);
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kFailedPrecondition)) << store.status();
}

TEST(OpenJobStoreTest, SqliteRefusesAFileThatIsNotADatabase) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.path() + "/not-a-db";
  std::ofstream(path) << std::string(4096, 'x');
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore("sqlite:" + path);
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kDataLoss)) << store.status();
}

TEST(OpenJobStoreTest, PostgresRefusesNewerSchema) {
  const char* base = PostgresUrlFromEnv();
  if (base == nullptr) GTEST_SKIP() << ::gpsel::testing::kPostgresSkipMessage;
  absl::StatusOr<std::unique_ptr<PostgresTestDatabase>> db = PostgresTestDatabase::Create(base);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE(OpenJobStore((*db)->url()).ok());
  {
    pqxx::connection conn(base);
    pqxx::work txn(conn);
    txn.exec(absl::StrCat("UPDATE ", (*db)->schema(), ".gpsel_schema_version SET version = 99"));
    txn.commit();
  }
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore((*db)->url());
  EXPECT_THAT(store, StatusIs(absl::StatusCode::kFailedPrecondition)) << store.status();
}

TEST(OpenJobStoreTest, PostgresMigratesVersion1) {
  const char* base = PostgresUrlFromEnv();
  if (base == nullptr) GTEST_SKIP() << ::gpsel::testing::kPostgresSkipMessage;
  absl::StatusOr<std::unique_ptr<PostgresTestDatabase>> db = PostgresTestDatabase::Create(base);
  ASSERT_TRUE(db.ok()) << db.status();
  std::string job_id;
  {
    absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore((*db)->url());
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<SubmitResult> s = (*store)->Submit("evidence", "old", "key", 0);
    ASSERT_TRUE(s.ok()) << s.status();
    job_id = s->job.id;
  }
  {
    // Version 1 as it was (dropping the columns drops their index too).
    pqxx::connection conn(base);
    pqxx::work txn(conn);
    const std::string jobs = absl::StrCat((*db)->schema(), ".gpsel_jobs");
    txn.exec(absl::StrCat("ALTER TABLE ", jobs, " DROP COLUMN parent_id, DROP COLUMN task_batch, ",
                          "DROP COLUMN task_index"));
    txn.exec(absl::StrCat("UPDATE ", (*db)->schema(), ".gpsel_schema_version SET version = 1"));
    txn.commit();
  }
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore((*db)->url());
  ASSERT_TRUE(store.ok()) << store.status();
  {
    pqxx::connection conn(base);
    pqxx::work txn(conn);
    const pqxx::result r = txn.exec(absl::StrCat(
        "SELECT max(version), count(*) FROM ", (*db)->schema(), ".gpsel_schema_version"));
    EXPECT_EQ(r[0][0].as<int>(), 2);
    EXPECT_EQ(r[0][1].as<int>(), 1);
  }
  absl::StatusOr<std::optional<Job>> claimed = (*store)->Claim("w", absl::Seconds(60));
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << claimed.status();
  EXPECT_EQ((*claimed)->id, job_id);
  absl::StatusOr<std::vector<Job>> tasks =
      (*store)->SubmitTasks(job_id, "runs", "evidence_run", {"a", "b"});
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_EQ(tasks->size(), 2u);
}

TEST(OpenJobStoreTest, PostgresSchemeAliasesAndMissingDatabase) {
  const char* base = PostgresUrlFromEnv();
  if (base == nullptr) GTEST_SKIP() << ::gpsel::testing::kPostgresSkipMessage;
  absl::StatusOr<std::unique_ptr<PostgresTestDatabase>> db = PostgresTestDatabase::Create(base);
  ASSERT_TRUE(db.ok()) << db.status();
  std::string url = (*db)->url();
  ASSERT_EQ(url.rfind("postgresql://", 0), 0u) << "test expects a postgresql:// URL";
  const std::string alias = "postgres://" + url.substr(std::string("postgresql://").size());
  EXPECT_TRUE(OpenJobStore(alias).ok());
  // Same server, a database that does not exist.
  const size_t slash = url.find('/', std::string("postgresql://").size());
  ASSERT_NE(slash, std::string::npos);
  const std::string missing = url.substr(0, slash) + "/gpsel_no_such_database";
  EXPECT_THAT(OpenJobStore(missing), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// A database restart or a proxy dropping idle connections must cost at most the call that
// discovers it (UNAVAILABLE, retryable); the pool then opens fresh connections.
TEST(OpenJobStoreTest, PostgresRecoversFromKilledConnections) {
  const char* base = PostgresUrlFromEnv();
  if (base == nullptr) GTEST_SKIP() << ::gpsel::testing::kPostgresSkipMessage;
  absl::StatusOr<std::unique_ptr<PostgresTestDatabase>> db = PostgresTestDatabase::Create(base);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore((*db)->url());
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<SubmitResult> submitted = (*store)->Submit("evidence", "r", "", 0);
  ASSERT_TRUE(submitted.ok()) << submitted.status();

  int killed = 0;
  {
    pqxx::connection admin(base);
    pqxx::nontransaction txn(admin);
    const pqxx::result r = txn.exec(absl::StrCat(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ",
        txn.quote((*db)->schema())));
    killed = static_cast<int>(r.size());
  }
  ASSERT_GE(killed, 1);

  int unavailable = 0;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Job> job = (*store)->GetJob(submitted->job.id);
    if (job.ok()) {
      EXPECT_EQ(job->request, "r");
    } else {
      EXPECT_THAT(job, StatusIs(absl::StatusCode::kUnavailable)) << job.status();
      ++unavailable;
    }
  }
  EXPECT_LE(unavailable, 1);
  EXPECT_TRUE((*store)->GetJob(submitted->job.id).ok());
}

TEST(JobIdTest, IdsAreUniqueCrockfordAndOrderedByCreation) {
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore("sqlite::memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  std::set<std::string> ids;
  std::string previous;
  for (int i = 0; i < 200; ++i) {
    if (i % 50 == 0) absl::SleepFor(absl::Milliseconds(2));  // a new millisecond
    absl::StatusOr<SubmitResult> s = (*store)->Submit("evidence", "", "", 0);
    ASSERT_TRUE(s.ok()) << s.status();
    const std::string& id = s->job.id;
    ASSERT_EQ(id.size(), 26u);
    EXPECT_EQ(id.find_first_not_of("0123456789ABCDEFGHJKMNPQRSTVWXYZ"), std::string::npos) << id;
    if (i % 50 == 0 && !previous.empty()) {
      // The 48-bit millisecond prefix (10 characters) grows with time.
      EXPECT_GT(id.substr(0, 10), previous.substr(0, 10));
    }
    previous = id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 200u);
}

}  // namespace
}  // namespace gpsel

namespace gpsel {
namespace {

TEST(RedactStoreUrlTest, HidesPostgresPasswordsOnly) {
  EXPECT_EQ(RedactStoreUrl("postgresql://gpsel:s3cr3t@db.internal:5432/jobs"),
            "postgresql://gpsel:***@db.internal:5432/jobs");
  EXPECT_EQ(RedactStoreUrl("postgres://u:p%40ss@h/db?sslmode=require&password=x2&user=u"),
            "postgres://u:***@h/db?sslmode=require&password=***&user=u");
  EXPECT_EQ(RedactStoreUrl("postgresql://gpsel@127.0.0.1:5432/jobs"),
            "postgresql://gpsel@127.0.0.1:5432/jobs");
  EXPECT_EQ(RedactStoreUrl("postgresql:///jobs?host=/run/pg"), "postgresql:///jobs?host=/run/pg");
  EXPECT_EQ(RedactStoreUrl("sqlite:/var/lib/gpsel/jobs.db"), "sqlite:/var/lib/gpsel/jobs.db");
}

}  // namespace
}  // namespace gpsel

namespace gpsel {
namespace {

// A filesystem of `bytes` mounted for the test's lifetime (tmpfs; needs root, as CI has).
class SmallFilesystem {
 public:
  SmallFilesystem(const std::string& dir, size_t bytes) : dir_(dir) {
    mounted_ = mount("tmpfs", dir.c_str(), "tmpfs", 0,
                     absl::StrCat("size=", bytes).c_str()) == 0;
  }
  ~SmallFilesystem() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// A full disk under SQLite is STORE_FULL (IsStoreFull), not a full queue, and leaves every job
// written before it intact and readable.
TEST(SqliteStoreTest, FullDiskIsStoreFullAndLosesNothing) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  SmallFilesystem disk(dir.path(), 192 * 1024);
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (not root?)";
  absl::StatusOr<std::unique_ptr<JobStore>> store =
      OpenJobStore(absl::StrCat("sqlite:", dir.path(), "/jobs.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string request(16 * 1024, 'r');
  int accepted = 0;
  absl::Status failure;
  for (int i = 0; i < 100 && failure.ok(); ++i) {
    absl::StatusOr<SubmitResult> submitted =
        (*store)->Submit("evidence", request, absl::StrCat("key-", i), /*max_queued=*/0);
    if (submitted.ok()) {
      ++accepted;
    } else {
      failure = submitted.status();
    }
  }
  ASSERT_FALSE(failure.ok()) << "192 KiB never filled up";
  EXPECT_TRUE(IsStoreFull(failure)) << failure;
  EXPECT_EQ(failure.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_GT(accepted, 0);
  // A full queue is not a full store.
  EXPECT_FALSE(IsStoreFull(absl::ResourceExhaustedError("job queue full")));
  ListJobsRequest list;
  list.page_size = 1000;
  absl::StatusOr<ListJobsResponse> page = (*store)->ListJobs(list);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(static_cast<int>(page->jobs.size()), accepted);
  for (const Job& job : page->jobs) EXPECT_EQ(job.request, request);
}

// Runs `command` with /bin/sh; its stdout, or nullopt when it fails.
std::optional<std::string> CommandOutput(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buffer[4096];
  while (size_t got = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, got);
  const int status = pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// A PostgreSQL cluster whose files (data and WAL) live on a 64 MiB tmpfs, made full with a filler
// file: the write probe (CheckHealth(kWrite)) is STORE_FULL, and OK again once space is freed.
// Before, the probe updated its row in place and succeeded on the full disk (the WAL record went
// into a pre-allocated segment, the page stayed in shared buffers), so health stayed SERVING.
TEST(PostgresStoreTest, WriteProbeNoticesAFullDisk) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  SmallFilesystem disk(dir.path(), 64 << 20);
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (not root?)";
  const std::string script = std::string(GPSEL_SOURCE_DIR) + "/scripts/start-test-postgres.sh";
  const std::string dir_file = dir.path() + "/cluster-dir";
  std::optional<std::string> url = CommandOutput(absl::StrCat(
      "TMPDIR=", dir.path(), " bash ", script, " start ", dir_file, " 2>/dev/null"));
  if (!url.has_value() || url->empty()) {
    CommandOutput(absl::StrCat("bash ", script, " stop-recorded ", dir_file, " 2>/dev/null"));
    GTEST_SKIP() << "no PostgreSQL cluster could be started (package not installed?)";
  }
  {
    absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(*url);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE((*store)->CheckHealth(StoreCheck::kWrite).ok());
    // Fill the disk: a filler file takes whatever space is left.
    const std::string filler = dir.path() + "/filler";
    {
      std::ofstream out(filler, std::ios::binary);
      const std::string block(1 << 20, 'f');
      for (int i = 0; i < 128 && out; ++i) out << block << std::flush;
    }
    absl::Status full;
    for (int i = 0; i < 3; ++i) {  // every probe, not a lucky first one
      full = (*store)->CheckHealth(StoreCheck::kWrite);
      EXPECT_TRUE(IsStoreFull(full)) << "probe " << i << " on a full disk: " << full;
    }
    EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
    // Reads still work, and space freed makes the probe pass again.
    EXPECT_TRUE((*store)->CheckHealth(StoreCheck::kConnection).ok());
    std::remove(filler.c_str());
    EXPECT_TRUE((*store)->CheckHealth(StoreCheck::kWrite).ok());
  }
  CommandOutput(absl::StrCat("bash ", script, " stop-recorded ", dir_file, " 2>/dev/null"));
}

}  // namespace
}  // namespace gpsel
