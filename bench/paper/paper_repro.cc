// The paper reproduced (issue 29): its kernel-search experiment (Tables 1–3 and the runtime
// figure), the Mauna Loa table (Table 4) and the interpretable example's Fig. 2, computed with
// gpsel and written beside the paper's printed numbers. bench/paper/run.sh drives it:
//
//   paper_repro cells     --out DIR [grid flags]   one JSON per (N, kernel, dataset) cell in
//                                                   DIR/cells/; a cell already there is skipped
//   paper_repro mauna     --out DIR                 DIR/table4.json (skipped when present)
//   paper_repro figure2   --out DIR                 DIR/figure2.json (skipped when present)
//   paper_repro aggregate --out DIR                 DIR/paper.json and DIR/index.html
//
// The data generation follows the authors' code (ABesginow/LaplaceKernelSearch, main.py at the
// ICML state): a zero-mean GP with every raw hyperparameter 0 (GPyTorch's default, each value
// softplus(0) ≈ 0.693, no output scale), at x = linspace(−5, 5, N) z-scored, the latent draw f
// plus noise of sd 0.1; ten fresh noisy draws from the same prior at the same inputs are the
// test sets of Table 3. CKS over SE, LIN, MAT32 with + and *, depth 3, greedy, 5 restarts, y as
// drawn (no standardisation). A kernel is recognised when its canonical expression equals the
// generating kernel's (equal up to commutativity, and associativity, core/kernel_expr.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <Eigen/Dense>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/paper/paper_data.h"
#include "bench/paper/paper_values.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/held_out.h"
#include "gpsel/core/internal/thread_pool.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/client/report/plot.h"

#ifndef GPSEL_DATA_DIR
#define GPSEL_DATA_DIR "data"
#endif

namespace gpsel::paper {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Config {
  std::string out_dir;
  std::vector<int> sizes = {5, 10, 20, 30, 40, 50, 100, 200};
  int datasets = 10;  // per generating kernel and N (the paper: 10, i.e. 40 per row)
  std::vector<std::string> kernels = {"SE", "SE+SE", "LIN", "MAT32"};
  int restarts = 5;
  uint64_t seed = 2024;
  int test_draws = 10;
  int threads = 2;              // cells in parallel
  bool evidence = true;         // Table 2: log Z of the chosen kernels
  int evidence_max_n = 200;     // ... for N up to this
  double evidence_seconds = 60; // cap of one log Z (a capped run is partial and left out)
  double mauna_evidence_seconds = 300;  // cap of Mauna Loa's importance stage (and nested's if 0 below)
  // Live points of Mauna Loa's nested-sampling fallback (0 = nested sampling's automatic 100 + 25u:
  // hours per kernel at n = 521). Its error is about sqrt(H / live points), H = 44 nats for k1+2+3.
  int mauna_live = 0;
  double mauna_nested_seconds = 0;  // cap of that fallback (0: mauna_evidence_seconds)
  std::vector<std::string> mauna_kernels;  // Table 4 columns to compute (empty: all four)
  std::string mode = "custom";  // quick | full | custom: written on the page
  double budget_seconds = 0;    // no new cell after this (0 = none)
};

// ---- the recognition rule --------------------------------------------------------------------

// The chosen kernel counts as the generating one when both are the same kernel up to
// commutativity (the authors compared their expressions' strings after sorting operands): both
// are canonicalised by ParseKernel, so equality of the canonical trees is that rule.
bool Recognised(const std::string& chosen, const std::string& generating) {
  absl::StatusOr<KernelExpr> a = ParseKernel(chosen), b = ParseKernel(generating);
  return a.ok() && b.ok() && *a == *b;
}

// ---- data ------------------------------------------------------------------------------------
// PaperInputs and NoisyPriorDraws: bench/paper/paper_data.h (shared with changepoint_table).

// ---- one cell: (N, generating kernel, dataset index) ------------------------------------------

const std::vector<Metric>& CellMetrics() {
  static const std::vector<Metric> metrics = {Metric::kMll,  Metric::kAic,    Metric::kBic,
                                              Metric::kMap,  Metric::kLap0,   Metric::kLapAic,
                                              Metric::kLapBic, Metric::kLapBicHalf};
  return metrics;
}

std::string CellName(int n, const std::string& kernel, int index) {
  std::string k = kernel;
  std::replace(k.begin(), k.end(), '+', 'p');
  std::replace(k.begin(), k.end(), '*', 'x');
  return absl::StrFormat("N%03d_%s_%02d", n, k, index);
}

ScoreOptions CellScoreOptions(const Config& config) {
  ScoreOptions options;
  options.fit.restarts = config.restarts;
  options.fit.seed = config.seed;
  options.standardize = false;  // the authors fitted y as drawn
  return options;
}

absl::StatusOr<json> RunCell(const Config& config, int n, const std::string& kernel_text,
                             int index) {
  const auto start = Clock::now();
  absl::StatusOr<KernelExpr> generator = ParseKernel(kernel_text);
  if (!generator.ok()) return generator.status();
  const Eigen::MatrixXd x = PaperInputs(n);
  const uint64_t data_seed =
      CandidateSeed(config.seed, absl::StrCat("paper-data|", kernel_text, "|", n, "|", index));
  absl::StatusOr<std::vector<Eigen::VectorXd>> draws =
      NoisyPriorDraws(*generator, x, 1 + config.test_draws, data_seed);
  if (!draws.ok()) return draws.status();
  Dataset data{x, (*draws)[0]};
  std::vector<Dataset> tests;
  for (int d = 1; d <= config.test_draws; ++d) tests.push_back(Dataset{x, (*draws)[d]});

  json cell;
  cell["n"] = n;
  cell["kernel"] = ToString(*generator);
  cell["dataset"] = index;
  cell["seed"] = data_seed;
  ScoreCache cache;
  std::map<std::string, KernelScore> chosen_scores;
  for (Metric metric : CellMetrics()) {
    const std::string name(MetricName(metric));
    SearchOptions options;
    options.metric = name;
    options.threads = 1;  // parallelism is across cells
    options.max_depth = 3;
    options.beam_width = 1;
    options.score = CellScoreOptions(config);
    options.score.metrics = AllMetrics();  // one cache entry serves every metric
    const auto search_start = Clock::now();
    absl::StatusOr<SearchResult> result = RunKernelSearch(data, options, nullptr, &cache);
    json m;
    m["search_seconds"] = SecondsSince(search_start);
    if (!result.ok()) {
      m["error"] = std::string(result.status().message());
      cell["metrics"][name] = m;
      continue;
    }
    const std::string chosen = ToString(result->best_kernel);
    m["chosen"] = chosen;
    m["recognized"] = Recognised(chosen, kernel_text);
    m["score"] = result->best_score;
    m["candidates_scored"] = result->candidates_scored;
    // Table 3: the paper's test log-likelihood at the fit the metric ranks by (MLL fit for
    // mll/aic/bic, MAP fit for the others), averaged over the test draws.
    const std::optional<FitResult>& fit =
        NeedsMllFit(metric) ? result->best.mll_fit : result->best.map_fit;
    if (fit.has_value()) {
      double test_sum = 0, predictive_sum = 0;
      int ok = 0;
      for (const Dataset& test : tests) {
        absl::StatusOr<HeldOutLikelihood> h =
            HeldOutLikelihoodAt(data, test, result->best_kernel, fit->values, false);
        if (!h.ok()) continue;
        test_sum += h->test_log_likelihood;
        predictive_sum += h->PredictiveLogDensityPerPoint();
        ++ok;
      }
      if (ok > 0) {
        m["test_log_likelihood"] = test_sum / ok;
        m["predictive_log_density_per_point"] = predictive_sum / ok;
      }
    }
    chosen_scores.emplace(chosen, result->best);
    cell["metrics"][name] = m;
  }
  cell["search_seconds"] = SecondsSince(start);
  cell["models_fitted"] = static_cast<int>(cache.size());

  // The runtime figure: the cost of one model (the generating kernel) for each kind of metric,
  // fits included, as the paper's figure counts it: MLL fit (mll, aic, bic), MAP fit (map),
  // MAP fit + Hessian (the Laplace variants).
  for (const auto& [label, metrics] :
       std::vector<std::pair<std::string, std::vector<Metric>>>{
           {"mll", {Metric::kMll}}, {"map", {Metric::kMap}}, {"laplace", {Metric::kLap0}}}) {
    ScoreOptions options = CellScoreOptions(config);
    options.metrics = metrics;
    options.compute_laplace_covariance = false;
    const auto t = Clock::now();
    absl::StatusOr<KernelScore> s = ScoreKernel(data, *generator, options);
    if (s.ok()) cell["runtime_seconds"][label] = SecondsSince(t);
  }

  // Table 2: log Z of each distinct chosen kernel (importance sampling where its diagnostics
  // pass, nested sampling otherwise; a capped, partial run is recorded but left out of means).
  if (config.evidence && n <= config.evidence_max_n) {
    for (const auto& [chosen, score] : chosen_scores) {
      EvidenceOptions options;
      options.method = EvidenceMethod::kAuto;
      options.standardize = false;
      options.sampling.seed = CandidateSeed(config.seed, absl::StrCat("paper-evidence|", chosen));
      options.importance.seed = options.sampling.seed;
      options.sampling.max_seconds = config.evidence_seconds;
      options.importance.max_seconds = config.evidence_seconds;
      const auto t = Clock::now();
      absl::StatusOr<EvidenceResult> e = ComputeEvidence(data, *ParseKernel(chosen), options);
      json ev;
      ev["seconds"] = SecondsSince(t);
      if (e.ok()) {
        ev["log_evidence"] = e->log_evidence;
        ev["log_evidence_error"] = e->log_evidence_error;
        ev["method"] = std::string(EvidenceMethodName(e->method));
        ev["partial"] = e->partial;
      } else {
        ev["error"] = std::string(e.status().message());
      }
      cell["evidence"][chosen] = ev;
    }
  }
  cell["seconds"] = SecondsSince(start);
  return cell;
}

absl::Status WriteJsonAtomically(const fs::path& path, const json& value) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << value.dump(1) << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp.string()));
  }
  fs::rename(tmp, path);
  return absl::OkStatus();
}

