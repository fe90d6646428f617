// libFuzzer target: everything gpsel-server does to a request before any numerics, for every
// request message of proto/gpsel/v1/model_selection.proto. The first input byte picks the message
// type, the rest is its wire encoding; bytes that do not parse are dropped (gRPC rejects them
// before the service sees them). Then the bridge's conversions (proto/bridge/convert.h) and validation
// (server/validation/validation.h, default ServiceLimits) for Score, Search, Predict, SubmitEvidence,
// SubmitSearch (with its candidate tasks' encoding) and SubmitScore;
// the job-name and ListJobs checks of server/service/service.cc for the job RPCs. No fits are run.
// Invariants:
//   - OK or INVALID_ARGUMENT only, and every INVALID_ARGUMENT carries field violations that
//     survive the trip to the client (bridge::ToGrpcStatus, then FromGrpcStatus);
//   - a validated request holds a valid dataset, kernels that read existing columns and options
//     whose own Validate() passes;
//   - the request a client builds from validated core types (ScoreRequestOf, SearchRequestOf,
//     PredictRequestOf) validates again; a validated evidence request, stored with its kernel
//     in canonical form as SubmitEvidence does, validates again to the same kernel and data
//     (the job runner re-validates stored requests, server/jobs/evidence_job.cc);
//   - an accepted job name round-trips through JobName; an accepted page token is ≥ 0.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/search.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/server/jobs/job_kind.h"
#include "gpsel/server/store/job_store_internal.h"
#include "gpsel/server/validation/validation.h"
#include "gpsel/v1/job_tasks.pb.h"
#include "gpsel/v1/model_selection.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/silence_protobuf_log.h"

