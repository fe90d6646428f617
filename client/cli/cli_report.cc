// `gpsel report`: pictures and words for the kernel a dataset supports. Runs the same calls as
// `score`, `search`, `evidence` and `predict` through the Backend (in-process, or on a
// gpsel-server with --server), so every figure shows the results --json would print, and hands
// them to the report library (client/report/report.h), which writes report.html and the figures.
//
//   gpsel report --data data/mauna_loa_monthly.csv --search --base SE,PER,LIN,RQ --depth 3
//       --y-unit ppm --out mauna-loa-report
//   gpsel report --data data/nile.csv --kernel SE --kernel MAT12 --evidence --out nile-report
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpsel/client/cli/backend.h"
#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"
#include "gpsel/client/report/report.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/core/status_macros.h"

namespace gpsel::cli {
namespace {

struct ReportFlags {
  FitFlags fit;
  RemoteFlags remote;
  std::string out_dir;
  bool search = false;
  SearchFlags search_flags;
  bool evidence = false;
  std::string evidence_method = "nested";
  double dlogz = 0.1;
  int nlive = 0;
  std::string pair;
  std::string x_label, y_label, x_unit, y_unit;
  int width = 960, height = 480;
};

// The header names of the columns read (core/dataset.h CsvReadReport: --x/--y, any separator),
// x's then y's; none for stdin or a file without a header (its columns are "column N").
std::vector<std::string> HeaderNames(const FitFlags& data_flags) {
  if (data_flags.data_path.empty() || data_flags.data_path == "-") return {};
  absl::StatusOr<CsvOptions> options = ParseCsvFlags(data_flags);
  CsvReadReport read;
  if (!options.ok() ||
      !LoadCsvFile(data_flags.data_path, *options, CliDatasetLimits(false), &read).ok()) {
    return {};
  }
  std::vector<std::string> names = read.x_names;
  names.push_back(read.y_name);
  for (const std::string& name : names) {
    if (absl::StartsWith(name, "column ")) return {};
  }
  return names;
}

// A label with its unit: "year", "co2 (ppm)".
std::string Labelled(const std::string& name, const std::string& unit) {
  return unit.empty() ? name : absl::StrCat(name, " (", unit, ")");
}

// `value` as one POSIX shell word, so that the report's footer command can be copied and run:
// as it is when it holds only characters no shell treats specially, else in single quotes (a
// quote inside written '\'').
std::string ShellQuote(const std::string& value) {
  const bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  });
  if (plain) return value;
  return absl::StrCat("'", absl::StrReplaceAll(value, {{"'", "'\\''"}}), "'");
}

// Phase 2 of a report: every kernel compared, with all the paper's metrics. Those of the
// search's path come with the search (SearchStep::kept_score, SearchResult::best); only the
// others are scored. Fills in->scores and in->chosen (the search's best, else the best by
// in->metric); `comparison` keeps what was scored and how, for the summary.
struct Comparison {
  std::vector<KernelExpr> to_score;
  std::vector<KernelScore> scored;
  ScoreOptions options;
};
absl::Status CompareKernels(Backend& backend, const Dataset& data,
                            const std::vector<KernelExpr>& given_kernels,
                            const ScoreOptions& score_options, ProgressCallback progress,
                            report::ReportInputs* in, Comparison* comparison) {
  // SE[*] as the scores name it: its copies pinned to the data's columns (core/kernel_expr.h).
  std::vector<KernelExpr> kernels;
  for (const KernelExpr& kernel : given_kernels) {
    GPSEL_ASSIGN_OR_RETURN(KernelExpr expanded, ExpandPerColumn(kernel, data.num_dims()));
    kernels.push_back(std::move(expanded));
  }
  std::map<std::string, KernelScore> searched;
  if (in->search) {
    for (const SearchStep& step : in->search->steps) {
      if (step.kept_score) searched.emplace(step.kept_score->kernel, *step.kept_score);
    }
    searched.emplace(in->search->best.kernel, in->search->best);
  }
  for (const KernelExpr& kernel : kernels) {
    if (!searched.count(ToString(kernel))) comparison->to_score.push_back(kernel);
  }
  // The kernels the search scored are scored already on this data with these options: a given
  // kernel that contains one also starts its fits from that one's optima (ScoreKernels picks the
  // largest contained; core/score.h NestedParent), in-process and in the ScoreRequest alike. So
  // its MLL is not below that of a kept kernel it contains, and it need not find that basin
  // again from its random starts.
  comparison->options = score_options;
  for (const auto& [text, score] : searched) {
    GPSEL_ASSIGN_OR_RETURN(KernelExpr kernel, ParseKernel(text));
    comparison->options.nested_parents.push_back(
        {std::move(kernel), std::make_shared<const KernelScore>(score)});
  }
  if (!comparison->to_score.empty()) {
    GPSEL_ASSIGN_OR_RETURN(
        comparison->scored,
        backend.Score(data, comparison->to_score, comparison->options, progress));
  }
  for (const KernelExpr& kernel : kernels) {
    auto it = searched.find(ToString(kernel));
    if (it != searched.end()) {
      in->scores.push_back(it->second);
      continue;
    }
    auto same = [&](const KernelScore& s) { return s.kernel == ToString(kernel); };
    auto found = std::find_if(comparison->scored.begin(), comparison->scored.end(), same);
    if (found != comparison->scored.end()) in->scores.push_back(*found);
  }
  if (in->search) {
    in->chosen = in->search->best;
    auto same = [&](const KernelScore& s) { return s.kernel == in->chosen.kernel; };
    if (std::none_of(in->scores.begin(), in->scores.end(), same)) {
      in->scores.push_back(in->chosen);
    }
    return absl::OkStatus();
  }
  GPSEL_ASSIGN_OR_RETURN(in->chosen, report::BestByMetric(in->scores, in->metric));
  return absl::OkStatus();
}