int RunCells(const Config& config) {
  const fs::path dir = fs::path(config.out_dir) / "cells";
  fs::create_directories(dir);
  struct Todo {
    int n;
    std::string kernel;
    int index;
  };
  std::vector<Todo> todo;
  int skipped = 0;
  for (int n : config.sizes) {
    for (int index = 0; index < config.datasets; ++index) {
      for (const std::string& kernel : config.kernels) {
        if (fs::exists(dir / (CellName(n, kernel, index) + ".json"))) {
          ++skipped;
          continue;
        }
        todo.push_back({n, kernel, index});
      }
    }
  }
  std::cerr << absl::StrFormat("paper_repro cells: %d to run, %d already done (resumed)\n",
                               todo.size(), skipped);
  const auto start = Clock::now();
  std::atomic<int> done{0}, failed{0}, not_started{0};
  std::mutex print_mutex;
  {
    ThreadPool pool(config.threads);
    for (const Todo& t : todo) {
      pool.Schedule([&, t] {
        if (config.budget_seconds > 0 && SecondsSince(start) > config.budget_seconds) {
          ++not_started;
          return;
        }
        absl::StatusOr<json> cell = RunCell(config, t.n, t.kernel, t.index);
        std::lock_guard<std::mutex> lock(print_mutex);
        if (!cell.ok()) {
          ++failed;
          std::cerr << "cell " << CellName(t.n, t.kernel, t.index) << ": " << cell.status() << "\n";
          return;
        }
        absl::Status s = WriteJsonAtomically(dir / (CellName(t.n, t.kernel, t.index) + ".json"),
                                             *cell);
        if (!s.ok()) std::cerr << s << "\n";
        std::cerr << absl::StrFormat("[%d/%d %5.0fs] %s: %.1f s\n", ++done, todo.size(),
                                     SecondsSince(start), CellName(t.n, t.kernel, t.index),
                                     (*cell)["seconds"].get<double>());
      });
    }
  }
  std::cerr << absl::StrFormat("paper_repro cells: %d run, %d failed, %d not started (budget), "
                               "%.0f s\n",
                               done.load(), failed.load(), not_started.load(), SecondsSince(start));
  return failed.load() == 0 ? 0 : 1;
}

