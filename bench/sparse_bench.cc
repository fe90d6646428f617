// Sparse (VFE) against exact fitting, side by side in one run (issue 28): on a CSV series or a
// synthetic one, the sparse MAP/MLL fit (core/sparse_fit.h) with its m, certified interval and
// time; the exact log likelihood at the sparse optimum (must lie in the interval) and, where n
// allows, the exact fit's optimum and time; and one n×n Cholesky as the time unit.
//
//   sparse_bench --csv data/co2_weekly.csv --kernel 'C*SE+C*PER*SE' --objective mll
//   sparse_bench --synthetic 100000 --span 50 --kernel 'C*SE+C*PER*SE' --exact=false
//   sparse_bench --csv data/sf_temps.csv --exact=false --cholesky --threads 2
//   sparse_bench --csv data/mauna_loa_monthly.csv --score 'SE;C*SE+C*PER*SE' (sparse vs exact
//       scores of several kernels: intervals, the exact likelihood at the sparse θ̂, rankings)
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/internal/data_starts.h"
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/score.h"
#include "gpsel/core/sparse_fit.h"
#include "gpsel/core/sparse_score.h"

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
// (n points, 0.01 years apart, or evenly over [0, span) years when span > 0: the same function
// sampled more densely, so the m it needs does not grow with n): the structure C*SE + C*PER*SE
// describes. The smooth parts are
// random Fourier features of SE kernels (lengthscales 5 and 20 years), so the generating process
// is (to the features' resolution) a draw from that kernel.
gpsel::Dataset Synthetic(int n, double span, uint64_t seed) {
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
    const double x = span > 0 ? span * i / n : 0.01 * i;
    data.x(i, 0) = x;
    const double season = std::sin(2.0 * M_PI * x) + 0.3 * std::sin(4.0 * M_PI * x + 1.0);
    data.y(i) = 2.0 * trend(x) + (1.0 + 0.3 * envelope(x)) * season + 0.1 * normal(rng);
  }
  return data;
}

// CPU seconds of this process (user + system, all threads).
double CpuSeconds() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// Seconds (wall) and CPU seconds of one Cholesky of an n×n kernel matrix + noise: the time unit.
std::pair<double, double> TimeOneCholesky(const gpsel::GpModel& model, const Eigen::VectorXd& raw) {
  Eigen::MatrixXd k = model.CrossCovariance(raw, model.x(), model.x());
  k.diagonal().array() += model.NoiseVariance(raw);
  const auto start = std::chrono::steady_clock::now();
  const double cpu = CpuSeconds();
  gpsel::SpdFactorization cholesky;
  (void)cholesky.Compute(std::move(k));
  return {Seconds(start), CpuSeconds() - cpu};
}

