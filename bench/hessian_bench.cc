// Times one likelihood with gradient plus one exact Hessian (core/gp_model.h), the work at the end
// of every fit, at the prior mean of a kernel on the first n points of a CSV (continued
// synthetically beyond its length, bench/bench_data.h). Prints the median of --reps runs. bench/hessian_ab.sh runs two
// builds of it alternately to compare implementations under the same machine state.
//
//   hessian_bench --data data/co2_weekly.csv --n 2000 --kernel 'C*SE + C*SE*PER' --reps 3
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "bench_data.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/linalg.h"

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
  gpsel::Dataset data = gpsel::bench::FirstPointsOrSynthetic(*full, n);
  data.y = gpsel::ApplyStandardization(*gpsel::ComputeStandardization(data.y, true), data.y);

  absl::StatusOr<gpsel::GpModel> model = gpsel::GpModel::Create(*kernel, data.x, data.y);
  if (!model.ok()) {
    std::cerr << model.status() << "\n";
    return 1;
  }
  const Eigen::VectorXd raw = model->prior_mean();
  std::vector<double> seconds, likelihood_seconds;
  double checksum = 0.0;
  auto since = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // CPU time of this (single-threaded) process: what the cost model of core/time_estimate.h
  // predicts, and what load from other processes on a shared machine hardly changes.
  auto cpu_now = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  std::vector<double> likelihood_cpu, hessian_cpu;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_now();
    Eigen::VectorXd gradient;
    absl::StatusOr<double> value = model->LogLikelihood(raw, &gradient);
    likelihood_seconds.push_back(since(start));
    const double cpu_middle = cpu_now();
    likelihood_cpu.push_back(cpu_middle - cpu_start);
    absl::StatusOr<gpsel::LikelihoodHessian> hessian = model->LogLikelihoodHessian(raw);
    hessian_cpu.push_back(cpu_now() - cpu_middle);
    if (!value.ok() || !hessian.ok()) {
      std::cerr << (value.ok() ? hessian.status() : value.status()) << "\n";
      return 1;
    }
    seconds.push_back(since(start));
    checksum = hessian->hessian.sum();
  }
  std::sort(seconds.begin(), seconds.end());
  std::sort(likelihood_seconds.begin(), likelihood_seconds.end());
  std::sort(likelihood_cpu.begin(), likelihood_cpu.end());
  std::sort(hessian_cpu.begin(), hessian_cpu.end());
  // median_s: lik+grad+Hessian; likgrad_s: the lik+grad part alone (wall); *_cpu_s: CPU time.
  std::cout << "kernel " << kernel_text << " n " << n << " u " << model->num_free() << " median_s "
            << seconds[seconds.size() / 2] << " min_s " << seconds.front() << " likgrad_s "
            << likelihood_seconds[likelihood_seconds.size() / 2] << " likgrad_cpu_s "
            << likelihood_cpu[likelihood_cpu.size() / 2] << " hessian_cpu_s "
            << hessian_cpu[hessian_cpu.size() / 2] << " hessian_sum " << checksum << "\n";
  return 0;
}
