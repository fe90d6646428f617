// One scoring, search or prediction run for bench/memory_estimate.sh: prints the core's memory
// estimate (core/memory_estimate.h) for it, then runs it, so that /usr/bin/time -v can measure
// the same process's peak RSS against the estimate. Kinds: score, search, predict; fit (a
// score of one start per fit, at most --iterations L-BFGS steps, then its Newton polish and
// Laplace Hessian: what a fit at large n costs, in bounded time); hessian (one likelihood with
// gradient and one exact Hessian at the prior mean: a fit's peak at any n). Beyond the data's
// length the inputs continue synthetically (bench/bench_data.h).
//
//   memory_estimate_run --kind score --n 2000 --kernel "C*SE + C*SE*PER" --threads 1
//   memory_estimate_run --kind hessian --n 10000 --kernel "C*SE" --data data/co2_weekly.csv
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "bench_data.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/memory_estimate.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/core/time_estimate.h"

int main(int argc, char** argv) {
  std::string kind = "score", kernel_text = "C*SE", data_path;
  int n = 1000, threads = 1, depth = 2, restarts = 2, iterations = 3;
  int64_t new_points = 100000;
  bool estimate_only = false;
  CLI::App app{"memory-estimate benchmark run"};
  app.add_option("--kind", kind, "score, search, predict, fit or hessian");
  app.add_option("--iterations", iterations, "fit: L-BFGS iterations per start");
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
  gpsel::ConfigureAllocatorForLargeMatrices();  // as gpsel and gpsel-server do
  const gpsel::Dataset data = gpsel::bench::FirstPointsOrSynthetic(*full, n);
  const gpsel::KernelExpr kernel = *gpsel::ParseKernel(kernel_text);
  gpsel::ScoreOptions score;
  score.fit.restarts = restarts;
  score.fit.threads = threads;
  absl::Status status;
  gpsel::MemoryEstimate estimate;
  if (kind == "score") {
    std::cout << "time_estimate_seconds " << gpsel::EstimateScoreTime(data, {kernel}, score).seconds
              << "\n";
    estimate = gpsel::EstimateScoreMemory(data, {kernel}, score);
    std::cout << "estimate_bytes " << estimate.bytes << "\n" << std::flush;
    if (!estimate_only) status = gpsel::ScoreKernel(data, kernel, score).status();
  } else if (kind == "fit") {
    score.fit.restarts = 1;
    score.fit.max_iterations = iterations;
    score.fit.threads = 1;
    std::cout << "time_estimate_seconds " << gpsel::EstimateScoreTime(data, {kernel}, score).seconds
              << "\n";
    estimate = gpsel::EstimateScoreMemory(data, {kernel}, score);
    std::cout << "estimate_bytes " << estimate.bytes << "\n" << std::flush;
    if (!estimate_only) status = gpsel::ScoreKernel(data, kernel, score).status();
  } else if (kind == "hessian") {
    score.fit.threads = 1;
    estimate = gpsel::EstimateScoreMemory(data, {kernel}, score);
    std::cout << "estimate_bytes " << estimate.bytes << "\n" << std::flush;
    absl::StatusOr<gpsel::GpModel> model = gpsel::GpModel::Create(
        kernel, data.x,
        gpsel::ApplyStandardization(*gpsel::ComputeStandardization(data.y, true), data.y));
    if (!model.ok()) {
      status = model.status();
    } else if (!estimate_only) {
      Eigen::VectorXd gradient;
      status = model->LogLikelihood(model->prior_mean(), &gradient).status();
      if (status.ok()) status = model->LogLikelihoodHessian(model->prior_mean()).status();
    }
  } else if (kind == "search") {
    gpsel::SearchOptions search;
    search.max_depth = depth;
    search.threads = threads;
    search.score.fit.restarts = restarts;
    std::cout << "time_estimate_seconds " << gpsel::EstimateSearchTime(data, search).seconds
              << "\n";
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
