// `gpsel predict`: the posterior mean and variance of a kernel's GP at new inputs (--at FILE or
// --grid A:B:N), fitting the hyperparameters first unless --hyperparameter gives them all
// (core/predict.h FitAndPredict, in-process or on a gpsel-server). Prints a table, CSV
// (--format csv) or the PredictResponse message in the protobuf JSON mapping (--json).
//
//   gpsel predict --data data/mauna_loa_monthly.csv --kernel 'C*SE' --grid 2002:2004:25
//       --format csv
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gpsel/client/cli/backend.h"
#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"
#include "gpsel/client/cli/model_file.h"
#include "gpsel/core/predict.h"
#include "gpsel/proto/bridge/convert.h"

namespace gpsel::cli {
namespace {

struct PredictFlags {
  FitFlags fit;
  RemoteFlags remote;
  std::string at_path;
  std::string grid;
  std::vector<std::string> hyperparameters;  // NAME=VALUE
  std::string objective = "map";
  std::string format = "table";  // table | csv | json
  bool components = false;
  std::string model_path;  // --model FILE
  int samples = 0;         // --samples K
};

// "START:STOP:N" → N evenly spaced 1-D inputs.
absl::StatusOr<Eigen::MatrixXd> ParseGrid(const std::string& grid) {
  std::vector<std::string> parts = absl::StrSplit(grid, ':');
  double start = 0, stop = 0;
  int count = 0;
  if (parts.size() != 3 || !absl::SimpleAtod(parts[0], &start) ||
      !absl::SimpleAtod(parts[1], &stop) || !absl::SimpleAtoi(parts[2], &count) || count < 1) {
    return absl::InvalidArgumentError("--grid: expected START:STOP:N, e.g. 0:10:101");
  }
  Eigen::MatrixXd x(count, 1);
  for (int i = 0; i < count; ++i) {
    x(i, 0) = count == 1 ? start : start + (stop - start) * i / (count - 1);
  }
  return x;
}

absl::StatusOr<Eigen::MatrixXd> LoadNewInputs(const PredictFlags& flags) {
  if (flags.at_path.empty() == flags.grid.empty()) {
    return absl::InvalidArgumentError("give exactly one of --at FILE or --grid A:B:N");
  }
  if (!flags.grid.empty()) return ParseGrid(flags.grid);
  if (flags.at_path == "-" && flags.fit.data_path == "-") {
    return absl::InvalidArgumentError("--at -: stdin already carries --data");
  }
  absl::StatusOr<std::string> text = ReadFlagFile(flags.at_path, "--at");
  if (!text.ok()) return text.status();
  // Same separator and date unit as --data, so a date maps to the same x in both.
  absl::StatusOr<CsvOptions> options = ParseCsvFlags(flags.fit);
  if (!options.ok()) return options.status();
  CsvReadReport report;
  absl::StatusOr<Eigen::MatrixXd> x = ParseCsvInputs(*text, *options, 1'000'000, &report);
  if (!x.ok()) return absl::InvalidArgumentError(absl::StrCat("--at: ", x.status().message()));
  PrintCsvNotes("--at", report);
  return x;
}

std::string FormatInputs(const Eigen::MatrixXd& x, Eigen::Index row) {
  std::string out;
  for (Eigen::Index c = 0; c < x.cols(); ++c) {
    absl::StrAppend(&out, c ? "," : "", absl::StrFormat("%.10g", x(row, c)));
  }
  return out;
}

void PrintTable(const PredictResult& out, const Eigen::MatrixXd& x_new) {
  const Prediction& p = out.prediction;
  std::cout << "kernel " << out.kernel << " (y "
            << (out.standardization.applied ? "standardised" : "as given") << ")\n";
  if (out.method == "sparse") {
    std::cout << "sparse posterior, m = " << out.num_inducing << " inducing points\n";
  }
  if (!out.approx_note.empty()) std::cout << out.approx_note << "\n";
  for (const auto& [name, value] : out.hyperparameters) {
    std::cout << absl::StrFormat("  %-24s %.6g\n", name, value);
  }
  std::cout << absl::StrFormat("%-24s %14s %14s %14s", "x", "mean", "sd", "sd+noise");
  for (Eigen::Index k = 0; k < p.samples.rows(); ++k) {
    std::cout << absl::StrFormat(" %14s", absl::StrCat("sample_", k + 1));
  }
  std::cout << "\n";
  for (Eigen::Index i = 0; i < x_new.rows(); ++i) {
    std::cout << absl::StrFormat("%-24s %14.6g %14.6g %14.6g", FormatInputs(x_new, i), p.mean(i),
                                 std::sqrt(std::max(0.0, p.variance(i))),
                                 std::sqrt(std::max(0.0, p.variance(i) + p.noise_variance(i))));
    for (Eigen::Index k = 0; k < p.samples.rows(); ++k) {
      std::cout << absl::StrFormat(" %14.6g", p.samples(k, i));
    }
    std::cout << "\n";
  }
  // With --components: each summand's posterior (a change's two regimes apart), on y's scale
  // without its mean: they add up to the mean above minus the mean of y.
  for (const PredictionComponent& c : p.components) {
    std::cout << "component " << c.Name() << "\n";
    std::cout << absl::StrFormat("%-24s %14s %14s\n", "x", "mean", "sd");
    for (Eigen::Index i = 0; i < x_new.rows(); ++i) {
      std::cout << absl::StrFormat("%-24s %14.6g %14.6g\n", FormatInputs(x_new, i), c.mean(i),
                                   std::sqrt(std::max(0.0, c.variance(i))));
    }
  }
}

// One row per new input: its columns, then mean, sd of f, sd of y (f plus noise).
void PrintCsv(const PredictResult& out, const Eigen::MatrixXd& x_new) {
  const Prediction& p = out.prediction;
  std::string header;
  for (Eigen::Index c = 0; c < x_new.cols(); ++c) {
    absl::StrAppend(&header, x_new.cols() == 1 ? "x" : absl::StrCat("x", c), ",");
  }
  std::cout << header << "mean,sd,sd_with_noise";
  for (Eigen::Index k = 0; k < p.samples.rows(); ++k) std::cout << ",sample_" << k + 1;
  std::cout << "\n";
  for (Eigen::Index i = 0; i < x_new.rows(); ++i) {
    std::cout << absl::StrFormat("%s,%.10g,%.10g,%.10g", FormatInputs(x_new, i), p.mean(i),
                                 std::sqrt(std::max(0.0, p.variance(i))),
                                 std::sqrt(std::max(0.0, p.variance(i) + p.noise_variance(i))));
    for (Eigen::Index k = 0; k < p.samples.rows(); ++k) {
      std::cout << absl::StrFormat(",%.17g", p.samples(k, i));
    }
    std::cout << "\n";
  }
}

int RunPredict(const PredictFlags& flags) {
  const std::string format = flags.fit.json ? "json" : flags.format;
  if (format != "table" && format != "csv" && format != "json") {
    return ReportError(absl::InvalidArgumentError("--format: expected table, csv or json"));
  }
  const bool remote = !flags.remote.server.empty();
  absl::StatusOr<Dataset> data = LoadDataFlag(flags.fit, CliDatasetLimits(remote, &flags.fit));
  if (!data.ok()) return ReportError(data.status());
  PredictOptions options;
  absl::StatusOr<KernelExpr> kernel;
  if (!flags.model_path.empty()) {
    absl::StatusOr<SavedModel> model = ReadModelFile(flags.model_path, "--model");
    if (!model.ok()) return ReportError(model.status());
    if (!flags.hyperparameters.empty()) {
      return ReportError(absl::InvalidArgumentError(
          "--hyperparameter: give either --model or the values, not both"));
    }
    // Refuse other data here too, with the flags' words (the server or core would as well).
    if (absl::Status s = CheckModelMatchesData(*model, *data); !s.ok()) {
      return ReportError(absl::InvalidArgumentError(absl::StrCat(
          "--model ", flags.model_path, " and --data ", flags.fit.data_path, ": ",
          absl::StripPrefix(s.message(), "model: "))));
    }
    kernel = ParseKernel(model->kernel);
    if (!kernel.ok()) {
      return ReportError(absl::InvalidArgumentError(absl::StrCat(
          "--model ", flags.model_path, ": kernel: ", kernel.status().message())));
    }
    if (!flags.fit.kernels.empty()) {
      absl::StatusOr<KernelExpr> given = ParseSingleKernelFlag(flags.fit);
      if (!given.ok()) return ReportError(given.status());
      if (ToString(*given) != ToString(*kernel)) {
        return ReportError(absl::InvalidArgumentError(
            absl::StrCat("--kernel ", ToString(*given), ": the model's kernel is ",
                         ToString(*kernel), " (leave --kernel out with --model)")));
      }
    }
    options.model = *std::move(model);
  } else {
    if (flags.fit.kernels.empty()) {
      return ReportError(absl::InvalidArgumentError("give --kernel EXPR or --model FILE"));
    }
    kernel = ParseSingleKernelFlag(flags.fit);
    if (!kernel.ok()) return ReportError(kernel.status());
  }
  absl::StatusOr<Eigen::MatrixXd> x_new = LoadNewInputs(flags);
  if (!x_new.ok()) return ReportError(x_new.status());
  if (x_new->cols() != data->num_dims()) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat(
        "new inputs have ", x_new->cols(), " column(s) but the data has ", data->num_dims())));
  }
  for (const std::string& entry : flags.hyperparameters) {
    std::vector<std::string> name_value = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    double value = 0;
    if (name_value.size() != 2 || !absl::SimpleAtod(name_value[1], &value)) {
      return ReportError(absl::InvalidArgumentError(
          absl::StrCat("--hyperparameter '", entry, "': expected NAME=VALUE")));
    }
    options.hyperparameters[name_value[0]] = value;
  }
  if (flags.objective != "map" && flags.objective != "mll") {
    return ReportError(absl::InvalidArgumentError("--objective: expected map or mll"));
  }
  options.objective = flags.objective == "mll" ? FitObjective::kMaximumLikelihood
                                               : FitObjective::kMaximumAPosteriori;
  absl::StatusOr<ScoreOptions> fit_options = ScoreOptionsFromFlags(flags.fit);
  if (!fit_options.ok()) return ReportError(fit_options.status());
  options.fit = *std::move(fit_options);
  options.components = flags.components;
  options.samples = flags.samples;
  options.seed = flags.fit.seed;
  if (flags.samples < 0) {
    return ReportError(absl::InvalidArgumentError("--samples: must be >= 0"));
  }
  if (std::string problem = SampleSizeProblem(flags.samples, x_new->rows()); !problem.empty()) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat("--samples: ", problem)));
  }
  if (absl::Status s = options.Validate(); !s.ok()) return ReportError(s);

  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(flags.remote);
  if (!backend.ok()) return ReportError(backend.status());
  AnnounceEstimate(EstimatePredictTime(*data, *kernel, x_new->rows(), options),
                   EstimatePredictMemory(*data, *kernel, x_new->rows(), options), remote);
  TerminalProgress progress(format == "table" && StderrIsTerminal());
  absl::StatusOr<PredictResult> result =
      (*backend)->Predict(*data, *kernel, *x_new, options, progress.callback());
  progress.Finish();
  if (!result.ok()) return ReportError(result.status());

  if (format == "json") {
    v1::PredictResponse message;
    bridge::ToProto(*result, &message);
    PrintJson(message);
  } else if (format == "csv") {
    PrintCsv(*result, *x_new);
  } else {
    PrintTable(*result, *x_new);
  }
  return kExitOk;
}

}  // namespace

