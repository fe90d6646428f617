// Issue 2 benchmarks of the scoring core (Google Benchmark). bench/run_score_bench.sh runs them
// next to scikit-learn and prints the side-by-side table; results live in bench/RESULTS.md.
//
//   BM_Score/<n>/<kernel>/<threads>
//                           ScoreKernel with every metric: MLL fit + MAP fit (5 restarts each,
//                           L-BFGS-B) + Laplace Hessian; kernel 0 = SE, 1 = SE+LIN; the starts of
//                           each fit on 1 or 2 threads (FitOptions::threads, same result).
//   BM_LogLikGrad/<n>       one GpModel::LogLikelihood with gradient (SE+LIN)
//   BM_EigenLLT/<n>         bare Eigen::LLT of the same n×n covariance (the reference)
//   BM_LapackPotrf/<n>      bare LAPACK dpotrf of it
//   BM_GradVsLlt/<n>        lik+grad and the Eigen LLT alternately, pair by pair: their ratio
//                           under the same machine state (counters: medians, ratio percentiles)
//   and, to see where a likelihood evaluation's time goes (SE+LIN, same matrix):
//   BM_LogLik/<n>           GpModel::LogLikelihood without gradient
//   BM_KernelEval/<n>       kernel tree with first derivatives (internal::KernelEvaluator)
//   BM_SpdCompute/<n>       SpdFactorization::Compute (copy + dpotrf)
//   BM_SpdInverse/<n>       SpdFactorization::Inverse (copy + dpotri + symmetrise)
//
// Data: --data_dir=DIR reads DIR/synth_n<n>.csv (written by bench/sklearn_score.py --write-data,
// the files scikit-learn fits too); without it the same recipe is generated here with a C++ RNG
// (x ~ U[0,10], y = sin x + 0.3 x + N(0, 0.2²)), so numbers are not comparable with sklearn's.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/internal/kernel_evaluator.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/score.h"

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
// OpenBLAS extensions: which kernel set it picked for this CPU, and its build configuration.
char* openblas_get_corename(void);
char* openblas_get_config(void);
}

