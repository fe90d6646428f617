// Reproduces the paper's kernel-search experiment (Section 4.2, appendix "Kernel search
// experiment"): Table 1, the share of CKS runs that recover the data-generating kernel, for each
// metric and dataset size; and Table 2, the mean log evidence (nested sampling) of the kernels
// each metric chose, for small n.
//
// Data: for each generating kernel (LIN, SE, MAT32, SE+SE) and dataset size n, `--datasets`
// samples of a zero-mean GP whose raw hyperparameters are all 0 (GPyTorch's default
// initialisation: every value softplus(0) ≈ 0.693, noise variance 1e-4 + softplus(0)), at n evenly
// spaced inputs in [x_min, x_max]. CKS: base kernels SE, LIN, MAT32, + and *, at most three base
// kernels, 5 restarts, y as sampled (no standardisation; --standardize turns it on). All seven
// metrics of one dataset share one score cache, so
// each kernel is fitted once per dataset (both fits), whatever metric explores it.
//
//   build-search/bench/paper_table1 --threads 2 --budget-seconds 1500 --out table1.json
//
// Jobs (one per dataset) run on a thread pool in order of increasing n; jobs not started when the
// time budget runs out are skipped and reported, so the tables say how many datasets they cover.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <Eigen/Dense>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/internal/thread_pool.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/nested_sampling.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"

namespace gpsel {
namespace {

struct Config {
  std::vector<int> sizes = {5, 10, 20, 30, 40, 50, 100, 200};
  int datasets = 10;
  std::vector<std::string> kernels = {"LIN", "SE", "MAT32", "SE+SE"};
  std::string metrics = "mll,aic,bic,map,lap0,lap_aic,lap_bic";
  int restarts = 5;
  int threads = 2;
  uint64_t seed = 2024;
  double budget_seconds = 1500;
  int evidence_max_n = 50;  // 0 = no Table 2
  double x_min = 0.0;
  double x_max = 1.0;
  std::string out_path;
  bool standardize = false;
  bool verbose = false;
  double evidence_max_seconds = 60;
};

struct MetricOutcome {
  std::string chosen;
  bool recognized = false;
  double score = 0.0;
  bool has_evidence = false;
  double log_evidence = 0.0;
  double log_evidence_error = 0.0;
  std::string error;  // search failed
};

struct Job {
  int n = 0;
  std::string kernel;  // generating kernel, canonical
  int index = 0;       // dataset number
  bool done = false;
  double seconds = 0.0;
  double evidence_seconds = 0.0;
  int candidates_fitted = 0;
  std::map<std::string, MetricOutcome> outcomes;  // by metric name
};

// A dataset drawn from the zero-mean GP with `kernel`, all raw hyperparameters 0.
absl::StatusOr<Dataset> SampleDataset(const KernelExpr& kernel, int n, double x_min,
                                      double x_max, uint64_t seed) {
  Dataset data;
  data.x.resize(n, 1);
  for (int i = 0; i < n; ++i) data.x(i, 0) = n == 1 ? x_min : x_min + (x_max - x_min) * i / (n - 1);
  data.y = Eigen::VectorXd::Zero(n);
  absl::StatusOr<GpModel> model = GpModel::Create(kernel, data.x, data.y);
  if (!model.ok()) return model.status();
  const Eigen::VectorXd raw = Eigen::VectorXd::Zero(model->num_free());
  Eigen::MatrixXd covariance = model->CrossCovariance(raw, data.x, data.x);
  covariance.diagonal().array() += model->NoiseVariance(raw);
  Eigen::LLT<Eigen::MatrixXd> cholesky(covariance);
  if (cholesky.info() != Eigen::Success) {
    return absl::InternalError("covariance of the generating GP is not positive definite");
  }
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::VectorXd z(n);
  for (int i = 0; i < n; ++i) z[i] = normal(rng);
  data.y = cholesky.matrixL() * z;
  return data;
}

std::string MetricHeader(Metric metric) {
  switch (metric) {
    case Metric::kMll: return "MLL";
    case Metric::kMap: return "MAP";
    case Metric::kAic: return "AIC";
    case Metric::kBic: return "BIC";
    case Metric::kLap: return "Lap";
    case Metric::kLap0: return "Lap0";
    case Metric::kLapAic: return "LapAIC";
    case Metric::kLapBic: return "LapBIC";
    case Metric::kLapBicHalf: return "LapBIC/2";
  }
  return "?";
}

void RunJob(const Config& config, const std::vector<Metric>& metrics, Job& job) {
  const auto start = std::chrono::steady_clock::now();
  const KernelExpr generator = *ParseKernel(job.kernel);
  const uint64_t data_seed =
      CandidateSeed(config.seed, absl::StrCat("data|", job.kernel, "|", job.n, "|", job.index));
  absl::StatusOr<Dataset> data =
      SampleDataset(generator, job.n, config.x_min, config.x_max, data_seed);
  if (!data.ok()) {
    for (Metric m : metrics) job.outcomes[std::string(MetricName(m))].error =
        std::string(data.status().message());
    job.done = true;
    return;
  }
  ScoreCache cache;
  for (Metric metric : metrics) {
    SearchOptions options;
    options.metric = std::string(MetricName(metric));
    options.threads = 1;  // parallelism is across datasets
    options.score.fit.restarts = config.restarts;
    options.score.fit.seed = config.seed;
    options.score.metrics = PaperMetrics();  // every entry then serves every metric
    options.score.standardize = config.standardize;
    MetricOutcome& outcome = job.outcomes[options.metric];
    absl::StatusOr<SearchResult> result = RunKernelSearch(*data, options, nullptr, &cache);
    if (!result.ok()) {
      outcome.error = std::string(result.status().message());
      continue;
    }
    outcome.chosen = ToString(result->best_kernel);
    outcome.recognized = result->best_kernel == generator;
    outcome.score = result->best_score;
    job.candidates_fitted += result->candidates_scored;
  }
  job.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Table 2: log Z of each distinct chosen kernel by nested sampling (paper: dynesty, dlogz 0.01).
  if (job.n <= config.evidence_max_n) {
    const auto evidence_start = std::chrono::steady_clock::now();
    ScoreOptions score_options;  // default priors and y treated as in the search
    score_options.standardize = config.standardize;
    NestedSamplingOptions sampling;
    sampling.dlogz = 0.01;
    // A cap so that one hard posterior cannot eat the budget (the result is then partial).
    sampling.max_seconds = config.evidence_max_seconds;
    const CandidateScorer evidence = MakeEvidenceScorer(score_options, sampling);
    std::map<std::string, absl::StatusOr<CandidateScore>> by_kernel;
    for (auto& [name, outcome] : job.outcomes) {
      if (outcome.chosen.empty()) continue;
      auto it = by_kernel.find(outcome.chosen);
      if (it == by_kernel.end()) {
        CandidateRequest request;
        request.seed = CandidateSeed(config.seed, absl::StrCat("evidence|", outcome.chosen));
        it = by_kernel.emplace(outcome.chosen,
                               evidence(*data, *ParseKernel(outcome.chosen), request)).first;
      }
      if (config.verbose) {
        std::cerr << absl::StrFormat(
            "  evidence N=%d %s #%d: %s -> %s\n", job.n, job.kernel, job.index, outcome.chosen,
            it->second.ok() ? absl::StrFormat("%.3f +- %.3f (%.1f s)", it->second->value,
                                              it->second->uncertainty,
                                              it->second->details.seconds)
                            : std::string(it->second.status().message()));
      }
      if (it->second.ok()) {
        outcome.has_evidence = true;
        outcome.log_evidence = it->second->value;
        outcome.log_evidence_error = it->second->uncertainty;
      }
    }
    job.evidence_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - evidence_start).count();
  }
  job.done = true;
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? NAN : sum / v.size();
}
double StdDev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double mean = Mean(v);
  double sum = 0;
  for (double x : v) sum += (x - mean) * (x - mean);
  return std::sqrt(sum / (v.size() - 1));
}

