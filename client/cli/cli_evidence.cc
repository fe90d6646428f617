// `gpsel evidence`: log model evidence of one kernel by (dynamic) nested sampling or by
// importance sampling from the posterior modes' Laplace approximations (--method), with a
// progress bar on a terminal. In-process, or as a job on a gpsel-server with --server. --json
// prints the EvidenceResult message (--detach: the SubmitEvidenceResponse's job) in the protobuf
// JSON mapping.
#include <iostream>

#include "absl/strings/str_format.h"
#include "gpsel/client/cli/backend.h"
#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"
#include "gpsel/core/evidence.h"
#include "gpsel/proto/bridge/convert.h"

namespace gpsel::cli {
namespace {

struct EvidenceFlags {
  FitFlags fit;
  RemoteFlags remote;
  double dlogz = 0.01;
  int nlive = 0;
  bool dynamic = false;
  bool samples = false;
  int64_t max_calls = 5'000'000;
  double max_seconds = 0;
  bool detach = false;
  std::string method = "nested";
  int runs = 1;
  int batch_size = 1;
  double target_error = ImportanceSamplingOptions{}.target_error;
  int64_t max_samples = ImportanceSamplingOptions{}.max_samples;
  bool restarts_given = false;  // --restarts given: the mode search's prior-draw starts
};

int RunEvidence(const EvidenceFlags& flags) {
  absl::StatusOr<Dataset> data = LoadDataFlag(flags.fit);
  if (!data.ok()) return ReportError(data.status());
  absl::StatusOr<KernelExpr> kernel = ParseSingleKernelFlag(flags.fit);
  if (!kernel.ok()) return ReportError(kernel.status());
  absl::StatusOr<ScoreOptions> fit_options = ScoreOptionsFromFlags(flags.fit);
  if (!fit_options.ok()) return ReportError(fit_options.status());
  if (fit_options->approx.mode != ApproxMode::kExact) {
    return ReportError(absl::InvalidArgumentError(
        "--approx: log evidence is computed on the exact GP only (nested and importance "
        "sampling need the exact likelihood at every sample), up to 10000 points; for large n "
        "use 'gpsel score --approx sparse', whose Laplace metrics carry certified intervals"));
  }

  EvidenceOptions options;
  absl::StatusOr<EvidenceMethod> method = ParseEvidenceMethod(flags.method, "--method");
  if (!method.ok()) return ReportError(method.status());
  options.method = *method;
  options.importance.seed = flags.fit.seed;
  options.importance.threads = fit_options->fit.threads;
  options.importance.target_error = flags.target_error;
  options.importance.max_samples = flags.max_samples;
  options.importance.max_seconds = flags.max_seconds;
  options.importance.return_samples = flags.samples;
  if (flags.restarts_given) options.mode_search.restarts = flags.fit.restarts;
  options.sampling.threads = options.importance.threads;
  options.sampling.num_runs = flags.runs;
  options.sampling.batch_size = flags.batch_size;
  options.sampling.dlogz = flags.dlogz;
  options.sampling.num_live = flags.nlive;
  options.sampling.dynamic = flags.dynamic;
  options.sampling.seed = flags.fit.seed;
  options.sampling.return_samples = flags.samples;
  options.sampling.max_likelihood_calls = flags.max_calls;
  options.sampling.max_seconds = flags.max_seconds;
  options.standardize = fit_options->standardize;
  options.hyperparameters = fit_options->hyperparameters;
  options.scale_x = fit_options->scale_x;
  if (absl::Status s = options.Validate(); !s.ok()) return ReportError(s);

  if (flags.detach && flags.remote.server.empty()) {
    return ReportError(absl::InvalidArgumentError("--detach: needs --server"));
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(flags.remote);
  if (!backend.ok()) return ReportError(backend.status());
  if (flags.detach) {
    absl::StatusOr<v1::SubmitEvidenceResponse> submitted =
        (*backend)->SubmitEvidence(*data, *kernel, options);
    if (!submitted.ok()) return ReportError(submitted.status());
    if (flags.fit.json) {
      PrintJson(*submitted);
    } else {
      std::cout << "submitted " << submitted->job().name() << "\n";
    }
    return kExitOk;
  }

  TerminalProgress progress(!flags.fit.json && StderrIsTerminal());
  absl::StatusOr<EvidenceResult> result =
      (*backend)->Evidence(*data, *kernel, options, progress.callback());
  progress.Finish();
  if (!result.ok()) return ReportError(result.status());
  if (flags.fit.json) {
    v1::EvidenceResult message;
    bridge::ToProto(*result, &message);
    PrintJson(message);
  } else {
    std::cout << absl::StrFormat(
        "kernel %s (n = %d, u = %d, y %s)\n"
        "log evidence   %.4f ± %.4f by %s (%s)%s\n",
        result->kernel, result->num_points, result->num_hyperparameters,
        result->standardized ? "standardised" : "not standardised", result->log_evidence,
        result->log_evidence_error, EvidenceMethodName(result->method), result->method_reason,
        result->partial ? "  PARTIAL, NOT FINAL" : "");
    if (result->partial) {
      std::cout << "PARTIAL: " << result->partial_reason;
      if (result->method == EvidenceMethod::kNested) {
        std::cout << absl::StrFormat(
            "; the error includes the remaining-mass term %.4f nats (log Z could rise by that "
            "much more)",
            result->log_evidence_truncation);
      }
      std::cout << ". Raise the cap for a final answer (exit code " << kExitPartial << ").\n";
    }
    std::cout << absl::StrFormat("likelihood calls %d, %.3f s\n", result->likelihood_calls,
                                 result->seconds);
    if (result->importance.has_value()) {
      const ImportanceSamplingResult& r = *result->importance;
      std::cout << absl::StrFormat(
          "importance sampling: %.4f ± %.4f, %d samples, effective sample size %.0f, "
          "Pareto k %.2f%s%s; %d mode search evaluations\n",
          r.log_evidence, r.log_evidence_error, r.num_samples, r.effective_sample_size, r.pareto_k,
          r.reliable ? "" : "  [NOT RELIABLE: " + r.reliability + "]",
          r.partial ? "  [PARTIAL: " + r.partial_reason + "]" : "",
          result->mode_search_evaluations);
      for (size_t m = 0; m < r.modes.size(); ++m) {
        const ProposalMode& mode = r.modes[m];
        const std::string what =
            mode.adapted ? "adapted component"
                         : absl::StrFormat("mode: log posterior %.3f, Laplace log mass %.3f",
                                           mode.log_posterior, mode.log_laplace_mass);
        std::cout << absl::StrFormat("  %d %s, weight %.3f (carries %.3f) — %s\n", m + 1, what,
                                     r.mode_weights[m], r.mode_weight_shares[m], mode.origin);
      }
    }
    if (result->sampling.has_value()) {
      const NestedSamplingResult& s = *result->sampling;
      // One error bar per estimate (issue 27): the bootstrap and sqrt(H/n) belong to the classic
      // estimate, not to the importance estimate reported beside them (7× its error on the
      // paper's example; bench/RESULTS.md, "Issue 27").
      std::cout << absl::StrFormat(
          "nested sampling: %.4f ± %.4f (%s estimate)%s\n"
          "  diagnostic, the classic estimate: %.4f ± %.4f (sqrt(H/n)), bootstrap ± %.4f\n"
          "  likelihood calls %d, iterations %d, effective sample size %.0f, %.3f s\n",
          s.log_evidence, s.log_evidence_error, s.log_evidence_estimator,
          s.partial ? "  [PARTIAL: " + s.partial_reason + "]" : "", s.log_evidence_nested,
          s.log_evidence_nested_error, s.log_evidence_error_bootstrap, s.likelihood_calls,
          s.iterations, s.effective_sample_size, s.seconds);
      if (s.runs.size() > 1) {
        std::cout << absl::StrFormat("  %d runs merged; error from their spread ± %.4f\n",
                                     static_cast<int>(s.runs.size()), s.log_evidence_error_spread);
        for (const NestedSamplingResult::Run& run : s.runs) {
          std::cout << absl::StrFormat("    seed %d: %.4f ± %.4f, %d calls%s\n", run.seed,
                                       run.log_evidence, run.log_evidence_error,
                                       run.likelihood_calls, run.partial ? " [PARTIAL]" : "");
        }
      }
    }
  }
  if (result->partial) {
    if (flags.fit.json) std::cerr << "gpsel: partial result: " << result->partial_reason << "\n";
    return kExitPartial;
  }
  return kExitOk;
}

}  // namespace

CommandRunner SetupEvidence(CLI::App& sub) {
  auto flags = std::make_shared<EvidenceFlags>();
  AddDataFlag(sub, flags->fit);
  sub.add_option("--kernel", flags->fit.kernels, "kernel expression")->required();
  sub.add_option("--dlogz", flags->dlogz, "stop when the remaining evidence is below this (nats)")
      ->capture_default_str();
  sub.add_option("--nlive", flags->nlive, "live points (0 = automatic)")->capture_default_str();
  sub.add_flag("--dynamic", flags->dynamic, "dynamic nested sampling (Higson et al. 2019)");
  sub.add_flag("--samples", flags->samples, "include weighted posterior samples in --json output");
  sub.add_option("--max-calls", flags->max_calls,
                 "cap on likelihood calls (a capped result is partial: exit code 3)")
      ->capture_default_str();
  sub.add_option("--max-seconds", flags->max_seconds,
                 "cap on wall time, 0 = none (a capped result is partial: exit code 3)");
  sub.add_option("--method", flags->method,
                 "nested (nested sampling), importance (importance sampling from the posterior "
                 "modes' Laplace approximations; also 'is') or auto (importance where its "
                 "diagnostics pass, else nested)")
      ->capture_default_str();
  AddThreadsFlag(sub, flags->fit,
                 "run importance sampling's mode search and likelihoods, or the nested-sampling "
                 "runs and --batch-size candidates,");
  sub.add_option("--runs", flags->runs,
                 "nested sampling: K independent runs, merged (error about sqrt(K) smaller; "
                 "their spread is reported too); with --server each run is a task that any "
                 "replica sharing the job store may take")
      ->capture_default_str();
  sub.add_option("--batch-size", flags->batch_size,
                 "nested sampling: replacement candidates evaluated at a time on the threads "
                 "inside each run (changes the numbers, not their accuracy; the threads never do)")
      ->capture_default_str();
  sub.add_option("--target-error", flags->target_error,
                 "importance sampling: stop at this standard error of log Z (nats)")
      ->capture_default_str();
  sub.add_option("--max-samples", flags->max_samples,
                 "importance sampling: cap on samples (a capped result is partial: exit code 3)")
      ->capture_default_str();
  AddFitFlags(sub, flags->fit);
  AddRemoteFlags(sub, flags->remote, /*server_required=*/false);
  sub.add_flag("--detach", flags->detach, "with --server: submit and print the job id");
  CLI::Option* restarts = sub.get_option("--restarts");
  return [flags, restarts] {
    flags->restarts_given = restarts->count() > 0;
    return RunEvidence(*flags);
  };
}

}  // namespace gpsel::cli