// Phase 3: the chosen kernel's posterior at its fit for the metric, on a grid (with the
// summands) and at the data (residuals). The values are given, so nothing is refitted.
absl::Status PredictChosen(Backend& backend, const Dataset& data, const KernelExpr& chosen_kernel,
                           const ScoreOptions& score_options, ProgressCallback progress,
                           report::ReportInputs* in) {
  const FitResult* fit = report::FitForMetric(in->chosen, in->metric);
  if (fit == nullptr) return absl::InternalError("the chosen kernel has no fit");
  PredictOptions predict_options;
  predict_options.hyperparameters = fit->values;
  predict_options.fit = score_options;
  predict_options.fit.standardize = in->chosen.standardized;
  // A kernel scored on the sparse GP is drawn from the sparse posterior with the same m (the
  // per-summand posterior is exact-only, so there are no components then).
  const bool sparse = in->chosen.method == "sparse";
  if (sparse) {
    predict_options.fit.approx.mode = ApproxMode::kSparse;
    predict_options.fit.approx.inducing_points = in->chosen.num_inducing;
  }
  in->grid = report::FitGrid(data);
  if (in->grid.rows() > 0) {
    predict_options.components = !sparse;
    GPSEL_ASSIGN_OR_RETURN(
        in->on_grid, backend.Predict(data, chosen_kernel, in->grid, predict_options, progress));
  }
  predict_options.components = false;
  GPSEL_ASSIGN_OR_RETURN(in->on_data,
                         backend.Predict(data, chosen_kernel, data.x, predict_options, progress));
  return absl::OkStatus();
}

// Phase 4 (--evidence): the chosen kernel's log evidence with its samples (figure "laplace",
// log Z in "metrics").
absl::Status AddEvidence(Backend& backend, const Dataset& data, const KernelExpr& chosen_kernel,
                         const ReportFlags& flags, const ScoreOptions& score_options,
                         EvidenceMethod method, ProgressCallback progress,
                         report::ReportInputs* in) {
  EvidenceOptions evidence_options;
  evidence_options.sampling.dlogz = flags.dlogz;
  evidence_options.sampling.num_live = flags.nlive;
  evidence_options.sampling.seed = flags.fit.seed;
  evidence_options.sampling.return_samples = true;
  evidence_options.importance.return_samples = true;
  evidence_options.importance.seed = flags.fit.seed;
  evidence_options.standardize = in->chosen.standardized;
  evidence_options.hyperparameters = score_options.hyperparameters;
  evidence_options.scale_x = score_options.scale_x;
  evidence_options.method = method;
  GPSEL_RETURN_IF_ERROR(evidence_options.Validate());
  GPSEL_ASSIGN_OR_RETURN(in->evidence,
                         backend.Evidence(data, chosen_kernel, evidence_options, progress));
  return absl::OkStatus();
}

