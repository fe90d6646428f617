// `gpsel score`: fit each kernel and print the paper's metrics, one row per kernel, the best
// value of every metric column marked; or JSON with --json. In-process unless --server is given.
#include <iostream>
#include <algorithm>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/cli_common.h"
#include "core/kernel_expr.h"
#include "core/score.h"

namespace gpsel::cli {
namespace {

struct ScoreFlags {
  FitFlags fit;
  std::string metrics = "mll,map,aic,bic,lap,lap0,lap_aic,lap_bic";
  std::vector<double> laplace_r;
  int threads = 0;  // 0: one per core
};

// "3/12d": starts at the optimum / starts, and the first letter of the winner's kind.
std::string StartsMark(const std::optional<FitResult>& fit) {
  if (!fit.has_value()) return "-";
  return absl::StrFormat("%d/%d%c", fit->starts_at_best, fit->starts,
                         StartKindName(fit->best_start_kind).front());
}

void PrintTable(const std::vector<KernelScore>& scores, const std::vector<Metric>& metrics,
                const Dataset& data) {
  std::map<std::string, double> best;
  for (const KernelScore& s : scores) {
    for (const auto& [name, value] : s.metrics) {
      if (!best.count(name) || value > best[name]) best[name] = value;
    }
  }
  size_t kernel_width = 6;
  for (const KernelScore& s : scores) kernel_width = std::max(kernel_width, s.kernel.size());
  std::string header =
      absl::StrFormat("%-*s %3s %9s %9s", kernel_width, "kernel", "u", "mll@", "map@");
  for (Metric m : metrics) absl::StrAppendFormat(&header, " %12s", MetricName(m));
  std::cout << header << "\n";
  for (const KernelScore& s : scores) {
    std::string row = absl::StrFormat("%-*s %3d %9s %9s", kernel_width, s.kernel,
                                      s.num_hyperparameters, StartsMark(s.mll_fit),
                                      StartsMark(s.map_fit));
    for (Metric m : metrics) {
      const std::string name(MetricName(m));
      auto it = s.metrics.find(name);
      if (it == s.metrics.end()) {
        absl::StrAppendFormat(&row, " %12s", "undefined");
      } else {
        const bool is_best = scores.size() > 1 && it->second == best[name];
        absl::StrAppendFormat(&row, " %11.3f%s", it->second, is_best ? "*" : " ");
      }
    }
    std::cout << row << "\n";
  }
  std::cout << absl::StrFormat("n = %d, %s; higher is better, * = best per column.\n",
                               data.num_points(),
                               scores.empty() || scores[0].standardized
                                   ? "y standardised (mean 0, sd 1)"
                                   : "y not standardised");
  std::cout << "mll@/map@: starts that reached the fit's optimum / starts, and the winning "
               "start's kind (p prior draw, d data-informed, n nested kernel, c cross-seeded, "
               "g given); 1/N means it may not be global.\n";
  if (!scores.empty() && scores[0].x_scale != 1.0) {
    std::cout << absl::StrFormat("x divided by %.6g for modelling (%s); values in x's units.\n",
                                 scores[0].x_scale, scores[0].x_scale_reason);
  }
  for (const KernelScore& s : scores) {
    for (const auto& [name, reason] : s.undefined_metrics) {
      std::cout << s.kernel << ": " << name << " undefined: " << reason << "\n";
    }
    for (const std::optional<FitResult>* fit : {&s.mll_fit, &s.map_fit}) {
      if (!fit->has_value()) continue;
      const FitResult& f = **fit;
      std::cout << absl::StrFormat(
          "%s %s fit: log lik %.4f, log prior %.4f;",
          s.kernel, f.objective == FitObjective::kMaximumLikelihood ? "MLL" : "MAP",
          f.log_likelihood, f.log_prior);
      for (const auto& [name, value] : f.values) {
        std::cout << absl::StrFormat(" %s=%.4g", name, value);
      }
      std::cout << "\n";
    }
  }
}

// Every warning of every score, on stderr (so that --json output stays clean).
void PrintWarnings(const std::vector<KernelScore>& scores) {
  for (const KernelScore& s : scores) {
    for (const std::string& warning : s.warnings) {
      std::cerr << "gpsel: warning: " << s.kernel << ": " << warning << "\n";
    }
  }
}

int RunScore(const ScoreFlags& flags) {
  absl::StatusOr<Dataset> data = LoadCsvFile(flags.fit.data_path);
  if (!data.ok()) return ReportError(data.status());
  std::vector<KernelExpr> kernels;
  for (const std::string& text : flags.fit.kernels) {
    absl::StatusOr<KernelExpr> kernel = ParseKernel(text);
    if (!kernel.ok()) return ReportError(kernel.status());
    kernels.push_back(*std::move(kernel));
  }
  absl::StatusOr<std::vector<Metric>> metrics = ParseMetricList(flags.metrics);
  if (!metrics.ok()) return ReportError(metrics.status());
  absl::StatusOr<HyperparameterSettings> settings = ParseHyperparameterFlags(flags.fit);
  if (!settings.ok()) return ReportError(settings.status());

  ScoreOptions options;
  options.fit.restarts = flags.fit.restarts;
  options.fit.seed = flags.fit.seed;
  options.fit.threads = flags.threads > 0
                            ? flags.threads
                            : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1,
                                         256);
  options.standardize = !flags.fit.no_standardize;
  options.metrics = *metrics;
  options.laplace_r = flags.laplace_r;
  options.hyperparameters = *settings;
  absl::StatusOr<XScaling> scale_x = ParseScaleXFlag(flags.fit);
  if (!scale_x.ok()) return ReportError(scale_x.status());
  options.scale_x = *scale_x;
  if (absl::Status s = options.Validate(); !s.ok()) return ReportError(s);

