// Request validation for gpsel-server (README "Running the service"): every bad input is
// answered with INVALID_ARGUMENT carrying a google.rpc.BadRequest that names each bad field
// ("dataset.y", "kernels[1]", "fit.prior_overrides[SE.lengthscale].sd", ...), before any O(n³)
// work. Each field is parsed once, with core's parsers, messages and defaults; the validated
// requests come back as core types, ready to run. The server adds only its own limits.
//
//   absl::StatusOr<gpsel::ValidScore> v = gpsel::ValidateScoreRequest(request, limits);
//   if (!v.ok()) return reactor->Finish(gpsel::bridge::ToGrpcStatus(v.status()));
#ifndef GPSEL_BRIDGE_VALIDATION_H_
#define GPSEL_BRIDGE_VALIDATION_H_

#include <map>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "gpsel/core/approx.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/memory_estimate.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/v1/model_selection.pb.h"

namespace gpsel {

// Configurable limits of one server (gpsel-server flags).
struct ServiceLimits {
  int max_points = kDefaultMaxPoints;  // n (core/dataset.h: the CLI's limit too)
  // n of a request whose fit.approx is sparse or auto (core/approx.h); its memory (about n·m
  // doubles, m capped where the fit's peak meets the per-request budget) is still checked.
  int max_sparse_points = static_cast<int>(kSparseMaxPoints);
  int max_dims = 64;                  // d
  int max_expression_length = 1000;   // characters of a kernel expression
  int max_expression_depth = 16;      // nesting depth of the canonical expression tree
  int max_base_kernels = 32;          // leaves of a kernel expression
  int max_kernels_per_request = 64;   // ScoreRequest.kernels
  int max_restarts = 100;             // fit.restarts
  int max_iterations = 10000;         // fit.max_iterations
  int max_search_depth = 6;           // SearchRequest.max_depth
  int max_beam_width = 16;            // SearchRequest.beam_width
  // Cap on SearchRequest.threads and EvidenceOptions.importance.threads; 0 = hardware threads.
  int max_search_threads = 0;
  int max_live_points = 5000;         // EvidenceOptions.live_points
  int64_t max_likelihood_calls = 20'000'000;  // EvidenceOptions.max_likelihood_calls
  int max_predict_points = 100000;    // PredictRequest.x_new rows
  int max_message_bytes = 64 << 20;   // gRPC receive limit
  // Estimated peak bytes of one request (core/memory_estimate.h); more is refused with
  // RESOURCE_EXHAUSTED (reason REQUEST_TOO_LARGE) and the estimate. 0 = no budget;
  // kAutomaticRequestBudget: GpselServer::Start divides ¾ of the machine's memory among the
  // requests and jobs that can run at once. A sparse request's fits take it as their own memory
  // budget (ApplyRequestBudget, core/memory_estimate.h): m is capped where the budget is full,
  // so such a request is refused only when not even one inducing point fits.
  int64_t max_request_bytes = 0;
  static constexpr int64_t kAutomaticRequestBudget = -1;
  // Every limit must be at least 1 and at most its hard ceiling (ServiceLimitCeilings()): an
  // operator can raise limits, but not to where one request exhausts any machine (a 977 GB
  // Hessian from 1,000 leaves) or overflows the parsers' recursion.
  absl::Status Validate() const;
};

// Caps on repeated fields and map keys that no real request comes near (README "Limits and
// memory"). A request over one is refused at once with INVALID_ARGUMENT naming the field and
// its size, before any element is parsed, so that a hostile list costs neither time nor a
// violation per element.
inline constexpr int kMaxMetricsPerRequest = 32;        // ScoreRequest/SearchRequest.metrics
inline constexpr int kMaxLaplaceRValues = 64;           // ScoreRequest.laplace_r
inline constexpr int kMaxSearchBaseKernels = 256;       // SearchRequest.base_kernels
inline constexpr int kMaxSearchOperators = 16;          // SearchRequest.operators
// Entries of fit.prior_overrides, fit.fixed_values, PredictRequest.hyperparameters.
inline constexpr int kMaxParameterEntries = 256;
inline constexpr size_t kMaxParameterNameBytes = 128;   // the keys of those maps
inline constexpr size_t kMaxListEntryBytes = 4096;      // one entry of metrics / base_kernels

// The hard ceilings of ServiceLimits (README "Limits and memory").
ServiceLimits ServiceLimitCeilings();

// RESOURCE_EXHAUSTED (reason REQUEST_TOO_LARGE, naming the estimate and the budget) when
// `estimate` exceeds limits.max_request_bytes; OK otherwise or without a budget.
absl::Status CheckMemoryBudget(const MemoryEstimate& estimate, const ServiceLimits& limits);

struct ValidScore {
  Dataset data;
  std::vector<KernelExpr> kernels;
  ScoreOptions options;
};
absl::StatusOr<ValidScore> ValidateScoreRequest(const v1::ScoreRequest& request,
                                                const ServiceLimits& limits);

struct ValidSearch {
  Dataset data;
  SearchOptions options;
};
absl::StatusOr<ValidSearch> ValidateSearchRequest(const v1::SearchRequest& request,
                                                  const ServiceLimits& limits);

struct ValidPredict {
  Dataset data;
  KernelExpr kernel;
  Eigen::MatrixXd x_new;
  PredictOptions options;  // given values (empty: fit them), objective, fit settings
};
absl::StatusOr<ValidPredict> ValidatePredictRequest(const v1::PredictRequest& request,
                                                    const ServiceLimits& limits);

struct ValidEvidence {
  Dataset data;
  KernelExpr kernel;
  EvidenceOptions options;
};
absl::StatusOr<ValidEvidence> ValidateEvidenceRequest(const v1::SubmitEvidenceRequest& request,
                                                      const ServiceLimits& limits);

}  // namespace gpsel

#endif  // GPSEL_BRIDGE_VALIDATION_H_