// ---- Table 4: Mauna Loa -----------------------------------------------------------------------

int RunMauna(const Config& config) {
  // Written after each kernel, so that an interrupted run keeps the kernels it finished and a
  // rerun continues with the next one.
  const fs::path path = fs::path(config.out_dir) / "table4.json";
  json table = json::object();
  if (fs::exists(path)) {
    std::ifstream in(path);
    table = json::parse(in);
  }
  absl::StatusOr<Dataset> data =
      LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/mauna_loa_monthly.csv");
  if (!data.ok()) {
    std::cerr << data.status() << "\n";
    return 1;
  }
  for (const MaunaLoaColumn& column : MaunaLoaColumns()) {
    if (!config.mauna_kernels.empty() &&
        std::find(config.mauna_kernels.begin(), config.mauna_kernels.end(), column.name) ==
            config.mauna_kernels.end()) {
      continue;
    }
    if (table.contains(column.name)) {
      std::cerr << "paper_repro mauna: " << column.name << " done before (resumed)\n";
      continue;
    }
    json entry;
    entry["expression"] = column.kernel;
    const std::clock_t cpu_start = std::clock();  // one thread: this process's CPU is the kernel's
    ScoreOptions options;
    options.fit.restarts = config.restarts;
    options.fit.seed = config.seed;
    options.fit.threads = config.threads;
    options.metrics = AllMetrics();
    const auto t = Clock::now();
    absl::StatusOr<KernelScore> score = ScoreKernel(*data, *ParseKernel(column.kernel), options);
    entry["score_seconds"] = SecondsSince(t);
    if (!score.ok()) {
      entry["error"] = std::string(score.status().message());
    } else {
      for (const auto& [name, value] : score->metrics) entry[name] = value;
      entry["num_hyperparameters"] = score->num_hyperparameters;
    }
    EvidenceOptions evidence;
    evidence.method = EvidenceMethod::kAuto;
    evidence.sampling.seed = config.seed;
    evidence.importance.seed = config.seed;
    evidence.importance.threads = config.threads;
    evidence.sampling.threads = config.threads;
    evidence.importance.max_seconds = config.mauna_evidence_seconds;
    evidence.sampling.max_seconds = config.mauna_nested_seconds > 0 ? config.mauna_nested_seconds
                                                                    : config.mauna_evidence_seconds;
    evidence.sampling.num_live = config.mauna_live;
    const auto te = Clock::now();
    absl::StatusOr<EvidenceResult> e = ComputeEvidence(*data, *ParseKernel(column.kernel), evidence);
    entry["evidence_seconds"] = SecondsSince(te);
    if (e.ok()) {
      entry["log_evidence"] = e->log_evidence;
      entry["log_evidence_error"] = e->log_evidence_error;
      entry["evidence_method"] = std::string(EvidenceMethodName(e->method));
      entry["evidence_method_reason"] = e->method_reason;
      entry["evidence_partial"] = e->partial;
      if (e->partial) entry["evidence_partial_reason"] = e->partial_reason;
      entry["evidence_likelihood_calls"] = e->likelihood_calls;
      if (e->importance.has_value()) {
        const ImportanceSamplingResult& is = *e->importance;
        entry["importance"] = {{"log_evidence", is.log_evidence},
                               {"log_evidence_error", is.log_evidence_error},
                               {"pareto_k", is.pareto_k},
                               {"effective_sample_size", is.effective_sample_size},
                               {"samples", is.num_samples},
                               {"reliable", is.reliable},
                               {"partial", is.partial},
                               {"seconds", is.seconds}};
      }
      if (e->sampling.has_value()) {
        const NestedSamplingResult& ns = *e->sampling;
        entry["nested"] = {{"live_points", ns.num_live},
                           {"estimator", ns.log_evidence_estimator},
                           {"log_evidence_nested", ns.log_evidence_nested},
                           {"log_evidence_nested_error", ns.log_evidence_nested_error},
                           {"log_evidence_error_bootstrap", ns.log_evidence_error_bootstrap},
                           {"information", ns.information},
                           {"iterations", ns.iterations},
                           {"likelihood_calls", ns.likelihood_calls},
                           {"partial", ns.partial},
                           {"seconds", ns.seconds}};
      }
    } else {
      entry["evidence_error"] = std::string(e.status().message());
    }
    entry["cpu_seconds"] = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    std::cerr << "mauna " << column.name << ": " << entry.dump() << "\n";
    table[column.name] = entry;
    if (!WriteJsonAtomically(path, table).ok()) return 1;
  }
  table["_data"] = {{"file", "data/mauna_loa_monthly.csv"},
                    {"num_points", data->num_points()},
                    {"x_first", data->x(0, 0)},
                    {"x_last", data->x(data->num_points() - 1, 0)},
                    {"standardized", true}};
  return WriteJsonAtomically(path, table).ok() ? 0 : 1;
}

// ---- Fig. 2: posterior samples inside the Laplace ellipses -----------------------------------

// Share of samples θ with (θ − θ̂)ᵀ H_r (θ − θ̂) ≤ 2² (inside the 2σ ellipse of N(θ̂, H_r⁻¹)),
// H_r = V diag(max(λ_i, 2π e^{−2r})) Vᵀ the clamped Hessian of Lemma 3.1 (r = +inf: H itself).
// Unweighted (every sample counts once, as a scatter plot of them shows) and posterior-weighted.
std::pair<double, double> ShareInside(const Eigen::MatrixXd& samples,
                                      const Eigen::VectorXd& log_weights,
                                      const Eigen::VectorXd& mode,
                                      const Eigen::VectorXd& eigenvalues,
                                      const Eigen::MatrixXd& eigenvectors, double r) {
  Eigen::VectorXd clamped = eigenvalues;
  if (std::isfinite(r)) clamped = clamped.cwiseMax(LaplaceEigenvalueFloor(r));
  const Eigen::MatrixXd h = eigenvectors * clamped.asDiagonal() * eigenvectors.transpose();
  const double top = log_weights.maxCoeff();
  double inside = 0, weight_inside = 0, weight_total = 0;
  for (Eigen::Index i = 0; i < samples.rows(); ++i) {
    const Eigen::VectorXd d = samples.row(i).transpose() - mode;
    const double w = std::exp(log_weights(i) - top);
    weight_total += w;
    if (d.dot(h * d) <= 4.0) {
      inside += 1;
      weight_inside += w;
    }
  }
  return {100.0 * inside / samples.rows(), 100.0 * weight_inside / weight_total};
}

