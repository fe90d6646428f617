// LocalBackend: every command in-process on the numerical core (no server, no network).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpsel/client/cli/backend.h"

namespace gpsel::cli {
namespace {

// What a flag that needs a server's job queue says in-process.
absl::Status NoQueue(const char* flag) {
  return absl::InvalidArgumentError(absl::StrCat(
      flag, ": needs --server (an in-process run has no job queue to leave it on)"));
}

class LocalBackend : public Backend {
 public:
  std::string Describe() const override { return "in-process"; }

  absl::StatusOr<std::vector<KernelScore>> Score(const Dataset& data,
                                                 const std::vector<KernelExpr>& kernels,
                                                 const ScoreOptions& options,
                                                 const ProgressCallback& progress) override {
    int failed = 0;
    absl::StatusOr<std::vector<KernelScore>> scores =
        ScoreKernels(data, kernels, options, progress, &failed);
    if (!scores.ok() && failed >= 0 && failed < static_cast<int>(kernels.size())) {
      return absl::Status(scores.status().code(), absl::StrCat(ToString(kernels[failed]), ": ",
                                                               scores.status().message()));
    }
    return scores;
  }

  absl::StatusOr<SearchResult> Search(const Dataset& data, const SearchOptions& options,
                                      const ProgressCallback& progress) override {
    return RunKernelSearch(data, options, progress);
  }

  absl::StatusOr<EvidenceResult> Evidence(const Dataset& data, const KernelExpr& kernel,
                                          const EvidenceOptions& options,
                                          const ProgressCallback& progress) override {
    return ComputeEvidence(data, kernel, options, progress);
  }

  absl::StatusOr<v1::SubmitEvidenceResponse> SubmitEvidence(const Dataset&, const KernelExpr&,
                                             const EvidenceOptions&) override {
    return NoQueue("--detach");
  }

  absl::StatusOr<SearchResult> SearchAsJob(const Dataset&, const SearchOptions&,
                                           const ProgressCallback&) override {
    return NoQueue("--job");
  }
  absl::StatusOr<v1::SubmitSearchResponse> SubmitSearch(const Dataset&,
                                                        const SearchOptions&) override {
    return NoQueue("--detach");
  }
  absl::StatusOr<std::vector<KernelScore>> ScoreAsJob(const Dataset&,
                                                      const std::vector<KernelExpr>&,
                                                      const ScoreOptions&,
                                                      const ProgressCallback&) override {
    return NoQueue("--job");
  }
  absl::StatusOr<v1::SubmitScoreResponse> SubmitScore(const Dataset&,
                                                      const std::vector<KernelExpr>&,
                                                      const ScoreOptions&) override {
    return NoQueue("--detach");
  }

  absl::StatusOr<PredictResult> Predict(const Dataset& data, const KernelExpr& kernel,
                                        const Eigen::MatrixXd& x_new,
                                        const PredictOptions& options,
                                        const ProgressCallback& progress) override {
    return FitAndPredict(data, kernel, x_new, options, progress);
  }
};

}  // namespace

std::unique_ptr<Backend> MakeLocalBackend() { return std::make_unique<LocalBackend>(); }

}  // namespace gpsel::cli
