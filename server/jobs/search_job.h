// Search jobs, the job kinds "search" and "search_candidate" (server/jobs/job_kind.h): a kernel search
// (core/search.h) run on the shared job queue, each step's candidates as tasks of the job
// (server/store/job_store.h "Tasks") that any worker of any replica sharing the store may take.
// SubmitSearch (server/service/service.cc) stores a SubmitSearchRequest under kind "search"; its job
// hands every step's candidates to the store as one batch ("step-<k>") of "search_candidate"
// tasks, each a SearchCandidateTask (proto/gpsel/v1/job_tasks.proto) whose result is a
// SearchCandidateOutcome, and takes the next step once the last of them is done.
//
// The result is the same whatever the number of replicas and whichever ran what: a candidate's
// score depends only on the data, the options, its kernel, its seed (CandidateSeed: the search
// seed and the kernel's text) and its warm start (its parent's optimum), all of which the task
// carries, and the outcomes travel bit for bit (proto/bridge/convert.h).
//
//   gpsel::JobKindRegistry kinds;
//   absl::Status s = gpsel::RegisterSearchJobKinds(&kinds, limits);
#ifndef GPSEL_JOBS_SEARCH_JOB_H_
#define GPSEL_JOBS_SEARCH_JOB_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/progress.h"
#include "gpsel/server/jobs/job_kind.h"
#include "gpsel/server/validation/validation.h"

namespace gpsel {

inline constexpr char kSearchJobKind[] = "search";
// One candidate of one step of a search job: a task of that job.
inline constexpr char kSearchCandidateJobKind[] = "search_candidate";

// Runs a stored search job: parses and re-validates the SubmitSearchRequest bytes (the limits
// may have changed since submission), searches, and returns the serialized SearchResult. With
// `tasks`, each step's candidates are tasks of the job (run by up to the request's threads on
// this worker while other replicas take the rest); without, they run on this worker's threads.
absl::StatusOr<std::string> RunSearchJob(std::string_view request_bytes,
                                         const ServiceLimits& limits,
                                         const ProgressCallback& progress,
                                         JobTasks* tasks = nullptr);

// Scores one stored SearchCandidateTask and returns the serialized SearchCandidateOutcome. A
// candidate that fails (or runs out of memory) is an outcome, which the search records; only
// `progress` asking to stop (cancellation, a lost lease) and a request that no longer validates
// fail the task.
absl::StatusOr<std::string> RunSearchCandidateTask(std::string_view request_bytes,
                                                   const ServiceLimits& limits,
                                                   const ProgressCallback& progress);

// Registers "search" (shows the result as gpsel.v1.Job.search_result) and "search_candidate".
// Fails as JobKindRegistry::Register does (ALREADY_EXISTS the second time).
absl::Status RegisterSearchJobKinds(JobKindRegistry* registry, const ServiceLimits& limits);

}  // namespace gpsel

#endif  // GPSEL_JOBS_SEARCH_JOB_H_
