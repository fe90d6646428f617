// The packaging test's core-only program (tests/packaging/run.sh), compiled and linked with
// nothing but `pkg-config --cflags --libs gpsel` (cmake/gpsel.pc.in): parses a kernel, scores it
// on a CSV file and prints the MLL.
#include <cstdio>

#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  absl::StatusOr<gpsel::Dataset> data = gpsel::LoadCsvFile(argv[1]);
  absl::StatusOr<gpsel::KernelExpr> kernel = gpsel::ParseKernel("SE");
  if (!data.ok() || !kernel.ok()) return 1;
  gpsel::ScoreOptions options;
  options.metrics = {gpsel::Metric::kMll};
  absl::StatusOr<gpsel::KernelScore> score = gpsel::ScoreKernel(*data, *kernel, options);
  if (!score.ok()) {
    std::fprintf(stderr, "pkgconfig_check: %s\n", score.status().ToString().c_str());
    return 1;
  }
  std::printf("pkgconfig_check: SE mll %.12f\n", score->metrics.at("mll"));
  return 0;
}
