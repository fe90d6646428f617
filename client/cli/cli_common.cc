// Shared CLI pieces: error reporting, data and fit flags, JSON output, progress line.
#include "gpsel/client/cli/cli_common.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gpsel/core/approx.h"
#include "gpsel/core/status_macros.h"

namespace gpsel::cli {

int ReportError(const absl::Status& status) {
  std::cerr << "gpsel: " << status.message() << "\n";
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

void AddDataFlag(CLI::App& sub, FitFlags& flags) {
  sub.add_option("--data", flags.data_path,
                 "CSV file (or - for stdin): optional header, inputs x..., target y last "
                 "(or --x/--y)")
      ->required();
  AddCsvFlags(sub, flags);
}

void AddCsvFlags(CLI::App& sub, FitFlags& flags) {
  sub.add_option("--x", flags.csv.x_columns,
                 "input columns of --data by header name or 1-based index (default: all but y)")
      ->delimiter(',');
  sub.add_option("--y", flags.csv.y_column,
                 "target column of --data by header name or 1-based index (default: the last)");
  sub.add_option("--delimiter", flags.csv.delimiter,
                 "field separator: auto (tab or ';' when the first line has one, else ','), "
                 "',', ';' or tab")
      ->capture_default_str();
  sub.add_option("--missing", flags.csv.missing,
                 "rows with an empty/NA/NaN cell in a column read: error (naming the lines) or "
                 "drop")
      ->capture_default_str();
  sub.add_option("--x-unit", flags.csv.x_unit,
                 "ISO dates in x become: years (decimal years, 2024-07-02 = 2024.5) or days "
                 "(since 1970-01-01 UTC)")
      ->capture_default_str();
}

absl::StatusOr<CsvOptions> ParseCsvFlags(const FitFlags& flags) {
  CsvOptions options;
  options.x_columns = flags.csv.x_columns;
  options.y_column = flags.csv.y_column;
  const std::string& d = flags.csv.delimiter;
  if (d == "auto") {
    options.delimiter = 0;
  } else if (d == "," || d == "comma") {
    options.delimiter = ',';
  } else if (d == ";" || d == "semicolon") {
    options.delimiter = ';';
  } else if (d == "tab" || d == "\\t" || d == "\t") {
    options.delimiter = '\t';
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--delimiter '", d, "': expected auto, ',', ';' or tab"));
  }
  if (flags.csv.missing == "error") {
    options.missing = MissingValues::kError;
  } else if (flags.csv.missing == "drop") {
    options.missing = MissingValues::kDrop;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--missing '", flags.csv.missing, "': expected error or drop"));
  }
  if (flags.csv.x_unit == "years") {
    options.date_unit = DateUnit::kYears;
  } else if (flags.csv.x_unit == "days") {
    options.date_unit = DateUnit::kDays;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--x-unit '", flags.csv.x_unit, "': expected years or days"));
  }
  if (absl::Status s = options.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--x/--y: ", s.message()));
  }
  return options;
}

void PrintCsvNotes(const std::string& what, const CsvReadReport& report) {
  for (const std::string& note : report.Notes()) std::cerr << "gpsel: " << what << ": " << note << "\n";
}

absl::StatusOr<std::string> ReadFlagFile(const std::string& path, const std::string& flag) {
  std::stringstream buffer;
  if (path == "-") {
    buffer << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read '", path, "'"));
    buffer << in.rdbuf();
  }
  return buffer.str();
}

DatasetLimits CliDatasetLimits(bool remote, const FitFlags* fit) {
  DatasetLimits limits;
  if (remote) limits.max_points = kMaxPointsCeiling;
  // --approx sparse or auto: up to the sparse limit (the server, when there is one, decides).
  if (fit != nullptr && ParseApproxMode(fit->approx).value_or(ApproxMode::kExact) !=
                            ApproxMode::kExact) {
    limits.max_points = static_cast<int>(kSparseMaxPoints);
  }
  return limits;
}

absl::StatusOr<Dataset> LoadDataFlag(const FitFlags& flags, const DatasetLimits& limits) {
  absl::StatusOr<CsvOptions> options = ParseCsvFlags(flags);
  if (!options.ok()) return options.status();
  CsvReadReport report;
  absl::StatusOr<Dataset> data;
  if (flags.data_path != "-") {
    data = LoadCsvFile(flags.data_path, *options, limits, &report);
  } else {
    absl::StatusOr<std::string> text = ReadFlagFile(flags.data_path, "--data");
    if (!text.ok()) return text.status();
    data = ParseCsv(*text, *options, limits, &report);
    if (!data.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("stdin: ", data.status().message()));
    }
  }
  if (data.ok()) PrintCsvNotes(flags.data_path == "-" ? "stdin" : flags.data_path, report);
  if (!data.ok() && absl::StrContains(data.status().message(), "exceed the limit") &&
      limits.max_points < kSparseMaxPoints) {
    return absl::Status(data.status().code(),
                        absl::StrCat(data.status().message(), " of the exact GP; --approx sparse "
                                     "(or auto) takes up to ", kSparseMaxPoints, " points"));
  }
  return data;
}

void AddFitFlags(CLI::App& sub, FitFlags& flags) {
  sub.add_option("--restarts", flags.restarts, "random restarts drawn from the prior")
      ->capture_default_str();
  sub.add_option("--max-draws-factor", flags.max_draws_factor,
                 "while only one start has reached a fit's best optimum, draw --restarts more, "
                 "up to this many times --restarts in all; a fit still unconfirmed then says "
                 "'may not be global' (1 = never draw more)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  sub.add_option("--seed", flags.seed, "random seed (same seed, same numbers)")
      ->capture_default_str();
  sub.add_flag("--no-standardize", flags.no_standardize,
               "fit y as given (default: standardise y to mean 0, sd 1)");
  sub.add_option("--prior", flags.priors,
                 "override a prior on a raw parameter: NAME=MEAN,SD (e.g. SE.lengthscale=0,1)");
  sub.add_option("--fix", flags.fixed,
                 "fix a parameter at a natural value: NAME=VALUE (e.g. PER.period=1)");
  sub.add_option("--scale-x", flags.scale_x,
                 "divide x by a factor before modelling: none (default: the paper's priors on x "
                 "as given), auto (the dominant period of y, or range/10), or a number; fitted "
                 "values are reported in x's own units")
      ->capture_default_str();
  sub.add_flag("--json", flags.json, "print JSON instead of a table");
  sub.add_option("--approx", flags.approx,
                 "exact (the default), sparse (VFE bound with a certified upper bound: every "
                 "metric an interval, up to 10^6 points), or auto (exact when it is estimated "
                 "to take at most 60 s, else sparse)")
      ->capture_default_str();
  sub.add_option("--inducing", flags.inducing,
                 "m, the sparse model's inducing points (0: grown until the bounds' gap is "
                 "small, at most 512)")
      ->capture_default_str();
}

absl::StatusOr<KernelExpr> ParseSingleKernelFlag(const FitFlags& flags) {
  if (flags.kernels.size() != 1) {
    return absl::InvalidArgumentError("--kernel: give exactly one kernel");
  }
  return ParseKernel(flags.kernels[0]);
}

absl::StatusOr<std::vector<KernelExpr>> ParseKernelFlags(const FitFlags& flags) {
  std::vector<KernelExpr> kernels;
  for (const std::string& text : flags.kernels) {
    absl::StatusOr<KernelExpr> kernel = ParseKernel(text);
    if (!kernel.ok()) return kernel.status();
    kernels.push_back(*std::move(kernel));
  }
  return kernels;
}

absl::StatusOr<XScaling> ParseScaleXFlag(const FitFlags& flags) {
  return ParseXScaling(flags.scale_x, "--scale-x");
}

void AddThreadsFlag(CLI::App& sub, FitFlags& flags, const std::string& what) {
  sub.add_option("--threads", flags.threads,
                 absl::StrCat(what, " on N threads (default 0 = one per core; the result does not "
                                    "depend on N)"))
      ->check(CLI::Range(0, 256));
}

int ThreadsOrOnePerCore(int threads) {
  if (threads > 0) return threads;
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 256);
}

absl::StatusOr<ScoreOptions> ScoreOptionsFromFlags(const FitFlags& flags) {
  ScoreOptions options;
  options.fit.restarts = flags.restarts;
  options.fit.max_draws_factor = flags.max_draws_factor;
  options.fit.seed = flags.seed;
  options.fit.threads = ThreadsOrOnePerCore(flags.threads);
  options.standardize = !flags.no_standardize;
  absl::StatusOr<HyperparameterSettings> settings = ParseHyperparameterFlags(flags);
  if (!settings.ok()) return settings.status();
  options.hyperparameters = *std::move(settings);
  absl::StatusOr<XScaling> scale_x = ParseScaleXFlag(flags);
  if (!scale_x.ok()) return scale_x.status();
  options.scale_x = *scale_x;
  absl::StatusOr<ApproxMode> approx = ParseApproxMode(flags.approx, "--approx");
  if (!approx.ok()) return approx.status();
  options.approx.mode = *approx;
  options.approx.inducing_points = flags.inducing;
  if (absl::Status s = options.approx.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--inducing: ", absl::StripPrefix(s.message(), "inducing_points: ")));
  }
  GPSEL_RETURN_IF_ERROR(options.Validate());
  return options;
}

void AddSearchFlags(CLI::App& sub, SearchFlags& flags, bool with_score_kept) {
  sub.add_option("--base", flags.base,
                 "comma-separated base kernels (SE, MAT12, MAT32, MAT52, LIN, PER, RQ, C; "
                 "optionally pinned to an input column, e.g. SE[1])")
      ->capture_default_str();
  sub.add_option("--operators", flags.operators,
                 "search moves: +,* (CKS) plus CP (S -> CP(S,S), a changepoint) and/or CW "
                 "(S -> CW(S,S), a changewindow), e.g. +,*,CP,CW; each adds one candidate per "
                 "subexpression whose doubled size fits --depth (per input column on data with "
                 "several columns: CP[c](S,S)); CP[c] / CW[c] pin the move to column c, e.g. "
                 "+,*,CP[1] (CP and CW to the same columns). Off by default: on the paper's "
                 "Table 1 data they lower recognition by mll, aic, bic and map (not by the "
                 "Laplace metrics) and cost 3-12x a search's CPU (bench/RESULTS.md, issue 31)")
      ->capture_default_str();
  sub.add_option("--depth", flags.depth, "at most this many base kernels (1..10)")
      ->capture_default_str();
  sub.add_option("--metric", flags.metric,
                 "the metric that chooses: mll, map, aic, bic, lap, lap0, lap_aic, lap_bic, "
                 "lap_bic_half (search: also evidence, by nested sampling; slow)")
      ->capture_default_str();
  sub.add_option("--beam", flags.beam, "kernels kept per step (1 = greedy CKS)")
      ->capture_default_str();
  sub.add_flag("--warm-start,!--no-warm-start", flags.warm_start,
               "also start each candidate's fit from its parent's optimum, the added part "
               "switched off, so a child never fits worse than the parent it contains "
               "(default; --no-warm-start as in the paper's search)");
  if (with_score_kept) {
    sub.add_flag("--score-kept", flags.score_kept,
                 "also score each step's kept kernel with every metric, as the best kernel is "
                 "(steps[].kept_score in --json), reusing the search's fit of it; costs one more "
                 "MLL + MAP fit per kept kernel other than the best");
  }
}

absl::StatusOr<SearchOptions> SearchOptionsFromFlags(const SearchFlags& search,
                                                     const FitFlags& fit) {
  SearchOptions options;
  absl::StatusOr<std::vector<KernelExpr>> bases = ParseBaseKernelList(search.base);
  if (!bases.ok()) return bases.status();
  options.base_kernels = *std::move(bases);
  absl::StatusOr<SearchOperators> operators = ParseSearchOperators(search.operators);
  if (!operators.ok()) return operators.status();
  options.operators = *std::move(operators);
  options.max_depth = search.depth;
  options.metric = absl::AsciiStrToLower(search.metric);
  options.beam_width = search.beam;
  options.threads = fit.threads;
  options.warm_start = search.warm_start;
  options.score_kept_kernels = search.score_kept;
  absl::StatusOr<ScoreOptions> score = ScoreOptionsFromFlags(fit);
  if (!score.ok()) return score.status();
  options.score = *std::move(score);
  // The search parallelises over candidates; each candidate's starts run on its thread.
  options.score.fit.threads = 1;
  if (options.metric == "evidence") {
    NestedSamplingOptions sampling;
    sampling.seed = fit.seed;
    options.scorer = MakeEvidenceScorer(options.score, sampling);
  }
  GPSEL_RETURN_IF_ERROR(options.Validate());
  return options;
}

absl::StatusOr<HyperparameterSettings> ParseHyperparameterFlags(const FitFlags& flags) {
  HyperparameterSettings settings;
  for (const std::string& entry : flags.priors) {
    std::vector<std::string> name_value = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    std::vector<std::string> numbers;
    if (name_value.size() == 2) numbers = absl::StrSplit(name_value[1], ',');
    NormalPrior prior;
    if (numbers.size() != 2 || !absl::SimpleAtod(numbers[0], &prior.mean) ||
        !absl::SimpleAtod(numbers[1], &prior.sd)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prior '", entry, "': expected NAME=MEAN,SD"));
    }
    settings.prior_overrides[name_value[0]] = prior;
  }
  for (const std::string& entry : flags.fixed) {
    std::vector<std::string> name_value = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    double value = 0;
    if (name_value.size() != 2 || !absl::SimpleAtod(name_value[1], &value)) {
      return absl::InvalidArgumentError(absl::StrCat("--fix '", entry, "': expected NAME=VALUE"));
    }
    settings.fixed_values[name_value[0]] = value;
  }
  GPSEL_RETURN_IF_ERROR(settings.Validate());
  return settings;
}

void PrintSubmitted(const google::protobuf::Message& response, const v1::Job& job, bool json) {
  if (json) {
    PrintJson(response);
  } else {
    std::cout << "submitted " << job.name() << "\n";
  }
}

void PrintJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    std::cerr << "gpsel: JSON output failed: " << status.ToString() << "\n";
    return;
  }
  std::cout << json;
  if (json.empty() || json.back() != '\n') std::cout << "\n";
}

