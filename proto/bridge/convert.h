// The one place where gpsel.v1 protobuf messages meet core types: datasets,
// options, scores, predictions, evidence results; and absl::Status <-> grpc::Status with
// google.rpc.Status details (BadRequest, ErrorInfo) carried as absl::Status payloads.
//
// Used by the server (requests in, results out) and by the client library (results back to
// core types, so the CLI prints a remote result with the same printer as an in-process one).
// Conversions are exact: doubles travel bit for bit, maps keep their keys.
//
//   absl::StatusOr<gpsel::Dataset> data = gpsel::bridge::FromProto(request.dataset());
//   gpsel::v1::KernelScore proto;
//   gpsel::bridge::ToProto(score, &proto);
//   grpc::Status wire = gpsel::bridge::ToGrpcStatus(gpsel::bridge::InvalidField("dataset.y", "NaN"));
#ifndef GPSEL_BRIDGE_CONVERT_H_
#define GPSEL_BRIDGE_CONVERT_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Dense>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/v1/job.pb.h"
#include "gpsel/v1/job_tasks.pb.h"
#include "gpsel/v1/model_selection.pb.h"
#include "gpsel/v1/types.pb.h"

namespace gpsel::bridge {

// ---- datasets and matrices ------------------------------------------------------------------

// Shape only (n×d from x, num_dims and y); value checks (NaN, limits) are the validator's job.
// INVALID_ARGUMENT naming "dataset.x" when x.size() is not y.size()·d.
absl::StatusOr<Dataset> FromProto(const v1::Dataset& proto);
void ToProto(const Dataset& data, v1::Dataset* proto);

// INVALID_ARGUMENT when values.size() != rows·cols (the message names `field`).
absl::StatusOr<Eigen::MatrixXd> FromProto(const v1::Matrix& proto, std::string_view field);
void ToProto(const Eigen::MatrixXd& matrix, v1::Matrix* proto);

// ---- options --------------------------------------------------------------------------------

// Fit options + standardisation + priors of a request (zero values mean core defaults).
struct FitSettings {
  FitOptions fit;
  bool standardize = true;
  HyperparameterSettings hyperparameters;
  XScaling scale_x;
  bool data_informed_starts = true;
  ApproxOptions approx;  // fit.approx and fit.inducing_points
};
// Decodes fit options already validated (a stored job's request): an unreadable scale_x is taken
// as "none". FitSettingsFromProto parses them as a request, INVALID_ARGUMENT naming
// `field`.scale_x with core's message.
FitSettings FromProto(const v1::FitOptions& proto);
absl::StatusOr<FitSettings> FitSettingsFromProto(const v1::FitOptions& proto,
                                                 std::string_view field);
void ToProto(const FitSettings& settings, v1::FitOptions* proto);
// The fit settings of score options, and back.
FitSettings FitSettingsOf(const ScoreOptions& options);
void ApplyFitSettings(const FitSettings& settings, ScoreOptions* options);

// Full score options of a ScoreRequest, each field parsed once with core's parsers and messages;
// INVALID_ARGUMENT listing every bad one ("metrics[i]", "laplace_r[i]", "fit.scale_x").
absl::StatusOr<ScoreOptions> ScoreOptionsFromProto(const v1::ScoreRequest& request);
// Fills the option fields of `request` (not dataset/kernels) from core options.
void ScoreOptionsToProto(const ScoreOptions& options, v1::ScoreRequest* request);
// Sets request.nested_parents from `parents` (those with a score), as ScoreOptionsToProto does.
void NestedParentsToProto(const std::vector<NestedParent>& parents, v1::ScoreRequest* request);

// ---- results ----------------------------------------------------------------------------------

void ToProto(const KernelScore& score, v1::KernelScore* proto);
KernelScore FromProto(const v1::KernelScore& proto);
void ToProto(const FitResult& fit, v1::FitResult* proto);
FitResult FromProto(const v1::FitResult& proto);
void ToProto(const Standardization& s, v1::Standardization* proto);
Standardization FromProto(const v1::Standardization& proto);
// `gpsel priors`: a prior in natural units, and the data's scales per input column.
void ToProto(const PriorSummary& prior, v1::PriorSummary* proto);
void ToProto(const InputColumnScales& scales, v1::InputColumnScales* proto);
void ToProto(const PredictResult& result, v1::PredictResponse* proto);
PredictResult FromProto(const v1::PredictResponse& proto);
// A saved model as the gpsel.v1.SavedModel message (format "gpsel.v1.SavedModel"), and back:
// INVALID_ARGUMENT naming `field` (".format", ".kernel", ".x_scale", ...) when the message is
// not a gpsel model or is malformed; whether it fits some data is core's
// CheckModelMatchesData.
void ToProto(const SavedModel& model, v1::SavedModel* proto);
absl::StatusOr<SavedModel> FromProto(const v1::SavedModel& proto, std::string_view field);
inline constexpr char kSavedModelFormat[] = "gpsel.v1.SavedModel";
// The request of FitAndPredict(data, kernel, x_new, options), and back (values not checked: that
// is ValidatePredictRequest's job).
v1::PredictRequest PredictRequestOf(const Dataset& data, const KernelExpr& kernel,
                                    const Eigen::MatrixXd& x_new, const PredictOptions& options);

// ---- evidence -----------------------------------------------------------------------------

// Zero values mean the core defaults (see gpsel.v1.EvidenceOptions).
EvidenceOptions FromProto(const v1::EvidenceOptions& proto);
void ToProto(const EvidenceOptions& options, v1::EvidenceOptions* proto);
void ToProto(const EvidenceResult& result, v1::EvidenceResult* proto);
EvidenceResult FromProto(const v1::EvidenceResult& proto);

// ---- search -------------------------------------------------------------------------------

// Search options of a request (scorer left empty), each field parsed once. INVALID_ARGUMENT
// listing every bad "base_kernels[i]", "metric", "metrics[i]" and "fit.scale_x".
absl::StatusOr<SearchOptions> SearchOptionsFromProto(const v1::SearchRequest& request);
// Fills every field of `request` except the dataset from core options.
void SearchOptionsToProto(const SearchOptions& options, v1::SearchRequest* request);
void ToProto(const SearchResult& result, v1::SearchResult* proto);
// INVALID_ARGUMENT when best_kernel does not parse.
absl::StatusOr<SearchResult> FromProto(const v1::SearchResult& proto);

// ---- task payloads of search and score jobs (proto/gpsel/v1/job_tasks.proto) ---------------

// The task of one candidate of a search job with request `search`.
v1::SearchCandidateTask SearchCandidateTaskOf(const v1::SearchRequest& search,
                                              const CandidateToScore& candidate);
// INVALID_ARGUMENT naming "kernel" when the kernel does not parse.
absl::StatusOr<CandidateToScore> FromProto(const v1::SearchCandidateTask& task);
// A candidate's outcome: its score, or (error set) why it failed.
void ToProto(const absl::StatusOr<CandidateScore>& outcome, v1::SearchCandidateOutcome* proto);
absl::StatusOr<CandidateScore> FromProto(const v1::SearchCandidateOutcome& proto);

// ---- requests the client sends, built from core types ------------------------------------

v1::ScoreRequest ScoreRequestOf(const Dataset& data, const std::vector<KernelExpr>& kernels,
                                const ScoreOptions& options);
v1::SearchRequest SearchRequestOf(const Dataset& data, const SearchOptions& options);
v1::SubmitEvidenceRequest SubmitEvidenceRequestOf(const Dataset& data, const KernelExpr& kernel,
                                                  const EvidenceOptions& options);
void ToProto(const Progress& progress, v1::Progress* proto);
Progress FromProto(const v1::Progress& proto);

// ---- status ------------------------------------------------------------------------------------

// INVALID_ARGUMENT "<field>: <description>" carrying a google.rpc.BadRequest payload.
absl::Status InvalidField(std::string_view field, std::string_view description);
// INVALID_ARGUMENT for several violations at once. The reply is bounded whatever the request
// (it travels in gRPC trailers, which peers cap at 8 KiB by default): at most
// kMaxReportedViolations violations and kMaxReportedViolationBytes of field names and
// descriptions, each field cut to kMaxViolationFieldBytes and each description to
// kMaxViolationDescriptionBytes (at a UTF-8 boundary, marked "…"); when some are left out, a
// last violation of field "request" says how many ("199980 more violations not listed"). The
// message lists the violations reported, "field: description; ...".
absl::Status InvalidFields(const std::vector<std::pair<std::string, std::string>>& violations);
inline constexpr size_t kMaxReportedViolations = 20;
inline constexpr size_t kMaxReportedViolationBytes = 2048;
inline constexpr size_t kMaxViolationFieldBytes = 120;
inline constexpr size_t kMaxViolationDescriptionBytes = 240;
// Adds a google.rpc.ErrorInfo payload (reason such as "QUEUE_FULL", domain "gpsel").
absl::Status WithErrorInfo(absl::Status status, std::string_view reason);

// Field violations carried by a status (empty when none).
std::vector<std::pair<std::string, std::string>> FieldViolations(const absl::Status& status);
// ErrorInfo reason carried by a status ("" when none).
std::string ErrorReason(const absl::Status& status);

// absl::Status -> grpc::Status; payloads of the known detail types become google.rpc.Status
// details in the binary trailer.
grpc::Status ToGrpcStatus(const absl::Status& status);
// grpc::Status -> absl::Status, decoding google.rpc.Status details back into payloads.
absl::Status FromGrpcStatus(const grpc::Status& status);

// The payload type URLs used above.
inline constexpr char kBadRequestTypeUrl[] = "type.googleapis.com/google.rpc.BadRequest";
inline constexpr char kErrorInfoTypeUrl[] = "type.googleapis.com/google.rpc.ErrorInfo";

}  // namespace gpsel::bridge

#endif  // GPSEL_BRIDGE_CONVERT_H_
