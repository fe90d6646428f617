// Benchmarks of RunNestedSampling on the paper's 2-D example (GP with SE lengthscale + noise,
// 10 points; exact log Z = -8.032) and on Gaussian likelihoods in 2 and 6 dimensions. Counters
// report likelihood calls, |log Z - exact| and the reported error per run.
//
//   ./build/bench/nested_sampling_bench --benchmark_counters_tabular=true
#include <cmath>
#include <limits>

#include "Eigen/Dense"
#include "benchmark/benchmark.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/nested_sampling.h"

namespace {

double Softplus(double r) { return r > 30 ? r : std::log1p(std::exp(r)); }

// log N(y | 0, K + σ² I) for the SE kernel on data/interpretable_linear.csv (~1-2 µs a call).
double PaperGpLogLik(const Eigen::VectorXd& raw) {
  static const double xs[] = {0, 1.0 / 9, 2.0 / 9, 3.0 / 9, 4.0 / 9, 5.0 / 9, 6.0 / 9, 7.0 / 9, 8.0 / 9, 1};
  static const double ys[] = {0.106470838606225, 0.151844221539413, 0.296365731603068,
                              0.406171032190665, 0.0893660808707719, 0.496633373724801,
                              1.3649612419355,   0.576025393790963, 1.03487772075105,
                              1.08454376768281};
  const double ell = Softplus(raw[0]), noise = 1e-4 + Softplus(raw[1]);
  Eigen::Matrix<double, 10, 10> k;
  Eigen::Matrix<double, 10, 1> y;
  for (int i = 0; i < 10; ++i) {
    y[i] = ys[i];
    for (int j = 0; j < 10; ++j) {
      const double d = xs[i] - xs[j];
      k(i, j) = std::exp(-0.5 * d * d / (ell * ell)) + (i == j ? noise : 0.0);
    }
  }
  Eigen::LLT<Eigen::Matrix<double, 10, 10>> llt(k);
  if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
  const Eigen::Matrix<double, 10, 1> a = llt.matrixL().solve(y);
  return -0.5 * a.squaredNorm() -
         Eigen::Matrix<double, 10, 10>(llt.matrixL()).diagonal().array().log().sum() - 5 * std::log(2 * M_PI);
}

void Report(benchmark::State& state, double abs_error_sum, double error_sum, double calls_sum, int runs) {
  state.counters["calls"] = calls_sum / runs;
  state.counters["abs_err"] = abs_error_sum / runs;
  state.counters["reported_err"] = error_sum / runs;
}

// Runs the paper's 10-point GP example (log Z = −8.032) once per iteration with `options`, seed
// by seed, and reports its error and calls.
void RunPaperGp(benchmark::State& state, gpsel::NestedSamplingOptions options) {
  const Eigen::Vector2d mean(-0.212, -3.52), sd(1.89, 3.58);
  double abs_error = 0, error = 0, calls = 0;
  int runs = 0;
  for (auto _ : state) {
    options.seed = runs;
    auto r = gpsel::RunNestedSampling(PaperGpLogLik, mean, sd, options);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    abs_error += std::abs(r->log_evidence + 8.032);
    error += r->log_evidence_error;
    calls += r->likelihood_calls;
    ++runs;
  }
  Report(state, abs_error, error, calls, runs);
}

void BM_PaperGp(benchmark::State& state) {
  gpsel::NestedSamplingOptions options;
  options.dynamic = state.range(0) != 0;
  RunPaperGp(state, options);
}
BENCHMARK(BM_PaperGp)->Arg(0)->Arg(1)->ArgName("dynamic")->Unit(benchmark::kMillisecond);

// batch_size B (range 0) on T threads (range 1): the same seeds give the same bits for any T,
// so the wall-time ratio of T = 2 to T = 1 at one B is the parallel speed-up; B against 1 gives
// the calls and error cost of batching. The 10-point likelihood costs ~1-2 µs, so the threads'
// hand-over per round dominates here; the Mauna Loa figures are in bench/evidence_table.cc
// (ns-batch).
void BM_PaperGpBatch(benchmark::State& state) {
  gpsel::NestedSamplingOptions options;
  options.batch_size = static_cast<int>(state.range(0));
  options.threads = static_cast<int>(state.range(1));
  RunPaperGp(state, options);
}
BENCHMARK(BM_PaperGpBatch)
    ->Args({1, 1})
    ->Args({8, 1})
    ->Args({8, 2})
    ->ArgNames({"batch", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Likelihood cost alone, for reference.
void BM_PaperGpLikelihoodCall(benchmark::State& state) {
  Eigen::VectorXd raw(2);
  raw << 0.5, -2.4;
  for (auto _ : state) {
    benchmark::DoNotOptimize(PaperGpLogLik(raw));
    raw[0] += 1e-12;
  }
}
BENCHMARK(BM_PaperGpLikelihoodCall);

// Isotropic Gaussian likelihood N(0.5·1, 0.1² I) under a N(0, I) prior, dimension = range(0).
void BM_Gaussian(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const Eigen::VectorXd mu = Eigen::VectorXd::Constant(d, 0.5);
  const double w = 0.1;
  auto loglik = [&](const Eigen::VectorXd& x) {
    return -0.5 * (x - mu).squaredNorm() / (w * w) - d * std::log(w) - 0.5 * d * std::log(2 * M_PI);
  };
  const double exact = -0.5 * d * 0.25 / (1 + w * w) - 0.5 * d * std::log(2 * M_PI * (1 + w * w));
  gpsel::NestedSamplingOptions options;
  double abs_error = 0, error = 0, calls = 0;
  int runs = 0;
  for (auto _ : state) {
    options.seed = runs;
    auto r = gpsel::RunNestedSampling(loglik, Eigen::VectorXd::Zero(d), Eigen::VectorXd::Ones(d), options);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    abs_error += std::abs(r->log_evidence - exact);
    error += r->log_evidence_error;
    calls += r->likelihood_calls;
    ++runs;
  }
  Report(state, abs_error, error, calls, runs);
}
BENCHMARK(BM_Gaussian)->Arg(2)->Arg(6)->ArgName("dim")->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