void PrintTables(const Config& config, const std::vector<Metric>& metrics,
                 const std::vector<Job>& jobs) {
  // Table 1.
  std::cout << "\nTable 1: % of CKS runs that recovered the generating kernel "
               "(LIN, SE, MAT32, SE+SE; "
            << config.datasets << " datasets each)\n";
  std::string header = absl::StrFormat("%5s %6s", "N", "runs");
  for (Metric m : metrics) absl::StrAppendFormat(&header, " %7s", MetricHeader(m));
  std::cout << header << "\n";
  std::map<std::string, std::vector<double>> per_metric_rates;
  for (int n : config.sizes) {
    int runs = 0;
    std::map<std::string, int> hits;
    for (const Job& job : jobs) {
      if (job.n != n || !job.done) continue;
      ++runs;
      for (const auto& [name, outcome] : job.outcomes) hits[name] += outcome.recognized ? 1 : 0;
    }
    if (runs == 0) {
      std::cout << absl::StrFormat("%5d %6s  (not run: time budget)\n", n, "0");
      continue;
    }
    std::string row = absl::StrFormat("%5d %6d", n, runs);
    for (Metric m : metrics) {
      const double rate = 100.0 * hits[std::string(MetricName(m))] / runs;
      per_metric_rates[std::string(MetricName(m))].push_back(rate);
      absl::StrAppendFormat(&row, " %7.1f", rate);
    }
    std::cout << row << "\n";
  }
  std::string average = absl::StrFormat("%5s %6s", "avg.", "");
  for (Metric m : metrics) {
    absl::StrAppendFormat(&average, " %7.1f", Mean(per_metric_rates[std::string(MetricName(m))]));
  }
  std::cout << average << "\n";

  // Recognition per generating kernel (averaged over n), and what was chosen instead.
  std::cout << "\nRecognition by generating kernel (% over all N run):\n";
  std::string kheader = absl::StrFormat("%-7s", "kernel");
  for (Metric m : metrics) absl::StrAppendFormat(&kheader, " %7s", MetricHeader(m));
  std::cout << kheader << "\n";
  for (const std::string& kernel_text : config.kernels) {
    const std::string canonical = ToString(*ParseKernel(kernel_text));
    std::string row = absl::StrFormat("%-7s", canonical);
    for (Metric m : metrics) {
      int runs = 0, hits = 0;
      for (const Job& job : jobs) {
        if (!job.done || job.kernel != canonical) continue;
        ++runs;
        hits += job.outcomes.at(std::string(MetricName(m))).recognized ? 1 : 0;
      }
      absl::StrAppendFormat(&row, " %7.1f", runs ? 100.0 * hits / runs : NAN);
    }
    std::cout << row << "\n";
  }
  std::cout << "\nMean number of base kernels chosen:\n" << header << "\n";
  for (int n : config.sizes) {
    std::string row;
    int runs = 0;
    std::map<std::string, double> total;
    for (const Job& job : jobs) {
      if (job.n != n || !job.done) continue;
      ++runs;
      for (const auto& [name, outcome] : job.outcomes) {
        if (!outcome.chosen.empty()) total[name] += NumBaseKernels(*ParseKernel(outcome.chosen));
      }
    }
    if (runs == 0) continue;
    row = absl::StrFormat("%5d %6d", n, runs);
    for (Metric m : metrics) {
      absl::StrAppendFormat(&row, " %7.2f", total[std::string(MetricName(m))] / runs);
    }
    std::cout << row << "\n";
  }

  // Table 2.
  if (config.evidence_max_n <= 0) return;
  std::cout << "\nTable 2: mean log evidence (nested sampling) +- sd of the chosen kernels\n";
  std::string header2 = absl::StrFormat("%5s", "N");
  for (Metric m : metrics) absl::StrAppendFormat(&header2, " %15s", MetricHeader(m));
  std::cout << header2 << "\n";
  for (int n : config.sizes) {
    if (n > config.evidence_max_n) continue;
    std::map<std::string, std::vector<double>> values;
    bool any = false;
    for (const Job& job : jobs) {
      if (job.n != n || !job.done) continue;
      for (const auto& [name, outcome] : job.outcomes) {
        if (outcome.has_evidence) {
          values[name].push_back(outcome.log_evidence);
          any = true;
        }
      }
    }
    if (!any) continue;
    std::vector<double> means;
    for (Metric m : metrics) means.push_back(Mean(values[std::string(MetricName(m))]));
    const double best = *std::max_element(means.begin(), means.end());
    std::string row = absl::StrFormat("%5d", n);
    for (size_t i = 0; i < metrics.size(); ++i) {
      const std::vector<double>& v = values[std::string(MetricName(metrics[i]))];
      absl::StrAppendFormat(&row, " %7.2f+-%5.2f%s", means[i], StdDev(v),
                            means[i] == best ? "*" : " ");
    }
    std::cout << row << "\n";
  }
  int missing = 0;
  for (const Job& job : jobs) {
    if (!job.done || job.n > config.evidence_max_n) continue;
    for (const auto& [name, outcome] : job.outcomes) {
      if (!outcome.chosen.empty() && !outcome.has_evidence) ++missing;
    }
  }
  std::cout << "(* = best mean per row; " << missing
            << " metric/dataset entries without a usable log Z — sampler failed or hit "
               "--evidence-max-seconds — are left out)\n";
}