namespace {

using gpsel::fuzz::StatusText;
namespace v1 = gpsel::v1;

const gpsel::ServiceLimits& Limits() {
  static const gpsel::ServiceLimits limits;
  return limits;
}

// A rejection is INVALID_ARGUMENT with a field list that a client can still read after the
// status went through gRPC's trailers.
void CheckRejection(const absl::Status& status) {
  GPSEL_FUZZ_CHECK_OK_OR_INVALID(status);
  if (status.ok()) return;
  const auto violations = gpsel::bridge::FieldViolations(status);
  GPSEL_FUZZ_CHECK(!violations.empty(), StatusText(status));
  const absl::Status received = gpsel::bridge::FromGrpcStatus(gpsel::bridge::ToGrpcStatus(status));
  GPSEL_FUZZ_CHECK(received.code() == status.code() && received.message() == status.message(),
                   StatusText(received));
  GPSEL_FUZZ_CHECK(gpsel::bridge::FieldViolations(received) == violations, StatusText(status));
}

void CheckDataset(const gpsel::Dataset& data) {
  gpsel::DatasetLimits limits;
  limits.max_points = Limits().max_points;
  limits.max_dims = Limits().max_dims;
  const absl::Status s = gpsel::ValidateDataset(data, limits);
  GPSEL_FUZZ_CHECK(s.ok(), StatusText(s));
}

void CheckKernelFits(const gpsel::KernelExpr& kernel, const gpsel::Dataset& data) {
  GPSEL_FUZZ_CHECK(gpsel::MaxActiveDim(kernel) < data.num_dims(), gpsel::ToString(kernel));
}

void Score(const v1::ScoreRequest& request) {
  CheckRejection(gpsel::bridge::ScoreOptionsFromProto(request).status());
  CheckRejection(gpsel::bridge::FitSettingsFromProto(request.fit(), "fit").status());
  absl::StatusOr<gpsel::ValidScore> valid = gpsel::ValidateScoreRequest(request, Limits());
  CheckRejection(valid.status());
  if (!valid.ok()) return;
  CheckDataset(valid->data);
  GPSEL_FUZZ_CHECK(static_cast<int>(valid->kernels.size()) == request.kernels_size(), "kernels");
  for (const gpsel::KernelExpr& kernel : valid->kernels) CheckKernelFits(kernel, valid->data);
  GPSEL_FUZZ_CHECK(valid->options.Validate().ok(), "options");
  const v1::ScoreRequest rebuilt =
      gpsel::bridge::ScoreRequestOf(valid->data, valid->kernels, valid->options);
  absl::StatusOr<gpsel::ValidScore> again = gpsel::ValidateScoreRequest(rebuilt, Limits());
  GPSEL_FUZZ_CHECK(again.ok(), StatusText(again.status()));
  GPSEL_FUZZ_CHECK(again->kernels == valid->kernels, "kernels");
}

void Search(const v1::SearchRequest& request) {
  CheckRejection(gpsel::bridge::SearchOptionsFromProto(request).status());
  absl::StatusOr<gpsel::ValidSearch> valid = gpsel::ValidateSearchRequest(request, Limits());
  CheckRejection(valid.status());
  if (!valid.ok()) return;
  CheckDataset(valid->data);
  for (const gpsel::KernelExpr& base : valid->options.base_kernels) {
    GPSEL_FUZZ_CHECK(base.is_base(), gpsel::ToString(base));
    CheckKernelFits(base, valid->data);
  }
  GPSEL_FUZZ_CHECK(valid->options.Validate().ok(), "options");
  const v1::SearchRequest rebuilt = gpsel::bridge::SearchRequestOf(valid->data, valid->options);
  absl::StatusOr<gpsel::ValidSearch> again = gpsel::ValidateSearchRequest(rebuilt, Limits());
  GPSEL_FUZZ_CHECK(again.ok(), StatusText(again.status()));
  GPSEL_FUZZ_CHECK(again->options.base_kernels == valid->options.base_kernels, "base_kernels");
}

void Predict(const v1::PredictRequest& request) {
  CheckRejection(gpsel::bridge::FitSettingsFromProto(request.fit(), "fit").status());
  CheckRejection(gpsel::bridge::FromProto(request.x_new(), "x_new").status());
  absl::StatusOr<gpsel::ValidPredict> valid = gpsel::ValidatePredictRequest(request, Limits());
  CheckRejection(valid.status());
  if (!valid.ok()) return;
  CheckDataset(valid->data);
  CheckKernelFits(valid->kernel, valid->data);
  const std::string shape = absl::StrCat(valid->x_new.rows(), "×", valid->x_new.cols());
  GPSEL_FUZZ_CHECK(valid->x_new.rows() >= 1 && valid->x_new.rows() <= Limits().max_predict_points,
                   shape);
  GPSEL_FUZZ_CHECK(valid->x_new.cols() == valid->data.num_dims(), shape);
  GPSEL_FUZZ_CHECK(valid->x_new.array().isFinite().all(), shape);
  GPSEL_FUZZ_CHECK(valid->options.Validate().ok(), "options");
  const v1::PredictRequest rebuilt =
      gpsel::bridge::PredictRequestOf(valid->data, valid->kernel, valid->x_new, valid->options);
  absl::StatusOr<gpsel::ValidPredict> again = gpsel::ValidatePredictRequest(rebuilt, Limits());
  GPSEL_FUZZ_CHECK(again.ok(), StatusText(again.status()));
  GPSEL_FUZZ_CHECK(again->kernel == valid->kernel, gpsel::ToString(valid->kernel));
}

void SubmitEvidence(const v1::SubmitEvidenceRequest& request) {
  CheckRejection(
      gpsel::bridge::FitSettingsFromProto(request.options().fit(), "options.fit").status());
  (void)gpsel::bridge::FromProto(request.options());  // the stored job's decoding; any input
  absl::StatusOr<gpsel::ValidEvidence> valid = gpsel::ValidateEvidenceRequest(request, Limits());
  CheckRejection(valid.status());
  if (!valid.ok()) return;
  CheckDataset(valid->data);
  CheckKernelFits(valid->kernel, valid->data);
  GPSEL_FUZZ_CHECK(valid->options.Validate().ok(), "options");
  // What SubmitEvidence stores (server/service/service.cc) and the job runner reads back.
  v1::SubmitEvidenceRequest stored = request;
  stored.set_kernel(gpsel::ToString(valid->kernel));
  v1::SubmitEvidenceRequest read;
  GPSEL_FUZZ_CHECK(read.ParseFromString(stored.SerializeAsString()), "stored request");
  absl::StatusOr<gpsel::ValidEvidence> again = gpsel::ValidateEvidenceRequest(read, Limits());
  GPSEL_FUZZ_CHECK(again.ok(), StatusText(again.status()));
  GPSEL_FUZZ_CHECK(again->kernel == valid->kernel, stored.kernel());
  GPSEL_FUZZ_CHECK(again->data.x == valid->data.x && again->data.y == valid->data.y, "data");
}

// SubmitSearch: the wrapped search request (server/service/service.cc validates it as Search does); a
// validated one's step-1 candidate tasks (server/jobs/search_job.cc) decode back to their candidates.
void SubmitSearch(const v1::SubmitSearchRequest& request) {
  Search(request.search());
  absl::StatusOr<gpsel::ValidSearch> valid = gpsel::ValidateSearchRequest(request.search(), Limits());
  if (!valid.ok()) return;
  const std::vector<gpsel::KernelExpr> bases = valid->options.base_kernels.empty()
                                                   ? gpsel::DefaultBaseKernels()
                                                   : valid->options.base_kernels;
  for (const gpsel::KernelExpr& base : bases) {
    gpsel::CandidateToScore candidate;
    candidate.kernel = base;
    candidate.seed = gpsel::CandidateSeed(valid->options.score.fit.seed, gpsel::ToString(base));
    v1::SearchCandidateTask read;
    GPSEL_FUZZ_CHECK(
        read.ParseFromString(
            gpsel::bridge::SearchCandidateTaskOf(request.search(), candidate).SerializeAsString()),
        "stored task");
    absl::StatusOr<gpsel::CandidateToScore> decoded = gpsel::bridge::FromProto(read);
    GPSEL_FUZZ_CHECK(decoded.ok(), StatusText(decoded.status()));
    GPSEL_FUZZ_CHECK(decoded->kernel == base && decoded->seed == candidate.seed &&
                         !decoded->warm_start.has_value(),
                     gpsel::ToString(base));
  }
}

// GetJob, WatchJob and CancelJob: the job name (server/service/service.cc).
void JobName(const std::string& name) {
  absl::StatusOr<std::string> id = gpsel::JobIdFromName(name, "name");
  CheckRejection(id.status());
  if (!id.ok()) return;
  GPSEL_FUZZ_CHECK(!id->empty() && id->find('/') == std::string::npos, *id);
  absl::StatusOr<std::string> again = gpsel::JobIdFromName(gpsel::JobName(*id), "name");
  GPSEL_FUZZ_CHECK(again.ok() && *again == *id, *id);
}

// ListJobs: the service's checks, then the store's reading of page size and token
// (server/store/job_store_common.cc), which both backends do before querying.
void ListJobs(const v1::ListJobsRequest& request) {
  if (request.page_size() < 0 || !v1::JobState_IsValid(request.state())) return;
  const std::optional<gpsel::JobState> state = gpsel::FromProto(request.state());
  GPSEL_FUZZ_CHECK(state.has_value() == (request.state() != v1::JOB_STATE_UNSPECIFIED),
                   absl::StrCat(request.state()));
  if (state) GPSEL_FUZZ_CHECK(gpsel::ToProto(*state) == request.state(), "state");
  namespace jsi = gpsel::job_store_internal;
  absl::StatusOr<int> page_size = jsi::EffectivePageSize(request.page_size());
  GPSEL_FUZZ_CHECK(
      page_size.ok() && *page_size >= 1 && *page_size <= gpsel::ListJobsRequest::kMaxPageSize,
      absl::StrCat(request.page_size()));
  if (request.page_token().empty()) return;
  absl::StatusOr<int64_t> after = jsi::DecodePageToken(request.page_token());
  GPSEL_FUZZ_CHECK_OK_OR_INVALID(after.status());
  if (after.ok()) GPSEL_FUZZ_CHECK(*after >= 0, request.page_token());
}

template <typename Message>
bool Parse(const uint8_t* data, size_t size, Message* message) {
  return message->ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t kind = data[0];
  ++data;
  --size;
  switch (kind % 10) {
    case 0: {
      v1::ScoreRequest request;
      if (Parse(data, size, &request)) Score(request);
      break;
    }
    case 1: {
      v1::SearchRequest request;
      if (Parse(data, size, &request)) Search(request);
      break;
    }
    case 2: {
      v1::PredictRequest request;
      if (Parse(data, size, &request)) Predict(request);
      break;
    }
    case 3: {
      v1::SubmitEvidenceRequest request;
      if (Parse(data, size, &request)) SubmitEvidence(request);
      break;
    }
    case 4: {
      v1::GetJobRequest request;
      if (Parse(data, size, &request)) JobName(request.name());
      break;
    }
    case 5: {
      v1::WatchJobRequest request;
      if (Parse(data, size, &request)) JobName(request.name());
      break;
    }
    case 6: {
      v1::CancelJobRequest request;
      if (Parse(data, size, &request)) JobName(request.name());
      break;
    }
    case 7: {
      v1::ListJobsRequest request;
      if (Parse(data, size, &request)) ListJobs(request);
      break;
    }
    case 8: {
      v1::SubmitSearchRequest request;
      if (Parse(data, size, &request)) SubmitSearch(request);
      break;
    }
    case 9: {
      // SubmitScore validates the wrapped request as Score does.
      v1::SubmitScoreRequest request;
      if (Parse(data, size, &request)) Score(request.score());
      break;
    }
  }
  return 0;
}
