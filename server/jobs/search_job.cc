// The search job kinds; see search_job.h.
#include "gpsel/server/jobs/search_job.h"

#include <new>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gpsel/core/approx_score.h"
#include "gpsel/core/search.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/v1/job_tasks.pb.h"
#include "gpsel/v1/model_selection.pb.h"

namespace gpsel {

absl::StatusOr<std::string> RunSearchJob(std::string_view request_bytes,
                                         const ServiceLimits& limits,
                                         const ProgressCallback& progress, JobTasks* tasks) {
  v1::SubmitSearchRequest request;
  if (!request.ParseFromArray(request_bytes.data(), static_cast<int>(request_bytes.size()))) {
    return absl::DataLossError("search job: stored request does not parse");
  }
  absl::StatusOr<ValidSearch> valid = ValidateSearchRequest(request.search(), limits);
  if (!valid.ok()) return valid.status();
  if (tasks != nullptr) {
    // The job's own threads run its candidates while no other replica takes them, as the
    // search's pool would.
    valid->options.score_candidates =
        [&request, tasks](int step, const std::vector<CandidateToScore>& candidates, int threads,
                          const ProgressCallback& step_progress)
        -> absl::StatusOr<std::vector<absl::StatusOr<CandidateScore>>> {
      std::vector<std::string> requests;
      requests.reserve(candidates.size());
      for (const CandidateToScore& candidate : candidates) {
        requests.push_back(
            bridge::SearchCandidateTaskOf(request.search(), candidate).SerializeAsString());
      }
      // One batch per step: a job re-run after its worker died finds each step's candidates,
      // with the outcomes of those that finished, under the same name.
      absl::StatusOr<std::vector<std::string>> results =
          tasks->Run(absl::StrCat("step-", step), kSearchCandidateJobKind, requests, threads,
                     step_progress);
      if (!results.ok()) return results.status();
      std::vector<absl::StatusOr<CandidateScore>> outcomes;
      outcomes.reserve(results->size());
      for (size_t k = 0; k < results->size(); ++k) {
        v1::SearchCandidateOutcome outcome;
        if (!outcome.ParseFromString((*results)[k])) {
          return absl::DataLossError(absl::StrCat("search job: the outcome of candidate ",
                                                  ToString(candidates[k].kernel),
                                                  " does not parse"));
        }
        outcomes.push_back(bridge::FromProto(outcome));
      }
      return outcomes;
    };
  }
  absl::StatusOr<SearchResult> result = RunKernelSearch(valid->data, valid->options, progress);
  if (!result.ok()) return result.status();
  v1::SearchResult proto;
  bridge::ToProto(*result, &proto);
  return proto.SerializeAsString();
}

absl::StatusOr<std::string> RunSearchCandidateTask(std::string_view request_bytes,
                                                   const ServiceLimits& limits,
                                                   const ProgressCallback& progress) {
  v1::SearchCandidateTask task;
  if (!task.ParseFromArray(request_bytes.data(), static_cast<int>(request_bytes.size()))) {
    return absl::DataLossError("search candidate: stored request does not parse");
  }
  absl::StatusOr<ValidSearch> valid = ValidateSearchRequest(task.search(), limits);
  if (!valid.ok()) return valid.status();
  absl::StatusOr<CandidateToScore> candidate = bridge::FromProto(task);
  if (!candidate.ok()) return candidate.status();
  absl::StatusOr<Metric> metric = ParseMetric(valid->options.metric);
  if (!metric.ok()) return metric.status();
  // The search's own default scorer, as RunKernelSearch makes it (core/search.cc).
  // With approx = auto, every candidate of one search is exact or every one sparse: the same
  // decision RunKernelSearch makes once (core/approx_score.h), made again here from the same
  // request.
  ScoreOptions score_options = valid->options.score;
  score_options.approx.mode = ChooseSearchApproximation(valid->data, valid->options).sparse
                                  ? ApproxMode::kSparse
                                  : ApproxMode::kExact;
  const CandidateScorer scorer = MakeMetricScorer(*metric, score_options);
  absl::Status stopped;  // what `progress` said when it asked the fits to stop
  CandidateRequest candidate_request;
  candidate_request.seed = candidate->seed;
  candidate_request.warm_start = candidate->warm_start;
  candidate_request.cancellation = [&progress, &stopped](const Progress& p) -> absl::Status {
    absl::Status status = ReportProgress(progress, p);
    if (!status.ok() && stopped.ok()) stopped = status;
    return status;
  };
  absl::StatusOr<CandidateScore> outcome = absl::UnknownError("not scored");
  try {
    outcome = scorer(valid->data, candidate->kernel, candidate_request);
  } catch (const std::bad_alloc&) {
    // As on the search's own threads (core/search.cc ScoreStep): an outcome that stops the
    // search, not a crash of this replica.
    outcome = absl::ResourceExhaustedError(
        absl::StrCat("out of memory while fitting candidate ", task.kernel()));
  }
  if (!stopped.ok()) return stopped;
  v1::SearchCandidateOutcome proto;
  bridge::ToProto(outcome, &proto);
  return proto.SerializeAsString();
}

absl::Status RegisterSearchJobKinds(JobKindRegistry* registry, const ServiceLimits& limits) {
  if (registry == nullptr) return absl::InvalidArgumentError("no job kind registry");
  JobKind search;
  search.name = kSearchJobKind;
  search.execute = [limits](std::string_view request, const ProgressCallback& progress,
                            JobTasks& tasks) {
    return RunSearchJob(request, limits, progress, &tasks);
  };
  search.result_to_proto = [](std::string_view result, v1::Job* job) {
    // Parsed aside and kept only when whole (see RegisterEvidenceJobKind).
    v1::SearchResult parsed;
    if (parsed.ParseFromArray(result.data(), static_cast<int>(result.size()))) {
      *job->mutable_search_result() = std::move(parsed);
    }
  };
  GPSEL_RETURN_IF_ERROR(registry->Register(std::move(search)));
  JobKind candidate;
  candidate.name = kSearchCandidateJobKind;
  candidate.execute = [limits](std::string_view request, const ProgressCallback& progress,
                               JobTasks&) {
    return RunSearchCandidateTask(request, limits, progress);
  };
  // Shown (to whoever asks for a task by its id) with its kernel.
  candidate.describe = [](std::string_view request, v1::Job* job) {
    v1::SearchCandidateTask task;
    if (task.ParseFromArray(request.data(), static_cast<int>(request.size()))) {
      job->set_kernel(task.kernel());
    }
  };
  return registry->Register(std::move(candidate));
}

}  // namespace gpsel