nlohmann::json JobsToJson(const Config& config, const std::vector<Job>& jobs) {
  nlohmann::json out;
  out["x_range"] = {config.x_min, config.x_max};
  out["restarts"] = config.restarts;
  out["seed"] = config.seed;
  nlohmann::json list = nlohmann::json::array();
  for (const Job& job : jobs) {
    if (!job.done) continue;
    nlohmann::json j;
    j["n"] = job.n;
    j["kernel"] = job.kernel;
    j["dataset"] = job.index;
    j["seconds"] = job.seconds;
    j["evidence_seconds"] = job.evidence_seconds;
    j["candidates_fitted"] = job.candidates_fitted;
    for (const auto& [name, o] : job.outcomes) {
      nlohmann::json m;
      m["chosen"] = o.chosen;
      m["recognized"] = o.recognized;
      m["score"] = o.score;
      if (o.has_evidence) {
        m["log_evidence"] = o.log_evidence;
        m["log_evidence_error"] = o.log_evidence_error;
      }
      if (!o.error.empty()) m["error"] = o.error;
      j["metrics"][name] = m;
    }
    list.push_back(j);
  }
  out["jobs"] = list;
  return out;
}

int Main(int argc, char** argv) {
  Config config;
  CLI::App app{"Reproduce the paper's kernel-search experiment (Tables 1 and 2)"};
  std::string sizes = "5,10,20,30,40,50,100,200";
  std::string kernels = "LIN,SE,MAT32,SE+SE";
  app.add_option("--sizes", sizes, "dataset sizes N")->capture_default_str();
  app.add_option("--datasets", config.datasets, "datasets per generating kernel and N")
      ->capture_default_str();
  app.add_option("--kernels", kernels, "generating kernels")->capture_default_str();
  app.add_option("--metrics", config.metrics, "CKS metrics")->capture_default_str();
  app.add_option("--restarts", config.restarts, "optimiser restarts")->capture_default_str();
  app.add_option("--threads", config.threads, "datasets processed in parallel")
      ->capture_default_str();
  app.add_option("--seed", config.seed, "seed of data and fits")->capture_default_str();
  app.add_option("--budget-seconds", config.budget_seconds,
                 "no new dataset is started after this")->capture_default_str();
  app.add_option("--evidence-max-n", config.evidence_max_n,
                 "nested-sampling evidence of chosen kernels for N <= this (0 = off)")
      ->capture_default_str();
  app.add_option("--x-min", config.x_min)->capture_default_str();
  app.add_option("--x-max", config.x_max)->capture_default_str();
  app.add_option("--out", config.out_path, "write every run as JSON here");
  app.add_flag("--standardize", config.standardize,
               "standardise y before fitting (default off: the data come from zero-mean GPs "
               "whose scale already matches the priors, and removing the mean would take linear "
               "data out of LIN's span)");
  app.add_flag("--verbose", config.verbose, "print every evidence computation");
  app.add_option("--evidence-max-seconds", config.evidence_max_seconds,
                 "time cap of one nested-sampling run")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  config.sizes.clear();
  for (absl::string_view s : absl::StrSplit(sizes, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 2) {
      std::cerr << "bad --sizes entry '" << s << "'\n";
      return 2;
    }
    config.sizes.push_back(n);
  }
  std::sort(config.sizes.begin(), config.sizes.end());
  config.kernels = absl::StrSplit(kernels, ',');
  absl::StatusOr<std::vector<Metric>> metrics = ParseMetricList(config.metrics);
  if (!metrics.ok()) {
    std::cerr << metrics.status() << "\n";
    return 2;
  }

  std::vector<Job> jobs;
  for (int n : config.sizes) {
    for (int index = 0; index < config.datasets; ++index) {
      for (const std::string& kernel : config.kernels) {
        absl::StatusOr<KernelExpr> parsed = ParseKernel(kernel);
        if (!parsed.ok()) {
          std::cerr << parsed.status() << "\n";
          return 2;
        }
        Job job;
        job.n = n;
        job.kernel = ToString(*parsed);
        job.index = index;
        jobs.push_back(job);
      }
    }
  }

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(config.budget_seconds);
  std::atomic<int> finished{0};
  std::atomic<int> skipped{0};
  std::mutex print_mutex;
  {
    ThreadPool pool(config.threads);
    for (Job& job : jobs) {
      pool.Schedule([&] {
        if (std::chrono::steady_clock::now() > deadline) {
          ++skipped;
          return;
        }
        RunJob(config, *metrics, job);
        const int count = ++finished;
        std::lock_guard<std::mutex> lock(print_mutex);
        std::cerr << absl::StrFormat("[%4d/%d %6.0fs] N=%-3d %-6s #%d: %.1f s search, %.1f s "
                                     "evidence; lap0 -> %s, mll -> %s\n",
                                     count, jobs.size(),
                                     std::chrono::duration<double>(
                                         std::chrono::steady_clock::now() - start).count(),
                                     job.n, job.kernel, job.index, job.seconds,
                                     job.evidence_seconds,
                                     job.outcomes.count("lap0") ? job.outcomes["lap0"].chosen : "",
                                     job.outcomes.count("mll") ? job.outcomes["mll"].chosen : "");
      });
    }
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintTables(config, *metrics, jobs);
  std::cout << absl::StrFormat("\n%d of %zu datasets run (%d skipped by the %.0f s budget) in "
                               "%.0f s with %d threads; x in [%g, %g], %d restarts, seed %d\n",
                               finished.load(), jobs.size(), skipped.load(),
                               config.budget_seconds, total, config.threads, config.x_min,
                               config.x_max, config.restarts, config.seed);
  if (!config.out_path.empty()) {
    std::ofstream out(config.out_path);
    out << JobsToJson(config, jobs).dump(1) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace gpsel

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  return gpsel::Main(argc, argv);
}
