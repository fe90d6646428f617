// RemoteBackend: every command on a gpsel-server through the client library (client/client.h),
// plus the connection flags shared by all commands.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gpsel/client/cli/backend.h"
#include "gpsel/proto/bridge/convert.h"

namespace gpsel::cli {
namespace {

class RemoteBackend : public Backend {
 public:
  explicit RemoteBackend(std::unique_ptr<Client> client) : client_(std::move(client)) {}

  std::string Describe() const override { return client_->options().target; }

  absl::StatusOr<std::vector<KernelScore>> Score(const Dataset& data,
                                                 const std::vector<KernelExpr>& kernels,
                                                 const ScoreOptions& options,
                                                 const ProgressCallback&) override {
    return client_->Score(data, kernels, options);
  }

  absl::StatusOr<SearchResult> Search(const Dataset& data, const SearchOptions& options,
                                      const ProgressCallback& progress) override {
    return client_->Search(data, options, progress);
  }

  absl::StatusOr<EvidenceResult> Evidence(const Dataset& data, const KernelExpr& kernel,
                                          const EvidenceOptions& options,
                                          const ProgressCallback& progress) override {
    return client_->Evidence(data, kernel, options, progress);
  }

  absl::StatusOr<v1::SubmitEvidenceResponse> SubmitEvidence(
      const Dataset& data, const KernelExpr& kernel, const EvidenceOptions& options) override {
    return client_->SubmitEvidence(bridge::SubmitEvidenceRequestOf(data, kernel, options));
  }

  absl::StatusOr<SearchResult> SearchAsJob(const Dataset& data, const SearchOptions& options,
                                           const ProgressCallback& progress) override {
    return client_->SearchAsJob(data, options, progress);
  }

  absl::StatusOr<v1::SubmitSearchResponse> SubmitSearch(const Dataset& data,
                                                        const SearchOptions& options) override {
    v1::SubmitSearchRequest request;
    *request.mutable_search() = bridge::SearchRequestOf(data, options);
    return client_->SubmitSearch(std::move(request));
  }

  absl::StatusOr<std::vector<KernelScore>> ScoreAsJob(const Dataset& data,
                                                      const std::vector<KernelExpr>& kernels,
                                                      const ScoreOptions& options,
                                                      const ProgressCallback& progress) override {
    return client_->ScoreAsJob(data, kernels, options, progress);
  }

  absl::StatusOr<v1::SubmitScoreResponse> SubmitScore(const Dataset& data,
                                                      const std::vector<KernelExpr>& kernels,
                                                      const ScoreOptions& options) override {
    v1::SubmitScoreRequest request;
    *request.mutable_score() = bridge::ScoreRequestOf(data, kernels, options);
    return client_->SubmitScore(std::move(request));
  }

  absl::StatusOr<PredictResult> Predict(const Dataset& data, const KernelExpr& kernel,
                                        const Eigen::MatrixXd& x_new,
                                        const PredictOptions& options,
                                        const ProgressCallback&) override {
    return client_->Predict(data, kernel, x_new, options);
  }

 private:
  std::unique_ptr<Client> client_;
};

}  // namespace

void AddRemoteFlags(CLI::App& sub, RemoteFlags& flags, bool server_required,
                    double default_timeout_seconds) {
  flags.timeout_seconds = default_timeout_seconds;
  auto* server = sub.add_option("--server", flags.server,
                                server_required
                                    ? "HOST:PORT of a gpsel-server"
                                    : "HOST:PORT of a gpsel-server (default: run in-process)");
  if (server_required) server->required();
  sub.add_option("--timeout", flags.timeout_seconds, "deadline of each call to the server, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub.add_option("--token-file", flags.token_file,
                 "file with the bearer token (default: $GPSEL_AUTH_TOKEN)");
  sub.add_flag("--tls", flags.tls, "connect with TLS (system roots unless --tls-ca)");
  sub.add_option("--tls-ca", flags.tls_ca, "PEM file of the CA to trust (implies --tls)");
}

void AddJobFlags(CLI::App& sub, JobFlags& flags, const std::string& parts) {
  sub.add_flag("--job", flags.job,
               absl::StrCat("with --server: run as a job on the server's shared queue, ", parts,
                            " spread over every replica sharing its job store, and wait for it "
                            "(the same result as without)"));
  sub.add_flag("--detach", flags.detach,
               "with --server: submit as a job (as --job) and print the job instead of waiting; "
               "follow it with `gpsel jobs wait`");
}

absl::Status CheckJobFlags(const JobFlags& flags, const RemoteFlags& remote) {
  if (flags.queued() && remote.server.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flags.detach ? "--detach" : "--job",
        ": needs --server (an in-process run has no job queue to leave it on)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Client>> Connect(const RemoteFlags& flags) {
  ClientOptions options;
  options.target = flags.server;
  options.timeout = absl::Seconds(flags.timeout_seconds);
  options.tls = flags.tls;
  options.tls_ca_file = flags.tls_ca;
  if (!flags.token_file.empty()) {
    std::ifstream in(flags.token_file);
    std::getline(in, options.auth_token);
    absl::StripTrailingAsciiWhitespace(&options.auth_token);
    if (options.auth_token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-file: '", flags.token_file, "' is missing or empty"));
    }
  }
  options.ApplyEnvironment();
  return Client::Create(options);
}

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const RemoteFlags& flags) {
  if (flags.server.empty()) {
    if (!flags.token_file.empty() || flags.tls || !flags.tls_ca.empty()) {
      return absl::InvalidArgumentError(
          "--token-file/--tls/--tls-ca: need --server (without it gpsel runs in-process)");
    }
    return MakeLocalBackend();
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags);
  if (!client.ok()) return client.status();
  return MakeRemoteBackend(*std::move(client));
}

std::unique_ptr<Backend> MakeRemoteBackend(std::unique_ptr<Client> client) {
  return std::make_unique<RemoteBackend>(std::move(client));
}

}  // namespace gpsel::cli
