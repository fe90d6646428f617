// The evidence job kind; see evidence_job.h.
#include "gpsel/server/jobs/evidence_job.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gpsel/core/evidence.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/v1/model_selection.pb.h"

namespace gpsel {

namespace {

// The task requests of an evidence job's K nested-sampling runs: run k is the job's request
// narrowed to nested sampling, one run, one thread and the seed of run k, which is what
// NestedRunsExecutor (core/evidence.h) asks of it.
std::vector<std::string> NestedRunRequests(const v1::SubmitEvidenceRequest& job_request,
                                           int num_runs) {
  std::vector<std::string> requests;
  requests.reserve(num_runs);
  for (int k = 0; k < num_runs; ++k) {
    v1::SubmitEvidenceRequest run = job_request;
    run.clear_request_id();
    v1::EvidenceOptions* options = run.mutable_options();
    options->set_method(v1::EVIDENCE_METHOD_NESTED);
    options->set_runs(1);
    options->set_threads(1);
    options->set_seed(NestedSamplingRunSeed(job_request.options().seed(), k));
    requests.push_back(run.SerializeAsString());
  }
  return requests;
}

}  // namespace

absl::StatusOr<std::string> RunEvidenceJob(std::string_view request_bytes,
                                           const ServiceLimits& limits,
                                           const ProgressCallback& progress, JobTasks* tasks) {
  v1::SubmitEvidenceRequest request;
  if (!request.ParseFromArray(request_bytes.data(), static_cast<int>(request_bytes.size()))) {
    return absl::DataLossError("evidence job: stored request does not parse");
  }
  absl::StatusOr<ValidEvidence> valid = ValidateEvidenceRequest(request, limits);
  if (!valid.ok()) return valid.status();
  if (tasks != nullptr) {
    valid->options.run_nested_runs = [&](int num_runs, const ProgressCallback& runs_progress)
        -> absl::StatusOr<std::vector<NestedSamplingResult>> {
      // The job's threads run its runs here while no other replica takes them, as the runs
      // of an in-process evidence would.
      absl::StatusOr<std::vector<std::string>> results = tasks->Run(
          kNestedRunsBatch, kEvidenceRunJobKind, NestedRunRequests(request, num_runs),
          std::max(1, valid->options.sampling.threads), runs_progress);
      if (!results.ok()) return results.status();
      std::vector<NestedSamplingResult> runs;
      for (size_t k = 0; k < results->size(); ++k) {
        v1::EvidenceResult run;
        if (!run.ParseFromString((*results)[k])) {
          return absl::DataLossError(absl::StrCat("evidence job: run ", k, "'s result does not parse"));
        }
        EvidenceResult parsed = bridge::FromProto(run);
        if (!parsed.sampling.has_value()) {
          return absl::DataLossError(absl::StrCat("evidence job: run ", k, " has no nested sampling"));
        }
        runs.push_back(*std::move(parsed.sampling));
      }
      return runs;
    };
  }
  absl::StatusOr<EvidenceResult> result =
      ComputeEvidence(valid->data, valid->kernel, valid->options, progress);
  if (!result.ok()) return result.status();
  v1::EvidenceResult proto;
  bridge::ToProto(*result, &proto);
  return proto.SerializeAsString();
}

absl::Status RegisterEvidenceJobKind(JobKindRegistry* registry, const ServiceLimits& limits) {
  if (registry == nullptr) return absl::InvalidArgumentError("no job kind registry");
  // Only the kernel is needed; the stored request was canonicalised at submission.
  const auto describe = [](std::string_view request_bytes, v1::Job* job) {
    v1::SubmitEvidenceRequest request;
    if (request.ParseFromArray(request_bytes.data(), static_cast<int>(request_bytes.size()))) {
      job->set_kernel(request.kernel());
    }
  };
  const auto result_to_proto = [](std::string_view result, v1::Job* job) {
    // Parsed aside and kept only when whole: a failed parse leaves the fields read so far, e.g.
    // a string that is not UTF-8, which would make the response unreadable for the client
    // (found by tests/fuzz/job_record_fuzzer.cc).
    v1::EvidenceResult parsed;
    if (parsed.ParseFromArray(result.data(), static_cast<int>(result.size()))) {
      *job->mutable_evidence_result() = std::move(parsed);
    }
  };
  JobKind evidence;
  evidence.name = kEvidenceJobKind;
  evidence.execute = [limits](std::string_view request, const ProgressCallback& progress,
                              JobTasks& tasks) {
    return RunEvidenceJob(request, limits, progress, &tasks);
  };
  evidence.describe = describe;
  evidence.result_to_proto = result_to_proto;
  GPSEL_RETURN_IF_ERROR(registry->Register(std::move(evidence)));
  JobKind run;
  run.name = kEvidenceRunJobKind;
  run.execute = [limits](std::string_view request, const ProgressCallback& progress,
                         JobTasks&) { return RunEvidenceJob(request, limits, progress); };
  run.describe = describe;
  run.result_to_proto = result_to_proto;
  return registry->Register(std::move(run));
}

}  // namespace gpsel