// Sparse against exact scores of several kernels on one series (issue 28's agreement table).
// exact_scores = false: the exact fits are skipped (too long at the n asked); the exact log
// likelihood at the sparse optima is still computed (one Cholesky each), the rankings are the
// sparse ones only.
int CompareScores(const gpsel::Dataset& data, const std::string& kernels_text,
                  const gpsel::SparseFitOptions& fit_options, int restarts, bool exact_scores) {
  std::vector<std::string> texts;
  for (size_t a = 0, b; a <= kernels_text.size(); a = b + 1) {
    b = kernels_text.find(';', a);
    if (b == std::string::npos) b = kernels_text.size();
    if (b > a) texts.push_back(kernels_text.substr(a, b - a));
  }
  const std::vector<gpsel::Metric> ranked = {gpsel::Metric::kBic, gpsel::Metric::kLap0,
                                             gpsel::Metric::kLapAic, gpsel::Metric::kLapBic};
  std::map<std::string, std::pair<std::string, double>> best_sparse, best_exact;
  bool all_inside = true;
  for (const std::string& text : texts) {
    absl::StatusOr<gpsel::KernelExpr> kernel = gpsel::ParseKernel(text);
    if (!kernel.ok()) {
      std::cerr << kernel.status() << "\n";
      return 1;
    }
    gpsel::SparseScoreOptions sparse_options;
    sparse_options.fit = fit_options;
    auto start = std::chrono::steady_clock::now();
    double cpu = CpuSeconds();
    absl::StatusOr<gpsel::SparseKernelScore> sparse =
        gpsel::ScoreKernelSparse(data, *kernel, sparse_options);
    const double sparse_seconds = Seconds(start), sparse_cpu = CpuSeconds() - cpu;
    if (!sparse.ok()) {
      std::cerr << text << ": " << sparse.status() << "\n";
      return 1;
    }
    gpsel::ScoreOptions exact_options;
    exact_options.fit.restarts = restarts;
    start = std::chrono::steady_clock::now();
    cpu = CpuSeconds();
    absl::StatusOr<gpsel::KernelScore> exact =
        exact_scores ? gpsel::ScoreKernel(data, *kernel, exact_options)
                     : absl::StatusOr<gpsel::KernelScore>(gpsel::KernelScore{});
    const double exact_seconds = Seconds(start), exact_cpu = CpuSeconds() - cpu;
    if (!exact.ok()) {
      std::cerr << text << ": " << exact.status() << "\n";
      return 1;
    }
    // The exact likelihood at the sparse optima, on the same standardised model.
    absl::StatusOr<gpsel::PreparedModel> prepared =
        gpsel::PrepareModel(data, *kernel, sparse_options.standardize, sparse_options.scale_x,
                            sparse_options.hyperparameters);
    std::printf("%s: sparse %.1f s (%.1f CPU s), m = %d; exact %.1f s (%.1f CPU s)\n",
                sparse->kernel.c_str(), sparse_seconds, sparse_cpu, sparse->num_inducing,
                exact_seconds, exact_cpu);
    for (const auto* fit : {&sparse->mll_fit, &sparse->map_fit}) {
      if (!fit->has_value()) continue;
      const absl::StatusOr<double> here = prepared->model.LogLikelihood((*fit)->raw);
      const bool inside = here.ok() && (*fit)->lower <= *here && *here <= (*fit)->upper;
      all_inside &= inside;
      std::printf("  %s fit: m = %d (%s), [%.3f, %.3f] gap %.3f, exact log p at theta %.3f %s\n",
                  (*fit)->objective == gpsel::FitObjective::kMaximumLikelihood ? "MLL" : "MAP",
                  (*fit)->num_inducing,
                  std::string(SparseStopReasonName((*fit)->stop_reason)).c_str(), (*fit)->lower,
                  (*fit)->upper, (*fit)->gap(), here.ok() ? *here : NAN,
                  inside ? "inside" : "OUTSIDE");
    }
    for (const auto& [name, interval] : sparse->intervals) {
      const auto e = exact->metrics.find(name);
      const double exact_value = e == exact->metrics.end() ? NAN : e->second;
      std::printf("  %-10s sparse [%.3f, %.3f]  exact %.3f  %s\n", name.c_str(), interval.lower,
                  interval.upper, exact_value,
                  !exact_scores                          ? "exact not run"
                  : exact_value >= interval.lower - 1e-6 ? "exact >= lower"
                                                         : "exact BELOW lower");
    }
    for (gpsel::Metric metric : ranked) {
      const std::string name(gpsel::MetricName(metric));
      auto note = [&](std::map<std::string, std::pair<std::string, double>>& best,
                      const std::map<std::string, double>& metrics) {
        const auto it = metrics.find(name);
        if (it == metrics.end()) return;
        if (!best.count(name) || it->second > best[name].second) best[name] = {text, it->second};
      };
      note(best_sparse, sparse->metrics);
      note(best_exact, exact->metrics);
    }
  }
  bool same = true;
  for (gpsel::Metric metric : ranked) {
    const std::string name(gpsel::MetricName(metric));
    const std::string a = best_sparse.count(name) ? best_sparse[name].first : "-";
    const std::string b = best_exact.count(name) ? best_exact[name].first : "-";
    same &= a == b;
    std::printf("best by %-7s sparse %-16s exact %-16s %s\n", name.c_str(), a.c_str(), b.c_str(),
                !exact_scores ? "" : a == b ? "same" : "DIFFERENT");
  }
  std::printf("summary: exact likelihood inside every interval: %s; best kernels agree: %s\n",
              all_inside ? "yes" : "NO", !exact_scores ? "exact not run" : same ? "yes" : "NO");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  CLI::App app{"sparse vs exact fit, side by side"};
  std::string csv, kernel_text = "C*SE+C*PER*SE", objective_text = "mll", score_kernels;
  int synthetic = 0, max_inducing = 0, restarts = 2, initial = 32, stride = 1, threads = 1;
  bool exact = true, cholesky = false;
  double x_factor = 1.0, span = 0.0;
  app.add_option("--csv", csv, "series (x,y) to fit");
  app.add_option("--synthetic", synthetic, "n of a synthetic series instead");
  app.add_option("--span", span, "synthetic x evenly over [0, span) years (0: 0.01 apart)");
  app.add_option("--stride", stride, "every stride-th point of the series");
  app.add_option("--kernel", kernel_text);
  app.add_option("--objective", objective_text, "mll or map");
  app.add_option("--max-inducing", max_inducing, "cap on m (0: memory budget)");
  app.add_option("--initial-inducing", initial);
  app.add_option("--restarts", restarts);
  app.add_option("--threads", threads, "threads of the sparse passes");
  app.add_option("--x-factor", x_factor, "divide x by this");
  app.add_option("--exact", exact, "also fit exactly (and time a Cholesky)");
  app.add_flag("--cholesky", cholesky, "time one exact Cholesky of n (and log p at the optimum)");
  app.add_option("--score", score_kernels, "';'-separated kernels: sparse vs exact scores");
  bool exact_scores = true;
  app.add_option("--exact-scores", exact_scores,
                 "with --score: also the exact scores (false: only the exact log likelihood at "
                 "the sparse optima)");
  bool cholesky_only = false;
  app.add_flag("--cholesky-only", cholesky_only, "only time one exact Cholesky of n (prior mean)");
  int evaluations_only = 0;
  app.add_option("--evaluations-only", evaluations_only,
                 "time this many bound evaluations (with gradients) at m = --max-inducing at the "
                 "prior mean instead of fitting (cost growth at fixed m)");
  CLI11_PARSE(app, argc, argv);

  gpsel::Dataset data;
  if (synthetic > 0) {
    data = Synthetic(synthetic, span, 1);
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
  if (stride > 1) {
    gpsel::Dataset thinned;
    const int n = (data.num_points() + stride - 1) / stride;
    thinned.x.resize(n, data.x.cols());
    thinned.y.resize(n);
    for (int i = 0; i < n; ++i) {
      thinned.x.row(i) = data.x.row(i * stride);
      thinned.y(i) = data.y(i * stride);
    }
    data = std::move(thinned);
  }
  data.x /= x_factor;
  gpsel::SparseFitOptions options;
  options.max_inducing = max_inducing;
  options.initial_inducing = initial;
  options.restarts = restarts;
  options.sparse.threads = threads;
  if (!score_kernels.empty()) {
    return CompareScores(data, score_kernels, options, restarts, exact_scores);
  }

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
  std::printf("n = %d, kernel %s, objective %s, threads %d\n", n, gpsel::ToString(*kernel).c_str(),
              objective_text.c_str(), threads);

  if (cholesky_only) {  // the time unit alone (issue 28: "≤ 20 exact Choleskys of the same n")
    const auto [seconds, cpu] = TimeOneCholesky(*model, model->prior_mean());
    std::printf("one Cholesky of n = %d: %.3f s wall, %.3f s CPU, peak RSS %.0f MB\n", n, seconds,
                cpu, PeakRssMb());
    return 0;
  }
  if (evaluations_only > 0) {
    const Eigen::VectorXd raw = model->prior_mean();
    const int m = max_inducing > 0 ? max_inducing : 64;
    auto start = std::chrono::steady_clock::now();
    double cpu = CpuSeconds();
    absl::StatusOr<gpsel::InducingSelection> z =
        gpsel::SelectInducingPoints(*model, raw, {.max_points = m});
    if (!z.ok()) {
      std::cerr << z.status() << "\n";
      return 1;
    }
    const double select_cpu = CpuSeconds() - cpu, select_wall = Seconds(start);
    gpsel::SparseGpOptions sparse_options;
    sparse_options.threads = threads;
    absl::StatusOr<gpsel::SparseGp> sparse =
        gpsel::SparseGp::Create(*model, z->points, sparse_options);
    if (!sparse.ok()) {
      std::cerr << sparse.status() << "\n";
      return 1;
    }
    start = std::chrono::steady_clock::now();
    cpu = CpuSeconds();
    double lower = 0.0;
    for (int e = 0; e < evaluations_only; ++e) {
      absl::StatusOr<gpsel::SparseBounds> b = sparse->Bounds(raw, true);
      if (!b.ok()) {
        std::cerr << b.status() << "\n";
        return 1;
      }
      lower = b->lower;
    }
    const double gradient_cpu = (CpuSeconds() - cpu) / evaluations_only,
                 gradient_wall = Seconds(start) / evaluations_only;
    // The ELBO's gradient only, as the fit asks for it (SparseObjective in core/sparse_fit.cc).
    start = std::chrono::steady_clock::now();
    cpu = CpuSeconds();
    for (int e = 0; e < evaluations_only; ++e) {
      if (absl::StatusOr<gpsel::SparseBounds> b = sparse->Bounds(raw, true, false); !b.ok()) {
        std::cerr << b.status() << "\n";
        return 1;
      }
    }
    const double lower_gradient_cpu = (CpuSeconds() - cpu) / evaluations_only,
                 lower_gradient_wall = Seconds(start) / evaluations_only;
    // The same bounds without gradients: the probe FitSparse makes at the larger m of the
    // growth sequence (SparseFitOptions::probe_growth).
    start = std::chrono::steady_clock::now();
    cpu = CpuSeconds();
    for (int e = 0; e < evaluations_only; ++e) {
      if (absl::StatusOr<gpsel::SparseBounds> b = sparse->Bounds(raw, false); !b.ok()) {
        std::cerr << b.status() << "\n";
        return 1;
      }
    }
    std::printf(
        "evaluations only: n = %d, m = %d, selection %.2f s CPU (%.2f s wall); one "
        "evaluation with gradients %.3f s CPU (%.3f s wall), with the ELBO's gradient only "
        "%.3f s CPU (%.3f s wall), without %.3f s CPU (%.3f s wall), ELBO %.3f, peak RSS %.0f "
        "MB\n",
        n, sparse->num_inducing(), select_cpu, select_wall, gradient_cpu, gradient_wall,
        lower_gradient_cpu, lower_gradient_wall,
        (CpuSeconds() - cpu) / evaluations_only, Seconds(start) / evaluations_only, lower,
        PeakRssMb());
    return 0;
  }
  options.objective = objective;
  // Data-informed starts as the sparse score makes them (periodogram periods, lengthscales).
  if (n <= gpsel::kSparseDataStartsMaxPoints) {
    for (const gpsel::StartPoint& start : gpsel::DataInformedStarts(*model)) {
      options.extra_starts.push_back(start.raw);
    }
  }
  auto start = std::chrono::steady_clock::now();
  double cpu = CpuSeconds();
  const double cpu_at_start = cpu;
  absl::StatusOr<gpsel::SparseFitResult> sparse =
      gpsel::FitSparse(*model, options, [&](const gpsel::Progress& p) {
        if (!p.poll_only) {
          std::fprintf(stderr, "[%.1f CPU s] %s\n", CpuSeconds() - cpu_at_start, p.message.c_str());
        }
        return absl::OkStatus();
      });
  const double sparse_seconds = Seconds(start), sparse_cpu = CpuSeconds() - cpu;
  if (!sparse.ok()) {
    std::cerr << sparse.status() << "\n";
    return 1;
  }
  std::printf("sparse: %.2f s wall, %.2f s CPU, peak RSS %.0f MB\n%s", sparse_seconds, sparse_cpu,
              PeakRssMb(), sparse->Summary().c_str());

  if (!exact && !cholesky) return 0;
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
  const auto [cholesky_seconds, cholesky_cpu] = TimeOneCholesky(*model, sparse->raw);
  std::printf("one Cholesky: %.3f s wall, %.3f s CPU; sparse fit = %.1f Choleskys (CPU)\n",
              cholesky_seconds, cholesky_cpu, sparse_cpu / cholesky_cpu);
  if (!exact) return 0;

  gpsel::FitOptions exact_options;
  exact_options.restarts = restarts;
  start = std::chrono::steady_clock::now();
  cpu = CpuSeconds();
  absl::StatusOr<gpsel::FitResult> exact_fit =
      gpsel::FitHyperparameters(*model, objective, exact_options);
  const double exact_seconds = Seconds(start), exact_cpu = CpuSeconds() - cpu;
  if (!exact_fit.ok()) {
    std::cerr << exact_fit.status() << "\n";
    return 1;
  }
  std::printf(
      "exact fit: %.2f s wall, %.2f s CPU (%d evaluations), objective %.4f, log p(y|theta) "
      "%.4f; sparse objective %.4f (%.4f below); exact/sparse CPU %.2f\n",
      exact_seconds, exact_cpu, exact_fit->evaluations, exact_fit->objective_value,
      exact_fit->log_likelihood, sparse->objective_value,
      exact_fit->objective_value - sparse->objective_value, exact_cpu / sparse_cpu);
  for (const auto& [name, value] : exact_fit->values) {
    std::printf("  exact %s = %.6g   sparse %.6g\n", name.c_str(), value, sparse->values.at(name));
  }
  return 0;
}
