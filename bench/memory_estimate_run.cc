// One scoring, search or prediction run for bench/memory_estimate.sh: prints the core's memory
// estimate (core/memory_estimate.h) for it, then runs it, so that /usr/bin/time -v can measure
// the same process's peak RSS against the estimate.
//
//   memory_estimate_run --kind score --n 2000 --kernel "C*SE + C*SE*PER" --threads 1
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "core/dataset.h"
#include "core/memory_estimate.h"
#include "core/predict.h"
#include "core/score.h"
#include "core/search.h"

int main(int argc, char** argv) {
  std::string kind = "score", kernel_text = "C*SE", data_path;
  int n = 1000, threads = 1, depth = 2, restarts = 2;
  int64_t new_points = 100000;
  bool estimate_only = false;
  CLI::App app{"memory-estimate benchmark run"};
  app.add_option("--kind", kind, "score, search or predict");
  app.add_option("--data", data_path, "CSV (x, y)")->required();
  app.add_option("--n", n, "first n rows of the data");
  app.add_option("--kernel", kernel_text);
  app.add_option("--threads", threads, "fit threads (score) or candidate threads (search)");
  app.add_option("--depth", depth, "search depth");
  app.add_option("--restarts", restarts);
  app.add_option("--m", new_points, "predict: new points");
  app.add_flag("--estimate-only", estimate_only, "print the estimate and stop (baseline RSS)");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<gpsel::Dataset> full = gpsel::LoadCsvFile(data_path);
  if (!full.ok()) {
    std::cerr << full.status() << "\n";
    return 1;
  }
  gpsel::Dataset data;
  data.x = full->x.topRows(n);
  data.y = full->y.head(n);
  const gpsel::KernelExpr kernel = *gpsel::ParseKernel(kernel_text);
  gpsel::ScoreOptions score;
  score.fit.restarts = restarts;
  score.fit.threads = threads;
  absl::Status status;
  gpsel::MemoryEstimate estimate;
  if (kind == "score") {
    estimate = gpsel::EstimateScoreMemory(data, {kernel}, score);
    std::cout << "estimate_bytes " << estimate.bytes << "\n" << std::flush;
    if (!estimate_only) status = gpsel::ScoreKernel(data, kernel, score).status();
  } else if (kind == "search") {
    gpsel::SearchOptions search;
    search.max_depth = depth;
    search.threads = threads;
    search.score.fit.restarts = restarts;
    estimate = gpsel::EstimateSearchMemory(data, search);
    std::cout << "estimate_bytes " << estimate.bytes << "\n" << std::flush;
    if (!estimate_only) status = gpsel::RunKernelSearch(data, search).status();
  } else {
    gpsel::PredictOptions predict;
    predict.hyperparameters = {{"C.constant", 1.0}, {"SE.lengthscale", 2.0}, {"noise", 0.01}};
    const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(new_points, 1958.0, 2000.0);
    estimate = gpsel::EstimatePredictMemory(data, kernel, new_points, predict);
    std::cout << "estimate_bytes " << estimate.bytes << "\n" << std::flush;
    if (!estimate_only) {
      status = gpsel::FitAndPredict(data, *gpsel::ParseKernel("C*SE"), x_new, predict).status();
    }
  }
  std::cout << "estimate " << estimate.Summary() << "\n";
  if (!status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  return 0;
}
