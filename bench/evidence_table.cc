// Issue 3 table: nested-sampling evidence on the paper's interpretable example (n = 10, SE,
// exact log Z = -8.032) and on SE+LIN over 50 synthetic points (with the Laplace metrics of
// ScoreKernel for comparison), static and dynamic, over 5 seeds each at dlogz 0.01; and the
// Mauna Loa kernels k1 = C*SE and k1+2 = C*SE + C*SE*PER (521 points, standardised y).
//
//   ./build/bench/evidence_table small                 # the two small problems (seconds)
//   ./build/bench/evidence_table mauna k1 static 3000000 600
//   ./build/bench/evidence_table mauna k12 static 3000000 600
//   ./build/bench/evidence_table mauna-is k12 2 900 [1.3 5]  # importance sampling: threads, cap,
//                                                            # covariance inflation, t dof
//   ./build/bench/evidence_table ns-batch paper|k1|k12|synth7|gauss7 SEEDS B [max_calls]
//       # nested sampling with batch_size B (issue 15 item 3): per seed, alternately, batch 1 on
//       # one thread, batch B on one thread and batch B on two threads (same bits, timed side by
//       # side); then per configuration the mean calls and wall time, the scatter of log Z and
//       # the statistical cost scatter² × calls relative to batch 1.
// Prints markdown table rows (see bench/RESULTS.md, "Issue 3 — nested sampling" and "Issue 15 —
// importance-sampling evidence").
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_format.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/nested_sampling.h"
#include "gpsel/core/score.h"

namespace {

// The paper's Sec. 4.1 example, by 2-D quadrature (tests/core/evidence_test.cc).
constexpr double kPaperExact = -8.032;

gpsel::Dataset LoadOrDie(const std::string& name) {
  absl::StatusOr<gpsel::Dataset> d = gpsel::LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/" + name);
  if (!d.ok()) {
    std::fprintf(stderr, "%s\n", std::string(d.status().message()).c_str());
    std::exit(1);
  }
  return *d;
}

gpsel::KernelExpr KernelOrDie(const char* text) {
  absl::StatusOr<gpsel::KernelExpr> k = gpsel::ParseKernel(text);
  if (!k.ok()) {
    std::fprintf(stderr, "%s\n", std::string(k.status().message()).c_str());
    std::exit(1);
  }
  return *k;
}

// 50 points on [0, 5]: a linear trend plus a smooth wiggle plus noise (fixed seed).
gpsel::Dataset SeLinData() {
  std::mt19937_64 rng(20261122);
  std::normal_distribution<double> normal(0.0, 1.0);
  gpsel::Dataset d;
  d.x.resize(50, 1);
  d.y.resize(50);
  for (int i = 0; i < 50; ++i) {
    const double x = 5.0 * i / 49.0;
    d.x(i, 0) = x;
    d.y[i] = 0.6 * x + std::sin(2.0 * x) + 0.2 * normal(rng);
  }
  return d;
}

struct Row {
  std::string problem, mode;
  std::vector<double> log_z, err, calls, seconds, cpu;
  bool any_partial = false;
};

void PrintRow(const Row& r, double exact) {
  const int k = static_cast<int>(r.log_z.size());
  double mean = 0, err = 0, calls = 0, secs = 0, max_secs = 0, max_abs = 0, cpu = 0;
  for (int i = 0; i < k; ++i) {
    mean += r.log_z[i] / k;
    err += r.err[i] / k;
    calls += r.calls[i] / k;
    secs += r.seconds[i] / k;
    cpu += r.cpu[i] / k;
    max_secs = std::max(max_secs, r.seconds[i]);
    if (!std::isnan(exact)) max_abs = std::max(max_abs, std::abs(r.log_z[i] - exact));
  }
  double var = 0;
  for (double z : r.log_z) var += (z - mean) * (z - mean) / std::max(1, k - 1);
  std::printf("| %s | %s | %d | %.0f | %.3f (max %.3f) | %.3f | %.4f | %.4f | %.4f | %s |%s\n",
              r.problem.c_str(), r.mode.c_str(), k, calls, secs, max_secs, cpu, mean,
              std::sqrt(var), err,
              std::isnan(exact) ? "n/a" : absl::StrFormat("%.4f", max_abs).c_str(),
              r.any_partial ? " PARTIAL" : "");
  std::fflush(stdout);
}

Row RunSeeds(const std::string& problem, const gpsel::Dataset& data, const gpsel::KernelExpr& k,
             bool standardize, bool dynamic, int seeds) {
  Row row;
  row.problem = problem;
  row.mode = dynamic ? "dynamic" : "static";
  for (int seed = 0; seed < seeds; ++seed) {
    gpsel::EvidenceOptions options;
    options.standardize = standardize;
    options.sampling.dlogz = 0.01;
    options.sampling.dynamic = dynamic;
    options.sampling.seed = seed;
    const std::clock_t cpu0 = std::clock();
    absl::StatusOr<gpsel::EvidenceResult> e = gpsel::ComputeEvidence(data, k, options);
    row.cpu.push_back(static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC);
    if (!e.ok()) {
      std::fprintf(stderr, "%s\n", std::string(e.status().message()).c_str());
      std::exit(1);
    }
    row.log_z.push_back(e->sampling->log_evidence);
    row.err.push_back(e->sampling->log_evidence_error);
    row.calls.push_back(static_cast<double>(e->sampling->likelihood_calls));
    row.seconds.push_back(e->sampling->seconds);
    row.any_partial |= e->sampling->partial;
  }
  return row;
}

int Small() {
  const gpsel::Dataset paper = LoadOrDie("interpretable_linear.csv");
  const gpsel::Dataset selin = SeLinData();
  const gpsel::KernelExpr se = KernelOrDie("SE");
  const gpsel::KernelExpr se_lin = KernelOrDie("SE+LIN");
  std::printf(
      "| problem | mode | seeds | mean calls | mean wall s (max) | mean CPU s | mean log Z | "
      "scatter (sd) | "
      "mean reported err | max abs(log Z - exact) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (bool dynamic : {false, true}) {
    PrintRow(RunSeeds("paper n=10, SE, raw y", paper, se, false, dynamic, 5), kPaperExact);
  }
  for (bool dynamic : {false, true}) {
    PrintRow(RunSeeds("synthetic n=50, SE+LIN, std y", selin, se_lin, true, dynamic, 5), NAN);
  }
  // Laplace metrics for SE+LIN (MAP fit, 5 restarts, standardised y).
  gpsel::ScoreOptions so;
  so.metrics = gpsel::AllMetrics();
  absl::StatusOr<gpsel::KernelScore> s = gpsel::ScoreKernel(selin, se_lin, so);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.status().message()).c_str());
    return 1;
  }
  std::printf("\nScoreKernel, synthetic n=50, SE+LIN (%.3f s):", s->seconds);
  for (const auto& [name, value] : s->metrics) std::printf(" %s %.3f;", name.c_str(), value);
  for (const auto& [name, why] : s->undefined_metrics)
    std::printf(" %s undefined (%s);", name.c_str(), why.c_str());
  std::printf("\n");
  return 0;
}