  std::vector<KernelScore> scores;
  if (!flags.fit.server.empty()) {
    if (!RemoteScoreHook()) {
      return ReportError(absl::UnimplementedError(
          "--server: this gpsel was built without the gRPC client (GPSEL_BUILD_SERVICE=OFF)"));
    }
    absl::StatusOr<std::vector<KernelScore>> remote =
        RemoteScoreHook()(flags.fit.server, *data, kernels, options);
    if (!remote.ok()) return ReportError(remote.status());
    scores = *std::move(remote);
  } else {
    TerminalProgress progress(!flags.fit.json && StderrIsTerminal());
    int failed = 0;
    absl::StatusOr<std::vector<KernelScore>> local =
        ScoreKernels(*data, kernels, options, progress.callback(), &failed);
    progress.Finish();
    if (!local.ok()) {
      return ReportError(absl::Status(local.status().code(),
                                      absl::StrCat(ToString(kernels[failed]), ": ",
                                                   local.status().message())));
    }
    scores = *std::move(local);
  }

  PrintWarnings(scores);
  if (flags.fit.json) {
    nlohmann::json out;
    out["n"] = data->num_points();
    out["standardized"] = options.standardize;
    nlohmann::json results = nlohmann::json::array();
    for (const KernelScore& s : scores) results.push_back(KernelScoreToJson(s));
    out["results"] = results;
    std::cout << out.dump(2) << "\n";
  } else {
    PrintTable(scores, *metrics, *data);
  }
  return kExitOk;
}

GPSEL_REGISTER_COMMAND(score, "score",
                       "fit kernels to a dataset and report MLL, MAP, AIC, BIC and Laplace metrics",
                       [](CLI::App& sub) -> std::function<int()> {
                         auto flags = std::make_shared<ScoreFlags>();
                         AddDataFlag(sub, flags->fit);
                         sub.add_option("--kernel", flags->fit.kernels,
                                        "kernel expression, e.g. 'SE+LIN' (repeatable)")
                             ->required();
                         sub.add_option("--metrics", flags->metrics,
                                        "comma-separated metrics or 'all' (adds lap_bic_half)")
                             ->capture_default_str();
                         sub.add_option("--threads", flags->threads,
                                        "fit the random starts in parallel on N threads "
                                        "(default 0 = one per core; same result for any N)")
                             ->check(CLI::Range(0, 256));
                         sub.add_option("--laplace-r", flags->laplace_r,
                                        "extra Laplace variant with minimal correction r "
                                        "(repeatable)");
                         AddFitFlags(sub, flags->fit);
                         sub.add_option("--server", flags->fit.server,
                                        "HOST:PORT of a gpsel-server (default: run in-process)");
                         return [flags] { return RunScore(*flags); };
                       });

}  // namespace
}  // namespace gpsel::cli
