// `gpsel evidence`: log model evidence of one kernel by (dynamic) nested sampling, with a
// progress bar on a terminal. In-process, or as a job on a gpsel-server with --server.
#include <iostream>

#include "absl/strings/str_format.h"
#include "cli/cli_common.h"
#include "core/evidence.h"

namespace gpsel::cli {
namespace {

struct EvidenceFlags {
  FitFlags fit;
  double dlogz = 0.01;
  int nlive = 0;
  bool dynamic = false;
  bool samples = false;
  int64_t max_calls = 5'000'000;
  double max_seconds = 0;
  bool detach = false;
};

int RunEvidence(const EvidenceFlags& flags) {
  absl::StatusOr<Dataset> data = LoadCsvFile(flags.fit.data_path);
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

  const bool remote = !flags.fit.server.empty();
  if (flags.detach && !remote) {
    return ReportError(absl::InvalidArgumentError("--detach: needs --server"));
  }
  if (remote && (!RemoteEvidenceHook() || !RemoteSubmitEvidenceHook())) {
    return ReportError(absl::UnimplementedError(
        "--server: this gpsel was built without the gRPC client (GPSEL_BUILD_SERVICE=OFF)"));
  }
  if (flags.detach) {
    absl::StatusOr<std::string> job =
        RemoteSubmitEvidenceHook()(flags.fit.server, *data, *kernel, options);
    if (!job.ok()) return ReportError(job.status());
    if (flags.fit.json) {
      std::cout << nlohmann::json{{"job", *job}}.dump() << "\n";
    } else {
      std::cout << "submitted job " << *job << "\n";
    }
    return kExitOk;
  }

  TerminalProgress progress(!flags.fit.json && StderrIsTerminal());
  absl::StatusOr<EvidenceResult> result =
      remote ? RemoteEvidenceHook()(flags.fit.server, *data, *kernel, options, progress.callback())
             : ComputeEvidence(*data, *kernel, options, progress.callback());
  progress.Finish();
  if (!result.ok()) return ReportError(result.status());
  if (flags.fit.json) {
    std::cout << EvidenceResultToJson(*result).dump(2) << "\n";
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

GPSEL_REGISTER_COMMAND(evidence, "evidence",
                       "log model evidence of a kernel by (dynamic) nested sampling",
                       [](CLI::App& sub) -> std::function<int()> {
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
                         sub.add_option("--server", flags->fit.server,
                                        "HOST:PORT of a gpsel-server: run as a job there");
                         sub.add_flag("--detach", flags->detach,
                                      "with --server: submit and print the job id");
                         return [flags] { return RunEvidence(*flags); };
                       });

}  // namespace
}  // namespace gpsel::cli