int Mauna(const std::string& which, bool dynamic, long long max_calls, double max_seconds) {
  const gpsel::Dataset data = LoadOrDie("mauna_loa_monthly.csv");
  const gpsel::KernelExpr k = KernelOrDie(which == "k1" ? "C*SE" : "C*SE + C*SE*PER");
  gpsel::EvidenceOptions options;
  options.standardize = true;
  options.sampling.dlogz = 0.01;
  options.sampling.dynamic = dynamic;
  options.sampling.seed = 0;
  options.sampling.max_likelihood_calls = max_calls;
  options.sampling.max_seconds = max_seconds;
  int last_percent = -1;
  absl::StatusOr<gpsel::EvidenceResult> e =
      gpsel::ComputeEvidence(data, k, options, [&](const gpsel::Progress& p) {
        const int percent = static_cast<int>(100 * p.fraction);
        if (percent != last_percent) {
          last_percent = percent;
          std::fprintf(stderr, "[%s] %d%% %s\n", which.c_str(), percent, p.message.c_str());
        }
        return absl::OkStatus();
      });
  if (!e.ok()) {
    std::fprintf(stderr, "%s\n", std::string(e.status().message()).c_str());
    return 1;
  }
  const gpsel::NestedSamplingResult& r = *e->sampling;
  std::printf(
      "| Mauna Loa %s = %s (n=%d, u=%d, std y) | %s | %.4f | %.4f (%s) | nested %.4f ± %.4f, "
      "bootstrap %.4f | %lld | %lld | %d | %.1f | %s |\n",
      which.c_str(), e->kernel.c_str(), e->num_points, e->num_hyperparameters,
      dynamic ? "dynamic" : "static", r.log_evidence, r.log_evidence_error,
      r.log_evidence_estimator.c_str(), r.log_evidence_nested, r.log_evidence_nested_error,
      r.log_evidence_error_bootstrap, static_cast<long long>(r.likelihood_calls),
      static_cast<long long>(r.iterations), r.num_live, r.seconds,
      r.partial ? ("PARTIAL: " + r.partial_reason).c_str() : "complete");
  std::fflush(stdout);
  return 0;
}

