// `gpsel search`: Compositional Kernel Search on a dataset, in-process or on a gpsel-server
// (--server; the server streams progress), with a live progress line on a terminal. Prints the
// trace and the best kernel's metrics, or JSON with --json.
//
//   gpsel search --data data/interpretable_linear.csv --base SE,LIN,MAT32 --depth 3 \
//       --metric lap0 --beam 1 --threads 2 --json
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cli/cli_common.h"
#include "core/kernel_expr.h"
#include "core/score.h"
#include "core/search.h"

namespace gpsel::cli {
namespace {

struct SearchFlags {
  FitFlags fit;
  std::string base = "SE,LIN,MAT32";
  int depth = 3;
  std::string metric = "lap0";
  int beam = 1;
  int threads = 0;
  bool warm_start = true;
};

nlohmann::json CandidateToJson(const CandidateRecord& c) {
  nlohmann::json j;
  j["kernel"] = c.kernel;
  j["parent"] = c.parent;
  j["derivation"] = c.derivation;
  j["num_base_kernels"] = c.num_base_kernels;
  j["ok"] = c.ok;
  j["score"] = c.ok ? JsonNumber(c.score) : nlohmann::json(nullptr);
  if (c.uncertainty > 0) j["uncertainty"] = JsonNumber(c.uncertainty);
  if (!c.ok) j["error"] = c.error;
  j["chosen"] = c.chosen;
  j["cached"] = c.from_cache;
  j["warm_started"] = c.warm_started;
  j["seed"] = c.seed;
  j["seconds"] = c.seconds;
  return j;
}

nlohmann::json SearchResultToJson(const SearchResult& result, int num_points) {
  nlohmann::json out;
  out["n"] = num_points;
  out["metric"] = result.metric;
  out["max_depth"] = result.max_depth;
  out["beam_width"] = result.beam_width;
  out["threads"] = result.threads;
  nlohmann::json best = KernelScoreToJson(result.best);
  best["kernel"] = ToString(result.best_kernel);
  best["score"] = JsonNumber(result.best_score);
  if (result.best_uncertainty > 0) best["uncertainty"] = JsonNumber(result.best_uncertainty);
  // KernelScoreToJson lists the scoring core's metrics; a custom scorer's value goes in too.
  if (!best["metrics"].contains(result.metric)) {
    best["metrics"][result.metric] = JsonNumber(result.best_score);
  }
  best["standardized"] = result.best.standardized;
  out["best"] = best;
  nlohmann::json steps = nlohmann::json::array();
  for (const SearchStep& step : result.steps) {
    nlohmann::json s;
    s["depth"] = step.depth;
    s["expanded"] = step.expanded;
    s["chosen"] = step.chosen;
    s["improved"] = step.improved;
    s["best_score"] = JsonNumber(step.best_score);
    s["seconds"] = step.seconds;
    nlohmann::json candidates = nlohmann::json::array();
    for (const CandidateRecord& c : step.candidates) candidates.push_back(CandidateToJson(c));
    s["candidates"] = candidates;
    steps.push_back(s);
  }
  out["steps"] = steps;
  out["stop_reason"] = result.stop_reason;
  out["candidates_scored"] = result.candidates_scored;
  out["cache_hits"] = result.cache_hits;
  out["failures"] = result.failures;
  out["seconds"] = result.seconds;
  return out;
}

int RunSearch(const SearchFlags& flags) {
  const bool remote = !flags.fit.server.empty();
  if (remote && !RemoteSearchHook()) {
    return ReportError(absl::UnimplementedError(
        "--server: this gpsel was built without the gRPC client (GPSEL_BUILD_SERVICE=OFF)"));
  }
  absl::StatusOr<Dataset> data = LoadCsvFile(flags.fit.data_path);
  if (!data.ok()) return ReportError(data.status());
  absl::StatusOr<std::vector<KernelExpr>> bases = ParseBaseKernelList(flags.base);
  if (!bases.ok()) return ReportError(bases.status());
  absl::StatusOr<HyperparameterSettings> settings = ParseHyperparameterFlags(flags.fit);
  if (!settings.ok()) return ReportError(settings.status());

  SearchOptions options;
  options.base_kernels = *std::move(bases);
  options.max_depth = flags.depth;
  options.metric = absl::AsciiStrToLower(flags.metric);
  options.beam_width = flags.beam;
  options.threads = flags.threads;
  options.warm_start = flags.warm_start;
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

  absl::StatusOr<SearchResult> result;
  {
    TerminalProgress progress(StderrIsTerminal());
    result = remote ? RemoteSearchHook()(flags.fit.server, *data, options, progress.callback())
                    : RunKernelSearch(*data, options, progress.callback());
    progress.Finish();
  }
  if (!result.ok()) return ReportError(result.status());
  if (flags.fit.json) {
    std::cout << SearchResultToJson(*result, data->num_points()).dump(2) << "\n";
  } else {
    std::cout << result->Summary();
  }
  return kExitOk;
}

GPSEL_REGISTER_COMMAND(
    search, "search",
    "compositional kernel search: build the best kernel from base kernels with + and *",
    [](CLI::App& sub) -> std::function<int()> {
      auto flags = std::make_shared<SearchFlags>();
      AddDataFlag(sub, flags->fit);
      sub.add_option("--base", flags->base,
                     "comma-separated base kernels (SE, MAT12, MAT32, MAT52, LIN, PER, RQ, C; "
                     "optionally pinned to an input column, e.g. SE[1])")
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
      AddFitFlags(sub, flags->fit);
      sub.add_option("--server", flags->fit.server,
                     "HOST:PORT of a gpsel-server: search there, progress streamed back "
                     "(default: run in-process)");
      return [flags] { return RunSearch(*flags); };
    });

}  // namespace
}  // namespace gpsel::cli