namespace {

std::string g_data_dir;  // from --data_dir

const char* const kKernels[] = {"SE", "SE+LIN"};

const gpsel::Dataset& Data(int n) {
  static std::map<int, gpsel::Dataset>* cache = new std::map<int, gpsel::Dataset>;
  auto it = cache->find(n);
  if (it != cache->end()) return it->second;
  gpsel::Dataset data;
  if (!g_data_dir.empty()) {
    const std::string path = g_data_dir + "/synth_n" + std::to_string(n) + ".csv";
    absl::StatusOr<gpsel::Dataset> loaded = gpsel::LoadCsvFile(path);
    if (!loaded.ok()) {
      std::cerr << "score_bench: " << loaded.status() << "\n";
      std::exit(2);
    }
    data = *std::move(loaded);
  } else {
    std::mt19937_64 rng(1000 + n);
    std::uniform_real_distribution<double> uniform(0.0, 10.0);
    std::normal_distribution<double> noise(0.0, 0.2);
    data.x.resize(n, 1);
    data.y.resize(n);
    for (int i = 0; i < n; ++i) {
      data.x(i, 0) = uniform(rng);
      data.y(i) = std::sin(data.x(i, 0)) + 0.3 * data.x(i, 0) + noise(rng);
    }
  }
  return cache->emplace(n, std::move(data)).first->second;
}

gpsel::KernelExpr Kernel(const char* text) { return *gpsel::ParseKernel(text); }

// SE+LIN model on standardised y at fixed, typical hyperparameters (close to the MLL optimum of
// the synthetic data: ℓ ≈ 1.9, v ≈ 0.01, σ² ≈ 0.03).
struct SeLinSetup {
  gpsel::GpModel model;
  Eigen::VectorXd raw;
  Eigen::MatrixXd covariance;  // K + σ²I, what the likelihood factorises
};

SeLinSetup MakeSeLin(int n) {
  const gpsel::Dataset& data = Data(n);
  const gpsel::Standardization s = *gpsel::ComputeStandardization(data.y, true);
  gpsel::GpModel model =
      *gpsel::GpModel::Create(Kernel("SE+LIN"), data.x, gpsel::ApplyStandardization(s, data.y));
  // Free order: SE.lengthscale, LIN.variance (canonical leaf order is LIN, SE), then noise.
  std::map<std::string, double> natural = {
      {"SE.lengthscale", 1.9}, {"LIN.variance", 0.01}, {"noise", 0.03}};
  const std::vector<std::string> names = model.free_names();
  Eigen::VectorXd raw(names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    const double value = natural.at(names[k]);
    raw(k) = gpsel::InverseSoftplus(names[k] == "noise" ? value - gpsel::kNoiseFloor : value);
  }
  Eigen::MatrixXd covariance = model.CrossCovariance(raw, data.x, data.x);
  covariance.diagonal().array() += model.NoiseVariance(raw);
  return {std::move(model), raw, std::move(covariance)};
}

void BM_Score(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const char* kernel_text = kKernels[state.range(1)];
  const gpsel::Dataset& data = Data(n);
  const gpsel::KernelExpr kernel = Kernel(kernel_text);
  gpsel::ScoreOptions options;  // 5 restarts per fit, standardised y, seed 0
  options.metrics = gpsel::AllMetrics();
  options.fit.threads = static_cast<int>(state.range(2));
  gpsel::KernelScore score;
  for (auto _ : state) {
    absl::StatusOr<gpsel::KernelScore> s = gpsel::ScoreKernel(data, kernel, options);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    score = *std::move(s);
    benchmark::DoNotOptimize(score.metrics);
  }
  state.SetLabel(kernel_text);
  for (const char* m : {"mll", "map", "lap", "lap0", "lap_aic", "lap_bic", "aic", "bic"}) {
    auto it = score.metrics.find(m);
    state.counters[m] = it == score.metrics.end() ? NAN : it->second;
  }
  state.counters["u"] = score.num_hyperparameters;
  state.counters["evals_mll"] = score.mll_fit->evaluations;
  state.counters["evals_map"] = score.map_fit->evaluations;
  state.counters["iters_mll"] = score.mll_fit->iterations;
  state.counters["iters_map"] = score.map_fit->iterations;
}

void BM_LogLikGrad(benchmark::State& state) {
  const SeLinSetup setup = MakeSeLin(static_cast<int>(state.range(0)));
  Eigen::VectorXd gradient;
  for (auto _ : state) {
    absl::StatusOr<double> value = setup.model.LogLikelihood(setup.raw, &gradient);
    benchmark::DoNotOptimize(value);
    benchmark::DoNotOptimize(gradient.data());
  }
}

void BM_LogLik(benchmark::State& state) {
  const SeLinSetup setup = MakeSeLin(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    absl::StatusOr<double> value = setup.model.LogLikelihood(setup.raw);
    benchmark::DoNotOptimize(value);
  }
}

void BM_EigenLLT(benchmark::State& state) {
  const SeLinSetup setup = MakeSeLin(static_cast<int>(state.range(0)));
  Eigen::LLT<Eigen::MatrixXd> llt(setup.covariance.rows());
  for (auto _ : state) {
    llt.compute(setup.covariance);  // copies the matrix in, as the likelihood path does
    benchmark::DoNotOptimize(llt.matrixLLT().data());
  }
  if (llt.info() != Eigen::Success) state.SkipWithError("LLT failed");
}

// This virtual machine's speed drifts by ±20 % and more within minutes (bench/RESULTS.md), so
// BM_LogLikGrad and BM_EigenLLT, run one after the other, can see different machines. Here each
// iteration times one likelihood+gradient and then one LLT of the same matrix; the median of the
// per-pair ratios is the figure, robust to drift and to the odd preempted call.
void BM_GradVsLlt(benchmark::State& state) {
  const SeLinSetup setup = MakeSeLin(static_cast<int>(state.range(0)));
  Eigen::LLT<Eigen::MatrixXd> llt(setup.covariance.rows());
  Eigen::VectorXd gradient;
  std::vector<double> grad_us, llt_us, ratios;
  using Clock = std::chrono::steady_clock;
  auto micros = [](Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
  };
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<double> value = setup.model.LogLikelihood(setup.raw, &gradient);
    benchmark::DoNotOptimize(value);
    benchmark::DoNotOptimize(gradient.data());
    const Clock::time_point t1 = Clock::now();
    llt.compute(setup.covariance);  // copies the matrix in, as the likelihood path does
    benchmark::DoNotOptimize(llt.matrixLLT().data());
    const Clock::time_point t2 = Clock::now();
    grad_us.push_back(micros(t1 - t0));
    llt_us.push_back(micros(t2 - t1));
    ratios.push_back(grad_us.back() / llt_us.back());
  }
  // q-quantile (nearest rank) of a sample.
  auto quantile = [](std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
  };
  state.counters["lik_grad_us"] = quantile(grad_us, 0.5);
  state.counters["llt_us"] = quantile(llt_us, 0.5);
  state.counters["ratio"] = quantile(ratios, 0.5);
  state.counters["ratio_p10"] = quantile(ratios, 0.1);
  state.counters["ratio_p90"] = quantile(ratios, 0.9);
}