CommandRunner SetupPredict(CLI::App& sub) {
  auto flags = std::make_shared<PredictFlags>();
  AddDataFlag(sub, flags->fit);
  sub.add_option("--kernel", flags->fit.kernels,
                 "kernel expression (not needed with --model)");
  sub.add_option("--model", flags->model_path,
                 "predict from a model saved by `gpsel score|search --save-model` (no refit; "
                 "--data must be its training data, read with the same flags; --objective picks "
                 "its MAP or MLL fit)");
  sub.add_option("--samples", flags->samples,
                 "also K joint posterior samples of f at the new inputs (noise excluded; "
                 "--seed S); CSV columns sample_1..K, JSON PredictResponse samples (K × points)");
  sub.add_option("--at", flags->at_path,
                 "CSV of new inputs, d columns, optional header (- for stdin)");
  sub.add_option("--grid", flags->grid, "1-D grid START:STOP:N of new inputs");
  sub.add_flag("--components", flags->components,
               "also the posterior of each summand of the kernel, a changepoint or "
               "changewindow split into its two regimes (\"CP before: C*SE\", \"CP after: "
               "...\"; table and JSON: PredictResponse components)");
  sub.add_option("--hyperparameter", flags->hyperparameters,
                 "natural value NAME=VALUE of every parameter (default: fit them)");
  sub.add_option("--objective", flags->objective, "fit used when none are given: map or mll")
      ->capture_default_str();
  sub.add_option("--format", flags->format,
                 "table, csv (x..., mean, sd, sd_with_noise) or json (same as --json)")
      ->capture_default_str();
  AddFitFlags(sub, flags->fit);
  AddRemoteFlags(sub, flags->remote, /*server_required=*/false);
  return [flags] { return RunPredict(*flags); };
}

}  // namespace gpsel::cli
