// gpsel::Client: the C++ client library of gpsel-server (gpsel.v1.ModelSelectionService).
//
// Every call has a deadline (ClientOptions::timeout), unary calls are retried with exponential
// backoff on UNAVAILABLE (server restarting or draining; the Submit calls are safe to retry because
// they carry an idempotency key), and errors come back as absl::Status with the server's
// google.rpc details as payloads (see proto/bridge/convert.h: FieldViolations, ErrorReason). Results
// are offered both as protobuf messages and as core types, so a remote result prints with the
// same code as an in-process one.
//
//   gpsel::ClientOptions options;
//   options.target = "127.0.0.1:50051";
//   auto client = gpsel::Client::Create(options);
//   absl::StatusOr<std::vector<gpsel::KernelScore>> scores =
//       (*client)->Score(data, {kernel}, score_options);
#ifndef GPSEL_CLIENT_CLIENT_H_
#define GPSEL_CLIENT_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/v1/model_selection.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace gpsel {

struct ClientOptions {
  std::string target;                            // HOST:PORT (or any gRPC target URI)
  absl::Duration timeout = absl::Minutes(10);    // deadline of each call; InfiniteDuration = none
  int max_attempts = 4;                          // tries of a unary call on UNAVAILABLE (1 = once)
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(3);
  std::string auth_token;                        // sent as "authorization: Bearer <token>"
  bool tls = false;                              // TLS with the system roots or tls_ca_file
  std::string tls_ca_file;                       // PEM roots to trust (implies tls)
  std::string tls_cert_file;                     // client certificate for mutual TLS (PEM)
  std::string tls_key_file;
  std::string tls_server_name;                   // override the name checked in the certificate
  int max_message_bytes = 64 << 20;
  // What the server does with points of a core Dataset holding a NaN (a missing value) in the
  // core-typed calls below (gpsel.v1.Dataset.missing): an error naming them (the default) or
  // leave them out. The protobuf API sends requests as given.
  MissingValues missing_values = MissingValues::kError;

  // Fills token and TLS settings from GPSEL_AUTH_TOKEN, GPSEL_TLS_CA, GPSEL_TLS_CERT,
  // GPSEL_TLS_KEY, GPSEL_TLS (=1) when they are set; used by the CLI's remote hooks.
  void ApplyEnvironment();
};

class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);

  // ---- protobuf API ----
  absl::StatusOr<v1::ScoreResponse> Score(const v1::ScoreRequest& request);
  // Streams progress events to `on_progress` (may be empty) and returns the result event.
  absl::StatusOr<v1::SearchResult> Search(
      const v1::SearchRequest& request,
      const std::function<void(const v1::Progress&)>& on_progress = nullptr);
  absl::StatusOr<v1::PredictResponse> Predict(const v1::PredictRequest& request);
  // A random request_id is filled in when empty, so retries never create a second job.
  absl::StatusOr<v1::SubmitEvidenceResponse> SubmitEvidence(v1::SubmitEvidenceRequest request);
  absl::StatusOr<v1::SubmitSearchResponse> SubmitSearch(v1::SubmitSearchRequest request);
  absl::StatusOr<v1::SubmitScoreResponse> SubmitScore(v1::SubmitScoreRequest request);
  absl::StatusOr<v1::Job> GetJob(const std::string& name);
  absl::StatusOr<v1::Job> CancelJob(const std::string& name);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request);
  // Follows a job with WatchJob (reconnecting when the stream breaks, e.g. across a server
  // restart) until it is terminal; `on_update` sees every change. Not bounded by `timeout`:
  // pass `wait_limit` (InfiniteDuration = wait for ever).
  absl::StatusOr<v1::Job> WaitJob(const std::string& name,
                                  const std::function<void(const v1::Job&)>& on_update = nullptr,
                                  absl::Duration wait_limit = absl::InfiniteDuration());
  // Standard health check of `service` ("" = the whole server).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health(
      const std::string& service = "");

  // ---- core-typed API (what the CLI prints) ----
  absl::StatusOr<std::vector<KernelScore>> Score(const Dataset& data,
                                                 const std::vector<KernelExpr>& kernels,
                                                 const ScoreOptions& options);
  absl::StatusOr<SearchResult> Search(const Dataset& data, const SearchOptions& options,
                                      const ProgressCallback& progress = nullptr);
  // FitAndPredict on the server (same options and result as core/predict.h).
  absl::StatusOr<PredictResult> Predict(const Dataset& data, const KernelExpr& kernel,
                                        const Eigen::MatrixXd& x_new,
                                        const PredictOptions& options);
  // Submits and returns the job name ("jobs/{id}").
  absl::StatusOr<std::string> SubmitEvidence(const Dataset& data, const KernelExpr& kernel,
                                             const EvidenceOptions& options);
  // Submits, follows with progress, and returns the result (a failed or cancelled job is its
  // error status). When `progress` returns non-OK the job is cancelled on the server.
  absl::StatusOr<EvidenceResult> Evidence(const Dataset& data, const KernelExpr& kernel,
                                          const EvidenceOptions& options,
                                          const ProgressCallback& progress = nullptr);

  // A search or a multi-kernel score as a job on the server's shared queue, whose candidates
  // (kernels) any replica sharing its job store may fit: the same result as Search / Score.
  // Submit* return the job name; the others submit, follow with progress and return the result
  // as Evidence does.
  absl::StatusOr<std::string> SubmitSearch(const Dataset& data, const SearchOptions& options);
  absl::StatusOr<SearchResult> SearchAsJob(const Dataset& data, const SearchOptions& options,
                                           const ProgressCallback& progress = nullptr);
  absl::StatusOr<std::string> SubmitScore(const Dataset& data,
                                          const std::vector<KernelExpr>& kernels,
                                          const ScoreOptions& options);
  absl::StatusOr<std::vector<KernelScore>> ScoreAsJob(const Dataset& data,
                                                      const std::vector<KernelExpr>& kernels,
                                                      const ScoreOptions& options,
                                                      const ProgressCallback& progress = nullptr);

  const ClientOptions& options() const { return options_; }

 private:
  Client() = default;
  // `request` with its dataset's `missing` set from options_.missing_values.
  template <typename Request>
  Request WithMissing(Request request) const;
  void Prepare(grpc::ClientContext* context, absl::Time deadline) const;
  // Runs `call` until it succeeds, fails with a non-retryable code, or attempts/deadline run out.
  absl::Status CallWithRetries(const std::function<grpc::Status(grpc::ClientContext*)>& call) const;
  // One unary RPC of the stub (`rpc`, e.g. &Stub::GetJob) with CallWithRetries: its response,
  // or the error of the last attempt.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Unary(
      const Request& request,
      grpc::Status (v1::ModelSelectionService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                           Response*)) const;
  template <typename Request, typename Response>
  absl::StatusOr<Response> Submit(
      Request request,
      grpc::Status (v1::ModelSelectionService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                           Response*));
  // Waits for job `name`, passing its progress to `progress`; cancels the job when `progress`
  // returns non-OK. The SUCCEEDED job, or the job's (or the progress callback's) error.
  absl::StatusOr<v1::Job> FollowJob(const std::string& name, const ProgressCallback& progress);

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ModelSelectionService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace gpsel

#endif  // GPSEL_CLIENT_CLIENT_H_
