// Evidence jobs: the payloads the job store keeps for kind "evidence" (a serialized, validated
// SubmitEvidenceRequest in, a serialized EvidenceResult out), the nested-sampling run itself,
// and the store's Job as a gpsel.v1.Job resource.
//
//   absl::StatusOr<std::string> result = gpsel::RunEvidenceJob(job.request, limits, progress);
#ifndef GPSEL_JOBS_EVIDENCE_JOB_H_
#define GPSEL_JOBS_EVIDENCE_JOB_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/progress.h"
#include "gpsel/v1/job.pb.h"
#include "store/job_store.h"
#include "bridge/validation.h"

namespace gpsel {

inline constexpr char kEvidenceJobKind[] = "evidence";

// Runs a stored evidence job: parses and re-validates the request bytes (the limits may have
// changed since submission), computes, and returns the serialized EvidenceResult.
absl::StatusOr<std::string> RunEvidenceJob(std::string_view request_bytes,
                                           const ServiceLimits& limits,
                                           const ProgressCallback& progress);

// "jobs/{id}" and back (a bare id is accepted too); INVALID_ARGUMENT naming `field` when empty.
std::string JobName(std::string_view id);
absl::StatusOr<std::string> JobIdFromName(std::string_view name, std::string_view field);

v1::JobState ToProto(JobState state);
// nullopt for JOB_STATE_UNSPECIFIED.
std::optional<JobState> FromProto(v1::JobState state);

// The store's job as the API resource (the result payload decoded for evidence jobs).
// `text` with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD.
std::string ValidUtf8(std::string_view text);
// The job as the API shows it; text from the store is made valid UTF-8 (ValidUtf8).
void JobToProto(const Job& job, v1::Job* proto);

}  // namespace gpsel

#endif  // GPSEL_JOBS_EVIDENCE_JOB_H_
