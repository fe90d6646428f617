// Recognition by CKS with and without the changepoint/changewindow moves (issue 31), side by side
// on the same data, and what the moves cost per search step. Two modes:
//
//   changepoint_table synthetic [--seeds 2]
//     Series of 60 points (x = 0..59, noise sd 0.3, fixed seeds) with a known change at
//     t ~ U(20, 40): a level shift of 2, a level of 2 inside a window of width w ~ U(8, 16)
//     centred at t (a changewindow's regime), a wave that stops, a trend that turns; and a control
//     without a change (a slow wave). Each is searched over C, SE, LIN (depth 3, 2 restarts,
//     x scaled automatically, one thread) with --operators +,* and +,*,CP,CW. Prints, per
//     search, the chosen kernel, its Lap0, the change it locates (with its Laplace sd; a window's
//     centre and width) and, per step, the candidates scored and the step's seconds.
//
//   changepoint_table paper [--sizes 10,20,50,100] [--datasets 3] [--metrics lap0]
//     The paper's Table 1 setting (bench/paper/paper_data.h; the same datasets and seeds as
//     bench/paper/paper_repro.cc): generating kernels SE, SE+SE, LIN, MAT32; CKS over SE, LIN,
//     MAT32, depth 3, greedy, 5 restarts, y as drawn. Each dataset is searched with +,* and with
//     +,*,CP,CW (each with its own score cache, so the times are each mode's own), one thread.
//     A kernel is recognised when it equals the generating kernel up to commutativity and
//     associativity. Prints one line per (dataset, metric) and then, per N and metric, the
//     recognition of both modes, the datasets where they differ, and the cost per step:
//     candidates and seconds of each step, both modes, summed over the datasets whose two
//     searches expanded the same kernel at that step (steps 1 and 2 always do).
//
// Results in bench/RESULTS.md.
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/paper/paper_data.h"
#include "gpsel/core/change_summary.h"
#include "gpsel/core/search.h"