int RunFigure2(const Config& config) {
  const fs::path path = fs::path(config.out_dir) / "figure2.json";
  if (fs::exists(path)) {
    std::cerr << "paper_repro figure2: " << path << " exists (resumed)\n";
    return 0;
  }
  absl::StatusOr<Dataset> data =
      LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/interpretable_linear.csv");
  if (!data.ok()) {
    std::cerr << data.status() << "\n";
    return 1;
  }
  const KernelExpr kernel = *ParseKernel("SE");
  ScoreOptions options;
  options.fit.restarts = config.restarts;
  options.fit.seed = config.seed;
  options.standardize = false;  // the paper's example (README: reproduces its numbers)
  options.metrics = AllMetrics();
  absl::StatusOr<KernelScore> score = ScoreKernel(*data, kernel, options);
  if (!score.ok() || !score->laplace.has_value()) {
    std::cerr << "figure2: " << (score.ok() ? "no Laplace diagnostics" : score.status().ToString())
              << "\n";
    return 1;
  }
  EvidenceOptions evidence;
  evidence.method = EvidenceMethod::kNested;  // the paper's samples are nested sampling's
  evidence.standardize = false;
  evidence.sampling.seed = config.seed;
  evidence.sampling.return_samples = true;
  absl::StatusOr<EvidenceResult> e = ComputeEvidence(*data, kernel, evidence);
  if (!e.ok() || !e->sampling.has_value() || e->sampling->samples.rows() == 0 ||
      score->laplace->eigenvectors.cols() != static_cast<Eigen::Index>(score->parameter_names.size())) {
    std::cerr << "figure2: " << (e.ok() ? "no samples" : e.status().ToString()) << "\n";
    return 1;
  }
  // Columns of the samples in the order of the score's free parameters.
  const Eigen::MatrixXd& all = e->sampling->samples;
  Eigen::MatrixXd samples(all.rows(), score->parameter_names.size());
  for (size_t j = 0; j < score->parameter_names.size(); ++j) {
    auto it = std::find(e->parameter_names.begin(), e->parameter_names.end(),
                        score->parameter_names[j]);
    if (it == e->parameter_names.end()) return 1;
    samples.col(j) = all.col(it - e->parameter_names.begin());
  }
  const LaplaceDiagnostics& l = *score->laplace;
  json fig;
  fig["num_samples"] = samples.rows();
  fig["log_evidence"] = e->log_evidence;
  fig["log_evidence_error"] = e->log_evidence_error;
  fig["parameter_names"] = score->parameter_names;
  fig["map_raw"] = std::vector<double>(score->map_fit->raw.data(),
                                       score->map_fit->raw.data() + score->map_fit->raw.size());
  fig["eigenvalues"] = std::vector<double>(l.eigenvalues.data(),
                                           l.eigenvalues.data() + l.eigenvalues.size());
  const std::vector<std::pair<std::string, double>> variants = {
      {"laplace", INFINITY}, {"lap0", 0.0}, {"lap_aic", -1.0},
      {"lap_bic", -std::log(static_cast<double>(data->num_points()))},
      {"lap_bic_half", -0.5 * std::log(static_cast<double>(data->num_points()))}};
  for (const auto& [name, r] : variants) {
    const auto [share, weighted] = ShareInside(samples, e->sampling->log_weights,
                                               score->map_fit->raw, l.eigenvalues,
                                               l.eigenvectors, r);
    fig["share_inside"][name] = share;
    fig["weighted_share_inside"][name] = weighted;
  }
  // Samples for the plot (at most 1024, every k-th) and the ellipses.
  json points = json::array();
  const Eigen::Index step = std::max<Eigen::Index>(1, samples.rows() / 1024);
  for (Eigen::Index i = 0; i < samples.rows(); i += step) {
    points.push_back({samples(i, 0), samples(i, 1)});
  }
  fig["samples"] = points;
  for (const auto& [name, r] : variants) {
    Eigen::VectorXd clamped = l.eigenvalues;
    if (std::isfinite(r)) clamped = clamped.cwiseMax(LaplaceEigenvalueFloor(r));
    json ring = json::array();
    for (int t = 0; t <= 120; ++t) {
      const double angle = 2 * M_PI * t / 120;
      Eigen::Vector2d unit(std::cos(angle), std::sin(angle));
      // (θ − θ̂) = V diag(1/√λ) u · 2 lies on the ellipse (θ − θ̂)ᵀ H_r (θ − θ̂) = 4.
      const Eigen::VectorXd p = score->map_fit->raw +
                                l.eigenvectors * (2.0 * clamped.cwiseSqrt().cwiseInverse())
                                                     .asDiagonal() * unit;
      ring.push_back({p(0), p(1)});
    }
    fig["ellipses"][name] = ring;
  }
  return WriteJsonAtomically(path, fig).ok() ? 0 : 1;
}

// ---- aggregation -------------------------------------------------------------------------------

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / v.size();
}
double StdDev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / (v.size() - 1));
}

// table[row][column], or null when either is missing.
json At(const json& table, const std::string& row, const std::string& column) {
  if (!table.is_object() || !table.contains(row)) return json();
  const json& r = table[row];
  return r.is_object() && r.contains(column) ? r[column] : json();
}

json NumberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string Fmt(const json& v, const char* format = "%.2f") {
  return v.is_number() ? absl::StrFormat(format, v.get<double>()) : std::string("–");
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// The runtime figure and Fig. 2 as SVG through the report's figure code (client/report/plot.h).
std::string RenderSvg(const report::FigureSpec& figure, const fs::path& dir) {
  const fs::path svg = dir / (figure.id + ".svg");
  const fs::path png = dir / (figure.id + ".png");
  absl::Status s = report::RenderFigure(figure, svg.string(), png.string());
  if (!s.ok()) return absl::StrCat("<p>(figure not drawn: ", Escape(std::string(s.message())), ")</p>");
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  std::string body = text.str();
  const size_t at = body.find("<svg");
  return at == std::string::npos ? body : body.substr(at);
}

// A table of our values beside the paper's: "ours (paper, Δ)".
std::string HtmlTable(const std::string& title, const json& ours, const json& ours_sd,
                      const json& paper, const std::vector<std::string>& rows,
                      const std::vector<std::string>& metrics, const char* format) {
  std::string html = absl::StrCat("<h3>", title, "</h3>\n<table>\n<tr><th>N</th>");
  for (const std::string& m : metrics) absl::StrAppend(&html, "<th>", m, "</th>");
  absl::StrAppend(&html, "</tr>\n");
  for (const std::string& row : rows) {
    absl::StrAppend(&html, "<tr><td>", row, "</td>");
    for (const std::string& m : metrics) {
      const json v = At(ours, row, m);
      const json sd = At(ours_sd, row, m);
      const json p = At(paper, row, m);
      std::string cell = Fmt(v, format);
      if (sd.is_number()) absl::StrAppend(&cell, " ± ", Fmt(sd, format));
      if (p.is_number()) {
        absl::StrAppend(&cell, "<br><small>paper ", Fmt(p, format));
        if (v.is_number()) {
          absl::StrAppend(&cell, ", Δ ", Fmt(json(v.get<double>() - p.get<double>()), "%+.2f"));
        }
        absl::StrAppend(&cell, "</small>");
      }
      absl::StrAppend(&html, "<td>", cell, "</td>");
    }
    absl::StrAppend(&html, "</tr>\n");
  }
  absl::StrAppend(&html, "</table>\n");
  return html;
}

int Aggregate(const Config& config) {
  const fs::path dir(config.out_dir);
  std::vector<json> cells;
  if (fs::exists(dir / "cells")) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir / "cells")) {
      if (entry.path().extension() == ".json") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      std::ifstream in(f);
      cells.push_back(json::parse(in));
    }
  }
  std::vector<std::string> metric_names;
  for (Metric m : CellMetrics()) metric_names.emplace_back(MetricName(m));

  // Per N and metric: recognition counts, log Z and test log-likelihood of the chosen kernels.
  std::map<int, std::map<std::string, std::vector<double>>> recognised, log_z, test_ll;
  std::map<int, int> runs;
  std::map<int, std::map<std::string, std::vector<double>>> runtime;
  int partial_evidence = 0;
  for (const json& cell : cells) {
    const int n = cell["n"];
    ++runs[n];
    for (const std::string& m : metric_names) {
      if (!cell["metrics"].contains(m)) continue;
      const json& r = cell["metrics"][m];
      recognised[n][m].push_back(r.value("recognized", false) ? 1.0 : 0.0);
      if (r.contains("test_log_likelihood")) test_ll[n][m].push_back(r["test_log_likelihood"]);
      if (r.contains("chosen") && cell.contains("evidence") &&
          cell["evidence"].contains(r["chosen"].get<std::string>())) {
        const json& e = cell["evidence"][r["chosen"].get<std::string>()];
        if (e.contains("log_evidence") && !e.value("partial", false)) {
          log_z[n][m].push_back(e["log_evidence"]);
        } else {
          ++partial_evidence;
        }
      }
    }
    if (cell.contains("runtime_seconds")) {
      for (const auto& [label, v] : cell["runtime_seconds"].items()) {
        runtime[n][label].push_back(v.get<double>());
      }
    }
    if (cell.contains("evidence")) {
      for (const auto& [k, e] : cell["evidence"].items()) {
        if (e.contains("seconds")) runtime[n]["evidence"].push_back(e["seconds"].get<double>());
      }
    }
  }
  json out;
  out["mode"] = config.mode;
  out["cells"] = cells.size();
  out["metrics"] = metric_names;
  json table1, table2, table2_sd, table3, table3_sd, counts, fisher, rt;
  std::map<std::string, std::vector<double>> t1_avg, t2_avg, t3_avg;
  std::vector<std::string> rows;
  for (const auto& [n, per_metric] : recognised) {
    const std::string key = std::to_string(n);
    rows.push_back(key);
    counts[key]["runs"] = runs[n];
    for (const std::string& m : metric_names) {
      const std::vector<double>& v = per_metric.count(m) ? per_metric.at(m) : std::vector<double>{};
      const double pct = 100.0 * Mean(v);
      table1[key][m] = NumberOrNull(pct);
      if (std::isfinite(pct)) t1_avg[m].push_back(pct);
      const int hits = static_cast<int>(std::lround(Mean(v) * v.size()));
      counts[key][m] = hits;
      // Fisher's exact test of our hits/runs against the paper's hits/40 (its 2.5 % steps).
      const json paper_pct = At(PaperTable1(), key, m);
      if (paper_pct.is_number() && !v.empty()) {
        const int paper_hits = static_cast<int>(std::lround(paper_pct.get<double>() * 40 / 100));
        fisher[key][m] = FisherExactTwoSided(hits, static_cast<int>(v.size()) - hits, paper_hits,
                                             40 - paper_hits);
      }
      if (log_z[n].count(m)) {
        table2[key][m] = NumberOrNull(Mean(log_z[n][m]));
        table2_sd[key][m] = NumberOrNull(StdDev(log_z[n][m]));
        t2_avg[m].push_back(Mean(log_z[n][m]));
      }
      if (test_ll[n].count(m)) {
        table3[key][m] = NumberOrNull(Mean(test_ll[n][m]));
        table3_sd[key][m] = NumberOrNull(StdDev(test_ll[n][m]));
        t3_avg[m].push_back(Mean(test_ll[n][m]));
      }
    }
    for (const auto& [label, v] : runtime[n]) rt[key][label] = Mean(v);
  }
  for (const std::string& m : metric_names) {
    table1["avg"][m] = NumberOrNull(Mean(t1_avg[m]));
    if (!t2_avg[m].empty()) table2["avg"][m] = NumberOrNull(Mean(t2_avg[m]));
    if (!t3_avg[m].empty()) table3["avg"][m] = NumberOrNull(Mean(t3_avg[m]));
  }
  out["table1"] = table1;
  out["table1_counts"] = counts;
  out["table1_fisher_p"] = fisher;
  out["table2"] = table2;
  out["table2_sd"] = table2_sd;
  out["table2_partial_or_failed_left_out"] = partial_evidence;
  out["table3"] = table3;
  out["table3_sd"] = table3_sd;
  out["runtime"] = rt;
  json table4, figure2;
  if (fs::exists(dir / "table4.json")) {
    std::ifstream in(dir / "table4.json");
    table4 = json::parse(in);
  }
  if (fs::exists(dir / "figure2.json")) {
    std::ifstream in(dir / "figure2.json");
    json full = json::parse(in);
    figure2 = full["share_inside"];
    out["figure2_weighted"] = full["weighted_share_inside"];
    out["figure2_samples"] = full["num_samples"];
  }
  out["table4"] = table4;
  out["figure2"] = figure2;
  out["paper"] = {{"table1", PaperTable1()}, {"table2", PaperTable2()},
                  {"table2_sd", PaperTable2Sd()}, {"table3", PaperTable3()},
                  {"table3_sd", PaperTable3Sd()}, {"table4", PaperTable4()},
                  {"figure2", PaperFigure2()}};
  if (!WriteJsonAtomically(dir / "paper.json", out).ok()) return 1;

  // ---- index.html ----
  std::vector<std::string> rows_avg = rows;
  rows_avg.push_back("avg");
  std::string html =
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>gpsel: the paper "
      "reproduced</title>\n<style>body{font-family:sans-serif;max-width:1200px;margin:auto}"
      "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 6px;"
      "text-align:right;font-size:90%}small{color:#666}</style></head><body>\n";
  absl::StrAppend(
      &html, "<h1>The paper reproduced with gpsel</h1>\n<p>Mode <b>", config.mode, "</b>: ",
      cells.size(), " datasets (cells of N × generating kernel × draw); the paper ran 40 per N "
      "(10 per kernel). Regenerate with <code>bash bench/paper/run.sh --", config.mode,
      " --out DIR</code>. Data as in the authors' code: SE, SE+SE, LIN, MAT32 at raw values 0 "
      "(every value softplus(0) ≈ 0.693), x = linspace(−5, 5, N) z-scored, noise sd 0.1, CKS "
      "over SE, LIN, MAT32 with + and *, depth 3, 5 restarts, y not standardised. "
      "Recognised = the same kernel up to commutativity. <code>lap_bic</code> is the paper's "
      "LapBIC (threshold 2πn², r = −log n, as printed); <code>lap_bic_half</code> the authors' "
      "later fix (commit c9b0a80: 2πn, r = −½ log n).</p>\n");
  absl::StrAppend(
      &html,
      "<h2>Why the numbers differ</h2><ul>"
      "<li><b>MLL and MAP</b>: the authors' search kept the candidate with the <i>worst</i> "
      "fit (kernelSearch.py takes the max of a loss), hence their ~0 % recognition and their "
      "far lower log Z and test likelihood; gpsel keeps the best, so these columns are "
      "expected to differ from the paper by design.</li>"
      "<li><b>Sample size</b>: Table 1's cells are shares of 40 runs in the paper and of ",
      runs.empty() ? 0 : runs.begin()->second,
      " here; the Fisher exact test per cell (paper.json <code>table1_fisher_p</code>) says "
      "which differences are more than noise.</li>"
      "<li><b>Table 2</b>: log Z by importance sampling where its diagnostics pass, nested "
      "sampling otherwise (the paper: dynesty's dynamic nested sampling); runs stopped by the "
      "time cap are left out (", partial_evidence, " metric × dataset entries).</li>"
      "<li><b>Table 4</b>: gpsel's data/mauna_loa_monthly.csv (NOAA monthly means, 1958–2001, "
      "n = 521), y standardised; the paper fitted another version of the series on its own "
      "scale, so absolute values differ by the log-Jacobian of the scale (hundreds of nats); "
      "compare the orderings and the gaps between kernels. The paper's AIC/BIC rows are "
      "−½·AIC and −½·BIC, which are gpsel's aic and bic. log Z: importance sampling where its "
      "diagnostics pass, else nested sampling with the live points shown in the cell (run.sh "
      "<code>--mauna-live</code>), whose error is about √(H / live points); the paper's "
      "dynesty errors were ±3.4–5.2 nats.</li></ul>\n");
  absl::StrAppend(&html, "<h2>Table 1: recognition (%)</h2>",
                  HtmlTable("Share of CKS runs that chose the generating kernel", table1, json(),
                            PaperTable1(), rows_avg, metric_names, "%.1f"));
  absl::StrAppend(&html, "<h2>Table 2: mean log Z of the chosen kernels ± sd</h2>",
                  HtmlTable("log Z", table2, table2_sd, PaperTable2(), rows_avg, metric_names,
                            "%.2f"));
  absl::StrAppend(&html,
                  "<h2>Table 3: test log-likelihood per point ± sd</h2><p>log N(y* | 0, K̂ + "
                  "σ̂²I)/N at the chosen kernel's fit (MLL fit for mll/aic/bic, MAP fit "
                  "otherwise), averaged over 10 fresh draws; the same number <code>gpsel score "
                  "--test</code> reports.</p>",
                  HtmlTable("test log-likelihood / N", table3, table3_sd, PaperTable3(), rows_avg,
                            metric_names, "%.2f"));
  // Runtime figure.
  {
    report::FigureSpec fig;
    fig.id = "runtime";
    fig.title = "Time per model";
    fig.width = 720;
    fig.height = 420;
    report::Panel panel;
    panel.x_label = "N";
    panel.y_label = "seconds per model";
    panel.log_y = true;
    int colour = 0;
    for (const std::string& label : {"mll", "map", "laplace", "evidence"}) {
      report::Series s;
      s.kind = report::Series::Kind::kLine;
      s.label = label == std::string("evidence") ? "log Z (IS / nested)"
                : label == std::string("laplace") ? "Laplace (MAP fit + Hessian)"
                : label == std::string("mll") ? "MLL / AIC / BIC (MLL fit)" : "MAP (MAP fit)";
      s.color = report::SeriesColor(colour++);
      for (const auto& [key, per_label] : rt.items()) {
        if (!per_label.contains(label)) continue;
        s.x.push_back(std::stod(key));
        s.y.push_back(std::log10(std::max(1e-6, per_label[label].get<double>())));
      }
      if (!s.x.empty()) panel.series.push_back(s);
    }
    if (!panel.series.empty()) {
      report::FitRanges(panel);
      fig.panels.push_back(panel);
      absl::StrAppend(&html, "<h2>Runtime</h2><p>Mean seconds per model on this machine: one "
                             "score of the generating kernel with each kind of metric (fits "
                             "included, 5 restarts) and one log Z of a chosen kernel.</p>",
                      RenderSvg(fig, dir));
    }
  }
  // Table 4.
  if (table4.is_object()) {
    absl::StrAppend(&html, "<h2>Table 4: Mauna Loa</h2><table><tr><th></th>");
    for (const MaunaLoaColumn& c : MaunaLoaColumns()) absl::StrAppend(&html, "<th>", c.name, "</th>");
    absl::StrAppend(&html, "</tr>\n");
    const json paper4 = PaperTable4();
    for (const std::string& row : {"log_evidence", "lap", "lap0", "lap_aic", "lap_bic",
                                   "lap_bic_half", "aic", "bic", "mll", "map"}) {
      absl::StrAppend(&html, "<tr><td>", row, "</td>");
      for (const MaunaLoaColumn& c : MaunaLoaColumns()) {
        const json e = table4.contains(c.name) ? table4[c.name] : json::object();
        std::string cell = Fmt(At(table4, c.name, row));
        if (row == std::string("log_evidence") && e.contains("log_evidence")) {
          std::string how = e.value("evidence_method", std::string());
          if (how == "nested" && e.contains("nested")) {
            // The live-point count sets the error (about sqrt(H / n_live)): say which was used.
            absl::StrAppend(&how, ", ", e["nested"].value("live_points", 0), " live points, H = ",
                            Fmt(e["nested"].value("information", 0.0), "%.0f"), " nats");
          }
          absl::StrAppend(&cell, " ± ", Fmt(e["log_evidence_error"], "%.3f"), " <small>(", how,
                          e.value("evidence_partial", false) ? ", partial: time cap" : "",
                          ")</small>");
        }
        const json p = At(paper4, c.name, row);
        if (p.is_number()) absl::StrAppend(&cell, "<br><small>paper ", Fmt(p), "</small>");
        absl::StrAppend(&html, "<td>", cell, "</td>");
      }
      absl::StrAppend(&html, "</tr>\n");
    }
    absl::StrAppend(&html, "</table>\n");
  }
  // Fig. 2.
  if (fs::exists(dir / "figure2.json")) {
    std::ifstream in(dir / "figure2.json");
    const json full = json::parse(in);
    report::FigureSpec fig;
    fig.id = "figure2";
    fig.title = "Fig. 2";
    fig.width = 640;
    fig.height = 520;
    report::Panel panel;
    panel.x_label = absl::StrCat("raw ", full["parameter_names"][0].get<std::string>());
    panel.y_label = absl::StrCat("raw ", full["parameter_names"][1].get<std::string>());
    panel.legend_right = true;
    report::Series cloud;
    cloud.kind = report::Series::Kind::kPoints;
    cloud.label = "nested-sampling samples";
    cloud.color = report::SeriesColor(0);
    cloud.marker_scale = 0.5;
    for (const json& p : full["samples"]) {
      cloud.x.push_back(p[0]);
      cloud.y.push_back(p[1]);
    }
    panel.series.push_back(cloud);
    int colour = 1;
    for (const std::string& name : {"laplace", "lap0", "lap_aic", "lap_bic"}) {
      report::Series ring;
      ring.kind = report::Series::Kind::kLine;
      ring.label = absl::StrFormat("%s 2σ (%.1f %% inside)", name,
                                   full["share_inside"][name].get<double>());
      ring.color = report::SeriesColor(colour++);
      for (const json& p : full["ellipses"][name]) {
        ring.x.push_back(p[0]);
        ring.y.push_back(p[1]);
      }
      panel.series.push_back(ring);
    }
    report::FitRanges(panel);
    fig.panels.push_back(panel);
    absl::StrAppend(&html, "<h2>Fig. 2: posterior samples and the Laplace ellipses</h2>"
                           "<p>SE on data/interpretable_linear.csv (y as given), ",
                    full["num_samples"].get<int>(),
                    " nested-sampling samples; share inside each 2σ ellipse (paper: 78.4, "
                    "60.6, 22.8, 3.1 %):</p><table><tr><th></th><th>ours, unweighted</th>"
                    "<th>ours, posterior-weighted</th><th>paper</th></tr>");
    const json paper2 = PaperFigure2();
    for (const std::string& name : {"laplace", "lap0", "lap_aic", "lap_bic", "lap_bic_half"}) {
      absl::StrAppend(&html, "<tr><td>", name, "</td><td>",
                      Fmt(full["share_inside"][name], "%.1f"), "</td><td>",
                      Fmt(full["weighted_share_inside"][name], "%.1f"), "</td><td>",
                      Fmt(paper2.contains(name) ? paper2[name] : json(), "%.1f"),
                      "</td></tr>");
    }
    absl::StrAppend(&html, "</table>", RenderSvg(fig, dir));
  }
  absl::StrAppend(&html, "</body></html>\n");
  std::ofstream(dir / "index.html") << html;
  std::cerr << "paper_repro aggregate: " << cells.size() << " cells -> " << (dir / "paper.json")
            << ", " << (dir / "index.html") << "\n";
  return 0;
}

