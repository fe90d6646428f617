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

#include "absl/strings/str_cat.h"
#include "gpsel/client/cli/backend.h"
#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"
#include "gpsel/client/cli/model_file.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/proto/bridge/convert.h"

namespace gpsel::cli {
namespace {

struct SearchCommandFlags {
  FitFlags fit;
  SearchFlags search;
  RemoteFlags remote;
  JobFlags queue;
  std::string save_model;  // --save-model FILE
};

int RunSearch(const SearchCommandFlags& flags) {
  const bool remote = !flags.remote.server.empty();
  absl::StatusOr<Dataset> data = LoadDataFlag(flags.fit, CliDatasetLimits(remote, &flags.fit));
  if (!data.ok()) return ReportError(data.status());
  absl::StatusOr<SearchOptions> search_options = SearchOptionsFromFlags(flags.search, flags.fit);
  if (!search_options.ok()) return ReportError(search_options.status());
  const SearchOptions& options = *search_options;

  if (absl::Status s = CheckJobFlags(flags.queue, flags.remote); !s.ok()) return ReportError(s);
  if (flags.queue.queued() && options.scorer) {
    return ReportError(absl::InvalidArgumentError(
        "--metric evidence: runs in-process only; use a fitted metric with --job or --detach"));
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(flags.remote);
  if (!backend.ok()) return ReportError(backend.status());
  if (flags.queue.detach && !flags.save_model.empty()) {
    return ReportError(absl::InvalidArgumentError(
        "--save-model: needs the result, which --detach does not wait for (use --job)"));
  }
  if (flags.queue.detach) {
    absl::StatusOr<v1::SubmitSearchResponse> submitted = (*backend)->SubmitSearch(*data, options);
    if (!submitted.ok()) return ReportError(submitted.status());
    PrintSubmitted(*submitted, submitted->job(), flags.fit.json);
    return kExitOk;
  }
  if (!options.scorer) {  // a custom scorer (evidence) has no cost model
    SearchOptions estimated = options;
    estimated.threads = ThreadsOrOnePerCore(estimated.threads);
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
  if (!flags.save_model.empty()) {
    // The best kernel re-scored with every paper metric: both its MLL and its MAP fit.
    if (absl::Status s = SaveScoreModel(flags.save_model, result->best, *data); !s.ok()) {
      return ReportError(s);
    }
    std::cerr << "gpsel: saved the model of the best kernel " << result->best.kernel << " to "
              << flags.save_model << "\n";
  }
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
  auto flags = std::make_shared<SearchCommandFlags>();
  AddDataFlag(sub, flags->fit);
  AddSearchFlags(sub, flags->search, /*with_score_kept=*/true);
  AddThreadsFlag(sub, flags->fit, "fit the candidates in parallel");
  AddFitFlags(sub, flags->fit);
  AddRemoteFlags(sub, flags->remote, /*server_required=*/false);
  AddJobFlags(sub, flags->queue, "each step's candidates");
  sub.add_option("--save-model", flags->save_model,
                 "write the best kernel's fitted model (MLL and MAP values, standardisation, data "
                 "fingerprint) as JSON for `gpsel predict --model`");
  return [flags] { return RunSearch(*flags); };
}

}  // namespace gpsel::cli