// The words of the page: axis titles and units from the flags or the CSV header, and x's
// columns by name for a pinned kernel's words ("SE[1]": "in <name of column 1>").
void LabelReport(const ReportFlags& flags, const FitFlags& data_flags, const Dataset& data,
                 report::ReportInputs* in) {
  const std::vector<std::string> header = HeaderNames(data_flags);
  const std::string x_name = flags.x_label.empty()
                                 ? (header.size() >= 2 && data.num_dims() == 1 ? header[0] : "x")
                                 : flags.x_label;
  const std::string y_name =
      flags.y_label.empty() ? (header.size() >= 2 ? header.back() : "y") : flags.y_label;
  in->units.x = flags.x_unit.empty() ? report::UnitFromColumnName(x_name) : flags.x_unit;
  in->units.y = flags.y_unit;
  if (header.size() == static_cast<size_t>(data.num_dims()) + 1) {
    in->units.x_columns.assign(header.begin(), header.end() - 1);
  }
  in->x_label =
      Labelled(x_name, flags.x_label.empty() && flags.x_unit.empty() ? "" : flags.x_unit);
  in->y_label = Labelled(y_name, flags.y_unit);
  in->title = flags.fit.data_path == "-" ? "stdin" : flags.fit.data_path;
  in->title = in->title.substr(in->title.find_last_of('/') + 1);
}

// What the comparison cost: kernels whose scores came with the search (and the seconds the
// search spent on the kept ones besides its best, inside its stage), kernels fitted for it,
// which of the search's kernels started each one scored for the report and where its winning
// starts came from (bench/RESULTS.md reads whether the nested starts won), and each stage's time.
void PrintCost(const report::ReportInputs& in, const Comparison& comparison,
               const std::vector<std::pair<std::string, double>>& stage_seconds) {
  double kept_seconds = 0.0;
  if (in.search) {
    for (const SearchStep& step : in.search->steps) {
      if (step.kept_score && step.kept_score->kernel != in.search->best.kernel) {
        kept_seconds += step.kept_score->seconds;
      }
    }
  }
  const size_t from_search = in.scores.size() - comparison.to_score.size();
  if (from_search > 0) {
    std::cout << absl::StrFormat(
        "kernels compared: %d scored by the search (its kept kernels' scores took %.2f s), %d "
        "scored for the report\n",
        from_search, kept_seconds, comparison.to_score.size());
  } else {
    std::cout << absl::StrFormat("kernels compared: %d, scored for the report\n",
                                 comparison.to_score.size());
  }
  auto winning_start = [](const std::optional<FitResult>& fit) -> std::string {
    if (!fit) return "-";
    const std::string kind(StartKindName(fit->best_start_kind));
    return fit->best_start_origin.empty() ? kind
                                          : absl::StrCat(kind, " (", fit->best_start_origin, ")");
  };
  for (const KernelScore& score : comparison.scored) {
    absl::StatusOr<KernelExpr> kernel = ParseKernel(score.kernel);
    if (!kernel.ok()) continue;
    std::vector<std::string> parents;
    for (const NestedParent& parent :
         LargestContainedParents(*kernel, comparison.options.nested_parents)) {
      parents.push_back(ToString(parent.kernel));
    }
    std::cout << absl::StrFormat(
        "  %s: %swinning starts: MLL %s, MAP %s\n", score.kernel,
        parents.empty() ? ""
                        : absl::StrCat("also started from the optima of ",
                                       absl::StrJoin(parents, ", "), "; "),
        winning_start(score.mll_fit), winning_start(score.map_fit));
  }
  std::cout << "seconds:";
  for (const auto& [stage, seconds] : stage_seconds) {
    std::cout << absl::StrFormat(" %s %.2f", stage, seconds);
  }
  std::cout << "\n";
}

