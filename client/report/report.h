// `gpsel report`'s output from results the caller already has (the CLI gets them from its
// Backend, in-process or from a server, so the figures show exactly what --json prints): a
// self-contained report.html (figures inline as SVG, no network needed) and each figure as
// <id>.svg and <id>.png in the output folder.
//
// Figures (ids):
//   fit        the data with the chosen kernel's posterior mean ± 2σ, with and without noise
//   components one panel per summand: its posterior mean ± 2σ (PredictionComponent)
//   search     the kernel search as a ladder: each step's candidates, the path taken
//   metrics    every metric of every kernel compared on one log-evidence scale, winners marked,
//              log Z ± its error where an evidence run was made
//   laplace    evidence samples of two hyperparameters with the Laplace ellipses (paper Fig. 2)
//   residuals  the residuals, and the Hessian eigenvalues against the floors 2π e^(−2r)
// A figure whose results are absent (no search, no evidence, x with several columns) is left out
// and the report says why.
//
//   ReportInputs inputs = ...;  ReportOptions options;  options.out_dir = "out";
//   absl::StatusOr<ReportResult> r = WriteReport(inputs, options);
#ifndef GPSEL_REPORT_REPORT_H_
#define GPSEL_REPORT_REPORT_H_

#include <Eigen/Dense>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/client/report/describe.h"
#include "gpsel/client/report/plot.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"

namespace gpsel::report {

struct ReportInputs {
  Dataset data;
  std::string title;          // e.g. the data file's name
  std::string command;        // the command line that made the report (shown in it)
  std::string x_label = "x";  // axis titles, with units
  std::string y_label = "y";
  Units units;  // for the words; x_range is taken from the data when 0
  // The metric that chose the kernel (search metric, or --metric): higher is better.
  std::string metric = "lap0";
  std::vector<KernelScore> scores;     // the kernels compared; `chosen` is one of them
  std::optional<SearchResult> search;  // when the kernel came from a search
  KernelScore chosen;
  Eigen::MatrixXd grid;                    // inputs of `on_grid` (1-D x only; empty otherwise)
  PredictResult on_grid;                   // chosen kernel, its fit for `metric`, with components
  PredictResult on_data;                   // the same at the data's x (residuals)
  std::optional<EvidenceResult> evidence;  // of the chosen kernel, with samples
  // Two parameter names for the laplace figure; empty: the most correlated pair under the
  // Laplace covariance.
  std::vector<std::string> pair;
};

struct ReportOptions {
  std::string out_dir;  // created when missing
  int width = 960;      // figure size, pixels
  int height = 480;
  absl::Status Validate() const;
};

// One series of a figure as the report lists it: what the tests compare with the SVG.
struct SeriesSummary {
  std::string label;
  std::string kind;   // "line", "band", "points", "error_bars"
  std::string color;  // "#RRGGBB"
  int points = 0;
};
struct PanelSummary {
  std::string title;
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
  std::vector<SeriesSummary> series;
};
struct FigureSummary {
  std::string id, title, caption;
  std::string svg_path, png_path;
  std::vector<PanelSummary> panels;
};

struct ReportResult {
  std::string html_path;
  std::string chosen_kernel;  // canonical text
  std::vector<FigureSummary> figures;
  std::vector<std::string> omitted;  // "search: no search was run", ...
  KernelDescription description;
  std::string Summary() const;
};

// Of `scores`, the one with the highest `metric`; FAILED_PRECONDITION when no score has it
// defined, saying why (the first kernel's reason) and suggesting lap0 unless it was lap0.
absl::StatusOr<KernelScore> BestByMetric(const std::vector<KernelScore>& scores,
                                         const std::string& metric);

// The fit whose values a metric uses: MLL for mll/aic/bic, MAP otherwise (null when absent).
const FitResult* FitForMetric(const KernelScore& score, std::string_view metric);

// Each summand's amplitude for the words (DescribeKernel's `amplitudes`): the sd of its
// posterior mean (on_grid's components, y's units) over the grid points within the data's x
// range, by canonical summand text. Empty when there is no grid (x with several columns).
std::map<std::string, double> ComponentAmplitudes(const ReportInputs& inputs);

// Inputs for the fit figures: `points` evenly spaced x over the data's range widened by 5 % on
// each side (1-D x; an empty matrix otherwise).
Eigen::MatrixXd FitGrid(const Dataset& data, int points = 400);

// Writes the figures and report.html. INVALID_ARGUMENT for inconsistent inputs (naming the
// field), FAILED_PRECONDITION when PLplot lacks its drivers, INTERNAL when a file cannot be
// written.
absl::StatusOr<ReportResult> WriteReport(const ReportInputs& inputs, const ReportOptions& options);

// The figure specifications WriteReport draws (exposed for tests).
absl::StatusOr<std::vector<FigureSpec>> BuildFigures(const ReportInputs& inputs,
                                                     std::vector<std::string>* omitted);

}  // namespace gpsel::report

#endif  // GPSEL_REPORT_REPORT_H_
