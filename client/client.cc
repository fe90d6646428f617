// gpsel::Client; see client.h.
#include "gpsel/client/client.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/proto/bridge/convert.h"

namespace gpsel {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string RandomRequestId() {
  std::random_device device;
  std::mt19937_64 generator((static_cast<uint64_t>(device()) << 32) ^ device() ^
                            static_cast<uint64_t>(
                                std::chrono::steady_clock::now().time_since_epoch().count()));
  return absl::StrFormat("cli-%016x%016x", generator(), generator());
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

// The status of a finished job: OK for SUCCEEDED, its error otherwise.
absl::Status JobOutcome(const v1::Job& job) {
  if (job.state() == v1::JOB_STATE_SUCCEEDED) return absl::OkStatus();
  const int code = job.error().code() != 0 ? job.error().code()
                                           : static_cast<int>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code),
                      absl::StrCat("job ", job.name(), " ",
                                   job.state() == v1::JOB_STATE_CANCELLED ? "was cancelled"
                                                                          : "failed",
                                   job.error().message().empty() ? "" : ": ",
                                   job.error().message()));
}

}  // namespace

void ClientOptions::ApplyEnvironment() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value ? value : "";
  };
  if (auth_token.empty()) auth_token = env("GPSEL_AUTH_TOKEN");
  if (tls_ca_file.empty()) tls_ca_file = env("GPSEL_TLS_CA");
  if (tls_cert_file.empty()) tls_cert_file = env("GPSEL_TLS_CERT");
  if (tls_key_file.empty()) tls_key_file = env("GPSEL_TLS_KEY");
  if (env("GPSEL_TLS") == "1") tls = true;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.target.empty()) {
    return absl::InvalidArgumentError("--server: give the server address as HOST:PORT");
  }
  if (options.max_attempts < 1) options.max_attempts = 1;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.tls || !options.tls_ca_file.empty() || !options.tls_cert_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadFile(options.tls_ca_file, "TLS CA");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
      absl::StatusOr<std::string> cert = ReadFile(options.tls_cert_file, "TLS client certificate");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadFile(options.tls_key_file, "TLS client key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  std::unique_ptr<Client> client(new Client());
  client->options_ = std::move(options);
  client->channel_ = grpc::CreateCustomChannel(client->options_.target, credentials, args);
  client->stub_ = v1::ModelSelectionService::NewStub(client->channel_);
  client->health_ = grpc::health::v1::Health::NewStub(client->channel_);
  return client;
}

void Client::Prepare(grpc::ClientContext* context, absl::Time deadline) const {
  if (deadline != absl::InfiniteFuture()) context->set_deadline(absl::ToChronoTime(deadline));
  if (!options_.auth_token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.auth_token);
  }
}

absl::Status Client::CallWithRetries(
    const std::function<grpc::Status(grpc::ClientContext*)>& call) const {
  const absl::Time deadline = options_.timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + options_.timeout;
  absl::Duration backoff = options_.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    Prepare(&context, deadline);
    const grpc::Status status = call(&context);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || attempt >= options_.max_attempts ||
        absl::Now() + backoff >= deadline) {
      return bridge::FromGrpcStatus(status);
    }
    // Full jitter keeps many clients from retrying in lockstep after a restart.
    static thread_local std::mt19937_64 jitter(std::random_device{}());
    const double fraction = std::uniform_real_distribution<double>(0.5, 1.0)(jitter);
    absl::SleepFor(backoff * fraction);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

