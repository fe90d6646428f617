// PostgreSQL backend of the JobStore: one queue shared by many server/worker replicas on many
// machines.
//
// Same contract as the SQLite backend. Claims use SELECT ... FOR UPDATE SKIP LOCKED, so
// concurrent claimers never wait for each other nor take the same job; idempotency keys are a
// UNIQUE constraint (INSERT ... ON CONFLICT DO NOTHING); every time (creation, leases, expiry)
// is the database's now(), so the replicas' clocks may disagree without breaking leases. The
// schema (tables gpsel_jobs, gpsel_schema_version) is created in the connection's current
// schema if absent; point `search_path` elsewhere (URI `options=-csearch_path%3Dname`) to keep
// several independent queues in one database.
//
// libpq settings come from the URI (and the usual PG* environment variables); add
// `connect_timeout=N` to bound how long an unreachable server blocks.
//
//   absl::StatusOr<std::unique_ptr<gpsel::JobStore>> store =
//       gpsel::OpenPostgresJobStore("postgresql://gpsel@db:5432/gpsel", {});
#ifndef GPSEL_STORE_JOB_STORE_POSTGRES_H_
#define GPSEL_STORE_JOB_STORE_POSTGRES_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "gpsel/server/store/job_store.h"

namespace gpsel {

// Connects to the libpq connection URI `url` ("postgresql://..." or "postgres://...") and
// creates the schema if absent. The store keeps up to options.postgres_max_connections
// connections and replaces broken ones on the next call. Errors: INVALID_ARGUMENT for a
// malformed URI; UNAVAILABLE when the server cannot be reached; UNAUTHENTICATED when it refuses
// the credentials; FAILED_PRECONDITION for a schema written by a newer gpsel.
absl::StatusOr<std::unique_ptr<JobStore>> OpenPostgresJobStore(std::string_view url,
                                                               const JobStoreOptions& options);

}  // namespace gpsel

#endif  // GPSEL_STORE_JOB_STORE_POSTGRES_H_