// The paper's Table 4 kernels (bench/mauna_loa_table.cc has the paper's values).
const char* MaunaKernel(const std::string& which) {
  if (which == "k1") return "C*SE";
  if (which == "k12") return "C*SE + C*SE*PER";
  if (which == "k123") return "C*SE + C*SE*PER + C*RQ";
  if (which == "k1234") return "C*SE + C*SE*PER + C*RQ + C*SE";
  return nullptr;
}

// Importance-sampling evidence of one Mauna Loa kernel (seed 0, target 0.02 nats unless a time
// cap stops it) beside the Laplace metrics of ScoreKernel (5 restarts, seed 0).
int MaunaImportance(const std::string& which, int threads, double max_seconds, double inflation,
                    int dof) {
  const char* text = MaunaKernel(which);
  if (text == nullptr) {
    std::fprintf(stderr, "unknown kernel %s (k1, k12, k123, k1234)\n", which.c_str());
    return 2;
  }
  const gpsel::Dataset data = LoadOrDie("mauna_loa_monthly.csv");
  const gpsel::KernelExpr k = KernelOrDie(text);
  gpsel::EvidenceOptions options;
  options.method = gpsel::EvidenceMethod::kImportance;
  options.importance.threads = threads;
  options.importance.max_seconds = max_seconds;
  options.importance.covariance_inflation = inflation;
  options.importance.student_t_dof = dof;
  std::string last_stage;
  absl::StatusOr<gpsel::EvidenceResult> e =
      gpsel::ComputeEvidence(data, k, options, [&](const gpsel::Progress& p) {
        if (p.poll_only) return absl::OkStatus();
        if (p.stage != last_stage || p.stage == "importance_sampling") {
          last_stage = p.stage;
          std::fprintf(stderr, "[%s] %s %s\n", which.c_str(), p.stage.c_str(), p.message.c_str());
        }
        return absl::OkStatus();
      });
  if (!e.ok()) {
    std::fprintf(stderr, "%s\n", std::string(e.status().message()).c_str());
    return 1;
  }
  gpsel::ScoreOptions score_options;
  score_options.fit.threads = threads;
  absl::StatusOr<gpsel::KernelScore> s = gpsel::ScoreKernel(data, k, score_options);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.status().message()).c_str());
    return 1;
  }
  const gpsel::ImportanceSamplingResult& r = *e->importance;
  int adapted = 0;
  for (const gpsel::ProposalMode& m : r.modes) adapted += m.adapted ? 1 : 0;
  auto metric = [&](const char* name) {
    auto it = s->metrics.find(name);
    return it == s->metrics.end() ? std::string("—") : absl::StrFormat("%.2f", it->second);
  };
  std::printf(
      "| %s | %d | **%.3f** ± %.3f | %.0f | %.2f | %s | %d + %d adapted | %lld + %lld | %.0f | %s "
      "| "
      "%s | %s | %s | %s |\n",
      which.c_str(), e->num_hyperparameters, e->log_evidence, e->log_evidence_error,
      r.effective_sample_size, r.pareto_k, r.reliable ? "yes" : ("no: " + r.reliability).c_str(),
      static_cast<int>(r.modes.size()) - adapted, adapted,
      static_cast<long long>(e->mode_search_evaluations), static_cast<long long>(r.num_samples),
      e->seconds, metric("lap").c_str(), metric("lap0").c_str(), metric("lap_aic").c_str(),
      metric("lap_bic").c_str(), r.partial ? ("PARTIAL: " + r.partial_reason).c_str() : "complete");
  for (size_t m = 0; m < r.modes.size(); ++m) {
    std::fprintf(stderr, "  component %zu: weight %.3f carries %.3f, %s\n", m + 1,
                 r.mode_weights[m], r.mode_weight_shares[m], r.modes[m].origin.c_str());
  }
  std::fflush(stdout);
  return 0;
}

