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
#include "client/client.h"
#include "core/dataset.h"
#include "core/evidence.h"
#include "core/kernel_expr.h"
#include "core/predict.h"
#include "core/progress.h"
#include "core/score.h"
#include "core/search.h"

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

// A client for the flags (token and TLS also from GPSEL_AUTH_TOKEN, GPSEL_TLS, GPSEL_TLS_CA,
// GPSEL_TLS_CERT, GPSEL_TLS_KEY where no flag gives them).
absl::StatusOr<std::unique_ptr<Client>> Connect(const RemoteFlags& flags);

// LocalBackend when flags.server is empty, else a RemoteBackend connected per Connect.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const RemoteFlags& flags);
std::unique_ptr<Backend> MakeLocalBackend();
std::unique_ptr<Backend> MakeRemoteBackend(std::unique_ptr<Client> client);

}  // namespace gpsel::cli

#endif  // GPSEL_CLI_BACKEND_H_