int RunReport(const ReportFlags& flags, const std::string& command) {
  if (flags.out_dir.empty()) return ReportError(absl::InvalidArgumentError("--out: required"));
  if (!flags.search && flags.fit.kernels.empty()) {
    return ReportError(absl::InvalidArgumentError("give --kernel EXPR (repeatable) or --search"));
  }
  FitFlags data_flags = flags.fit;
  data_flags.csv.x_unit = flags.x_unit == "days" ? "days" : "years";  // ISO dates in x, if any
  absl::StatusOr<Dataset> data =
      LoadDataFlag(data_flags, CliDatasetLimits(/*remote=*/false, &data_flags));
  if (!data.ok()) return ReportError(data.status());
  absl::StatusOr<std::vector<KernelExpr>> parsed = ParseKernelFlags(flags.fit);
  if (!parsed.ok()) return ReportError(parsed.status());
  std::vector<KernelExpr> kernels = *std::move(parsed);
  const std::string metric = absl::AsciiStrToLower(flags.search_flags.metric);
  if (absl::StatusOr<Metric> m = ParseMetric(metric); !m.ok()) {
    return ReportError(
        absl::InvalidArgumentError(absl::StrCat("--metric: ", m.status().message())));
  }
  absl::StatusOr<ScoreOptions> fit_options = ScoreOptionsFromFlags(flags.fit);
  if (!fit_options.ok()) return ReportError(fit_options.status());
  const ScoreOptions& score_options = *fit_options;
  absl::StatusOr<EvidenceMethod> evidence_method =
      ParseEvidenceMethod(flags.evidence_method, "--method");
  if (!evidence_method.ok()) return ReportError(evidence_method.status());
  std::vector<std::string> pair;
  if (!flags.pair.empty()) {
    pair = absl::StrSplit(flags.pair, ',');
    if (pair.size() != 2) {
      return ReportError(absl::InvalidArgumentError("--pair: expected NAME,NAME"));
    }
  }

  SearchOptions search_options;
  if (flags.search) {
    // The search scores the kernels of its path with every metric, reusing its fits, so the
    // comparison below need not fit them again.
    SearchFlags search_flags = flags.search_flags;
    search_flags.score_kept = true;
    absl::StatusOr<SearchOptions> parsed = SearchOptionsFromFlags(search_flags, flags.fit);
    if (!parsed.ok()) return ReportError(parsed.status());
    search_options = *std::move(parsed);
  }
  report::ReportOptions report_options;
  report_options.out_dir = flags.out_dir;
  report_options.width = flags.width;
  report_options.height = flags.height;
  if (absl::Status s = report_options.Validate(); !s.ok()) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat("--", s.message())));
  }

  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(flags.remote);
  if (!backend.ok()) return ReportError(backend.status());
  TerminalProgress progress(StderrIsTerminal());

  report::ReportInputs in;
  in.data = *data;
  in.metric = metric;
  in.pair = pair;
  in.command = command;
  // Wall time of each stage, printed last (bench/report_overhead.sh reads what the report adds
  // to its search).
  std::vector<std::pair<std::string, double>> stage_seconds;
  absl::Time stage_start = absl::Now();
  auto stage_done = [&](const std::string& stage) {
    const absl::Time now = absl::Now();
    stage_seconds.emplace_back(stage, absl::ToDoubleSeconds(now - stage_start));
    stage_start = now;
  };
  // 1. The search (when asked), whose path's kernels are compared with the given ones.
  if (flags.search) {
    absl::StatusOr<SearchResult> search =
        (*backend)->Search(*data, search_options, progress.callback());
    if (!search.ok()) return ReportError(search.status());
    in.search = *std::move(search);
    for (const SearchStep& step : in.search->steps) {
      if (step.chosen.empty()) continue;
      absl::StatusOr<KernelExpr> kept = ParseKernel(step.chosen.front());
      if (!kept.ok()) return ReportError(kept.status());
      if (*kept != in.search->best_kernel &&
          std::find(kernels.begin(), kernels.end(), *kept) == kernels.end()) {
        kernels.push_back(*std::move(kept));
      }
    }
    stage_done("search");
  }
  // 2. Every kernel compared, with all the paper's metrics (CompareKernels).
  Comparison comparison;
  if (absl::Status s = CompareKernels(**backend, *data, kernels, score_options,
                                      progress.callback(), &in, &comparison);
      !s.ok()) {
    return ReportError(s);
  }
  if (!comparison.to_score.empty()) stage_done("scores");
  absl::StatusOr<KernelExpr> chosen_kernel = ParseKernel(in.chosen.kernel);
  if (!chosen_kernel.ok()) return ReportError(chosen_kernel.status());

  // 3. The chosen kernel's posterior (PredictChosen).
  if (absl::Status s = PredictChosen(**backend, *data, *chosen_kernel, score_options,
                                     progress.callback(), &in);
      !s.ok()) {
    return ReportError(s);
  }
  stage_done("predict");

  // 4. The evidence of the chosen kernel (AddEvidence).
  if (flags.evidence) {
    if (absl::Status s = AddEvidence(**backend, *data, *chosen_kernel, flags, score_options,
                                     *evidence_method, progress.callback(), &in);
        !s.ok()) {
      return ReportError(s);
    }
    stage_done("evidence");
  }
  progress.Finish();

  LabelReport(flags, data_flags, *data, &in);
  absl::StatusOr<report::ReportResult> result = report::WriteReport(in, report_options);
  if (!result.ok()) return ReportError(result.status());
  stage_done("figures");
  std::cout << result->Summary();
  PrintCost(in, comparison, stage_seconds);
  if (in.evidence.has_value() && in.evidence->partial) {
    std::cout << "PARTIAL: the log evidence in the report is not final: "
              << in.evidence->partial_reason << "\n";
    return kExitPartial;
  }
  return kExitOk;
}

}  // namespace

