// `gpsel evidence`: log model evidence of one kernel by (dynamic) nested sampling, with a
// progress bar on a terminal. In-process, or as a job on a gpsel-server with --server. --json
// prints the EvidenceResult message (--detach: the SubmitEvidenceResponse's job) in the protobuf
// JSON mapping.
#include <iostream>

#include "absl/strings/str_format.h"
#include "bridge/convert.h"
#include "cli/backend.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/evidence.h"

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
};

int RunEvidence(const EvidenceFlags& flags) {
  absl::StatusOr<Dataset> data = LoadDataFlag(flags.fit);
  if (!data.ok()) return ReportError(data.status());
  absl::StatusOr<KernelExpr> kernel = ParseSingleKernelFlag(flags.fit);
  if (!kernel.ok()) return ReportError(kernel.status());
  absl::StatusOr<HyperparameterSettings> settings = ParseHyperparameterFlags(flags.fit);
  if (!settings.ok()) return ReportError(settings.status());

  EvidenceOptions options;
  options.sampling.dlogz = flags.dlogz;
  options.sampling.num_live = flags.nlive;
  options.sampling.dynamic = flags.dynamic;
  options.sampling.seed = flags.fit.seed;
  options.sampling.return_samples = flags.samples;
  options.sampling.max_likelihood_calls = flags.max_calls;
  options.sampling.max_seconds = flags.max_seconds;
  options.standardize = !flags.fit.no_standardize;
  options.hyperparameters = *settings;
  absl::StatusOr<XScaling> scale_x = ParseScaleXFlag(flags.fit);
  if (!scale_x.ok()) return ReportError(scale_x.status());
  options.scale_x = *scale_x;
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
    const NestedSamplingResult& s = result->sampling;
    std::cout << absl::StrFormat(
        "kernel %s (n = %d, u = %d, y %s)\n"
        "log evidence   %.4f ± %.4f (information) ± %.4f (bootstrap)%s\n"
        "likelihood calls %d, iterations %d, effective sample size %.0f, %.3f s\n",
        result->kernel, result->num_points, result->num_hyperparameters,
        result->standardized ? "standardised" : "not standardised", s.log_evidence,
        s.log_evidence_error, s.log_evidence_error_bootstrap,
        s.partial ? "  [PARTIAL: " + s.partial_reason + "]" : "", s.likelihood_calls,
        s.iterations, s.effective_sample_size, s.seconds);
  }
  return kExitOk;
}

}  // namespace

CommandRunner SetupEvidence(CLI::App& sub) {
  auto flags = std::make_shared<EvidenceFlags>();
  AddDataFlag(sub, flags->fit);
  sub.add_option("--kernel", flags->fit.kernels, "kernel expression")
      ->required();
  sub.add_option("--dlogz", flags->dlogz,
                 "stop when the remaining evidence is below this (nats)")
      ->capture_default_str();
  sub.add_option("--nlive", flags->nlive, "live points (0 = automatic)")
      ->capture_default_str();
  sub.add_flag("--dynamic", flags->dynamic,
               "dynamic nested sampling (Higson et al. 2019)");
  sub.add_flag("--samples", flags->samples,
               "include weighted posterior samples in --json output");
  sub.add_option("--max-calls", flags->max_calls,
                 "cap on likelihood calls (result marked partial)")
      ->capture_default_str();
  sub.add_option("--max-seconds", flags->max_seconds,
                 "cap on wall time, 0 = none (result marked partial)");
  AddFitFlags(sub, flags->fit);
  AddRemoteFlags(sub, flags->remote, /*server_required=*/false);
  sub.add_flag("--detach", flags->detach,
               "with --server: submit and print the job id");
  return [flags] { return RunEvidence(*flags); };
}

}  // namespace gpsel::cli