namespace gpsel {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU seconds of the process (the searches run on one thread; steadier than wall time on a
// shared machine).
double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

SearchOperators Moves(bool with_changes) {
  SearchOperators operators;
  operators.change_point = with_changes;
  operators.change_window = with_changes;
  return operators;
}

std::string StepsText(const SearchResult& r) {
  std::string steps;
  for (const SearchStep& step : r.steps) {
    absl::StrAppend(&steps, steps.empty() ? "" : ", ", step.candidates.size(), " (",
                    absl::StrFormat("%.1f", step.seconds), ")");
  }
  return steps;
}

// ---- synthetic series with a known change ------------------------------------------------------

struct Series {
  std::string name;
  Dataset data;
  double change = NAN;  // true location (a window's centre), NAN for the control
  double width = NAN;   // a window's true width
};

std::vector<Series> MakeSeries(int seed) {
  std::mt19937_64 rng(1000 + seed);
  std::normal_distribution<double> noise(0.0, 0.3);
  std::uniform_real_distribution<double> where(20.0, 40.0);
  const double t = where(rng);
  const int n = 60;
  std::vector<Series> out;
  auto make = [&](const std::string& name, double change, double width, auto f) {
    Series s;
    s.name = name + "_" + std::to_string(seed);
    s.change = change;
    s.width = width;
    s.data.x.resize(n, 1);
    s.data.y.resize(n);
    for (int i = 0; i < n; ++i) {
      s.data.x(i, 0) = i;
      s.data.y(i) = f(static_cast<double>(i)) + noise(rng);
    }
    out.push_back(std::move(s));
  };
  make("level", t, NAN, [&](double x) { return x > t ? 2.0 : 0.0; });
  make("wave_stops", t, NAN, [&](double x) { return x < t ? std::sin(x / 2.5) : 0.0; });
  make("slope_turns", t, NAN, [&](double x) { return 0.08 * (x < t ? x : 2 * t - x); });
  make("no_change", NAN, NAN, [&](double x) { return std::sin(x / 9.0); });
  // Drawn after the others so that their series stay those of the earlier tables.
  const double w = std::uniform_real_distribution<double>(8.0, 16.0)(rng);
  make("window", t, w, [&](double x) { return std::abs(x - t) < w / 2 ? 2.0 : 0.0; });
  return out;
}

int RunSynthetic(int seeds) {
  std::printf("%-14s %-10s %-26s %9s %-30s %-40s %8s\n", "series", "operators", "chosen", "lap0",
              "change (true)", "candidates/step (s/step)", "total s");
  for (int seed = 0; seed < seeds; ++seed) {
    for (const Series& s : MakeSeries(seed)) {
      for (bool with_changes : {false, true}) {
        SearchOptions options;
        options.base_kernels = {KernelExpr::Base(BaseKernel::kConst),
                                KernelExpr::Base(BaseKernel::kSE),
                                KernelExpr::Base(BaseKernel::kLIN)};
        options.max_depth = 3;
        options.threads = 1;
        options.score.fit.restarts = 2;
        options.score.scale_x.mode = XScaling::Mode::kAuto;
        options.operators = Moves(with_changes);
        const auto start = Clock::now();
        absl::StatusOr<SearchResult> r = RunKernelSearch(s.data, options);
        const double seconds = SecondsSince(start);
        if (!r.ok()) {
          std::printf("%-14s error: %s\n", s.name.c_str(), std::string(r.status().message()).c_str());
          continue;
        }
        std::string change = "-";
        absl::StatusOr<std::vector<ChangeSummary>> changes = SummarizeChanges(s.data, r->best);
        if (changes.ok() && !changes->empty()) {
          const ChangeSummary& c = changes->front();
          change = absl::StrFormat("%.1f±%.1f", c.location, c.location_sd.value_or(NAN));
          if (c.kind == KernelExpr::Kind::kChangeWindow) {
            absl::StrAppend(&change, absl::StrFormat(" w %.1f", c.width));
          }
        }
        if (!std::isnan(s.change)) absl::StrAppend(&change, absl::StrFormat(" (%.1f", s.change));
        if (!std::isnan(s.width)) absl::StrAppend(&change, absl::StrFormat(" w %.1f", s.width));
        if (!std::isnan(s.change)) absl::StrAppend(&change, ")");
        std::printf("%-14s %-10s %-26s %9.2f %-30s %-40s %8.1f\n", s.name.c_str(),
                    with_changes ? "+,*,CP,CW" : "+,*", ToString(r->best_kernel).c_str(),
                    r->best_score, change.c_str(), StepsText(*r).c_str(), seconds);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

// ---- the paper's Table 1 setting ----------------------------------------------------------------

bool Recognised(const KernelExpr& chosen, const std::string& generating) {
  absl::StatusOr<KernelExpr> g = ParseKernel(generating);
  return g.ok() && chosen == *g;
}

bool HasChange(const KernelExpr& k) {
  if (k.is_change()) return true;
  for (const KernelExpr& child : k.operands) {
    if (HasChange(child)) return true;
  }
  return false;
}

struct StepCost {
  int searches = 0;
  long candidates[2] = {0, 0};  // off, on
  double seconds[2] = {0, 0};
};

struct Tally {
  int runs = 0;
  int recognised[2] = {0, 0};
  int changes_chosen = 0;  // on: a CP/CW kernel chosen
  double seconds[2] = {0, 0};
  double cpu[2] = {0, 0};
  std::vector<std::string> differ;
};

int RunPaper(const std::vector<int>& sizes, int datasets, const std::vector<std::string>& metrics,
             uint64_t seed) {
  const std::vector<std::string> kernels = {"SE", "SE+SE", "LIN", "MAT32"};
  std::map<std::pair<int, std::string>, Tally> tallies;
  std::map<std::pair<int, int>, StepCost> step_costs;  // (N, step) for the first metric
  std::printf("%-20s %-12s %-22s %-22s %9s %9s\n", "dataset", "metric", "chosen +,*",
              "chosen +,*,CP,CW", "cpu s off", "cpu s on");
  for (const int n : sizes) {
    for (const std::string& kernel_text : kernels) {
      for (int index = 0; index < datasets; ++index) {
        absl::StatusOr<KernelExpr> generator = ParseKernel(kernel_text);
        if (!generator.ok()) return 1;
        const Eigen::MatrixXd x = paper::PaperInputs(n);
        const uint64_t data_seed =
            CandidateSeed(seed, absl::StrCat("paper-data|", kernel_text, "|", n, "|", index));
        absl::StatusOr<std::vector<Eigen::VectorXd>> draws =
            paper::NoisyPriorDraws(*generator, x, 1, data_seed);
        if (!draws.ok()) return 1;
        const Dataset data{x, (*draws)[0]};
        ScoreCache caches[2];
        std::vector<Metric> parsed;
        for (const std::string& m : metrics) parsed.push_back(*ParseMetric(m));
        for (size_t mi = 0; mi < metrics.size(); ++mi) {
          SearchResult results[2];
          double seconds[2] = {0, 0}, cpu[2] = {0, 0};
          bool ok = true;
          for (int mode = 0; mode < 2; ++mode) {
            SearchOptions options;
            options.metric = metrics[mi];
            options.threads = 1;
            options.max_depth = 3;
            options.beam_width = 1;
            options.score.fit.restarts = 5;
            options.score.fit.seed = seed;
            options.score.standardize = false;  // the authors fitted y as drawn
            options.score.metrics = parsed;     // one cache entry serves every listed metric
            options.operators = Moves(mode == 1);
            const auto start = Clock::now();
            const double cpu_start = CpuSeconds();
            absl::StatusOr<SearchResult> r = RunKernelSearch(data, options, nullptr, &caches[mode]);
            seconds[mode] = SecondsSince(start);
            cpu[mode] = CpuSeconds() - cpu_start;
            if (!r.ok()) {
              std::printf("N%03d %s %d %s: %s\n", n, kernel_text.c_str(), index,
                          metrics[mi].c_str(), std::string(r.status().message()).c_str());
              ok = false;
              break;
            }
            results[mode] = *std::move(r);
          }
          if (!ok) continue;
          const std::string name = absl::StrFormat("N%03d_%s_%02d", n, kernel_text, index);
          Tally& tally = tallies[{n, metrics[mi]}];
          ++tally.runs;
          for (int mode = 0; mode < 2; ++mode) {
            tally.recognised[mode] += Recognised(results[mode].best_kernel, kernel_text);
            tally.seconds[mode] += seconds[mode];
            tally.cpu[mode] += cpu[mode];
          }
          if (HasChange(results[1].best_kernel)) ++tally.changes_chosen;
          if (!(results[0].best_kernel == results[1].best_kernel)) {
            tally.differ.push_back(absl::StrCat(name, ": ", ToString(results[0].best_kernel),
                                                " -> ", ToString(results[1].best_kernel)));
          }
          if (mi == 0) {
            // Steps whose two searches expanded the same kernel compare like with like.
            for (size_t s = 0; s < results[0].steps.size() && s < results[1].steps.size(); ++s) {
              if (results[0].steps[s].expanded != results[1].steps[s].expanded) break;
              StepCost& cost = step_costs[{n, static_cast<int>(s) + 1}];
              ++cost.searches;
              for (int mode = 0; mode < 2; ++mode) {
                cost.candidates[mode] += static_cast<long>(results[mode].steps[s].candidates.size());
                cost.seconds[mode] += results[mode].steps[s].seconds;
              }
            }
          }
          std::printf("%-20s %-12s %-22s %-22s %9.2f %9.2f\n", name.c_str(), metrics[mi].c_str(),
                      ToString(results[0].best_kernel).c_str(),
                      ToString(results[1].best_kernel).c_str(), cpu[0], cpu[1]);
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf("\nRecognition (%% of runs), +,* vs +,*,CP,CW; CPU and wall seconds of the "
              "searches summed (a later metric's search reuses its dataset's cache)\n");
  std::printf("%-5s %-12s %5s %9s %9s %6s %9s %9s %9s %9s\n", "N", "metric", "runs", "rec off",
              "rec on", "CP/CW", "cpu off", "cpu on", "wall off", "wall on");
  for (const auto& [key, t] : tallies) {
    std::printf("%-5d %-12s %5d %8.1f%% %8.1f%% %6d %9.1f %9.1f %9.1f %9.1f\n", key.first,
                key.second.c_str(), t.runs, 100.0 * t.recognised[0] / t.runs,
                100.0 * t.recognised[1] / t.runs, t.changes_chosen, t.cpu[0], t.cpu[1],
                t.seconds[0], t.seconds[1]);
  }
  std::printf("\nChosen kernels that differ (off -> on)\n");
  for (const auto& [key, t] : tallies) {
    for (const std::string& d : t.differ) std::printf("  %s %s\n", key.second.c_str(), d.c_str());
  }
  // Over all N: what the default metric's users would see.
  std::printf("\nAll N: recognised off / on per metric\n");
  std::map<std::string, std::array<int, 3>> all;
  for (const auto& [key, t] : tallies) {
    all[key.second][0] += t.runs;
    all[key.second][1] += t.recognised[0];
    all[key.second][2] += t.recognised[1];
  }
  for (const auto& [metric, a] : all) {
    std::printf("  %-12s %4d runs: %5.1f%% / %5.1f%% (%d / %d)\n", metric.c_str(), a[0],
                100.0 * a[1] / a[0], 100.0 * a[2] / a[0], a[1], a[2]);
  }
  std::printf("\nCost per step (%s): searches with the same expanded kernel; candidates and "
              "wall seconds of the step summed, off / on\n",
              metrics.front().c_str());
  std::printf("%-5s %-5s %9s %15s %21s %7s\n", "N", "step", "searches", "candidates", "seconds",
              "ratio");
  for (const auto& [key, c] : step_costs) {
    std::printf("%-5d %-5d %9d %7ld / %-7ld %9.2f / %-9.2f %7.2f\n", key.first, key.second,
                c.searches, c.candidates[0], c.candidates[1], c.seconds[0], c.seconds[1],
                c.seconds[0] > 0 ? c.seconds[1] / c.seconds[0] : NAN);
  }
  return 0;
}

}  // namespace
}  // namespace gpsel

int main(int argc, char** argv) {
  CLI::App app{"Recognition with and without the CP/CW search moves (issue 31)"};
  app.require_subcommand(1);
  int seeds = 2;
  CLI::App* synthetic = app.add_subcommand("synthetic", "series with a known change or window");
  synthetic->add_option("--seeds", seeds, "series per kind")->check(CLI::Range(1, 100));
  std::string sizes_text = "10,20,50,100", metrics_text = "lap0";
  int datasets = 3;
  uint64_t seed = 2024;
  CLI::App* paper = app.add_subcommand("paper", "the paper's Table 1 setting");
  paper->add_option("--sizes", sizes_text, "dataset sizes N");
  paper->add_option("--datasets", datasets, "datasets per generating kernel and N")
      ->check(CLI::Range(1, 100));
  paper->add_option("--metrics", metrics_text, "search metrics (one shared cache per mode)");
  paper->add_option("--seed", seed, "as paper_repro's --seed");
  CLI11_PARSE(app, argc, argv);
  if (synthetic->parsed()) return gpsel::RunSynthetic(seeds);
  std::vector<int> sizes;
  for (absl::string_view s : absl::StrSplit(sizes_text, ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 3) {
      std::fprintf(stderr, "--sizes: bad entry '%s'\n", std::string(s).c_str());
      return 2;
    }
    sizes.push_back(n);
  }
  std::vector<std::string> metrics = absl::StrSplit(metrics_text, ',');
  for (const std::string& m : metrics) {
    if (!gpsel::ParseMetric(m).ok()) {
      std::fprintf(stderr, "--metrics: unknown metric '%s'\n", m.c_str());
      return 2;
    }
  }
  return gpsel::RunPaper(sizes, datasets, metrics, seed);
}
