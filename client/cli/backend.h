// Where a `gpsel` command runs: in-process on the numerical core (LocalBackend) or on a
// gpsel-server through the client library (RemoteBackend). Every command takes the same remote
// flags (--server --token-file --tls --tls-ca --timeout) and asks MakeBackend for one; the
// printers then see the same core types either way.
//
//   RemoteFlags remote;                 // AddRemoteFlags(sub, remote, /*server_required=*/false)
//   absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(remote);
//   absl::StatusOr<std::vector<KernelScore>> scores =
//       (*backend)->Score(data, kernels, options, /*progress=*/nullptr);
#ifndef GPSEL_CLI_BACKEND_H_
#define GPSEL_CLI_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "gpsel/client/client.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"

namespace gpsel::cli {

class Backend {
 public:
  virtual ~Backend() = default;
  // "in-process" or the server's address.
  virtual std::string Describe() const = 0;
  // ScoreKernels; an error names the kernel that failed.
  virtual absl::StatusOr<std::vector<KernelScore>> Score(const Dataset& data,
                                                         const std::vector<KernelExpr>& kernels,
                                                         const ScoreOptions& options,
                                                         const ProgressCallback& progress) = 0;
  virtual absl::StatusOr<SearchResult> Search(const Dataset& data, const SearchOptions& options,
                                              const ProgressCallback& progress) = 0;
  virtual absl::StatusOr<EvidenceResult> Evidence(const Dataset& data, const KernelExpr& kernel,
                                                  const EvidenceOptions& options,
                                                  const ProgressCallback& progress) = 0;
  // Submits an evidence job without waiting for it (remote only).
  virtual absl::StatusOr<v1::SubmitEvidenceResponse> SubmitEvidence(const Dataset& data,
                                                     const KernelExpr& kernel,
                                                     const EvidenceOptions& options) = 0;
  // A search or a multi-kernel score as a job on the server's shared queue (remote only): run
  // and waited for (…AsJob), or submitted without waiting (Submit…).
  virtual absl::StatusOr<SearchResult> SearchAsJob(const Dataset& data,
                                                   const SearchOptions& options,
                                                   const ProgressCallback& progress) = 0;
  virtual absl::StatusOr<v1::SubmitSearchResponse> SubmitSearch(const Dataset& data,
                                                                const SearchOptions& options) = 0;
  virtual absl::StatusOr<std::vector<KernelScore>> ScoreAsJob(
      const Dataset& data, const std::vector<KernelExpr>& kernels, const ScoreOptions& options,
      const ProgressCallback& progress) = 0;
  virtual absl::StatusOr<v1::SubmitScoreResponse> SubmitScore(
      const Dataset& data, const std::vector<KernelExpr>& kernels, const ScoreOptions& options) = 0;
  virtual absl::StatusOr<PredictResult> Predict(const Dataset& data, const KernelExpr& kernel,
                                                const Eigen::MatrixXd& x_new,
                                                const PredictOptions& options,
                                                const ProgressCallback& progress) = 0;
};

// The connection flags every command shares.
struct RemoteFlags {
  std::string server;            // HOST:PORT; empty: in-process
  double timeout_seconds = 600;  // deadline of each call
  std::string token_file;        // bearer token (default: $GPSEL_AUTH_TOKEN)
  bool tls = false;
  std::string tls_ca;
};
// Adds --server --timeout --token-file --tls --tls-ca. `default_timeout_seconds` replaces the
// 600 s default (health uses a few seconds).
void AddRemoteFlags(CLI::App& sub, RemoteFlags& flags, bool server_required,
                    double default_timeout_seconds = 600);

// --job and --detach of the commands that can run on a server's shared job queue (search,
// score): with --job the work is a job whose parts any replica sharing the server's job store
// may take, and the command waits for it; --detach submits it and prints the job instead.
struct JobFlags {
  bool job = false;
  bool detach = false;
  bool queued() const { return job || detach; }
};
void AddJobFlags(CLI::App& sub, JobFlags& flags, const std::string& parts);
// INVALID_ARGUMENT naming the flag when it is given without --server.
absl::Status CheckJobFlags(const JobFlags& flags, const RemoteFlags& remote);
// A client for the flags (token and TLS also from GPSEL_AUTH_TOKEN, GPSEL_TLS, GPSEL_TLS_CA,
// GPSEL_TLS_CERT, GPSEL_TLS_KEY where no flag gives them).
absl::StatusOr<std::unique_ptr<Client>> Connect(const RemoteFlags& flags);

// LocalBackend when flags.server is empty, else a RemoteBackend connected per Connect.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const RemoteFlags& flags);
std::unique_ptr<Backend> MakeLocalBackend();
std::unique_ptr<Backend> MakeRemoteBackend(std::unique_ptr<Client> client);

}  // namespace gpsel::cli

#endif  // GPSEL_CLI_BACKEND_H_