// ---- self-test (the ctest runs it) -------------------------------------------------------------

// The recognition rule on hand-made pairs, Fisher's test against textbook values, and the test
// log-likelihood against a dense computation written here from the definition.
int SelfTest() {
  int failures = 0;
  auto expect = [&failures](bool ok, const std::string& what) {
    if (!ok) {
      ++failures;
      std::cerr << "selftest FAILED: " << what << "\n";
    }
  };
  const std::vector<std::tuple<std::string, std::string, bool>> pairs = {
      {"SE", "SE", true},           {"LIN+SE", "SE+LIN", true},
      {"SE*LIN", "LIN*SE", true},   {"SE+SE", "SE", false},
      {"SE*SE", "SE+SE", false},    {"SE*(LIN+MAT32)", "(MAT32+LIN)*SE", true},
      {"SE*LIN+SE", "SE*(LIN+SE)", false}, {"MAT32", "MAT52", false},
      {"LIN", "SE+LIN", false},     {"(SE+LIN)+MAT32", "MAT32+(LIN+SE)", true}};
  for (const auto& [a, b, same] : pairs) {
    expect(Recognised(a, b) == same, absl::StrCat("Recognised(", a, ", ", b, ") != ", same));
  }
  // Fisher's tea-tasting table [[3, 1], [1, 3]]: p = 34/70; [[1, 9], [11, 3]]: 0.0027594562.
  expect(std::abs(FisherExactTwoSided(3, 1, 1, 3) - 34.0 / 70.0) < 1e-12, "Fisher tea");
  expect(std::abs(FisherExactTwoSided(1, 9, 11, 3) - 0.002759456185220083) < 1e-12,
         "Fisher [[1,9],[11,3]]");
  expect(std::abs(FisherExactTwoSided(6, 2, 1, 4) - 4.0 / 39.0) < 1e-12, "Fisher [[6,2],[1,4]]");
  // Test log-likelihood: log N(y* | 0, K + σ²I)/n with SE at lengthscale 0.693 on the paper's
  // inputs, K written out here.
  const int n = 10;
  const Eigen::MatrixXd x = PaperInputs(n);
  expect(std::abs(x.mean()) < 1e-12 && std::abs((x.array().square().sum() / (n - 1)) - 1) < 1e-12,
         "z-scored inputs");
  const double l = std::log(2.0), noise = 0.01;
  Eigen::MatrixXd k(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      k(i, j) = std::exp(-(x(i, 0) - x(j, 0)) * (x(i, 0) - x(j, 0)) / (2 * l * l)) +
                (i == j ? noise : 0.0);
  Eigen::VectorXd y_train(n), y_test(n);
  for (int i = 0; i < n; ++i) {
    y_train(i) = std::sin(x(i, 0));
    y_test(i) = std::sin(x(i, 0) + 0.1);
  }
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  const Eigen::VectorXd w = llt.matrixL().solve(y_test);
  double log_det = 0;
  for (int i = 0; i < n; ++i) log_det += 2 * std::log(llt.matrixL()(i, i));
  const double direct = (-0.5 * w.squaredNorm() - 0.5 * log_det - 0.5 * n * std::log(2 * M_PI)) / n;
  absl::StatusOr<HeldOutLikelihood> h =
      HeldOutLikelihoodAt(Dataset{x, y_train}, Dataset{x, y_test}, *ParseKernel("SE"),
                          {{"SE.lengthscale", l}, {"noise", noise}}, false);
  expect(h.ok() && std::abs(h->test_log_likelihood - direct) < 1e-10,
         absl::StrCat("test log-likelihood ", h.ok() ? h->test_log_likelihood : NAN, " vs direct ",
                      direct));
  std::cerr << "paper_repro selftest: " << (failures == 0 ? "ok" : "FAILED") << "\n";
  return failures == 0 ? 0 : 1;
}

std::vector<int> ParseSizes(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view s : absl::StrSplit(text, ',')) {
    int n = 0;
    if (absl::SimpleAtoi(s, &n) && n >= 3) out.push_back(n);
  }
  return out;
}

