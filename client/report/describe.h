// A kernel's fitted structure in plain words, following the Automatic Statistician's (ABCD)
// reading of a sum of products of base kernels: each summand is one component, its factors
// qualify it (SE × PER: a periodic component whose shape drifts; × LIN: its amplitude grows
// linearly; C: its scale), and the noise closes the list. Every rule is one row of the table in
// describe.cc (DescriptionRules), so the words change in one place.
//
//   Units units{"years", "ppm", /*x_range=*/45.0};
//   DescribeKernel(*ParseKernel("C*SE + C*PER*SE"), fit.values, standardization, units)
//   // "a smooth trend varying over about 11 years, plus a yearly periodic component whose
//   //  shape drifts over about 4 years, plus noise of sd 0.3 ppm"; with amplitudes, "a yearly
//   //  periodic component of amplitude about 2 ppm whose shape ..."
#ifndef GPSEL_REPORT_DESCRIBE_H_
#define GPSEL_REPORT_DESCRIBE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"

namespace gpsel::report {

struct Units {
  std::string x;         // unit of x, plural ("years", "days"); empty: "units of x"
  std::string y;         // unit of y ("ppm"); empty: none
  double x_range = 0.0;  // max x − min x of the data (0: unknown); tells a trend from wiggles
  // Names of x's columns (e.g. the CSV header's), by index: a base kernel pinned to column d
  // (SE[d]) is said to be "in <name>"; "in xd" when the name is missing or empty.
  std::vector<std::string> x_columns;
  // Smallest x of the data's column 0 (with x_range: where a changepoint's location, a fraction
  // of the range, lies in x; core/hyperparameters.h).
  double x_min = 0.0;
  // Laplace standard deviations of change locations in x's units, by the change's label in
  // the whole kernel ("CP", "CW#2"; core/change_summary.h), said as "± 1.1 years".
  std::map<std::string, double> change_location_sd;
  // Levels of y (its units, the mean included) on either side of a change, by the change's
  // label: before/after a CP, outside/inside a CW, said as "from about 1100 (…) to about 850
  // (…)". The report passes the mean of each regime's posterior (core/predict.h) over the
  // data on its side, plus y's mean.
  std::map<std::string, std::pair<double, double>> change_levels;
  // Parameters the fit left at the prior's value (KernelScore::prior_dominated, full names such
  // as "SE[1].lengthscale"): an ARD product's lengthscales among them are said to be the prior's,
  // not structure.
  std::vector<std::string> prior_dominated;
};

// One summand's words and the numbers they used (natural values in the user's units).
struct ComponentDescription {
  std::string kernel;  // canonical text of the summand
  std::string text;    // e.g. "a yearly periodic component whose shape drifts over about 4 years"
};

struct KernelDescription {
  std::vector<ComponentDescription> components;  // canonical summand order
  std::string noise;                             // e.g. "noise of sd 0.3 ppm"
  // All of it joined with ", plus ": trends first, then periodic components, shorter-term
  // variations and offsets, the noise last.
  std::string text;
};

// A summand that is a changepoint or changewindow is said as "a change at about 1898 (± 1.1
// years) from <its first operand's words> to <its second's>" ("… a window from 1940 to 1950
// of <second> within <first>" for CW); a change deeper inside a summand as the summand's
// kernel text with "with a change at about 1898".
// `values`: natural values by parameter name, as FitResult::values (user units of x); a value
// missing for a parameter is INVALID_ARGUMENT naming it. `standardization`: of the y the fit
// saw, so that variances are reported in y's own units. `amplitudes`: by canonical summand text,
// the summand's amplitude in y's units, said as "of amplitude about 2 ppm" (the report passes
// the sd of the summand's posterior mean over the data's range, ComponentAmplitudes); a summand
// without one, or a constant offset, gets no amplitude.
absl::StatusOr<KernelDescription> DescribeKernel(
    const KernelExpr& kernel, const std::map<std::string, double>& values,
    const Standardization& standardization, const Units& units,
    const std::map<std::string, double>& amplitudes = {});

// The unit a column name implies when it names a time unit ("year", "Years", "month", "day",
// "hours", "time (days)" ...): the plural ("years"); empty otherwise.
std::string UnitFromColumnName(const std::string& name);

// "11", "0.29", "4.1", "1.2e+04": two significant digits, no trailing zeros.
std::string About(double value);

}  // namespace gpsel::report

#endif  // GPSEL_REPORT_DESCRIBE_H_