template <typename Request, typename Response>
absl::StatusOr<Response> Client::Unary(
    const Request& request,
    grpc::Status (v1::ModelSelectionService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                         Response*)) const {
  Response response;
  absl::Status status = CallWithRetries([&](grpc::ClientContext* context) {
    response.Clear();
    return (stub_.get()->*rpc)(context, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::ScoreResponse> Client::Score(const v1::ScoreRequest& request) {
  return Unary(request, &v1::ModelSelectionService::Stub::Score);
}

absl::StatusOr<v1::SearchResult> Client::Search(
    const v1::SearchRequest& request,
    const std::function<void(const v1::Progress&)>& on_progress) {
  const absl::Time deadline = options_.timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + options_.timeout;
  absl::Duration backoff = options_.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    Prepare(&context, deadline);
    std::unique_ptr<grpc::ClientReader<v1::SearchResponse>> reader =
        stub_->Search(&context, request);
    v1::SearchResponse event;
    std::optional<v1::SearchResult> result;
    bool received = false;
    while (reader->Read(&event)) {
      received = true;
      if (event.has_progress() && on_progress) on_progress(event.progress());
      if (event.has_result()) result = std::move(*event.mutable_result());
    }
    const grpc::Status status = reader->Finish();
    if (status.ok()) {
      if (!result) return absl::InternalError("search stream ended without a result");
      return *std::move(result);
    }
    // A stream is retried only when nothing arrived: a restarted search starts from scratch.
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || received ||
        attempt >= options_.max_attempts || absl::Now() + backoff >= deadline) {
      return bridge::FromGrpcStatus(status);
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::StatusOr<v1::PredictResponse> Client::Predict(const v1::PredictRequest& request) {
  return Unary(request, &v1::ModelSelectionService::Stub::Predict);
}

// Every Submit call: a random request_id when none is given, so that the retries of one call
// never create a second job (the key is what makes a retried submit safe).
template <typename Request, typename Response>
absl::StatusOr<Response> Client::Submit(
    Request request,
    grpc::Status (v1::ModelSelectionService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                         Response*)) {
  if (request.request_id().empty()) request.set_request_id(RandomRequestId());
  return Unary(request, rpc);
}

absl::StatusOr<v1::SubmitEvidenceResponse> Client::SubmitEvidence(
    v1::SubmitEvidenceRequest request) {
  return Submit(std::move(request), &v1::ModelSelectionService::Stub::SubmitEvidence);
}

absl::StatusOr<v1::SubmitSearchResponse> Client::SubmitSearch(v1::SubmitSearchRequest request) {
  return Submit(std::move(request), &v1::ModelSelectionService::Stub::SubmitSearch);
}

absl::StatusOr<v1::SubmitScoreResponse> Client::SubmitScore(v1::SubmitScoreRequest request) {
  return Submit(std::move(request), &v1::ModelSelectionService::Stub::SubmitScore);
}

absl::StatusOr<v1::Job> Client::GetJob(const std::string& name) {
  v1::GetJobRequest request;
  request.set_name(name);
  absl::StatusOr<v1::GetJobResponse> response =
      Unary(request, &v1::ModelSelectionService::Stub::GetJob);
  if (!response.ok()) return response.status();
  return response->job();
}

absl::StatusOr<v1::Job> Client::CancelJob(const std::string& name) {
  v1::CancelJobRequest request;
  request.set_name(name);
  absl::StatusOr<v1::CancelJobResponse> response =
      Unary(request, &v1::ModelSelectionService::Stub::CancelJob);
  if (!response.ok()) return response.status();
  return response->job();
}

absl::StatusOr<v1::ListJobsResponse> Client::ListJobs(const v1::ListJobsRequest& request) {
  return Unary(request, &v1::ModelSelectionService::Stub::ListJobs);
}

absl::StatusOr<v1::Job> Client::WaitJob(const std::string& name,
                                        const std::function<void(const v1::Job&)>& on_update,
                                        absl::Duration wait_limit) {
  const absl::Time deadline =
      wait_limit == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + wait_limit;
  v1::WatchJobRequest request;
  request.set_name(name);
  absl::Duration backoff = options_.initial_backoff;
  int consecutive_failures = 0;
  for (;;) {
    grpc::ClientContext context;
    Prepare(&context, deadline);
    std::unique_ptr<grpc::ClientReader<v1::WatchJobResponse>> reader =
        stub_->WatchJob(&context, request);
    v1::WatchJobResponse event;
    std::optional<v1::Job> last;
    while (reader->Read(&event)) {
      last = event.job();
      consecutive_failures = 0;
      backoff = options_.initial_backoff;
      if (on_update) on_update(*last);
    }
    const grpc::Status status = reader->Finish();
    if (last && IsTerminal(last->state())) return *std::move(last);
    // The server went away (restart, drain) or ended the stream early: reconnect and go on.
    const bool retryable = status.ok() || status.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (!retryable) return bridge::FromGrpcStatus(status);
    if (++consecutive_failures > 60 || absl::Now() + backoff >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("gave up waiting for ", name, ": ",
                                                      status.error_message()));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Client::Health(
    const std::string& service) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  absl::Status status = CallWithRetries([&](grpc::ClientContext* context) {
    return health_->Check(context, request, &response);
  });
  if (!status.ok()) return status;
  return response.status();
}

// A request built from core types, its dataset's missing-value policy from the options.
template <typename Request>
Request Client::WithMissing(Request request) const {
  request.mutable_dataset()->set_missing(options_.missing_values == MissingValues::kDrop
                                             ? v1::MISSING_VALUES_DROP
                                             : v1::MISSING_VALUES_ERROR);
  return request;
}

absl::StatusOr<std::vector<KernelScore>> Client::Score(const Dataset& data,
                                                       const std::vector<KernelExpr>& kernels,
                                                       const ScoreOptions& options) {
  absl::StatusOr<v1::ScoreResponse> response = Score(WithMissing(bridge::ScoreRequestOf(data, kernels, options)));
  if (!response.ok()) return response.status();
  std::vector<KernelScore> scores;
  for (const v1::KernelScore& score : response->scores()) {
    scores.push_back(bridge::FromProto(score));
  }
  return scores;
}

absl::StatusOr<SearchResult> Client::Search(const Dataset& data, const SearchOptions& options,
                                            const ProgressCallback& progress) {
  absl::StatusOr<v1::SearchResult> result =
      Search(WithMissing(bridge::SearchRequestOf(data, options)), [&progress](const v1::Progress& p) {
        if (progress) (void)progress(bridge::FromProto(p));
      });
  if (!result.ok()) return result.status();
  return bridge::FromProto(*result);
}

absl::StatusOr<PredictResult> Client::Predict(const Dataset& data, const KernelExpr& kernel,
                                              const Eigen::MatrixXd& x_new,
                                              const PredictOptions& options) {
  absl::StatusOr<v1::PredictResponse> response =
      Predict(WithMissing(bridge::PredictRequestOf(data, kernel, x_new, options)));
  if (!response.ok()) return response.status();
  return bridge::FromProto(*response);
}

absl::StatusOr<std::string> Client::SubmitEvidence(const Dataset& data, const KernelExpr& kernel,
                                                   const EvidenceOptions& options) {
  absl::StatusOr<v1::SubmitEvidenceResponse> response =
      SubmitEvidence(WithMissing(bridge::SubmitEvidenceRequestOf(data, kernel, options)));
  if (!response.ok()) return response.status();
  return response->job().name();
}

absl::StatusOr<v1::Job> Client::FollowJob(const std::string& name,
                                          const ProgressCallback& progress) {
  absl::Status stop = absl::OkStatus();
  bool cancel_sent = false;
  absl::StatusOr<v1::Job> job = WaitJob(name, [&](const v1::Job& update) {
    if (!progress || !stop.ok()) return;
    stop = progress(bridge::FromProto(update.progress()));
    if (!stop.ok() && !cancel_sent) {
      cancel_sent = true;
      (void)CancelJob(name);  // the job then ends CANCELLED and the wait returns
    }
  });
  if (!job.ok()) return job.status();
  if (!stop.ok()) return stop;
  GPSEL_RETURN_IF_ERROR(JobOutcome(*job));
  return job;
}

absl::StatusOr<EvidenceResult> Client::Evidence(const Dataset& data, const KernelExpr& kernel,
                                                const EvidenceOptions& options,
                                                const ProgressCallback& progress) {
  absl::StatusOr<std::string> name = SubmitEvidence(data, kernel, options);
  if (!name.ok()) return name.status();
  absl::StatusOr<v1::Job> job = FollowJob(*name, progress);
  if (!job.ok()) return job.status();
  return bridge::FromProto(job->evidence_result());
}

absl::StatusOr<std::string> Client::SubmitSearch(const Dataset& data,
                                                 const SearchOptions& options) {
  v1::SubmitSearchRequest request;
  *request.mutable_search() = WithMissing(bridge::SearchRequestOf(data, options));
  absl::StatusOr<v1::SubmitSearchResponse> response = SubmitSearch(std::move(request));
  if (!response.ok()) return response.status();
  return response->job().name();
}

absl::StatusOr<SearchResult> Client::SearchAsJob(const Dataset& data, const SearchOptions& options,
                                                 const ProgressCallback& progress) {
  absl::StatusOr<std::string> name = SubmitSearch(data, options);
  if (!name.ok()) return name.status();
  absl::StatusOr<v1::Job> job = FollowJob(*name, progress);
  if (!job.ok()) return job.status();
  return bridge::FromProto(job->search_result());
}

absl::StatusOr<std::string> Client::SubmitScore(const Dataset& data,
                                                const std::vector<KernelExpr>& kernels,
                                                const ScoreOptions& options) {
  v1::SubmitScoreRequest request;
  *request.mutable_score() = WithMissing(bridge::ScoreRequestOf(data, kernels, options));
  absl::StatusOr<v1::SubmitScoreResponse> response = SubmitScore(std::move(request));
  if (!response.ok()) return response.status();
  return response->job().name();
}

absl::StatusOr<std::vector<KernelScore>> Client::ScoreAsJob(const Dataset& data,
                                                            const std::vector<KernelExpr>& kernels,
                                                            const ScoreOptions& options,
                                                            const ProgressCallback& progress) {
  absl::StatusOr<std::string> name = SubmitScore(data, kernels, options);
  if (!name.ok()) return name.status();
  absl::StatusOr<v1::Job> job = FollowJob(*name, progress);
  if (!job.ok()) return job.status();
  std::vector<KernelScore> scores;
  for (const v1::KernelScore& score : job->score_result().scores()) {
    scores.push_back(bridge::FromProto(score));
  }
  return scores;
}

}  // namespace gpsel
