// Test helpers for the job store suites: status assertions, and throwaway databases — a SQLite
// file in a fresh temp directory, or a fresh schema in the PostgreSQL database named by
// GPSEL_TEST_POSTGRES_URL (scripts/start-test-postgres.sh starts one), dropped afterwards.
// Each test gets its own database, so tests may run in parallel (ctest -j) against one server.
#ifndef GPSEL_TESTS_JOBSTORE_JOB_STORE_TEST_UTIL_H_
#define GPSEL_TESTS_JOBSTORE_JOB_STORE_TEST_UTIL_H_

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>

#include <pqxx/pqxx>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

#define GPSEL_JS_CONCAT_INNER(a, b) a##b
#define GPSEL_JS_CONCAT(a, b) GPSEL_JS_CONCAT_INNER(a, b)

#define ASSERT_OK(expr)                            \
  do {                                             \
    const absl::Status assert_ok_status = (expr);  \
    ASSERT_TRUE(assert_ok_status.ok()) << assert_ok_status; \
  } while (0)
#define EXPECT_OK(expr)                            \
  do {                                             \
    const absl::Status expect_ok_status = (expr);  \
    EXPECT_TRUE(expect_ok_status.ok()) << expect_ok_status; \
  } while (0)

// ASSERT_OK_AND_ASSIGN(auto job, store->GetJob(id));
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  GPSEL_JS_ASSIGN_IMPL(GPSEL_JS_CONCAT(status_or_, __LINE__), lhs, expr)
#define GPSEL_JS_ASSIGN_IMPL(var, lhs, expr)  \
  auto var = (expr);                          \
  ASSERT_TRUE(var.ok()) << var.status();      \
  lhs = std::move(*var)

// EXPECT_STATUS_CODE(store->GetJob(id), absl::StatusCode::kNotFound) << "context";
// Works for absl::Status and absl::StatusOr<T>; the expression is evaluated once.
#define EXPECT_STATUS_CODE(expr, code) \
  EXPECT_TRUE(::gpsel::testing::HasStatusCode((expr), (code)))

namespace gpsel::testing {

inline ::testing::AssertionResult HasStatusCode(const absl::Status& status,
                                                absl::StatusCode code) {
  if (status.code() == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected code " << absl::StatusCodeToString(code) << ", got " << status;
}
template <typename T>
::testing::AssertionResult HasStatusCode(const absl::StatusOr<T>& status_or,
                                         absl::StatusCode code) {
  return HasStatusCode(status_or.status(), code);
}

inline const char* PostgresUrlFromEnv() {
  const char* url = std::getenv("GPSEL_TEST_POSTGRES_URL");
  return (url != nullptr && *url != '\0') ? url : nullptr;
}

inline constexpr char kPostgresSkipMessage[] =
    "GPSEL_TEST_POSTGRES_URL is not set, so the PostgreSQL backend is not tested. Start a "
    "throwaway server with: export GPSEL_TEST_POSTGRES_URL=$(scripts/start-test-postgres.sh)";

// A fresh temp directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpsel-jobstore-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

// A database that store instances can open (again and again) by URL.
class TestDatabase {
 public:
  virtual ~TestDatabase() = default;
  virtual std::string url() const = 0;
  virtual std::string name() const = 0;
};

class SqliteTestDatabase final : public TestDatabase {
 public:
  std::string url() const override { return "sqlite:" + dir_.path() + "/jobs.db"; }
  std::string name() const override { return "sqlite"; }
  bool ok() const { return dir_.ok(); }

 private:
  TempDir dir_;
};

// A schema of its own in the test PostgreSQL database, selected through the URL's
// `options=-csearch_path=...`, so the store creates its tables there.
class PostgresTestDatabase final : public TestDatabase {
 public:
  static absl::StatusOr<std::unique_ptr<PostgresTestDatabase>> Create(const std::string& base) {
    absl::BitGen gen;
    const std::string schema = absl::StrFormat("gpsel_t_%d_%016x", getpid(),
                                               absl::Uniform<uint64_t>(gen));
    try {
      pqxx::connection conn(base);
      pqxx::nontransaction txn(conn);
      txn.exec("CREATE SCHEMA " + schema);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("cannot create test schema: ", e.what()));
    }
    const char* sep = base.find('?') == std::string::npos ? "?" : "&";
    // application_name lets a test find (and kill) the store's own server connections.
    return std::unique_ptr<PostgresTestDatabase>(new PostgresTestDatabase(
        base, schema,
        absl::StrCat(base, sep, "options=-csearch_path%3D", schema, "&application_name=", schema)));
  }
  ~PostgresTestDatabase() override {
    try {
      pqxx::connection conn(base_);
      pqxx::nontransaction txn(conn);
      txn.exec("SET client_min_messages = warning");
      txn.exec("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE");
    } catch (const std::exception&) {
      // Best effort: a leftover schema in a throwaway cluster harms nothing.
    }
  }
  std::string url() const override { return url_; }
  std::string name() const override { return "postgres"; }
  const std::string& schema() const { return schema_; }
  const std::string& base_url() const { return base_; }

 private:
  PostgresTestDatabase(std::string base, std::string schema, std::string url)
      : base_(std::move(base)), schema_(std::move(schema)), url_(std::move(url)) {}

  std::string base_;
  std::string schema_;
  std::string url_;
};

// The two store backends that parameterised suites run on.
enum class Backend { kSqlite, kPostgres };

// Test names ("Sqlite", "Postgres") for INSTANTIATE_TEST_SUITE_P.
inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

// Readable parameter in failure messages (instead of "4-byte object <00-00 00-00>").
inline void PrintTo(Backend backend, std::ostream* os) {
  *os << (backend == Backend::kSqlite ? "sqlite" : "postgres");
}

// The test database of `backend`: a SQLite file in a fresh temp directory, or a schema of its
// own in the PostgreSQL that GPSEL_TEST_POSTGRES_URL names. nullptr (and OK) when that variable
// is not set: the caller skips with kPostgresSkipMessage.
inline absl::StatusOr<std::unique_ptr<TestDatabase>> MakeTestDatabase(Backend backend) {
  if (backend == Backend::kPostgres) {
    const char* url = PostgresUrlFromEnv();
    if (url == nullptr) return std::unique_ptr<TestDatabase>();
    absl::StatusOr<std::unique_ptr<PostgresTestDatabase>> db = PostgresTestDatabase::Create(url);
    if (!db.ok()) return db.status();
    return std::unique_ptr<TestDatabase>(*std::move(db));
  }
  auto db = std::make_unique<SqliteTestDatabase>();
  if (!db->ok()) return absl::InternalError("cannot create a temporary directory");
  return std::unique_ptr<TestDatabase>(std::move(db));
}

}  // namespace gpsel::testing

#endif  // GPSEL_TESTS_JOBSTORE_JOB_STORE_TEST_UTIL_H_