// Issue 15 item 3: batch_size B against 1, and 2 threads against 1 at the same B. The same seed
// and B give the same bits on any thread count (checked here too), so the two-thread runs do the
// work of the one-thread runs and their wall-time ratio is the parallel speed-up; the batch-1
// runs give the statistical cost of batching (scatter² × calls: calls needed per nat² of
// variance). Configurations alternate within each seed (order reversed on odd seeds) so that
// load on the shared machine falls on all of them alike.
int NsBatch(const std::string& problem, int seeds, int batch, long long max_calls) {
  gpsel::Dataset data;
  const char* kernel_text = nullptr;
  bool standardize = true;
  double exact = NAN;
  if (problem == "paper") {
    data = LoadOrDie("interpretable_linear.csv");
    kernel_text = "SE";
    standardize = false;
    exact = kPaperExact;
  } else if (problem == "k1" || problem == "k12") {
    data = LoadOrDie("mauna_loa_monthly.csv");
    kernel_text = MaunaKernel(problem);
  } else if (problem == "synth7") {
    // 7 hyperparameters (slice sampling) at a small n, so that many seeds are affordable.
    data = SeLinData();
    kernel_text = "C*SE + C*SE*PER";
  } else if (problem == "gauss7") {
    // Slice sampling on a closed form: L = N(θ; 0.4·1, 0.3² I) in 7 dimensions under the N(0, I)
    // prior, log Z = Σ log N(0.4; 0, 1 + 0.3²).
    exact = 7 * (-0.5 * 0.16 / 1.09 - 0.5 * std::log(2 * M_PI * 1.09));
  } else {
    std::fprintf(stderr, "unknown problem %s (paper, k1, k12, synth7, gauss7)\n", problem.c_str());
    return 2;
  }
  const gpsel::KernelExpr k = KernelOrDie(kernel_text ? kernel_text : "SE");
  const gpsel::LogLikelihoodFn gauss7 = [](const Eigen::VectorXd& x) {
    return -0.5 * (x.array() - 0.4).square().sum() / 0.09 - 7 * std::log(0.3) -
           3.5 * std::log(2 * M_PI);
  };
  struct Config {
    const char* name;
    int batch, threads;
    std::vector<double> log_z, err, calls, wall, cpu;
    int partial = 0;
  };
  std::vector<Config> configs = {{"batch 1, 1 thread", 1, 1, {}, {}, {}, {}, {}},
                                 {"batch B, 1 thread", batch, 1, {}, {}, {}, {}, {}},
                                 {"batch B, 2 threads", batch, 2, {}, {}, {}, {}, {}}};
  int same_bits = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    std::vector<int> order = {0, 1, 2};
    if (seed % 2 == 1) order = {2, 1, 0};
    for (int c : order) {
      Config& cfg = configs[c];
      gpsel::EvidenceOptions options;
      options.standardize = standardize;
      options.sampling.dlogz = 0.01;
      options.sampling.seed = seed;
      options.sampling.batch_size = cfg.batch;
      options.sampling.threads = cfg.threads;
      if (max_calls > 0) options.sampling.max_likelihood_calls = max_calls;
      const std::clock_t cpu0 = std::clock();
      absl::StatusOr<gpsel::NestedSamplingResult> run;
      if (problem == "gauss7") {
        run = gpsel::RunNestedSampling(gauss7, Eigen::VectorXd::Zero(7), Eigen::VectorXd::Ones(7),
                                       options.sampling);
      } else {
        absl::StatusOr<gpsel::EvidenceResult> e = gpsel::ComputeEvidence(data, k, options);
        if (e.ok()) {
          run = *e->sampling;
        } else {
          run = e.status();
        }
      }
      const double cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
      if (!run.ok()) {
        std::fprintf(stderr, "%s\n", std::string(run.status().message()).c_str());
        return 1;
      }
      const gpsel::NestedSamplingResult& r = *run;
      cfg.log_z.push_back(r.log_evidence);
      cfg.err.push_back(r.log_evidence_error);
      cfg.calls.push_back(static_cast<double>(r.likelihood_calls));
      cfg.wall.push_back(r.seconds);
      cfg.cpu.push_back(cpu);
      cfg.partial += r.partial ? 1 : 0;
      std::fprintf(stderr, "[%s seed %d] %s: log Z %.4f ± %.4f (%s), %lld calls, %.2f s wall, %.2f s CPU%s\n",
                   problem.c_str(), seed, cfg.name, r.log_evidence, r.log_evidence_error,
                   r.log_evidence_estimator.c_str(), static_cast<long long>(r.likelihood_calls),
                   r.seconds, cpu, r.partial ? " (partial)" : "");
    }
    same_bits += configs[1].log_z.back() == configs[2].log_z.back() &&
                 configs[1].calls.back() == configs[2].calls.back();
  }
  auto mean = [](const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m += x / v.size();
    return m;
  };
  auto sd = [&](const std::vector<double>& v) {
    if (v.size() < 2) return std::nan("");
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m) / (v.size() - 1);
    return std::sqrt(s);
  };
  std::printf("%s, B = %d, %d seeds%s; batch-B runs on 1 and 2 threads bit-identical in %d of %d seeds\n\n",
              problem.c_str(), batch, seeds,
              max_calls > 0 ? absl::StrFormat(", cap %lld calls", max_calls).c_str() : "",
              same_bits, seeds);
  std::printf("| configuration | mean calls | mean wall s | mean CPU s | mean log Z | scatter (sd) | "
              "mean reported err | scatter² × calls (rel. to batch 1) | wall rel. to 1 thread | partial |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  const double base_cost = std::pow(sd(configs[0].log_z), 2) * mean(configs[0].calls);
  for (size_t c = 0; c < configs.size(); ++c) {
    const Config& cfg = configs[c];
    const double cost = std::pow(sd(cfg.log_z), 2) * mean(cfg.calls);
    // Wall time per seed relative to the same batch size on one thread (median over seeds).
    std::string wall_ratio = "—";
    if (c == 2) {
      std::vector<double> ratios;
      for (size_t i = 0; i < cfg.wall.size(); ++i) ratios.push_back(cfg.wall[i] / configs[1].wall[i]);
      std::sort(ratios.begin(), ratios.end());
      wall_ratio = absl::StrFormat("%.2f (median; range %.2f–%.2f)", ratios[ratios.size() / 2],
                                   ratios.front(), ratios.back());
    }
    std::printf("| %s | %.0f | %.3f | %.3f | %.4f%s | %.4f | %.4f | %.3g (%.2f) | %s | %d |\n",
                c == 0 ? "batch 1, 1 thread"
                       : absl::StrFormat("batch %d, %d thread%s", cfg.batch, cfg.threads,
                                         cfg.threads > 1 ? "s" : "").c_str(),
                mean(cfg.calls), mean(cfg.wall), mean(cfg.cpu), mean(cfg.log_z),
                std::isnan(exact) ? "" : absl::StrFormat(" (exact %.3f)", exact).c_str(),
                sd(cfg.log_z), mean(cfg.err), cost, cost / base_cost, wall_ratio.c_str(),
                cfg.partial);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  const std::string mode = argc > 1 ? argv[1] : "small";
  if (mode == "small") return Small();
  if (mode == "mauna" && argc > 2) {
    const bool dynamic = argc > 3 && std::string(argv[3]) == "dynamic";
    const long long calls = argc > 4 ? std::atoll(argv[4]) : 3'000'000;
    const double seconds = argc > 5 ? std::atof(argv[5]) : 600;
    return Mauna(argv[2], dynamic, calls, seconds);
  }
  if (mode == "mauna-is" && argc > 2) {
    const gpsel::ImportanceSamplingOptions defaults;
    return MaunaImportance(argv[2], argc > 3 ? std::atoi(argv[3]) : 2,
                           argc > 4 ? std::atof(argv[4]) : 900,
                           argc > 5 ? std::atof(argv[5]) : defaults.covariance_inflation,
                           argc > 6 ? std::atoi(argv[6]) : defaults.student_t_dof);
  }
  if (mode == "ns-batch" && argc > 4) {
    return NsBatch(argv[2], std::atoi(argv[3]), std::atoi(argv[4]),
                   argc > 5 ? std::atoll(argv[5]) : 0);
  }
  std::fprintf(stderr,
               "usage: %s small | mauna k1|k12 [static|dynamic] [max_calls] [max_s] | "
               "mauna-is k1|k12|k123|k1234 [threads] [max_s] [inflation] [dof] | "
               "ns-batch paper|k1|k12|synth7|gauss7 seeds batch [max_calls]\n",
               argv[0]);
  return 2;
}
