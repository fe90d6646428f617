// Evidence jobs, the job kind "evidence" (jobs/job_kind.h): the payloads the job store keeps for
// it (a serialized, validated SubmitEvidenceRequest in, a serialized EvidenceResult out), the
// nested-sampling run itself, and the kind's registration. service/server.cc registers it once;
// SubmitEvidence (service/service.cc) submits jobs of this kind.
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
#include "bridge/validation.h"
#include "core/progress.h"
#include "jobs/job_kind.h"

namespace gpsel {

inline constexpr char kEvidenceJobKind[] = "evidence";

// Runs a stored evidence job: parses and re-validates the request bytes (the limits may have
// changed since submission), computes, and returns the serialized EvidenceResult.
absl::StatusOr<std::string> RunEvidenceJob(std::string_view request_bytes,
                                           const ServiceLimits& limits,
                                           const ProgressCallback& progress);

// Registers kind "evidence": executes with RunEvidenceJob under `limits`, shows the stored
// request's kernel as gpsel.v1.Job.kernel and the result as gpsel.v1.Job.evidence_result.
// Fails as JobKindRegistry::Register does (ALREADY_EXISTS the second time).
absl::Status RegisterEvidenceJobKind(JobKindRegistry* registry, const ServiceLimits& limits);

}  // namespace gpsel

#endif  // GPSEL_JOBS_EVIDENCE_JOB_H_