int Main(int argc, char** argv) {
  Config config;
  CLI::App app{"The paper's tables and figures reproduced with gpsel (issue 29)"};
  std::string phase, sizes = "5,10,20,30,40,50,100,200";
  app.add_option("phase", phase, "cells | mauna | figure2 | aggregate | selftest")->required();
  app.add_option("--out", config.out_dir, "output directory (not needed by selftest)");
  app.add_option("--sizes", sizes, "dataset sizes N")->capture_default_str();
  app.add_option("--datasets", config.datasets, "datasets per generating kernel and N")
      ->capture_default_str();
  app.add_option("--restarts", config.restarts)->capture_default_str();
  app.add_option("--seed", config.seed)->capture_default_str();
  app.add_option("--threads", config.threads, "cells in parallel")->capture_default_str();
  app.add_option("--evidence-max-n", config.evidence_max_n, "log Z of chosen kernels up to N "
                 "(0: no Table 2)")->capture_default_str();
  app.add_option("--evidence-seconds", config.evidence_seconds)->capture_default_str();
  app.add_option("--mauna-evidence-seconds", config.mauna_evidence_seconds,
                 "cap of Mauna Loa's importance stage (and of the nested fallback unless "
                 "--mauna-nested-seconds)")->capture_default_str();
  app.add_option("--mauna-live", config.mauna_live,
                 "live points of Mauna Loa's nested-sampling fallback (0: automatic 100 + 25u)")
      ->capture_default_str();
  app.add_option("--mauna-nested-seconds", config.mauna_nested_seconds,
                 "cap of that fallback (0: --mauna-evidence-seconds)")->capture_default_str();
  std::string mauna_kernels;
  app.add_option("--mauna-kernels", mauna_kernels, "Table 4 columns to compute, e.g. "
                 "k1+2+3,k1+2+3+4 (default: all)");
  app.add_option("--mode", config.mode, "quick | full | custom (shown on the page)");
  app.add_option("--budget-seconds", config.budget_seconds, "no new cell after this (0: none)");
  CLI11_PARSE(app, argc, argv);
  config.sizes = ParseSizes(sizes);
  if (!mauna_kernels.empty()) config.mauna_kernels = absl::StrSplit(mauna_kernels, ',');
  config.evidence = config.evidence_max_n > 0;
  if (phase == "selftest") return SelfTest();
  if (phase == "cells") return RunCells(config);
  if (phase == "mauna") return RunMauna(config);
  if (phase == "figure2") return RunFigure2(config);
  if (phase == "aggregate") return Aggregate(config);
  std::cerr << "unknown phase '" << phase << "'\n";
  return 2;
}

}  // namespace
}  // namespace gpsel::paper

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  return gpsel::paper::Main(argc, argv);
}
