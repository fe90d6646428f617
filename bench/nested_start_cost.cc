// What the nested starts of a report's given kernel cost and buy (issue #16, bench/RESULTS.md):
// on data/mauna_loa_monthly.csv, SE and PER+SE (the kernels a depth-3 search with --base
// SE,PER,LIN keeps after steps 1 and 2) are scored, then the report's given kernel
// C*SE + C*PER*SE is scored cold and with those two as ScoreOptions::nested_parents, as
// `gpsel report` does. Prints each fit's objective, evaluations, starts and winning start, and the
// wall time, so the cost is read in likelihood evaluations, which load does not change.
//
//   nested_start_cost [every=1] [threads=2]   (every=3: every third month, as the unit test)
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"

namespace {

void Print(const char* label, const gpsel::KernelScore& score) {
  std::printf("%-34s mll %9.3f  map %9.3f  %6.1f s\n", label, score.metrics.at("mll"),
              score.metrics.at("map"), score.seconds);
  for (const gpsel::FitResult* fit : {&*score.mll_fit, &*score.map_fit}) {
    std::printf("    %s fit: %5d evaluations, %2d starts, winner %s (%s)\n",
                fit->objective == gpsel::FitObjective::kMaximumLikelihood ? "MLL" : "MAP",
                fit->evaluations, fit->starts,
                std::string(gpsel::StartKindName(fit->best_start_kind)).c_str(),
                fit->best_start_origin.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int every = argc > 1 ? std::atoi(argv[1]) : 1;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  absl::StatusOr<gpsel::Dataset> monthly =
      gpsel::LoadCsvFile(GPSEL_DATA_DIR "/mauna_loa_monthly.csv");
  if (!monthly.ok() || every < 1 || threads < 1) {
    std::fprintf(stderr, "usage: nested_start_cost [every>=1] [threads>=1]\n");
    return 2;
  }
  gpsel::Dataset data;
  const int n = (monthly->num_points() + every - 1) / every;
  data.x.resize(n, 1);
  data.y.resize(n);
  for (int i = 0; i < n; ++i) {
    data.x(i, 0) = monthly->x(every * i, 0);
    data.y(i) = monthly->y(every * i);
  }
  gpsel::ScoreOptions options;  // the report's: every paper metric, 5 restarts, seed 0
  options.fit.threads = threads;
  gpsel::ScoreOptions with_parents = options;
  for (const char* text : {"SE", "PER+SE"}) {
    const gpsel::KernelExpr kernel = *gpsel::ParseKernel(text);
    absl::StatusOr<gpsel::KernelScore> parent = gpsel::ScoreKernel(data, kernel, options);
    if (!parent.ok()) {
      std::fprintf(stderr, "%s: %s\n", text, parent.status().ToString().c_str());
      return 1;
    }
    Print(text, *parent);
    with_parents.nested_parents.push_back(
        {kernel, std::make_shared<const gpsel::KernelScore>(*std::move(parent))});
  }
  const gpsel::KernelExpr given = *gpsel::ParseKernel("C*SE + C*PER*SE");
  for (const gpsel::ScoreOptions* o : {&options, &with_parents}) {
    absl::StatusOr<std::vector<gpsel::KernelScore>> scores =
        gpsel::ScoreKernels(data, {given}, *o);
    if (!scores.ok()) {
      std::fprintf(stderr, "%s\n", scores.status().ToString().c_str());
      return 1;
    }
    Print(o == &options ? "C*SE + C*PER*SE cold" : "C*SE + C*PER*SE from SE, PER+SE",
          scores->front());
  }
  return 0;
}
