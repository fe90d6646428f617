// SQLite backend of the JobStore (the default: an embedded file, no server to run).
//
// One connection per store instance, guarded by a mutex. The file is in WAL mode and every write
// is a BEGIN IMMEDIATE transaction, so several store instances or processes on one host may
// share a file safely (a claim takes the write lock before it reads). Times come from the host
// clock, which is why the file must not be shared across machines (nor put on a network file
// system, which SQLite's locking does not support anyway); use PostgreSQL for that.
//
//   absl::StatusOr<std::unique_ptr<gpsel::JobStore>> store =
//       gpsel::OpenSqliteJobStore("/var/lib/gpsel/jobs.db", {});
#ifndef GPSEL_STORE_JOB_STORE_SQLITE_H_
#define GPSEL_STORE_JOB_STORE_SQLITE_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "gpsel/server/store/job_store.h"

namespace gpsel {

// Opens the job store in the SQLite file `path`, creating file and schema if absent.
// ":memory:" gives a private in-memory database (tests). Errors: INVALID_ARGUMENT for an empty
// path or bad options; FAILED_PRECONDITION if the file cannot be opened or has a newer schema;
// DATA_LOSS if it is not a database.
absl::StatusOr<std::unique_ptr<JobStore>> OpenSqliteJobStore(std::string_view path,
                                                             const JobStoreOptions& options);

}  // namespace gpsel

#endif  // GPSEL_STORE_JOB_STORE_SQLITE_H_
