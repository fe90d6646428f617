// Times one likelihood with gradient plus one exact Hessian (core/gp_model.h), the work at the end
// of every fit, at the prior mean of a kernel on the first n points of a CSV (or on synthetic
// inputs beyond its length). Prints the median of --reps runs. bench/hessian_ab.sh runs two
// builds of it alternately to compare implementations under the same machine state.
//
//   hessian_bench --data data/co2_weekly.csv --n 2000 --kernel 'C*SE + C*SE*PER' --reps 3
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "core/dataset.h"
#include "core/gp_model.h"
#include "core/kernel_expr.h"
#include "core/linalg.h"

int main(int argc, char** argv) {
  std::string kernel_text = "C*SE", data_path;
  int n = 1000, reps = 3;
  CLI::App app{"lik+grad+Hessian timing"};
  app.add_option("--data", data_path, "CSV (x, y); rows beyond its length are synthetic")
      ->required();
  app.add_option("--n", n, "points");
  app.add_option("--kernel", kernel_text);
  app.add_option("--reps", reps, "timed repetitions (the median is printed)");
  CLI11_PARSE(app, argc, argv);
  gpsel::ConfigureAllocatorForLargeMatrices();

  absl::StatusOr<gpsel::Dataset> full = gpsel::LoadCsvFile(data_path);
  absl::StatusOr<gpsel::KernelExpr> kernel = gpsel::ParseKernel(kernel_text);
  if (!full.ok() || !kernel.ok()) {
    std::cerr << (full.ok() ? kernel.status() : full.status()) << "\n";
    return 1;
  }
  gpsel::Dataset data;
  const int have = std::min(n, full->num_points());
  data.x.resize(n, full->num_dims());
  data.y.resize(n);
  data.x.topRows(have) = full->x.topRows(have);
  data.y.head(have) = full->y.head(have);
  // Synthetic continuation: the data's x range repeated with a small offset, y a smooth curve
  // plus noise (the timing depends on n and the kernel only).
  std::mt19937_64 rng(17);
  std::normal_distribution<double> noise(0.0, 0.1);
  for (int i = have; i < n; ++i) {
    data.x.row(i) = full->x.row(i % full->num_points()).array() + 1e-3 * (i / full->num_points());
    data.y(i) = std::sin(data.x(i, 0)) + noise(rng);
  }
  data.y = gpsel::ApplyStandardization(*gpsel::ComputeStandardization(data.y, true), data.y);

  absl::StatusOr<gpsel::GpModel> model = gpsel::GpModel::Create(*kernel, data.x, data.y);
  if (!model.ok()) {
    std::cerr << model.status() << "\n";
    return 1;
  }
  const Eigen::VectorXd raw = model->prior_mean();
  std::vector<double> seconds;
  double checksum = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    Eigen::VectorXd gradient;
    absl::StatusOr<double> value = model->LogLikelihood(raw, &gradient);
    absl::StatusOr<gpsel::LikelihoodHessian> hessian = model->LogLikelihoodHessian(raw);
    if (!value.ok() || !hessian.ok()) {
      std::cerr << (value.ok() ? hessian.status() : value.status()) << "\n";
      return 1;
    }
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    checksum = hessian->hessian.sum();
  }
  std::sort(seconds.begin(), seconds.end());
  std::cout << "kernel " << kernel_text << " n " << n << " u " << model->num_free() << " median_s "
            << seconds[seconds.size() / 2] << " min_s " << seconds.front() << " hessian_sum "
            << checksum << "\n";
  return 0;
}
