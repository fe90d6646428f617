// `gpsel score`: fit each kernel and print the paper's metrics, one row per kernel, the best
// value of every metric column marked; or, with --json, the ScoreResponse message in the protobuf
// JSON mapping. In-process unless --server is given (with --job or --detach: as a job whose
// kernels every replica sharing the server's job store may fit).
#include <iostream>
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/client/cli/backend.h"
#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"
#include "gpsel/core/held_out.h"

#include "gpsel/client/cli/model_file.h"
#include "gpsel/core/approx_score.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "gpsel/proto/bridge/convert.h"

namespace gpsel::cli {
namespace {

struct ScoreFlags {
  FitFlags fit;
  RemoteFlags remote;
  std::string metrics = "mll,map,aic,bic,lap,lap0,lap_aic,lap_bic";
  std::vector<double> laplace_r;
  std::string test_path;  // --test: held-out data, read with the CSV flags of --data
  JobFlags queue;
  std::string save_model;  // --save-model FILE
  std::string save_by;     // --save-by METRIC
  // --search-starts: ScoreOptions::search_starts (in-process, over gRPC and in score jobs).
  bool search_starts = false;
};

// "3/12d": starts at the optimum / starts, and the first letter of the winner's kind; a
// trailing "?" when the fit may not be global (FitResult::may_not_be_global).
std::string StartsMark(const std::optional<FitResult>& fit) {
  if (!fit.has_value()) return "-";
  return absl::StrFormat("%d/%d%c%s", fit->starts_at_best, fit->starts,
                         StartKindName(fit->best_start_kind).front(),
                         fit->may_not_be_global ? "?" : "");
}

// With --test: each fit's held-out numbers (core/held_out.h), the best of each column marked.
void PrintHeldOut(const std::vector<KernelScore>& scores) {
  const auto with_held_out = std::find_if(scores.begin(), scores.end(), [](const KernelScore& s) {
    return !s.held_out.empty();
  });
  if (with_held_out == scores.end()) return;
  double best_test = -INFINITY, best_predictive = -INFINITY;
  for (const KernelScore& s : scores) {
    for (const HeldOutLikelihood& h : s.held_out) {
      best_test = std::max(best_test, h.test_log_likelihood);
      best_predictive = std::max(best_predictive, h.predictive_log_density);
    }
  }
  size_t kernel_width = 6;
  for (const KernelScore& s : scores) kernel_width = std::max(kernel_width, s.kernel.size());
  std::cout << absl::StrFormat("\nheld-out data (--test, %d points), on y's own scale:\n",
                               with_held_out->held_out[0].num_test_points);
  std::cout << absl::StrFormat("%-*s %4s %15s %17s %15s\n", kernel_width, "kernel", "fit",
                               "test_loglik/pt", "pred_log_density", "pred/pt");
  for (const KernelScore& s : scores) {
    for (const HeldOutLikelihood& h : s.held_out) {
      const bool mll = h.objective == FitObjective::kMaximumLikelihood;
      std::cout << absl::StrFormat(
          "%-*s %4s %14.4f%s %16.4f%s %15.4f\n", kernel_width, s.kernel, mll ? "MLL" : "MAP",
          h.test_log_likelihood, h.test_log_likelihood == best_test ? "*" : " ",
          h.predictive_log_density, h.predictive_log_density == best_predictive ? "*" : " ",
          h.PredictiveLogDensityPerPoint());
    }
  }
  std::cout << "test_loglik/pt: log N(y* | 0, K + noise I) / n* at the fit, the prior on the test "
               "points alone (the paper's Table 3); pred_log_density: log p(y* | X*, X, y), the "
               "joint posterior predictive, total.\n";
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
    // A sparse score's fits have no start statistics: each fit's own m is shown instead (the
    // warnings name it with what stopped its growth; the score's m is the larger).
    auto sparse_mark = [&s](const std::optional<FitResult>& fit) -> std::string {
      if (!fit) return "-";
      return absl::StrCat("m=", fit->num_inducing > 0 ? fit->num_inducing : s.num_inducing);
    };
    const bool sparse = s.method == "sparse";
    std::string row = absl::StrFormat(
        "%-*s %3d %9s %9s", kernel_width, s.kernel, s.num_hyperparameters,
        sparse ? sparse_mark(s.mll_fit) : StartsMark(s.mll_fit),
        sparse ? sparse_mark(s.map_fit) : StartsMark(s.map_fit));
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
  PrintHeldOut(scores);
  std::cout << absl::StrFormat("n = %d, %s; higher is better, * = best per column.\n",
                               data.num_points(),
                               scores.empty() || scores[0].standardized
                                   ? "y standardised (mean 0, sd 1)"
                                   : "y not standardised");
  std::cout << "mll@/map@: starts that reached the fit's optimum / starts, and the winning "
               "start's kind (p prior draw, d data-informed, n nested kernel, c cross-seeded, "
               "g given); a fit reached by one start draws more, up to --max-draws-factor × "
               "--restarts; ? = still one start then: MAY NOT BE GLOBAL.\n";
  for (const KernelScore& s : scores) {
    if (const std::string note = MayNotBeGlobalNote(s); !note.empty()) {
      std::cout << s.kernel << note << "\n";
    }
  }
  if (!scores.empty() && scores[0].x_scale != 1.0) {
    std::cout << absl::StrFormat("x divided by %.6g for modelling (%s); values in x's units.\n",
                                 scores[0].x_scale, scores[0].x_scale_reason);
  }
  for (const KernelScore& s : scores) {
    if (!s.x_scales.empty()) {
      std::cout << absl::StrFormat("%s: x's columns divided for modelling (%s); values in each "
                                   "column's units.\n",
                                   s.kernel, s.x_scale_reason);
    }
  }
  for (const std::string& line : UndecidedAmongScores(scores, metrics)) {
    std::cout << line << "\n";
  }
  for (const KernelScore& s : scores) {
    if (!s.approx_note.empty()) std::cout << s.kernel << ": " << s.approx_note << "\n";
    if (s.method == "sparse") {
      std::cout << absl::StrFormat(
          "%s: sparse GP, m = %d inducing points; each value is the lower end of an interval "
          "that holds the exact value at these hyperparameters:\n",
          s.kernel, s.num_inducing);
      for (Metric m : metrics) {
        auto it = s.intervals.find(std::string(MetricName(m)));
        if (it == s.intervals.end()) continue;
        std::cout << absl::StrFormat("  %-12s [%.3f, %.3f]  (width %.3f)\n", it->first,
                                     it->second.lower, it->second.upper,
                                     it->second.upper - it->second.lower);
      }
    }
    for (const auto& [name, reason] : s.undefined_metrics) {
      std::cout << s.kernel << ": " << name << " undefined: " << reason << "\n";
    }
    for (const std::optional<FitResult>* fit : {&s.mll_fit, &s.map_fit}) {
      if (!fit->has_value()) continue;
      const FitResult& f = **fit;
      std::cout << absl::StrFormat(
          "%s %s fit: %s %.4f, log prior %.4f;",
          s.kernel, f.objective == FitObjective::kMaximumLikelihood ? "MLL" : "MAP",
          s.method == "sparse" ? "ELBO" : "log lik", f.log_likelihood, f.log_prior);
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
  const bool remote = !flags.remote.server.empty();
  absl::StatusOr<Dataset> data = LoadDataFlag(flags.fit, CliDatasetLimits(remote, &flags.fit));
  if (!data.ok()) return ReportError(data.status());
  absl::StatusOr<std::vector<KernelExpr>> parsed = ParseKernelFlags(flags.fit);
  if (!parsed.ok()) return ReportError(parsed.status());
  const std::vector<KernelExpr>& kernels = *parsed;
  absl::StatusOr<std::vector<Metric>> metrics = ParseMetricList(flags.metrics);
  if (!metrics.ok()) return ReportError(metrics.status());
  absl::StatusOr<ScoreOptions> fit_options = ScoreOptionsFromFlags(flags.fit);
  if (!fit_options.ok()) return ReportError(fit_options.status());
  ScoreOptions options = *std::move(fit_options);
  options.metrics = *metrics;
  options.laplace_r = flags.laplace_r;
  options.search_starts = flags.search_starts;
  if (!flags.test_path.empty()) {
    FitFlags test_flags = flags.fit;
    test_flags.data_path = flags.test_path;
    absl::StatusOr<Dataset> test = LoadDataFlag(test_flags, CliDatasetLimits(remote));
    if (!test.ok()) {
      return ReportError(absl::Status(test.status().code(),
                                      absl::StrCat("--test ", flags.test_path, ": ",
                                                   test.status().message())));
    }
    if (absl::Status s = ValidateTestData(*test, *data); !s.ok()) {
      return ReportError(absl::InvalidArgumentError(
          absl::StrCat("--test ", flags.test_path, ": ", s.message())));
    }
    options.test = std::make_shared<const Dataset>(*std::move(test));
  }
  if (absl::Status s = options.Validate(); !s.ok()) return ReportError(s);

  if (absl::Status s = CheckJobFlags(flags.queue, flags.remote); !s.ok()) return ReportError(s);
  // The metric a saved model is chosen by: --save-by, else lap0 when computed, else the first.
  std::string save_by = flags.save_by;
  if (!flags.save_model.empty() && flags.queue.detach) {
    return ReportError(absl::InvalidArgumentError(
        "--save-model: needs the scores, which --detach does not wait for (use --job)"));
  }
  if (!save_by.empty()) {
    absl::StatusOr<Metric> metric = ParseMetric(save_by);
    if (!metric.ok()) {
      return ReportError(absl::InvalidArgumentError(
          absl::StrCat("--save-by: ", metric.status().message())));
    }
    if (std::find(metrics->begin(), metrics->end(), *metric) == metrics->end()) {
      return ReportError(absl::InvalidArgumentError(
          absl::StrCat("--save-by ", save_by, ": is not among --metrics")));
    }
  } else if (!metrics->empty()) {
    save_by = std::find(metrics->begin(), metrics->end(), Metric::kLap0) != metrics->end()
                  ? "lap0"
                  : std::string(MetricName(metrics->front()));
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(flags.remote);
  if (!backend.ok()) return ReportError(backend.status());
  if (flags.queue.detach) {
    absl::StatusOr<v1::SubmitScoreResponse> submitted =
        (*backend)->SubmitScore(*data, kernels, options);
    if (!submitted.ok()) return ReportError(submitted.status());
    PrintSubmitted(*submitted, submitted->job(), flags.fit.json);
    return kExitOk;
  }
  AnnounceEstimate(EstimateScoreTime(*data, kernels, options),
                   EstimateScoreMemory(*data, kernels, options), remote);
  TerminalProgress progress(!flags.fit.json && StderrIsTerminal());
  absl::StatusOr<std::vector<KernelScore>> result =
      flags.queue.job ? (*backend)->ScoreAsJob(*data, kernels, options, progress.callback())
                      : (*backend)->Score(*data, kernels, options, progress.callback());
  progress.Finish();
  if (!result.ok()) return ReportError(result.status());
  const std::vector<KernelScore>& scores = *result;

  PrintWarnings(scores);
  if (!flags.save_model.empty()) {
    std::string why;
    absl::StatusOr<const KernelScore*> chosen =
        ChooseScoreToSave(scores, scores.size() == 1 ? flags.save_by : save_by, &why);
    if (!chosen.ok()) return ReportError(chosen.status());
    if (absl::Status s = SaveScoreModel(flags.save_model, **chosen, *data); !s.ok()) {
      return ReportError(s);
    }
    std::cerr << "gpsel: saved the model of " << (*chosen)->kernel << " (" << why << ") to "
              << flags.save_model << "\n";
  }
  if (flags.fit.json) {
    v1::ScoreResponse response;
    for (const KernelScore& score : scores) bridge::ToProto(score, response.add_scores());
    PrintJson(response);
  } else {
    PrintTable(scores, *metrics, *data);
  }
  return kExitOk;
}

}  // namespace

CommandRunner SetupScore(CLI::App& sub) {
  auto flags = std::make_shared<ScoreFlags>();
  AddDataFlag(sub, flags->fit);
  sub.add_option("--kernel", flags->fit.kernels, "kernel expression, e.g. 'SE+LIN' (repeatable)")
      ->required();
  sub.add_option("--metrics", flags->metrics,
                 "comma-separated metrics or 'all' (adds lap_bic_half)")
      ->capture_default_str();
  sub.add_option("--test", flags->test_path,
                 "held-out CSV (read like --data): each fit's test log-likelihood and "
                 "predictive log density on it");
  AddThreadsFlag(sub, flags->fit, "fit the random starts in parallel");
  sub.add_option("--laplace-r", flags->laplace_r,
                 "extra Laplace variant with minimal correction r (repeatable)");
  AddFitFlags(sub, flags->fit);
  sub.add_flag("--search-starts,!--no-search-starts", flags->search_starts,
               "start each kernel as a search that built it would: first score its sub-kernels "
               "(base kernels removed one at a time, for kernels of at most 5) and start from "
               "their optima, and draw its prior starts from the seed a search gives it, so that "
               "score and search agree on a kernel's optimum; costs the sub-kernels' fits "
               "(about 2.5x on sunspots' PER*RQ+PER; off by default; the estimate counts them)");
  AddRemoteFlags(sub, flags->remote, /*server_required=*/false);
  AddJobFlags(sub, flags->queue, "its kernels");
  sub.add_option("--save-model", flags->save_model,
                 "write the fitted model (kernel, MLL and MAP values, standardisation, data "
                 "fingerprint) as JSON for `gpsel predict --model`: the only kernel, or the best "
                 "of several by --save-by");
  sub.add_option("--save-by", flags->save_by,
                 "metric that picks the kernel --save-model saves (default: lap0 if computed, "
                 "else the first of --metrics)");
  return [flags] { return RunScore(*flags); };
}

}  // namespace gpsel::cli