void BM_LapackPotrf(benchmark::State& state) {
  const SeLinSetup setup = MakeSeLin(static_cast<int>(state.range(0)));
  const int n = static_cast<int>(setup.covariance.rows());
  Eigen::MatrixXd a(n, n);
  int info = 0;
  for (auto _ : state) {
    a = setup.covariance;  // dpotrf works in place: copy in, as the likelihood path does
    dpotrf_("L", &n, a.data(), &n, &info, 1);
    benchmark::DoNotOptimize(a.data());
  }
  if (info != 0) state.SkipWithError("dpotrf failed");
}

void BM_KernelEval(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const SeLinSetup setup = MakeSeLin(n);
  const gpsel::internal::KernelEvaluator evaluator(setup.model.kernel());
  const gpsel::internal::PairGeometry geometry =
      evaluator.MakeGeometry(setup.model.x(), setup.model.x());
  const Eigen::VectorXd full = setup.model.ExpandRaw(setup.raw);
  std::vector<gpsel::internal::KernelEvaluator::NodeValue> values;
  for (auto _ : state) {
    evaluator.Evaluate(geometry, full.head(evaluator.num_parameters()), true, &values);
    benchmark::DoNotOptimize(values.data());
  }
}

void BM_SpdCompute(benchmark::State& state) {
  const SeLinSetup setup = MakeSeLin(static_cast<int>(state.range(0)));
  gpsel::SpdFactorization chol;
  for (auto _ : state) {
    absl::Status s = chol.Compute(setup.covariance);
    benchmark::DoNotOptimize(s);
  }
}

void BM_SpdInverse(benchmark::State& state) {
  const SeLinSetup setup = MakeSeLin(static_cast<int>(state.range(0)));
  gpsel::SpdFactorization chol;
  if (!chol.Compute(setup.covariance).ok()) state.SkipWithError("Compute failed");
  for (auto _ : state) {
    Eigen::MatrixXd inverse = chol.Inverse();
    benchmark::DoNotOptimize(inverse.data());
  }
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int n : {50, 200, 1000}) b->Arg(n);
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Score)
    ->ArgsProduct({{50, 200, 1000}, {0, 1}, {1, 2}})
    ->ArgNames({"n", "kernel", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK(BM_LogLikGrad)->Apply(Sizes);
BENCHMARK(BM_EigenLLT)->Apply(Sizes);
BENCHMARK(BM_LapackPotrf)->Apply(Sizes);
BENCHMARK(BM_GradVsLlt)->Apply(Sizes)->MinTime(3.0);
BENCHMARK(BM_LogLik)->Apply(Sizes);
BENCHMARK(BM_KernelEval)->Apply(Sizes);
BENCHMARK(BM_SpdCompute)->Apply(Sizes);
BENCHMARK(BM_SpdInverse)->Apply(Sizes);

}  // namespace

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  // Take --data_dir=DIR out before Google Benchmark parses its own flags.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--data_dir=", 11) == 0) {
      g_data_dir = argv[i] + 11;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  benchmark::AddCustomContext("data", g_data_dir.empty() ? "generated in C++ (not sklearn's)"
                                                         : g_data_dir + "/synth_n<n>.csv");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
