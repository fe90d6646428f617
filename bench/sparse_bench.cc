// Sparse (VFE) against exact fitting, side by side in one run (issue 28): on a CSV series or a
// synthetic one, the sparse MAP/MLL fit (core/sparse_fit.h) with its m, certified interval and
// time; the exact log likelihood at the sparse optimum (must lie in the interval) and, where n
// allows, the exact fit's optimum and time; and one n×n Cholesky as the time unit.
//
//   sparse_bench --csv data/co2_weekly.csv --kernel 'C*SE+C*PER*SE' --objective mll
//   sparse_bench --synthetic 100000 --kernel 'C*SE+C*PER*SE' --exact=false
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include <CLI/CLI.hpp>

#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/sparse_fit.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Peak resident set size of this process (VmHWM), in MB.
double PeakRssMb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0.0;
}

// y = a smooth trend + a yearly cycle with a slowly varying amplitude + noise, on x in years
// (n points, 0.01 years apart): the structure C*SE + C*PER*SE describes. The smooth parts are
// random Fourier features of SE kernels (lengthscales 5 and 20 years), so the generating process
// is (to the features' resolution) a draw from that kernel.
gpsel::Dataset Synthetic(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> phase(0.0, 2.0 * M_PI);
  constexpr int kFeatures = 200;
  auto smooth = [&](double lengthscale) {
    Eigen::VectorXd w(kFeatures), b(kFeatures), a(kFeatures);
    for (int k = 0; k < kFeatures; ++k) {
      w(k) = normal(rng) / lengthscale;
      b(k) = phase(rng);
      a(k) = normal(rng) * std::sqrt(2.0 / kFeatures);
    }
    return [w, b, a](double x) { return (a.array() * (w.array() * x + b.array()).cos()).sum(); };
  };
  auto trend = smooth(20.0);
  auto envelope = smooth(5.0);
  gpsel::Dataset data;
  data.x.resize(n, 1);
  data.y.resize(n);
  for (int i = 0; i < n; ++i) {
    const double x = 0.01 * i;
    data.x(i, 0) = x;
    const double season = std::sin(2.0 * M_PI * x) + 0.3 * std::sin(4.0 * M_PI * x + 1.0);
    data.y(i) = 2.0 * trend(x) + (1.0 + 0.3 * envelope(x)) * season + 0.1 * normal(rng);
  }
  return data;
}

}  // namespace

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  CLI::App app{"sparse vs exact fit, side by side"};
  std::string csv, kernel_text = "C*SE+C*PER*SE", objective_text = "mll";
  int synthetic = 0, max_inducing = 0, restarts = 2, initial = 32;
  bool exact = true;
  double x_factor = 1.0;
  app.add_option("--csv", csv, "series (x,y) to fit");
  app.add_option("--synthetic", synthetic, "n of a synthetic series instead");
  app.add_option("--kernel", kernel_text);
  app.add_option("--objective", objective_text, "mll or map");
  app.add_option("--max-inducing", max_inducing, "cap on m (0: memory budget)");
  app.add_option("--initial-inducing", initial);
  app.add_option("--restarts", restarts);
  app.add_option("--x-factor", x_factor, "divide x by this");
  app.add_option("--exact", exact, "also fit exactly (and time a Cholesky)");
  CLI11_PARSE(app, argc, argv);

  gpsel::Dataset data;
  if (synthetic > 0) {
    data = Synthetic(synthetic, 1);
  } else {
    gpsel::DatasetLimits limits;
    limits.max_points = 2'000'000;
    absl::StatusOr<gpsel::Dataset> loaded = gpsel::LoadCsvFile(csv, limits);
    if (!loaded.ok()) {
      std::cerr << loaded.status() << "\n";
      return 1;
    }
    data = *std::move(loaded);
  }
  data.x /= x_factor;
  const gpsel::Standardization s = *gpsel::ComputeStandardization(data.y, true);
  data.y = gpsel::ApplyStandardization(s, data.y);
  const absl::StatusOr<gpsel::KernelExpr> kernel = gpsel::ParseKernel(kernel_text);
  if (!kernel.ok()) {
    std::cerr << kernel.status() << "\n";
    return 1;
  }
  absl::StatusOr<gpsel::GpModel> model = gpsel::GpModel::Create(*kernel, data.x, data.y);
  if (!model.ok()) {
    std::cerr << model.status() << "\n";
    return 1;
  }
  const gpsel::FitObjective objective = objective_text == "map"
                                            ? gpsel::FitObjective::kMaximumAPosteriori
                                            : gpsel::FitObjective::kMaximumLikelihood;
  const int n = data.num_points();
  std::printf("n = %d, kernel %s, objective %s\n", n, gpsel::ToString(*kernel).c_str(),
              objective_text.c_str());

  gpsel::SparseFitOptions options;
  options.objective = objective;
  options.max_inducing = max_inducing;
  options.initial_inducing = initial;
  options.restarts = restarts;
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<gpsel::SparseFitResult> sparse = gpsel::FitSparse(*model, options);
  const double sparse_seconds = Seconds(start);
  if (!sparse.ok()) {
    std::cerr << sparse.status() << "\n";
    return 1;
  }
  std::printf("sparse: %.2f s, peak RSS %.0f MB\n%s", sparse_seconds, PeakRssMb(),
              sparse->Summary().c_str());

  if (!exact) return 0;
  start = std::chrono::steady_clock::now();
  absl::StatusOr<double> exact_here = model->LogLikelihood(sparse->raw);
  const double one_likelihood = Seconds(start);
  if (!exact_here.ok()) {
    std::cerr << exact_here.status() << "\n";
    return 1;
  }
  const bool inside = sparse->lower <= *exact_here && *exact_here <= sparse->upper;
  std::printf("exact log p(y|theta_sparse) = %.4f: %s [%.4f, %.4f] (one evaluation %.2f s)\n",
              *exact_here, inside ? "inside" : "OUTSIDE", sparse->lower, sparse->upper,
              one_likelihood);
  // One Cholesky of the noisy n×n kernel matrix: the time unit.
  Eigen::MatrixXd k = model->CrossCovariance(sparse->raw, data.x, data.x);
  k.diagonal().array() += model->NoiseVariance(sparse->raw);
  start = std::chrono::steady_clock::now();
  gpsel::SpdFactorization cholesky;
  (void)cholesky.Compute(std::move(k));
  const double cholesky_seconds = Seconds(start);
  std::printf("one Cholesky: %.3f s; sparse fit = %.1f Choleskys\n", cholesky_seconds,
              sparse_seconds / cholesky_seconds);

  gpsel::FitOptions exact_options;
  exact_options.restarts = restarts;
  start = std::chrono::steady_clock::now();
  absl::StatusOr<gpsel::FitResult> exact_fit =
      gpsel::FitHyperparameters(*model, objective, exact_options);
  const double exact_seconds = Seconds(start);
  if (!exact_fit.ok()) {
    std::cerr << exact_fit.status() << "\n";
    return 1;
  }
  std::printf("exact fit: %.2f s (%d evaluations), objective %.4f, log p(y|theta) %.4f; sparse "
              "objective %.4f (%.4f below); exact/sparse time %.2f\n",
              exact_seconds, exact_fit->evaluations, exact_fit->objective_value,
              exact_fit->log_likelihood, sparse->objective_value,
              exact_fit->objective_value - sparse->objective_value, exact_seconds / sparse_seconds);
  for (const auto& [name, value] : exact_fit->values) {
    std::printf("  exact %s = %.6g   sparse %.6g\n", name.c_str(), value,
                sparse->values.at(name));
  }
  return 0;
}
