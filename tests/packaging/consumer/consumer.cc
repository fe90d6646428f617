// The packaging test's consumer (tests/packaging/run.sh): scores kernel SE on a CSV file through
// an installed gpsel-server with gpsel::Client and in-process with gpsel::ScoreKernel, and checks
// that the two MLLs agree (both run the same core code with the same seed, core/fit.h).
//
//   gpsel_consumer HOST:PORT data/interpretable_linear.csv
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "gpsel/client/client.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s HOST:PORT FILE.csv\n", argv[0]);
    return 2;
  }
  absl::StatusOr<gpsel::Dataset> data = gpsel::LoadCsvFile(argv[2]);
  absl::StatusOr<gpsel::KernelExpr> kernel = gpsel::ParseKernel("SE");
  if (!data.ok() || !kernel.ok()) {
    std::fprintf(stderr, "consumer: bad input: %s %s\n", data.status().ToString().c_str(),
                 kernel.status().ToString().c_str());
    return 1;
  }
  gpsel::ScoreOptions options;
  options.metrics = {gpsel::Metric::kMll};

  absl::StatusOr<gpsel::KernelScore> local = gpsel::ScoreKernel(*data, *kernel, options);
  if (!local.ok()) {
    std::fprintf(stderr, "consumer: ScoreKernel: %s\n", local.status().ToString().c_str());
    return 1;
  }

  gpsel::ClientOptions client_options;
  client_options.target = argv[1];
  absl::StatusOr<std::unique_ptr<gpsel::Client>> client = gpsel::Client::Create(client_options);
  if (!client.ok()) {
    std::fprintf(stderr, "consumer: Client::Create: %s\n", client.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::vector<gpsel::KernelScore>> remote =
      (*client)->Score(*data, {*kernel}, options);
  if (!remote.ok() || remote->size() != 1) {
    std::fprintf(stderr, "consumer: Score RPC: %s\n", remote.status().ToString().c_str());
    return 1;
  }

  const double local_mll = local->metrics.at("mll");
  const double remote_mll = remote->front().metrics.at("mll");
  std::printf("consumer: SE mll local %.12f remote %.12f\n", local_mll, remote_mll);
  if (!std::isfinite(local_mll) || std::fabs(local_mll - remote_mll) > 1e-9) {
    std::fprintf(stderr, "consumer: MLLs differ by %g\n", std::fabs(local_mll - remote_mll));
    return 1;
  }
  std::printf("consumer: OK\n");
  return 0;
}
