// Score jobs, the job kinds "score" and "score_kernel" (server/jobs/job_kind.h): the scoring of several
// kernels (core/score.h ScoreKernels) run on the shared job queue, each kernel's fits a task of
// the job (server/store/job_store.h "Tasks") that any worker of any replica sharing the store may take.
// SubmitScore (server/service/service.cc) stores a SubmitScoreRequest under kind "score". Its job
// scores the kernels in ScoreKernels' rounds: the kernels of one round are one batch
// ("round-<k>") of "score_kernel" tasks, each a ScoreKernelTask (proto/gpsel/v1/job_tasks.proto)
// that carries the scores of the contained kernels its fits start from, and whose result is a
// KernelScore. The job's result, a KernelScoreList, equals what the Score RPC returns.
//
//   gpsel::JobKindRegistry kinds;
//   absl::Status s = gpsel::RegisterScoreJobKinds(&kinds, limits);
#ifndef GPSEL_JOBS_SCORE_JOB_H_
#define GPSEL_JOBS_SCORE_JOB_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/progress.h"
#include "gpsel/server/jobs/job_kind.h"
#include "gpsel/server/validation/validation.h"

namespace gpsel {

inline constexpr char kScoreJobKind[] = "score";
// One kernel of a score job: a task of that job.
inline constexpr char kScoreKernelJobKind[] = "score_kernel";

// Runs a stored score job: parses and re-validates the SubmitScoreRequest bytes, scores, and
// returns the serialized KernelScoreList. With `tasks`, each kernel is a task of the job (this
// worker runs one at a time while other replicas take the rest); without, they run here.
absl::StatusOr<std::string> RunScoreJob(std::string_view request_bytes,
                                        const ServiceLimits& limits,
                                        const ProgressCallback& progress,
                                        JobTasks* tasks = nullptr);

// Scores one stored ScoreKernelTask and returns the serialized KernelScore.
absl::StatusOr<std::string> RunScoreKernelTask(std::string_view request_bytes,
                                               const ServiceLimits& limits,
                                               const ProgressCallback& progress);

// Registers "score" (shows the result as gpsel.v1.Job.score_result) and "score_kernel".
// Fails as JobKindRegistry::Register does (ALREADY_EXISTS the second time).
absl::Status RegisterScoreJobKinds(JobKindRegistry* registry, const ServiceLimits& limits);

}  // namespace gpsel

#endif  // GPSEL_JOBS_SCORE_JOB_H_