CommandRunner SetupReport(CLI::App& sub) {
  auto flags = std::make_shared<ReportFlags>();
  AddDataFlag(sub, flags->fit);
  // The report's --x-unit (below) names x's unit in its words and also picks the unit of ISO
  // dates in x (RunReport), so the data flags' own goes.
  sub.remove_option(sub.get_option("--x-unit"));
  sub.add_option("--kernel", flags->fit.kernels,
                 "kernel expression to compare (repeatable); the best by --metric is reported "
                 "unless --search is given");
  sub.add_option("--out", flags->out_dir, "folder for report.html and the figures (created)")
      ->required();
  sub.add_flag("--search", flags->search,
               "choose the kernel by Compositional Kernel Search (--base, --depth, --beam); the "
               "kernels kept at each step are compared with any --kernel");
  AddSearchFlags(sub, flags->search_flags, /*with_score_kept=*/false);
  AddThreadsFlag(sub, flags->fit, "fit the starts (and, with --search, the candidates)");
  sub.add_flag("--evidence", flags->evidence,
               "also compute the chosen kernel's log evidence by nested sampling, for log Z "
               "in the metrics figure and the samples under the Laplace ellipse");
  sub.add_option("--method", flags->evidence_method,
                 "evidence: nested, importance or auto (core/evidence.h)")
      ->capture_default_str();
  sub.add_option("--dlogz", flags->dlogz, "evidence: stop when the remaining log Z is below this")
      ->capture_default_str();
  sub.add_option("--nlive", flags->nlive, "evidence: live points (0 = automatic)")
      ->capture_default_str();
  sub.add_option("--pair", flags->pair,
                 "two parameter names NAME,NAME for the Laplace figure (default: the most "
                 "correlated pair)");
  sub.add_option("--x-label", flags->x_label, "x axis title (default: the CSV header's)");
  sub.add_option("--y-label", flags->y_label, "y axis title (default: the CSV header's)");
  sub.add_option("--x-unit", flags->x_unit,
                 "unit of x for the words, plural (default: guessed from a header such as "
                 "'year' → years); with ISO dates in x, 'days' reads them as days since "
                 "1970-01-01, anything else as decimal years");
  sub.add_option("--y-unit", flags->y_unit, "unit of y (e.g. ppm)");
  sub.add_option("--width", flags->width, "figure width in pixels")->capture_default_str();
  sub.add_option("--height", flags->height, "figure height in pixels")->capture_default_str();
  AddFitFlags(sub, flags->fit);
  // The report writes files; `score --json` and `search --json` print its numbers.
  sub.remove_option(sub.get_option("--json"));
  AddRemoteFlags(sub, flags->remote, /*server_required=*/false);
  return [flags, &sub] {
    std::string command = "gpsel report";
    for (const CLI::Option* option : sub.get_options()) {
      if (option->count() == 0 || option->get_name() == "--help") continue;
      for (const std::string& value : option->results()) {
        absl::StrAppend(&command, " ", option->get_name(),
                        option->get_expected_min() == 0 ? "" : absl::StrCat(" ", ShellQuote(value)));
      }
    }
    return RunReport(*flags, command);
  };
}

}  // namespace gpsel::cli
