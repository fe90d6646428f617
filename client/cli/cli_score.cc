// `gpsel score`: fit each kernel and print the paper's metrics, one row per kernel, the best
// value of every metric column marked; or, with --json, the ScoreResponse message in the protobuf
// JSON mapping. In-process unless --server is given (with --job or --detach: as a job whose
// kernels every replica sharing the server's job store may fit).
#include <iostream>
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/client/cli/backend.h"
#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"
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
  JobFlags queue;
};

// "3/12d": starts at the optimum / starts, and the first letter of the winner's kind; a
// trailing "?" when the fit may not be global (FitResult::may_not_be_global).
std::string StartsMark(const std::optional<FitResult>& fit) {
  if (!fit.has_value()) return "-";
  return absl::StrFormat("%d/%d%c%s", fit->starts_at_best, fit->starts,
                         StartKindName(fit->best_start_kind).front(),
                         fit->may_not_be_global ? "?" : "");
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
  const bool remote = !flags.remote.server.empty();
  absl::StatusOr<Dataset> data = LoadDataFlag(flags.fit, CliDatasetLimits(remote));
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
  if (absl::Status s = options.Validate(); !s.ok()) return ReportError(s);

  if (absl::Status s = CheckJobFlags(flags.queue, flags.remote); !s.ok()) return ReportError(s);
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
  AddThreadsFlag(sub, flags->fit, "fit the random starts in parallel");
  sub.add_option("--laplace-r", flags->laplace_r,
                 "extra Laplace variant with minimal correction r (repeatable)");
  AddFitFlags(sub, flags->fit);
  AddRemoteFlags(sub, flags->remote, /*server_required=*/false);
  AddJobFlags(sub, flags->queue, "its kernels");
  return [flags] { return RunScore(*flags); };
}

}  // namespace gpsel::cli
