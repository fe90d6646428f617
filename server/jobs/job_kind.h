// Job kinds: what the asynchronous jobs of the job store (server/store/job_store.h) can be, and the
// store's Job as the gpsel.v1.Job API resource.
//
// A JobKind names one kind of job ("evidence", "search", "score") and says how to run a
// stored request and how to show its kind-specific fields. The server builds one
// JobKindRegistry at startup (server/service/server.cc), registers every kind in it — each kind has
// its own registration function, e.g. RegisterEvidenceJobKind in server/jobs/evidence_job.h — and
// hands it to the JobRunner (server/jobs/job_runner.h), which executes claimed jobs by kind, and to the
// service (server/service/service.h), which turns stored jobs into API resources with JobToProto.
// There is no global registry: tests build their own with their own kinds
// (tests/server/jobs/job_kind_test.cc, tests/server/jobs/job_runner_test.cc).
//
// A new kind ("search", "score") implements `execute` (and `describe` / `result_to_proto` when
// gpsel.v1.Job shows fields of its own), offers a Register<Kind>JobKind function beside its
// payload code as evidence_job.h does, is registered in GpselServer::Start (server/service/server.cc),
// and gets jobs through a Submit RPC of its own that stores its request under its name.
//
//   gpsel::JobKindRegistry kinds;
//   gpsel::JobKind echo;
//   echo.name = "echo";
//   echo.execute = [](std::string_view request, const gpsel::ProgressCallback& progress,
//                     gpsel::JobTasks& tasks) -> absl::StatusOr<std::string> {
//     return std::string(request);
//   };
//   absl::Status s = kinds.Register(std::move(echo));   // ALREADY_EXISTS the second time
//   const gpsel::JobKind* kind = kinds.Find("echo");    // nullptr for an unknown kind
#ifndef GPSEL_JOBS_JOB_KIND_H_
#define GPSEL_JOBS_JOB_KIND_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/progress.h"
#include "gpsel/server/store/job_store.h"
#include "gpsel/v1/job.pb.h"

namespace gpsel {

// What a running job may do besides computing: hand parts of its work to the job store as
// tasks (server/store/job_store.h "Tasks") that any worker of any replica may run — each a job of
// another registered kind, run by that kind's `execute` — and wait for their results. The
// JobRunner gives each job it runs one (server/jobs/job_runner.cc).
class JobTasks {
 public:
  virtual ~JobTasks() = default;

  // Runs one task of kind `kind` per request, stored as batch `batch` of this job, and returns
  // their results in request order. The batch is stored once: when the job is run again after
  // its worker died, the same call finds the tasks made before, with the results of those that
  // finished, so only the unfinished ones run (again). So the requests must depend only on the
  // job's own request. While it waits, this worker runs tasks of the batch itself, up to
  // `local_parallelism` (≥ 1) at once, each on a thread of its own (so the job's threads serve
  // its tasks when no other replica is idle). `progress` receives the tasks' mean progress and,
  // through its answer, cancellation. Errors: the first failed task's, naming it (the others are
  // then cancelled); CANCELLED when a task was cancelled; the progress callback's; the store's.
  virtual absl::StatusOr<std::vector<std::string>> Run(std::string_view batch,
                                                       std::string_view kind,
                                                       const std::vector<std::string>& requests,
                                                       int local_parallelism,
                                                       const ProgressCallback& progress) = 0;
};

struct JobKind {
  // The kind as stored in Job::kind and shown in gpsel.v1.Job.kind and the job metrics' `kind`
  // label. Non-empty; unique within a registry.
  std::string name;

  // Required. Runs a stored request (the bytes the service submitted, or a job's task) and
  // returns the result bytes that the store publishes. Called on a job worker thread, possibly
  // concurrently for several jobs. Must call `progress` now and then and, once it returns non-OK
  // (cancellation requested, lease lost, server stopping), stop soon and return that status. Any
  // other error is stored on the job as its failure. `tasks` splits the work into tasks (a task
  // cannot have tasks of its own: its Run fails with FAILED_PRECONDITION).
  std::function<absl::StatusOr<std::string>(std::string_view request,
                                            const ProgressCallback& progress, JobTasks& tasks)>
      execute;

  // Optional. Sets the kind's descriptive fields of the resource from the stored request, for a
  // job in any state (evidence: `kernel`). Must tolerate bytes that do not parse.
  std::function<void(std::string_view request, v1::Job* job)> describe;

  // Optional. Sets the kind's result field of a SUCCEEDED job from the stored result bytes
  // (evidence: `evidence_result`). Must tolerate bytes that do not parse.
  std::function<void(std::string_view result, v1::Job* job)> result_to_proto;
};

// The job kinds one server knows. Register every kind before the registry is shared (the
// JobRunner and the service share it as std::shared_ptr<const JobKindRegistry>); the const
// methods are safe from any thread.
class JobKindRegistry {
 public:
  // INVALID_ARGUMENT for an empty name or a missing `execute`; ALREADY_EXISTS when a kind of
  // that name is registered already (the first registration stays).
  absl::Status Register(JobKind kind);
  // The kind named `name`, or nullptr. Valid as long as the registry is.
  const JobKind* Find(std::string_view name) const;
  // Every registered name, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, JobKind, std::less<>> kinds_;
};

// "jobs/{id}" and back (a bare id is accepted too); INVALID_ARGUMENT naming `field` when empty.
std::string JobName(std::string_view id);
absl::StatusOr<std::string> JobIdFromName(std::string_view name, std::string_view field);

v1::JobState ToProto(JobState state);
// nullopt for JOB_STATE_UNSPECIFIED.
std::optional<JobState> FromProto(v1::JobState state);

// `text` with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD.
std::string ValidUtf8(std::string_view text);

// The job as the API shows it; text from the store is made valid UTF-8 (ValidUtf8). The kind's
// hooks in `kinds` add its descriptive fields and, when SUCCEEDED, its result; a job of a kind
// that `kinds` does not know (or kinds == nullptr) gets the kind-independent fields only.
void JobToProto(const Job& job, const JobKindRegistry* kinds, v1::Job* proto);
// The kind-independent fields only.
inline void JobToProto(const Job& job, v1::Job* proto) { JobToProto(job, nullptr, proto); }

}  // namespace gpsel

#endif  // GPSEL_JOBS_JOB_KIND_H_
