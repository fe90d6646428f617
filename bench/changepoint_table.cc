// Recognition of changes by CKS with and without the changepoint/changewindow moves (issue 31),
// and what the moves cost per search step. Synthetic series of 60 points (x = 0..59, noise sd
// 0.3, fixed seeds) with a known change at t ~ U(20, 40): a level shift of 2, a wave that stops,
// a trend that turns; and a control without a change (a slow wave). Each is searched over the
// base kernels C, SE, LIN (depth 3, 2 restarts, x scaled automatically, one thread) with
// --operators +,* and +,*,CP,CW. Prints, per search, the chosen kernel, its Lap0, the change it
// locates (with its Laplace sd) and, per step, the candidates scored and the step's seconds.
//
//   build/bench/changepoint_table [SEEDS]      (results in bench/RESULTS.md)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gpsel/core/change_summary.h"
#include "gpsel/core/search.h"

namespace {

struct Series {
  std::string name;
  gpsel::Dataset data;
  double change = NAN;  // true location, NAN for the control
};

std::vector<Series> MakeSeries(int seed) {
  std::mt19937_64 rng(1000 + seed);
  std::normal_distribution<double> noise(0.0, 0.3);
  std::uniform_real_distribution<double> where(20.0, 40.0);
  const double t = where(rng);
  const int n = 60;
  std::vector<Series> out;
  auto make = [&](const std::string& name, double change, auto f) {
    Series s;
    s.name = name + "_" + std::to_string(seed);
    s.change = change;
    s.data.x.resize(n, 1);
    s.data.y.resize(n);
    for (int i = 0; i < n; ++i) {
      s.data.x(i, 0) = i;
      s.data.y(i) = f(static_cast<double>(i)) + noise(rng);
    }
    out.push_back(std::move(s));
  };
  make("level", t, [&](double x) { return x > t ? 2.0 : 0.0; });
  make("wave_stops", t, [&](double x) { return x < t ? std::sin(x / 2.5) : 0.0; });
  make("slope_turns", t, [&](double x) { return 0.08 * (x < t ? x : 2 * t - x); });
  make("no_change", NAN, [&](double x) { return std::sin(x / 9.0); });
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int seeds = argc > 1 ? std::atoi(argv[1]) : 2;
  std::printf("%-14s %-10s %-26s %9s %-18s %-34s %8s\n", "series", "operators", "chosen", "lap0",
              "change (true)", "candidates/step (s/step)", "total s");
  for (int seed = 0; seed < seeds; ++seed) {
    for (const Series& s : MakeSeries(seed)) {
      for (bool with_changes : {false, true}) {
        gpsel::SearchOptions options;
        options.base_kernels = {gpsel::KernelExpr::Base(gpsel::BaseKernel::kConst),
                                gpsel::KernelExpr::Base(gpsel::BaseKernel::kSE),
                                gpsel::KernelExpr::Base(gpsel::BaseKernel::kLIN)};
        options.max_depth = 3;
        options.threads = 1;
        options.score.fit.restarts = 2;
        options.score.scale_x.mode = gpsel::XScaling::Mode::kAuto;
        options.operators.change_point = with_changes;
        options.operators.change_window = with_changes;
        const auto start = std::chrono::steady_clock::now();
        absl::StatusOr<gpsel::SearchResult> r = gpsel::RunKernelSearch(s.data, options);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!r.ok()) {
          std::printf("%-14s error: %s\n", s.name.c_str(), std::string(r.status().message()).c_str());
          continue;
        }
        std::string change = "-";
        absl::StatusOr<std::vector<gpsel::ChangeSummary>> changes =
            gpsel::SummarizeChanges(s.data, r->best);
        if (changes.ok() && !changes->empty()) {
          char text[64];
          std::snprintf(text, sizeof text, "%.1f±%.1f", changes->front().location,
                        changes->front().location_sd.value_or(NAN));
          change = text;
        }
        if (!std::isnan(s.change)) {
          char text[32];
          std::snprintf(text, sizeof text, " (%.1f)", s.change);
          change += text;
        }
        std::string steps;
        for (const gpsel::SearchStep& step : r->steps) {
          char text[32];
          std::snprintf(text, sizeof text, "%s%zu (%.1f)", steps.empty() ? "" : ", ",
                        step.candidates.size(), step.seconds);
          steps += text;
        }
        std::printf("%-14s %-10s %-26s %9.2f %-18s %-34s %8.1f\n", s.name.c_str(),
                    with_changes ? "+,*,CP,CW" : "+,*", gpsel::ToString(r->best_kernel).c_str(),
                    r->best_score, change.c_str(), steps.c_str(), seconds);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