bool StderrIsTerminal() { return isatty(fileno(stderr)) != 0; }

void AnnounceEstimate(const TimeEstimate& time, const MemoryEstimate& memory, bool remote) {
  if (!(time.seconds > kAnnounceSeconds)) return;
  std::cerr << "gpsel: estimated " << FormatDuration(time.seconds) << " and "
            << FormatBytes(memory.bytes)
            << (remote ? " on the server, at this machine's speed" : "") << " (" << time.breakdown
            << ")\n";
}

TerminalProgress::TerminalProgress(bool enabled) : enabled_(enabled) {}
TerminalProgress::~TerminalProgress() { Finish(); }

ProgressCallback TerminalProgress::callback() {
  if (!enabled_) return nullptr;
  return [this](const Progress& p) {
    if (p.poll_only) return absl::OkStatus();
    constexpr int kWidth = 30;
    const double fraction = std::clamp(p.fraction, 0.0, 1.0);
    const int filled = static_cast<int>(fraction * kWidth + 0.5);
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::string message = p.message.substr(0, 60);
    const ProgressClock::Reading time = clock_.Update(fraction);
    std::string clock = FormatDuration(time.elapsed_seconds);
    if (time.remaining_seconds && fraction < 1.0) {
      absl::StrAppend(&clock, " ~", FormatDuration(*time.remaining_seconds), " left");
    }
    std::fprintf(stderr, "\r\033[K[%s] %3.0f%% %s %s %s", bar.c_str(), fraction * 100.0,
                 clock.c_str(), p.stage.c_str(), message.c_str());
    std::fflush(stderr);
    drawn_ = true;
    return absl::OkStatus();
  };
}

void TerminalProgress::Finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace gpsel::cli
