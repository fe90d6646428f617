// The evidence job kind; see evidence_job.h.
#include "jobs/evidence_job.h"

#include <utility>

#include "core/evidence.h"
#include "gpsel/v1/model_selection.pb.h"
#include "bridge/convert.h"

namespace gpsel {

absl::StatusOr<std::string> RunEvidenceJob(std::string_view request_bytes,
                                           const ServiceLimits& limits,
                                           const ProgressCallback& progress) {
  v1::SubmitEvidenceRequest request;
  if (!request.ParseFromArray(request_bytes.data(), static_cast<int>(request_bytes.size()))) {
    return absl::DataLossError("evidence job: stored request does not parse");
  }
  absl::StatusOr<ValidEvidence> valid = ValidateEvidenceRequest(request, limits);
  if (!valid.ok()) return valid.status();
  absl::StatusOr<EvidenceResult> result =
      ComputeEvidence(valid->data, valid->kernel, valid->options, progress);
  if (!result.ok()) return result.status();
  v1::EvidenceResult proto;
  bridge::ToProto(*result, &proto);
  return proto.SerializeAsString();
}

absl::Status RegisterEvidenceJobKind(JobKindRegistry* registry, const ServiceLimits& limits) {
  if (registry == nullptr) return absl::InvalidArgumentError("no job kind registry");
  JobKind kind;
  kind.name = kEvidenceJobKind;
  kind.execute = [limits](std::string_view request, const ProgressCallback& progress) {
    return RunEvidenceJob(request, limits, progress);
  };
  kind.describe = [](std::string_view request_bytes, v1::Job* job) {
    // Only the kernel is needed; the stored request was canonicalised at submission.
    v1::SubmitEvidenceRequest request;
    if (request.ParseFromArray(request_bytes.data(), static_cast<int>(request_bytes.size()))) {
      job->set_kernel(request.kernel());
    }
  };
  kind.result_to_proto = [](std::string_view result, v1::Job* job) {
    // Parsed aside and kept only when whole: a failed parse leaves the fields read so far, e.g.
    // a string that is not UTF-8, which would make the response unreadable for the client
    // (found by tests/fuzz/job_record_fuzzer.cc).
    v1::EvidenceResult parsed;
    if (parsed.ParseFromArray(result.data(), static_cast<int>(result.size()))) {
      *job->mutable_evidence_result() = std::move(parsed);
    }
  };
  return registry->Register(std::move(kind));
}

}  // namespace gpsel
