// `gpsel priors`: every prior of a kernel in natural units with its central 95 % interval, in the
// units of x the user's data has (after --scale-x); with --data, the data's own scales beside
// them, so that a prior that cannot reach the data (an 11-year cycle under a period prior of
// 0.3–2.7) is seen before any fit.
#include <cstdlib>
#include <iostream>

#include "absl/strings/str_format.h"
#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/v1/types.pb.h"

namespace gpsel::cli {
namespace {

struct PriorsFlags {
  FitFlags fit;
};

int RunPriors(const PriorsFlags& flags) {
  absl::StatusOr<KernelExpr> kernel = ParseSingleKernelFlag(flags.fit);
  if (!kernel.ok()) return ReportError(kernel.status());
  absl::StatusOr<HyperparameterSettings> settings = ParseHyperparameterFlags(flags.fit);
  if (!settings.ok()) return ReportError(settings.status());
  absl::StatusOr<XScaling> scale_x = ParseScaleXFlag(flags.fit);
  if (!scale_x.ok()) return ReportError(scale_x.status());

  std::optional<Dataset> data;
  std::vector<double> column_factors;  // --scale-x auto, each column by its own (ScaleInputs)
  double factor = scale_x->mode == XScaling::Mode::kFactor ? scale_x->factor : 1.0;
  std::string reason = scale_x->mode == XScaling::Mode::kFactor ? "given" : "as given";
  if (!flags.fit.data_path.empty()) {
    absl::StatusOr<Dataset> loaded = LoadDataFlag(flags.fit);
    if (!loaded.ok()) return ReportError(loaded.status());
    absl::StatusOr<KernelExpr> expanded =
        ExpandPerColumn(*kernel, static_cast<int>(loaded->x.cols()));
    if (!expanded.ok()) return ReportError(expanded.status());
    absl::StatusOr<ScaledInputs> inputs = ScaleInputs(*loaded, *scale_x, *settings, &*expanded);
    if (!inputs.ok()) return ReportError(inputs.status());
    factor = inputs->factor;
    column_factors = inputs->column_factors;
    reason = inputs->reason;
    // With the data, BASE[*] is shown as its copies, one prior per column in its own units.
    kernel = *std::move(expanded);
    data = *std::move(loaded);
  } else if (scale_x->mode == XScaling::Mode::kAuto) {
    return ReportError(absl::InvalidArgumentError("--scale-x auto: needs --data"));
  }
  absl::StatusOr<std::vector<PriorSummary>> priors = DescribePriors(*kernel, *settings, factor, column_factors);
  if (!priors.ok()) return ReportError(priors.status());

  // The data's own scales, per input column: what lengthscales and periods should be able to
  // reach, and the period priors that cannot reach y's strongest period.
  std::vector<InputColumnScales> scales;
  if (data.has_value()) scales = DescribeInputScales(*data);
  const std::vector<std::string> notes = PeriodsOutOfPriorReach(*priors, scales);

  if (flags.fit.json) {
    v1::PriorsReport report;
    report.set_kernel(ToString(*kernel));
    report.set_x_scale(factor);
    report.set_x_scale_reason(reason);
    for (const PriorSummary& p : *priors) bridge::ToProto(p, report.add_priors());
    for (const InputColumnScales& column : scales) bridge::ToProto(column, report.add_data());
    for (const std::string& note : notes) report.add_notes(note);
    PrintJson(report);
    return kExitOk;
  }
  std::cout << absl::StrFormat("Priors of %s in natural units%s\n", ToString(*kernel),
                               !column_factors.empty()
                                   ? absl::StrFormat(" (each column's own units; %s)", reason)
                               : factor == 1.0 ? " (x as given)"
                                             : absl::StrFormat(" (x's units; the model sees x / "
                                                               "%.6g, %s)", factor, reason));
  std::cout << absl::StrFormat("%-24s %-18s %12s %27s\n", "parameter", "raw Normal", "median",
                               "95% interval");
  for (const PriorSummary& p : *priors) {
    if (p.fixed) {
      std::cout << absl::StrFormat("%-24s fixed at %.6g\n", p.name, p.fixed_value);
      continue;
    }
    std::cout << absl::StrFormat("%-24s N(%6.3f, %5.3f) %12.4g %13.4g to %-10.4g\n", p.name,
                                 p.raw.mean, p.raw.sd, p.median, p.lower95, p.upper95);
  }
  std::cout << "Values are softplus(raw) (noise: 1e-4 + softplus(raw), a variance of "
               "standardised y); lengthscales and periods are in x's units.\n";
  if (ContainsChange(*kernel)) {
    std::cout << "CP/CW location, transition and width are fractions of the range of x's column "
                 "over the data (location 1 = the first x, 2 = the last; transition = 1/(steepness"
                 " x range)), so they scale with any units of x.\n";
    if (data.has_value()) {
      for (const PriorSummary& p : *priors) {
        if (p.fixed || p.name.find(".location") == std::string::npos) continue;
        // The column: the pinned one of "CP[1].location", else 0.
        const size_t bracket = p.name.find('[');
        const int column =
            bracket < p.name.find('.') ? std::atoi(p.name.c_str() + bracket + 1) : 0;
        if (column >= data->x.cols()) continue;
        const double lo = data->x.col(column).minCoeff();
        const double range = data->x.col(column).maxCoeff() - lo;
        std::cout << absl::StrFormat("%s in x[%d]: median %.6g, 95%% %.6g to %.6g\n", p.name,
                                     column,
                                     lo + (p.median - 1) * range, lo + (p.lower95 - 1) * range,
                                     lo + (p.upper95 - 1) * range);
      }
    }
  }
  for (const InputColumnScales& column : scales) {
    const InputColumnGeometry& g = column.geometry;
    std::cout << absl::StrFormat(
        "x[%d]: range %.4g, median spacing %.4g, median pairwise distance %.4g", column.column,
        g.range, g.median_spacing, g.median_pairwise_distance);
    if (column.strongest_period.has_value()) {
      std::cout << absl::StrFormat(", strongest period of y %.4g (false-alarm probability %.2g)",
                                   column.strongest_period->period,
                                   column.strongest_period->false_alarm_probability);
    }
    std::cout << "\n";
  }
  for (const std::string& note : notes) std::cout << "note: " << note << "\n";
  return kExitOk;
}

}  // namespace

CommandRunner SetupPriors(CLI::App& sub) {
  auto flags = std::make_shared<PriorsFlags>();
  sub.add_option("--kernel", flags->fit.kernels, "kernel expression")
      ->required();
  sub.add_option("--data", flags->fit.data_path,
                 "CSV file or - for stdin (optional): show the data's scales too");
  AddCsvFlags(sub, flags->fit);
  sub.add_option("--prior", flags->fit.priors,
                 "override a prior on a raw parameter: NAME=MEAN,SD");
  sub.add_option("--fix", flags->fit.fixed,
                 "fix a parameter at a natural value: NAME=VALUE");
  sub.add_option("--scale-x", flags->fit.scale_x,
                 "none, auto (needs --data) or a factor x is divided by")
      ->capture_default_str();
  sub.add_flag("--json", flags->fit.json, "print JSON");
  return [flags] { return RunPriors(*flags); };
}

}  // namespace gpsel::cli
