// The score job kinds; see score_job.h.
#include "gpsel/server/jobs/score_job.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/v1/job_tasks.pb.h"
#include "gpsel/v1/model_selection.pb.h"

namespace gpsel {

absl::StatusOr<std::string> RunScoreJob(std::string_view request_bytes,
                                        const ServiceLimits& limits,
                                        const ProgressCallback& progress, JobTasks* tasks) {
  v1::SubmitScoreRequest request;
  if (!request.ParseFromArray(request_bytes.data(), static_cast<int>(request_bytes.size()))) {
    return absl::DataLossError("score job: stored request does not parse");
  }
  absl::StatusOr<ValidScore> valid = ValidateScoreRequest(request.score(), limits);
  if (!valid.ok()) return valid.status();
  KernelRoundScorer score_round;
  if (tasks != nullptr) {
    score_round = [&request, tasks](int round, const std::vector<KernelToScore>& entries,
                                    const ProgressCallback& round_progress)
        -> absl::StatusOr<std::vector<std::optional<KernelScore>>> {
      std::vector<std::string> requests;
      requests.reserve(entries.size());
      for (const KernelToScore& entry : entries) {
        v1::ScoreKernelTask task;
        *task.mutable_score() = request.score();
        task.mutable_score()->mutable_fit()->set_seed(entry.fit_seed);
        bridge::NestedParentsToProto(entry.nested_parents, task.mutable_score());
        int parent_index = 0;  // NestedParentsToProto keeps the parents that have a score
        for (const NestedParent& parent : entry.nested_parents) {
          if (parent.score == nullptr) continue;
          if (parent.one_fewer_base_kernel) task.add_one_fewer_base_kernel_parents(parent_index);
          ++parent_index;
        }
        if (entry.start_only) {
          task.set_kernel(ToString(entry.kernel));
        } else {
          task.set_kernel_index(static_cast<int>(entry.index));
        }
        requests.push_back(task.SerializeAsString());
      }
      // One kernel at a time on this worker: a kernel's fits use the request's threads already.
      absl::StatusOr<std::vector<std::string>> results = tasks->Run(
          absl::StrCat("round-", round), kScoreKernelJobKind, requests, 1, round_progress);
      if (!results.ok()) return results.status();
      std::vector<std::optional<KernelScore>> scores;
      scores.reserve(results->size());
      for (size_t k = 0; k < results->size(); ++k) {
        if ((*results)[k].empty() && entries[k].start_only) {
          scores.push_back(std::nullopt);  // a sub-kernel that offers no start
          continue;
        }
        v1::KernelScore score;
        if (!score.ParseFromString((*results)[k])) {
          return absl::DataLossError(absl::StrCat("score job: the score of ",
                                                  ToString(entries[k].kernel), " does not parse"));
        }
        scores.push_back(bridge::FromProto(score));
      }
      return scores;
    };
  }
  int failed = -1;
  absl::StatusOr<std::vector<KernelScore>> scores =
      ScoreKernels(valid->data, valid->kernels, valid->options, progress, &failed, score_round);
  if (!scores.ok()) {
    if (failed < 0) return scores.status();
    return absl::Status(scores.status().code(), absl::StrCat("kernels[", failed, "]: ",
                                                             scores.status().message()));
  }
  v1::KernelScoreList list;
  for (const KernelScore& score : *scores) bridge::ToProto(score, list.add_scores());
  return list.SerializeAsString();
}

absl::StatusOr<std::string> RunScoreKernelTask(std::string_view request_bytes,
                                               const ServiceLimits& limits,
                                               const ProgressCallback& progress) {
  v1::ScoreKernelTask task;
  if (!task.ParseFromArray(request_bytes.data(), static_cast<int>(request_bytes.size()))) {
    return absl::DataLossError("score kernel: stored request does not parse");
  }
  absl::StatusOr<ValidScore> valid = ValidateScoreRequest(task.score(), limits);
  if (!valid.ok()) return valid.status();
  // The request's nested_parents are this kernel's parents (RunScoreJob).
  ScoreOptions& options = valid->options;
  for (int parent_index : task.one_fewer_base_kernel_parents()) {
    if (parent_index < 0 || parent_index >= static_cast<int>(options.nested_parents.size())) {
      return absl::DataLossError("score kernel: stored task names no parent of its request");
    }
    options.nested_parents[parent_index].one_fewer_base_kernel = true;
  }
  KernelExpr kernel;
  if (!task.kernel().empty()) {
    // A sub-kernel scored for its starts (ScoreOptions::search_starts).
    absl::StatusOr<KernelExpr> parsed = ParseKernel(task.kernel());
    if (!parsed.ok()) return absl::DataLossError("score kernel: stored sub-kernel does not parse");
    kernel = *std::move(parsed);
  } else {
    const int index = task.kernel_index();
    if (index < 0 || index >= static_cast<int>(valid->kernels.size())) {
      return absl::DataLossError("score kernel: stored task names no kernel of its request");
    }
    kernel = valid->kernels[index];
  }
  absl::StatusOr<KernelScore> score = ScoreKernel(valid->data, kernel, options, progress);
  if (!score.ok() && !task.kernel().empty() && SubKernelErrorOffersNoStart(score.status())) {
    return std::string();  // no start from this sub-kernel; RunScoreJob reads the empty result
  }
  if (!score.ok()) return score.status();
  v1::KernelScore proto;
  bridge::ToProto(*score, &proto);
  return proto.SerializeAsString();
}

absl::Status RegisterScoreJobKinds(JobKindRegistry* registry, const ServiceLimits& limits) {
  if (registry == nullptr) return absl::InvalidArgumentError("no job kind registry");
  JobKind score;
  score.name = kScoreJobKind;
  score.execute = [limits](std::string_view request, const ProgressCallback& progress,
                           JobTasks& tasks) { return RunScoreJob(request, limits, progress, &tasks); };
  score.result_to_proto = [](std::string_view result, v1::Job* job) {
    // Parsed aside and kept only when whole (see RegisterEvidenceJobKind).
    v1::KernelScoreList parsed;
    if (parsed.ParseFromArray(result.data(), static_cast<int>(result.size()))) {
      *job->mutable_score_result() = std::move(parsed);
    }
  };
  GPSEL_RETURN_IF_ERROR(registry->Register(std::move(score)));
  JobKind kernel;
  kernel.name = kScoreKernelJobKind;
  kernel.execute = [limits](std::string_view request, const ProgressCallback& progress,
                            JobTasks&) { return RunScoreKernelTask(request, limits, progress); };
  return registry->Register(std::move(kernel));
}

}  // namespace gpsel
