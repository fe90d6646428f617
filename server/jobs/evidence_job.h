// Evidence jobs, the job kinds "evidence" and "evidence_run" (server/jobs/job_kind.h): the payloads
// the job store keeps for them (a serialized, validated SubmitEvidenceRequest in, a serialized
// EvidenceResult out), the computation itself, nested sampling's runs as tasks, and the kinds'
// registration. server/service/server.cc registers them once; SubmitEvidence (server/service/service.cc)
// submits jobs of kind "evidence", which submit their "evidence_run" tasks themselves.
//
//   gpsel::JobKindRegistry kinds;
//   absl::Status s = gpsel::RegisterEvidenceJobKind(&kinds, limits);
//   absl::StatusOr<std::string> result = gpsel::RunEvidenceJob(job.request, limits, progress);
#ifndef GPSEL_JOBS_EVIDENCE_JOB_H_
#define GPSEL_JOBS_EVIDENCE_JOB_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/progress.h"
#include "gpsel/server/jobs/job_kind.h"
#include "gpsel/server/validation/validation.h"

namespace gpsel {

inline constexpr char kEvidenceJobKind[] = "evidence";
// One nested-sampling run of an evidence job with several runs (EvidenceOptions.runs > 1): a
// task of that job (server/store/job_store.h "Tasks") that any worker of any replica may take. Its
// request is the job's SubmitEvidenceRequest narrowed to that run (nested sampling, one run,
// the run's seed NestedSamplingRunSeed(seed, k), one thread); its result an EvidenceResult.
inline constexpr char kEvidenceRunJobKind[] = "evidence_run";
// The batch name of those tasks within their job.
inline constexpr char kNestedRunsBatch[] = "nested-runs";

// Runs a stored evidence job (or run task): parses and re-validates the request bytes (the
// limits may have changed since submission), computes, and returns the serialized
// EvidenceResult. With `tasks`, nested sampling's runs (when more than one) become tasks of
// the job; without, they run in this process.
absl::StatusOr<std::string> RunEvidenceJob(std::string_view request_bytes,
                                           const ServiceLimits& limits,
                                           const ProgressCallback& progress,
                                           JobTasks* tasks = nullptr);

// Registers the kinds "evidence" (executes with RunEvidenceJob under `limits`, its runs as
// tasks; shows the stored request's kernel as gpsel.v1.Job.kernel and the result as
// gpsel.v1.Job.evidence_result) and "evidence_run" (its tasks). Fails as
// JobKindRegistry::Register does (ALREADY_EXISTS the second time).
absl::Status RegisterEvidenceJobKind(JobKindRegistry* registry, const ServiceLimits& limits);

}  // namespace gpsel

#endif  // GPSEL_JOBS_EVIDENCE_JOB_H_
