// `gpsel search`: Compositional Kernel Search on a dataset, in-process or on a gpsel-server
// (--server; the server streams progress; with --job or --detach the search is a job whose
// candidates every replica sharing the server's job store may fit), with a live progress line on
// a terminal. Prints the
// trace and the best kernel's metrics, or with --json the SearchResult message in the protobuf
// JSON mapping.
//
//   gpsel search --data data/interpretable_linear.csv --base SE,LIN,MAT32 --depth 3
//       --metric lap0 --beam 1 --threads 2 --json
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "bridge/convert.h"
#include "cli/backend.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/kernel_expr.h"
#include "core/score.h"
#include "core/search.h"

namespace gpsel::cli {
namespace {

struct SearchFlags {
  FitFlags fit;
  RemoteFlags remote;
  std::string base = "SE,LIN,MAT32";
  std::string operators = "+,*";
  int depth = 3;
  std::string metric = "lap0";
  int beam = 1;
  int threads = 0;
  bool warm_start = true;
  bool score_kept = false;
  JobFlags queue;
};

int RunSearch(const SearchFlags& flags) {
  const bool remote = !flags.remote.server.empty();
  absl::StatusOr<Dataset> data = LoadDataFlag(flags.fit, CliDatasetLimits(remote));
  if (!data.ok()) return ReportError(data.status());
  absl::StatusOr<std::vector<KernelExpr>> bases = ParseBaseKernelList(flags.base);
  if (!bases.ok()) return ReportError(bases.status());
  absl::StatusOr<HyperparameterSettings> settings = ParseHyperparameterFlags(flags.fit);
  if (!settings.ok()) return ReportError(settings.status());

  SearchOptions options;
  options.base_kernels = *std::move(bases);
  absl::StatusOr<SearchOperators> operators = ParseSearchOperators(flags.operators);
  if (!operators.ok()) return ReportError(operators.status());
  options.operators = *operators;
  options.max_depth = flags.depth;
  options.metric = absl::AsciiStrToLower(flags.metric);
  options.beam_width = flags.beam;
  options.threads = flags.threads;
  options.warm_start = flags.warm_start;
  options.score_kept_kernels = flags.score_kept;
  options.score.fit.restarts = flags.fit.restarts;
  options.score.fit.seed = flags.fit.seed;
  options.score.standardize = !flags.fit.no_standardize;
  options.score.hyperparameters = *std::move(settings);
  absl::StatusOr<XScaling> scale_x = ParseScaleXFlag(flags.fit);
  if (!scale_x.ok()) return ReportError(scale_x.status());
  options.score.scale_x = *scale_x;
  if (options.metric == "evidence") {
    NestedSamplingOptions sampling;
    sampling.seed = flags.fit.seed;
    options.scorer = MakeEvidenceScorer(options.score, sampling);
  }
  if (absl::Status s = options.Validate(); !s.ok()) return ReportError(s);

  if (absl::Status s = CheckJobFlags(flags.queue, flags.remote); !s.ok()) return ReportError(s);
  if ((remote || flags.queue.queued() || flags.queue.job) &&
      (options.operators.change_point || options.operators.change_window)) {
    // The search request of the gRPC protocol has no field for them yet: refuse rather than
    // drop them silently.
    return ReportError(absl::InvalidArgumentError(
        "--operators: CP and CW run in-process only for now (not with --server, --job or "
        "--detach)"));
  }
  if (flags.queue.queued() && options.scorer) {
    return ReportError(absl::InvalidArgumentError(
        "--metric evidence: runs in-process only; use a fitted metric with --job or --detach"));
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(flags.remote);
  if (!backend.ok()) return ReportError(backend.status());
  if (flags.queue.detach) {
    absl::StatusOr<v1::SubmitSearchResponse> submitted = (*backend)->SubmitSearch(*data, options);
    if (!submitted.ok()) return ReportError(submitted.status());
    PrintSubmitted(*submitted, submitted->job(), flags.fit.json);
    return kExitOk;
  }
  if (!options.scorer) {  // a custom scorer (evidence) has no cost model
    SearchOptions estimated = options;
    if (estimated.threads == 0) {
      estimated.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    }
    AnnounceEstimate(EstimateSearchTime(*data, estimated), EstimateSearchMemory(*data, estimated),
                     remote);
  }
  absl::StatusOr<SearchResult> result;
  {
    TerminalProgress progress(StderrIsTerminal());
    result = flags.queue.job ? (*backend)->SearchAsJob(*data, options, progress.callback())
                             : (*backend)->Search(*data, options, progress.callback());
    progress.Finish();
  }
  if (!result.ok()) return ReportError(result.status());
  if (flags.fit.json) {
    v1::SearchResult message;
    bridge::ToProto(*result, &message);
    PrintJson(message);
  } else {
    std::cout << result->Summary();
  }
  return kExitOk;
}

}  // namespace

CommandRunner SetupSearch(CLI::App& sub) {
  auto flags = std::make_shared<SearchFlags>();
  AddDataFlag(sub, flags->fit);
  sub.add_option("--base", flags->base,
                 "comma-separated base kernels (SE, MAT12, MAT32, MAT52, LIN, PER, RQ, C; "
                 "optionally pinned to an input column, e.g. SE[1])")
      ->capture_default_str();
  sub.add_option("--operators", flags->operators,
                 "search moves: +,* (CKS) plus CP (S -> CP(S,S), a changepoint) and/or CW "
                 "(S -> CW(S,S), a changewindow), e.g. +,*,CP,CW; each adds one candidate per "
                 "subexpression whose doubled size fits --depth")
      ->capture_default_str();
  sub.add_option("--depth", flags->depth, "at most this many base kernels (1..10)")
      ->capture_default_str();
  sub.add_option("--metric", flags->metric,
                 "mll, map, aic, bic, lap, lap0, lap_aic, lap_bic, lap_bic_half, or evidence "
                 "(nested sampling; slow)")
      ->capture_default_str();
  sub.add_option("--beam", flags->beam, "kernels kept per step (1 = greedy CKS)")
      ->capture_default_str();
  sub.add_option("--threads", flags->threads,
                 "candidates fitted in parallel (0 = one per CPU); results do not depend on it")
      ->capture_default_str();
  sub.add_flag("--warm-start,!--no-warm-start", flags->warm_start,
               "also start each candidate's fit from its parent's optimum, the added part "
               "switched off, so a child never fits worse than the parent it contains "
               "(default; --no-warm-start as in the paper's search)");
  sub.add_flag("--score-kept", flags->score_kept,
               "also score each step's kept kernel with every metric, as the best kernel is "
               "(steps[].kept_score in --json), reusing the search's fit of it; costs one more "
               "MLL + MAP fit per kept kernel other than the best");
  AddFitFlags(sub, flags->fit);
  AddRemoteFlags(sub, flags->remote, /*server_required=*/false);
  AddJobFlags(sub, flags->queue, "each step's candidates");
  return [flags] { return RunSearch(*flags); };
}

}  // namespace gpsel::cli
