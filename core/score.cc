// The paper's metrics (MLL, MAP, AIC, BIC, Lap, Lap0, LapAIC, LapBIC, LapBIC½) for one kernel,
// and Laplace diagnostics.
#include "gpsel/core/score.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include <Eigen/Eigenvalues>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gpsel/core/approx_score.h"
#include "gpsel/core/data_heuristics.h"
#include "gpsel/core/fit_bounds.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/internal/data_starts.h"
#include "gpsel/core/internal/nested_embedding.h"
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/search.h"  // CandidateSeed (ScoreOptions::search_starts)
#include "gpsel/core/status_macros.h"

namespace gpsel {

namespace {
constexpr double kLog2Pi = 1.8378770664093454836;
constexpr double kLoadingThreshold = 0.3;

struct MetricEntry {
  Metric metric;
  std::string_view name;
};
constexpr MetricEntry kMetricNames[] = {
    {Metric::kMll, "mll"},         {Metric::kMap, "map"},       {Metric::kAic, "aic"},
    {Metric::kBic, "bic"},         {Metric::kLap, "lap"},       {Metric::kLap0, "lap0"},
    {Metric::kLapAic, "lap_aic"},  {Metric::kLapBic, "lap_bic"},
    {Metric::kLapBicHalf, "lap_bic_half"},
};

// Minimal correction r of each Laplace variant (Lemma 3.1 and its corollaries); +inf = no clamp.
double LaplaceCorrection(Metric metric, int n) {
  switch (metric) {
    case Metric::kLap: return std::numeric_limits<double>::infinity();
    case Metric::kLap0: return 0.0;
    case Metric::kLapAic: return -1.0;
    case Metric::kLapBic: return -std::log(static_cast<double>(n));
    case Metric::kLapBicHalf: return -0.5 * std::log(static_cast<double>(n));
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

bool IsLaplace(Metric metric) { return std::isfinite(LaplaceCorrection(metric, 2)) || metric == Metric::kLap; }
}  // namespace

std::string_view MetricName(Metric metric) {
  for (const auto& e : kMetricNames) {
    if (e.metric == metric) return e.name;
  }
  return "unknown";
}

absl::StatusOr<Metric> ParseMetric(std::string_view name) {
  const std::string text(name);
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  for (const auto& e : kMetricNames) {
    if (e.name == lower) return e.metric;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "metrics: unknown metric '", text,
      "' (known: mll, map, aic, bic, lap, lap0, lap_aic, lap_bic, lap_bic_half, all)"));
}

const std::vector<Metric>& PaperMetrics() {
  static const std::vector<Metric> metrics = {Metric::kMll,  Metric::kMap,    Metric::kAic,
                                              Metric::kBic,  Metric::kLap,    Metric::kLap0,
                                              Metric::kLapAic, Metric::kLapBic};
  return metrics;
}

const std::vector<Metric>& AllMetrics() {
  static const std::vector<Metric> metrics = [] {
    std::vector<Metric> m = PaperMetrics();
    m.push_back(Metric::kLapBicHalf);
    return m;
  }();
  return metrics;
}

absl::StatusOr<std::vector<Metric>> ParseMetricList(std::string_view list) {
  const std::string text(list);
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  if (trimmed.empty()) return absl::InvalidArgumentError("metrics: empty list");
  if (absl::AsciiStrToLower(trimmed) == "all") return AllMetrics();
  std::vector<Metric> metrics;
  for (absl::string_view part : absl::StrSplit(trimmed, ',')) {
    absl::StatusOr<Metric> m = ParseMetric(std::string_view(part.data(), part.size()));
    if (!m.ok()) return m.status();
    if (std::find(metrics.begin(), metrics.end(), *m) == metrics.end()) metrics.push_back(*m);
  }
  return metrics;
}

bool NeedsMllFit(Metric metric) {
  return metric == Metric::kMll || metric == Metric::kAic || metric == Metric::kBic;
}
bool NeedsMapFit(Metric metric) { return !NeedsMllFit(metric); }

absl::Status XScaling::Validate() const {
  if (mode == Mode::kFactor && !(std::isfinite(factor) && factor > 0)) {
    return absl::InvalidArgumentError("scale_x: the factor must be finite and > 0");
  }
  return absl::OkStatus();
}

std::string XScalingText(const XScaling& scaling) {
  switch (scaling.mode) {
    case XScaling::Mode::kNone: return "none";
    case XScaling::Mode::kAuto: return "auto";
    case XScaling::Mode::kFactor: return absl::StrFormat("%.17g", scaling.factor);
  }
  return "none";
}

absl::StatusOr<XScaling> ParseXScaling(std::string_view text, std::string_view field) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(std::string(text)));
  XScaling scaling;
  if (lower == "none" || lower.empty()) return scaling;
  if (lower == "auto") {
    scaling.mode = XScaling::Mode::kAuto;
    return scaling;
  }
  double factor = 0.0;
  if (!absl::SimpleAtod(lower, &factor) || !std::isfinite(factor) || !(factor > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(field), ": '", std::string(text),
        "' is not 'none', 'auto' or a positive number"));
  }
  scaling.mode = XScaling::Mode::kFactor;
  scaling.factor = factor;
  return scaling;
}

double UserUnitsPerModelUnit(std::string_view name, double x_scale) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  // PER's lengthscale divides sin²(πd/p), a number, not a distance: it has no units.
  const bool periodic = name.substr(0, 3) == "PER";
  if ((ends_with(".lengthscale") && !periodic) || ends_with(".period")) return x_scale;
  if (ends_with(".variance")) return 1.0 / (x_scale * x_scale);
  return 1.0;
}

int PinnedColumnOfParameter(std::string_view name) {
  const std::string_view label = name.substr(0, name.find('.'));
  const size_t open = label.find('[');
  if (open == std::string_view::npos) return -1;
  int column = 0;
  size_t i = open + 1;
  if (i >= label.size() || !absl::ascii_isdigit(static_cast<unsigned char>(label[i]))) return -1;
  for (; i < label.size() && absl::ascii_isdigit(static_cast<unsigned char>(label[i])); ++i) {
    column = column * 10 + (label[i] - '0');
    if (column > 1'000'000) return -1;
  }
  return i < label.size() && label[i] == ']' ? column : -1;
}

double UserUnitsPerModelUnit(std::string_view name, double x_scale,
                             const std::vector<double>& column_scales) {
  const int column = PinnedColumnOfParameter(name);
  if (!column_scales.empty() && column >= 0 &&
      column < static_cast<int>(column_scales.size())) {
    return UserUnitsPerModelUnit(name, column_scales[static_cast<size_t>(column)]);
  }
  return UserUnitsPerModelUnit(name, x_scale);
}

absl::StatusOr<std::vector<PriorSummary>> DescribePriors(
    const KernelExpr& kernel, const HyperparameterSettings& settings, double x_scale,
    const std::vector<double>& column_scales) {
  if (!(std::isfinite(x_scale) && x_scale > 0)) {
    return absl::InvalidArgumentError("scale_x: the factor must be finite and > 0");
  }
  absl::StatusOr<std::vector<HyperparameterInfo>> infos =
      DescribeHyperparameters(kernel, settings);
  if (!infos.ok()) return infos.status();
  std::vector<PriorSummary> out;
  for (const HyperparameterInfo& info : *infos) {
    const double units = UserUnitsPerModelUnit(info.name, x_scale, column_scales);
    const double offset = info.name == kNoiseName ? kNoiseFloor : 0.0;
    auto natural = [&](double raw) { return (offset + Softplus(raw)) * units; };
    PriorSummary summary;
    summary.name = info.name;
    summary.raw = info.prior;
    summary.fixed = info.fixed;
    if (info.fixed) summary.fixed_value = natural(info.fixed_raw);
    summary.median = natural(info.prior.mean);
    summary.lower95 = natural(info.prior.mean - 1.96 * info.prior.sd);
    summary.upper95 = natural(info.prior.mean + 1.96 * info.prior.sd);
    out.push_back(std::move(summary));
  }
  return out;
}

std::vector<InputColumnScales> DescribeInputScales(const Dataset& data) {
  std::vector<InputColumnScales> scales;
  for (Eigen::Index c = 0; c < data.x.cols(); ++c) {
    InputColumnScales column;
    column.column = static_cast<int>(c);
    column.geometry = DescribeInputColumn(data.x.col(c));
    const std::vector<PeriodogramPeak> peaks = LombScarglePeaks(data.x.col(c), data.y, 1);
    if (!peaks.empty()) column.strongest_period = peaks[0];
    scales.push_back(column);
  }
  return scales;
}

std::vector<std::string> PeriodsOutOfPriorReach(const std::vector<PriorSummary>& priors,
                                                const std::vector<InputColumnScales>& scales) {
  std::vector<std::string> notes;
  for (const PriorSummary& p : priors) {
    if (p.fixed || p.name.find(".period") == std::string::npos) continue;
    for (const InputColumnScales& column : scales) {
      if (!column.strongest_period.has_value()) continue;
      const double period = column.strongest_period->period;
      if (period >= p.lower95 && period <= p.upper95) continue;
      notes.push_back(absl::StrFormat(
          "y's strongest period %.4g lies outside %s's 95%% prior interval; --scale-x auto (or "
          "--prior %s=MEAN,SD) lets the period prior reach it.",
          period, p.name, p.name));
    }
  }
  return notes;
}

namespace {
// Whether some base kernel of `kernel` reads every column with one parameter in x's units (SE,
// LIN, PER, ... without a pin; C has none): then columns scaled differently leave that parameter
// without units.
bool ReadsEveryColumnInXUnits(const KernelExpr& kernel) {
  if (kernel.is_base()) return kernel.active_dim < 0 && kernel.base != BaseKernel::kConst;
  for (const KernelExpr& operand : kernel.operands) {
    if (ReadsEveryColumnInXUnits(operand)) return true;
  }
  return false;
}
}  // namespace

absl::StatusOr<ScaledInputs> ScaleInputs(const Dataset& data, const XScaling& scaling,
                                         const HyperparameterSettings& settings,
                                         const KernelExpr* kernel) {
  GPSEL_RETURN_IF_ERROR(scaling.Validate());
  ScaledInputs out;
  switch (scaling.mode) {
    case XScaling::Mode::kNone:
      out.reason = "as given";
      break;
    case XScaling::Mode::kFactor:
      out.factor = scaling.factor;
      out.reason = "given";
      break;
    case XScaling::Mode::kAuto: {
      absl::StatusOr<XScaleChoice> choice = AutoXScale(data.x, data.y);
      if (!choice.ok()) return choice.status();
      if (!choice->column_factors.empty() && kernel != nullptr &&
          !ReadsEveryColumnInXUnits(*kernel)) {
        out.column_factors = choice->column_factors;
        std::vector<std::string> listed;
        for (size_t c = 0; c < out.column_factors.size(); ++c) {
          listed.push_back(absl::StrFormat("%zu: %.6g", c, out.column_factors[c]));
        }
        out.reason = absl::StrCat("auto: each column by its own range/10 (",
                                  absl::StrJoin(listed, ", "), ")");
        break;
      }
      out.factor = choice->factor;
      out.reason = absl::StrCat("auto: ", choice->reason);
      if (!choice->column_factors.empty() && kernel != nullptr) {
        absl::StrAppend(&out.reason, ", one factor for every column since ", ToString(*kernel),
                        " reads every column with one lengthscale (pin columns, or write e.g. "
                        "SE[*] for one lengthscale per column, to scale each by its own)");
      }
      break;
    }
  }
  // Unscaled x stays bit for bit what the user gave.
  if (!out.column_factors.empty()) {
    out.x = data.x;
    for (Eigen::Index c = 0; c < out.x.cols(); ++c) {
      out.x.col(c) /= out.column_factors[static_cast<size_t>(c)];
    }
  } else {
    out.x = out.factor == 1.0 ? data.x : (data.x / out.factor).eval();
  }
  out.settings = settings;
  for (auto& [name, value] : out.settings.fixed_values) {
    value /= UserUnitsPerModelUnit(name, out.factor, out.column_factors);
  }
  return out;
}

absl::Status ScoreOptions::Validate() const {
  GPSEL_RETURN_IF_ERROR(fit.Validate());
  GPSEL_RETURN_IF_ERROR(scale_x.Validate());
  GPSEL_RETURN_IF_ERROR(hyperparameters.Validate());
  for (double r : laplace_r) {
    if (!std::isfinite(r)) return absl::InvalidArgumentError("laplace_r: must be finite");
  }
  if (test != nullptr) GPSEL_RETURN_IF_ERROR(ValidateTestData(*test));
  return approx.Validate();
}

double LaplaceEigenvalueFloor(double r) { return 2.0 * M_PI * std::exp(-2.0 * r); }

std::optional<double> LaplaceScore(double map_value, const Eigen::VectorXd& eigenvalues,
                                   double r) {
  // Paper eq. (3): log Z ≈ MAP + (u/2) log 2π − ½ log det H, with each λ raised to its floor.
  const bool clamp = std::isfinite(r);
  const double floor = clamp ? LaplaceEigenvalueFloor(r) : 0.0;
  double sum_log = 0.0;
  for (Eigen::Index i = 0; i < eigenvalues.size(); ++i) {
    double lambda = eigenvalues(i);
    if (clamp) lambda = std::max(lambda, floor);
    if (!(lambda > 0)) return std::nullopt;
    sum_log += std::log(lambda);
  }
  return map_value + 0.5 * static_cast<double>(eigenvalues.size()) * kLog2Pi - 0.5 * sum_log;
}

namespace {

LaplaceDiagnostics::ClampedDirection DescribeDirection(double eigenvalue,
                                                       const Eigen::VectorXd& vector,
                                                       const std::vector<std::string>& names) {
  LaplaceDiagnostics::ClampedDirection d;
  d.eigenvalue = eigenvalue;
  for (Eigen::Index k = 0; k < vector.size(); ++k) {
    if (std::abs(vector(k)) >= kLoadingThreshold) d.loadings.emplace_back(names[k], vector(k));
  }
  std::sort(d.loadings.begin(), d.loadings.end(), [](const auto& a, const auto& b) {
    return std::abs(a.second) > std::abs(b.second);
  });
  return d;
}

std::string FormatLaplaceRName(double r) { return absl::StrFormat("lap_r=%g", r); }

// The optima of the contained kernels in options.nested_parents, embedded into `model`'s
// parameters with the extra part switched off (core/internal/nested_embedding.h), as starts of the fit of
// the same objective. A parent scored on another number of points or with y scaled otherwise
// is skipped: its raw optimum would be a point of another likelihood (a caller's mistake, or a
// ScoreRequest's nested_parents from elsewhere), so starting there would only cost time. A
// parent whose x was scaled otherwise (--scale-x auto: per column for SE[*], one factor for
// SE[*] + LIN) is carried through its values in the user's units into this kernel's scaling.
void AddNestedStarts(const KernelExpr& kernel, const GpModel& model, const ScoreOptions& options,
                     const KernelScore& score, FitOptions& fit) {
  for (const NestedParent& parent : options.nested_parents) {
    if (parent.score == nullptr || parent.kernel == kernel ||
        (!parent.one_fewer_base_kernel && !KernelContains(kernel, parent.kernel)) ||
        parent.score->num_points != score.num_points ||
        parent.score->standardized != score.standardized) {
      continue;
    }
    for (const std::optional<FitResult>* parent_fit :
         {&parent.score->mll_fit, &parent.score->map_fit}) {
      if (!parent_fit->has_value()) continue;
      absl::StatusOr<NestedEmbedding> embedding = EmbedNestedOptimum(
          parent.kernel,
          ModelRawValues(*parent.score, **parent_fit, score.x_scale, score.x_scales), kernel,
          fit.raw_lower_bound, fit.raw_upper_bound);
      if (!embedding.ok()) continue;
      StartPoint start;
      start.kind = StartKind::kNestedParent;
      start.only_for = (*parent_fit)->objective;
      start.origin = absl::StrCat(
          parent.score->kernel,
          (*parent_fit)->objective == FitObjective::kMaximumLikelihood ? " MLL" : " MAP",
          " optimum");
      start.raw.resize(model.num_free());
      Eigen::Index k = 0;
      bool complete = true;
      for (const HyperparameterInfo& info : model.parameters()) {
        if (info.fixed) continue;
        auto it = embedding->raw.find(info.name);
        if (it == embedding->raw.end()) {
          complete = false;
          break;
        }
        start.raw(k++) = it->second;
      }
      if (complete) fit.extra_starts.push_back(std::move(start));
    }
  }
}

// Appends to `warnings` what the user should know about `fit`: parameters on a bound or more
// than kPriorSdWarning prior sd from the prior mean, and an optimum only one start reached.
constexpr double kPriorSdWarning = 3.0;
constexpr double kOnBound = 1e-6;  // raw distance from a bound that counts as on it

void AddFitWarnings(const GpModel& model, const FitResult& fit, const ScoreOptions& options,
                    double x_factor, const std::vector<double>& x_factors,
                    std::vector<std::string>* warnings) {
  const char* label = fit.objective == FitObjective::kMaximumLikelihood ? "MLL" : "MAP";
  const std::vector<std::string> names = model.free_names();
  const Eigen::VectorXd mean = model.prior_mean(), sd = model.prior_sd();
  const ParameterBounds bounds = FitParameterBounds(model, options.fit);
  for (Eigen::Index k = 0; k < fit.raw.size() && k < static_cast<Eigen::Index>(names.size());
       ++k) {
    const std::string& name = names[k];
    const double raw = fit.raw(k);
    auto value = fit.values.find(name);
    const double natural = value != fit.values.end() ? value->second : Softplus(raw);
    // Lengthscales, periods and LIN variances depend on the units of x; the rest on y's.
    const bool depends_on_x_units = UserUnitsPerModelUnit(name, 2.0) != 1.0;
    // Rescaling x is no remedy once x was rescaled (issue 27: the warning suggested
    // --scale-x auto after it had been used).
    const bool x_rescaled = options.scale_x.mode != XScaling::Mode::kNone;
    const std::string remedy =
        depends_on_x_units && x_rescaled
            ? absl::StrCat("x is already rescaled (--scale-x ", XScalingText(options.scale_x),
                           "): set its prior with --prior ", name, "=MEAN,SD or fix it with --fix ",
                           name, "=VALUE")
        : depends_on_x_units
            ? absl::StrCat("check the units of x (rescale with --scale-x auto or FACTOR) or set "
                           "its prior with --prior ", name, "=MEAN,SD")
            : absl::StrCat("set its prior with --prior ", name, "=MEAN,SD or fix it with --fix ",
                           name, "=VALUE");
    if (raw <= bounds.lower(k) + kOnBound) {
      warnings->push_back(absl::StrCat(
          absl::StrFormat("%s fit: %s ends on its lower bound (%.3g)", label, name, natural),
          name == kNoiseName ? ", the floor: the kernel interpolates the data"
                             : ": the data does not need this part, so the kernel without it "
                               "fits as well"));
    } else if (raw >= bounds.upper(k) - kOnBound * std::max(1.0, bounds.scale(k))) {
      // What the bound is, in the units the value is printed in (core/fit_bounds.h): scaled to
      // the data, or the fixed B on the model's x (converted into x's units when x was
      // rescaled), on y's scale, or on a parameter without units.
      const bool y_units = name == kNoiseName || absl::EndsWith(name, ".constant") ||
                           absl::EndsWith(name, ".variance");
      const double x_units = UserUnitsPerModelUnit(name, x_factor, x_factors);
      const std::string what =
          bounds.scale(k) > 1 ? ", the bound scaled to the data"
          : depends_on_x_units && x_units != 1.0
              ? ", the fixed bound on x as modelled (x rescaled), converted into x's units"
          : depends_on_x_units ? ", the fixed bound, above twice x's range"
          : y_units ? ", the fixed bound, on y's scale as modelled"
                    : ", the fixed bound of a parameter without units";
      warnings->push_back(
          absl::StrFormat("%s fit: %s ends on its upper bound (%.4g%s) and would grow further; %s",
                          label, name, natural, what, remedy));
    } else if (const double z = (raw - mean(k)) / sd(k); std::abs(z) > kPriorSdWarning) {
      const double units = UserUnitsPerModelUnit(name, x_factor, x_factors);
      const double offset = name == kNoiseName ? kNoiseFloor : 0.0;
      warnings->push_back(absl::StrFormat(
          "%s fit: %s = %.4g lies %.1f prior sd %s its prior mean (the prior's 95%% interval is "
          "%.3g to %.3g); %s",
          label, name, natural, std::abs(z), z > 0 ? "above" : "below",
          (offset + Softplus(mean(k) - 1.96 * sd(k))) * units,
          (offset + Softplus(mean(k) + 1.96 * sd(k))) * units, remedy));
    }
  }
  if (fit.may_not_be_global) {
    warnings->push_back(absl::StrFormat(
        "%s fit: only 1 of %d starts reached the optimum (objective %.4f), even after %d extra "
        "prior draws (the cap, %d × --restarts), so it may not be global; raise --restarts "
        "(now %d) to check",
        label, fit.starts, fit.objective_value, fit.extra_draws, options.fit.max_draws_factor,
        options.fit.restarts));
  }
}

// No absurd answer: the best log likelihood of a score's fits must not lie far below that of
// white noise on the same (modelled) y, N(0, σ² I) with σ² = mean(y²), the maximum-likelihood
// white noise: −n/2 (log(2π σ²) + 1). Every kernel + noise gets close to it (the kernel's part
// shrunk, or made diagonal by a lengthscale on its lower bound, and the noise taking the rest),
// so an optimum far below it is a fit that failed — a parameter held on a bound, or fixed values
// that do not suit the data — and returning it as a score would mislead. The margin,
// max(10, n/10) nats, leaves room for kernels whose unit-variance part cannot vanish exactly.
absl::Status CheckAgainstWhiteNoise(const GpModel& model, const KernelScore& score) {
  double best = -std::numeric_limits<double>::infinity();
  for (const std::optional<FitResult>* fit : {&score.mll_fit, &score.map_fit}) {
    if (fit->has_value()) best = std::max(best, (*fit)->log_likelihood);
  }
  const Eigen::VectorXd& y = model.y();
  const double n = static_cast<double>(y.size());
  if (n == 0 || best == -std::numeric_limits<double>::infinity()) return absl::OkStatus();
  const double y2 = y.squaredNorm() / n;
  if (!(y2 > 0) || !std::isfinite(y2)) return absl::OkStatus();
  const double white_noise = -0.5 * n * (std::log(2.0 * M_PI * y2) + 1.0);
  const double margin = std::max(10.0, 0.1 * n);
  if (std::isfinite(best) && best >= white_noise - margin) return absl::OkStatus();
  std::string why;
  for (const std::string& warning : score.warnings) {
    if (absl::StrContains(warning, "bound")) absl::StrAppend(&why, "; ", warning);
  }
  bool fixed = false;
  for (const HyperparameterInfo& info : model.parameters()) fixed = fixed || info.fixed;
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: the fit's log likelihood %.6g is %.4g nats below that of white noise on the same "
      "data (%.6g, variance mean(y²) = %.4g), so it is not a fit of this data and no score is "
      "given%s%s%s",
      score.kernel, best, white_noise - best, white_noise, y2, why,
      score.standardized ? ""
                         : "; y is not standardised: drop --no-standardize, or add a C "
                           "factor whose constant can take y's scale",
      fixed ? "; some parameters are fixed (--fix): check their values against the data" : ""));
}

// ScoreKernel, taking the fits `earlier` has (null: none).
absl::StatusOr<KernelScore> ScoreKernelImpl(const Dataset& data, const KernelExpr& given_kernel,
                                            const ScoreOptions& options,
                                            const KernelScore* earlier,
                                            const ProgressCallback& progress) {
  const auto started = std::chrono::steady_clock::now();
  GPSEL_RETURN_IF_ERROR(options.Validate());
  // BASE[*] becomes one pinned copy per column (core/kernel_expr.h): the score, its parameter
  // names and its kernel text are those of the expanded kernel.
  GPSEL_ASSIGN_OR_RETURN(const KernelExpr kernel,
                         ExpandPerColumn(given_kernel, static_cast<int>(data.x.cols())));
  if (options.test != nullptr) GPSEL_RETURN_IF_ERROR(ValidateTestData(*options.test, data));
  // Exact or sparse (core/approx_score.h): the sparse path returns its own KernelScore.
  const ApproxChoice choice = ChooseApproximation(data, kernel, options);
  if (choice.sparse && options.test != nullptr) {
    // The held-out likelihoods (core/held_out.h) are joint Gaussians of the exact GP; a sparse
    // score would have to drop them silently.
    return absl::InvalidArgumentError(absl::StrCat(
        "test: held-out likelihoods need the exact GP, and ", ToString(kernel), " would be ",
        "scored sparse (", choice.note, "); score with approx = exact or without the test data"));
  }
  if (choice.sparse) return ScoreKernelSparsely(data, kernel, options, choice.note, progress);
  if (data.num_points() > kMaxPointsCeiling) {
    return absl::InvalidArgumentError(absl::StrCat(
        "approx: the exact GP takes at most ", kMaxPointsCeiling, " points (n = ",
        data.num_points(), "); use approx = sparse or auto"));
  }
  absl::StatusOr<PreparedModel> prepared = PrepareModel(
      data, kernel, options.standardize, options.scale_x, options.hyperparameters);
  if (!prepared.ok()) return prepared.status();
  const double x_factor = prepared->x_factor;
  const Standardization* standardization = &prepared->standardization;
  GpModel* model = &prepared->model;

  const std::vector<Metric>& metrics = options.metrics.empty() ? PaperMetrics() : options.metrics;
  bool need_mll = false, need_map = !options.laplace_r.empty();
  for (Metric m : metrics) (NeedsMllFit(m) ? need_mll : need_map) = true;

  KernelScore score;
  std::map<std::string, double> prior_dominated_share;  // by parameter name (see below)
  score.kernel = ToString(kernel);
  score.num_points = data.num_points();
  score.num_hyperparameters = model->num_free();
  score.approx_note = choice.note;
  score.standardized = standardization->applied;
  score.standardization = *standardization;
  score.parameter_names = model->free_names();
  score.x_scale = x_factor;
  score.x_scales = prepared->x_factors;
  score.x_scale_reason = prepared->x_scale_reason;
  const double n = data.num_points();
  const double u = model->num_free();
  if (earlier != nullptr) {
    if (earlier->kernel != score.kernel || earlier->num_points != score.num_points ||
        earlier->parameter_names != score.parameter_names) {
      return absl::InvalidArgumentError(absl::StrCat(
          "earlier score is for '", earlier->kernel, "' on ", earlier->num_points,
          " points, not for '", score.kernel, "' on ", score.num_points));
    }
    // Both fits are cross-seeded from each other when made together, so one fit of `earlier`
    // alone is not what a fresh score would give: it is reused only when no other fit is
    // needed.
    const bool has_mll = earlier->mll_fit.has_value(), has_map = earlier->map_fit.has_value();
    if (need_mll && has_mll && (!need_map || has_map)) score.mll_fit = earlier->mll_fit;
    if (need_map && has_map && (!need_mll || has_mll)) score.map_fit = earlier->map_fit;
  }

  const bool make_mll = need_mll && !score.mll_fit, make_map = need_map && !score.map_fit;
  FitOptions fit_options = options.fit;
  const bool periodic = ContainsBaseKernel(kernel, BaseKernel::kPER);
  // Without a period the MLL fit follows the MAP fit's prior draws (FitOptions::
  // share_prior_draws): on the bundled series no such kernel lost an optimum that way, while
  // periodic kernels did, their period landscape being rugged enough that every draw counts.
  fit_options.share_prior_draws = !periodic;
  if ((make_mll || make_map) && model->num_free() > 0) {
    if (options.data_informed_starts) {
      // With both fits, the MLL fit alone takes them when the kernel has no period: every MLL
      // end point is a candidate start of the MAP fit by cross-seeding, at the price of a log
      // prior, so the MAP fit gets their basins without paying for the starts twice. With a
      // period the MAP fit takes them too: there the prior can move its optimum far from the
      // MLL fit's (Mauna Loa C*SE + C*PER*SE: the trend's lengthscale from 51 to 11 years), and
      // the one cross-seeded start, from the MLL end point best under the MAP objective, ended
      // 72.8 nats below it (RQ + PER*SE: 24.0; bench/RESULTS.md, "Data-informed starts for
      // periodic kernels").
      // A changepoint or changewindow likewise: its MLL fit takes the change with flat
      // operands (lengthscales on the upper bound, which the prior forbids), and the MAP fit
      // needs the located change with the data's own lengthscales to start from (the Nile:
      // CP(C*SE, C*SE)'s MAP otherwise ends with short lengthscales and the change at 1953).
      const bool mll_only = make_mll && make_map && fit_options.cross_seed && !periodic &&
                            !ContainsChange(kernel);
      for (StartPoint& start : DataInformedStarts(*model)) {
        if (mll_only) start.only_for = FitObjective::kMaximumLikelihood;
        fit_options.extra_starts.push_back(std::move(start));
      }
    }
    AddNestedStarts(kernel, *model, options, score, fit_options);
    // A fit of `earlier` that is made again (with the other one, for cross-seeding) starts from
    // where it ended, so it cannot come out worse.
    if (earlier != nullptr) {
      for (const std::optional<FitResult>* fit : {&earlier->mll_fit, &earlier->map_fit}) {
        if (!fit->has_value() || (*fit)->raw.size() != model->num_free()) continue;
        StartPoint start;
        start.raw = (*fit)->raw;
        start.kind = StartKind::kGiven;
        start.origin = "the earlier fit's optimum";
        start.only_for = (*fit)->objective;
        fit_options.extra_starts.push_back(std::move(start));
      }
    }
  }

  if (make_mll && make_map) {
    // Both fits at once: their starts (the MLL ones, usually longer, first) balance over the
    // threads far better than two rounds, the two Newton polishes overlap, and each fit is
    // cross-seeded from the other (FitHyperparametersJointly), so that MLL ≥ log p(y|θ̂_MAP)
    // and MAP ≥ log p(y|θ̂_MLL) + log p(θ̂_MLL).
    absl::StatusOr<std::vector<FitResult>> fits = FitHyperparametersJointly(
        *model, {FitObjective::kMaximumLikelihood, FitObjective::kMaximumAPosteriori},
        fit_options, progress);
    if (!fits.ok()) return fits.status();
    score.mll_fit = std::move((*fits)[0]);
    score.map_fit = std::move((*fits)[1]);
  } else if (make_mll) {
    absl::StatusOr<FitResult> fit =
        FitHyperparameters(*model, FitObjective::kMaximumLikelihood, fit_options, progress);
    if (!fit.ok()) return fit.status();
    score.mll_fit = *std::move(fit);
  }
  if (need_map) {
    if (!score.map_fit.has_value()) {
      absl::StatusOr<FitResult> fit =
          FitHyperparameters(*model, FitObjective::kMaximumAPosteriori, fit_options, progress);
      if (!fit.ok()) return fit.status();
      score.map_fit = *std::move(fit);
    }

    GPSEL_RETURN_IF_ERROR(ReportProgress(progress, {"hessian", 0.95, "Laplace Hessian"}));
    // H = −∇²(log lik + log prior) at the MAP optimum: the fit's final Newton check computed
    // exactly this matrix at exactly this point, so it is reused when there.
    Eigen::MatrixXd h;
    double hessian_jitter = 0.0;
    if (u > 0 && score.map_fit->objective_hessian.rows() == u) {
      h = -score.map_fit->objective_hessian;
      hessian_jitter = score.map_fit->objective_hessian_jitter;
    } else {
      absl::StatusOr<LikelihoodHessian> objective = ObjectiveWithHessian(
          *model, FitObjective::kMaximumAPosteriori, score.map_fit->raw, progress);
      if (!objective.ok()) return objective.status();
      h = -objective->hessian;
      hessian_jitter = objective->jitter;
    }
    LaplaceDiagnostics diag;
    if (u > 0) {
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(h);
      if (eigen.info() != Eigen::Success) {
        return absl::InternalError("eigen-decomposition of the MAP Hessian failed");
      }
      diag.eigenvalues = eigen.eigenvalues();
      diag.eigenvectors = eigen.eigenvectors();
    }
    diag.positive_definite = u == 0 || diag.eigenvalues(0) > 0;
    diag.hessian_jitter = hessian_jitter;
    // Prior-dominated parameters (KernelScore::prior_dominated): the Laplace posterior variance
    // (H⁻¹)_kk against the prior's sd_k² in raw space. H = P + L with P = diag(1/sd²) the prior's
    // curvature; for one parameter (H⁻¹)_kk / sd_k² = P/(P + L) ≥ 0.9 means L ≤ P/9, the data
    // adding less than a ninth of what the prior already says.
    if (diag.positive_definite && u > 0) {
      const Eigen::VectorXd prior_sd = model->prior_sd();
      for (int k = 0; k < u && k < static_cast<int>(score.parameter_names.size()); ++k) {
        const double variance =
            (diag.eigenvectors.row(k).array().square() / diag.eigenvalues.transpose().array())
                .sum();
        const double share = variance / (prior_sd(k) * prior_sd(k));
        if (share >= kPriorDominatedShare) {
          prior_dominated_share[score.parameter_names[k]] = share;
        }
      }
    }
    if (diag.positive_definite && options.compute_laplace_covariance && u > 0) {
      diag.covariance = diag.eigenvectors * diag.eigenvalues.cwiseInverse().asDiagonal() *
                        diag.eigenvectors.transpose();
    }
    auto record_clamped = [&](const std::string& name, double r) {
      const double floor = LaplaceEigenvalueFloor(r);
      std::vector<LaplaceDiagnostics::ClampedDirection> clamped;
      for (Eigen::Index i = 0; i < diag.eigenvalues.size(); ++i) {
        if (diag.eigenvalues(i) < floor) {
          clamped.push_back(DescribeDirection(diag.eigenvalues(i), diag.eigenvectors.col(i),
                                              score.parameter_names));
        }
      }
      diag.clamped[name] = std::move(clamped);
    };
    for (Metric m : metrics) {
      if (!IsLaplace(m) || m == Metric::kLap) continue;
      record_clamped(std::string(MetricName(m)), LaplaceCorrection(m, score.num_points));
    }
    for (double r : options.laplace_r) {
      record_clamped(FormatLaplaceRName(r), r);
      if (std::optional<double> v = LaplaceScore(score.map_fit->objective_value, diag.eigenvalues, r)) {
        score.laplace_r[r] = *v;
      }
    }
    score.laplace = std::move(diag);
  }

  for (Metric m : metrics) {
    const std::string name(MetricName(m));
    switch (m) {
      case Metric::kMll: score.metrics[name] = score.mll_fit->log_likelihood; break;
      case Metric::kAic: score.metrics[name] = score.mll_fit->log_likelihood - u; break;
      case Metric::kBic:
        score.metrics[name] = score.mll_fit->log_likelihood - 0.5 * u * std::log(n);
        break;
      case Metric::kMap: score.metrics[name] = score.map_fit->objective_value; break;
      default: {
        std::optional<double> v = LaplaceScore(score.map_fit->objective_value,
                                               score.laplace->eigenvalues,
                                               LaplaceCorrection(m, score.num_points));
        if (v) {
          score.metrics[name] = *v;
        } else {
          score.undefined_metrics[name] = absl::StrFormat(
              "Hessian at the MAP optimum is not positive definite (smallest eigenvalue %.4g)",
              score.laplace->eigenvalues(0));
        }
      }
    }
  }
  // Fitted values in the user's units of x, and what the user should know about the optima.
  for (auto [fit, made] : {std::pair{&score.mll_fit, make_mll}, std::pair{&score.map_fit, make_map}}) {
    if (!fit->has_value()) continue;
    if (made) {
      for (auto& [name, value] : (*fit)->values) {
        value *= UserUnitsPerModelUnit(name, x_factor, prepared->x_factors);
      }
    }
    AddFitWarnings(*model, **fit, options, x_factor, prepared->x_factors, &score.warnings);
  }
  for (const auto& [name, share] : prior_dominated_share) {
    score.prior_dominated.push_back(name);
    const auto value = score.map_fit->values.find(name);
    score.warnings.push_back(absl::StrFormat(
        "%s is prior-dominated in the MAP fit: its Laplace posterior sd is %.0f%% of its prior "
        "sd, so its value%s is the prior's, not something the data show",
        name, 100.0 * std::sqrt(share),
        value == score.map_fit->values.end() ? std::string()
                                             : absl::StrFormat(" %.4g", value->second)));
  }
  GPSEL_RETURN_IF_ERROR(CheckAgainstWhiteNoise(*model, score));
  if (options.test != nullptr) {
    for (const std::optional<FitResult>* fit : {&score.mll_fit, &score.map_fit}) {
      if (!fit->has_value()) continue;
      absl::StatusOr<HeldOutLikelihood> held_out = HeldOutLikelihoodAt(
          data, *options.test, kernel, (*fit)->values, options.standardize);
      if (!held_out.ok()) return held_out.status();
      held_out->objective = (*fit)->objective;
      score.held_out.push_back(*held_out);
    }
  }
  score.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return score;
}

}  // namespace

std::string MayNotBeGlobalNote(const KernelScore& score) {
  std::vector<std::string> parts;
  for (const std::optional<FitResult>* fit : {&score.mll_fit, &score.map_fit}) {
    if (!fit->has_value() || !(*fit)->may_not_be_global) continue;
    parts.push_back(absl::StrFormat(
        "%s optimum MAY NOT BE GLOBAL: 1 of %d starts reached it",
        (*fit)->objective == FitObjective::kMaximumLikelihood ? "MLL" : "MAP", (*fit)->starts));
  }
  return parts.empty() ? "" : absl::StrCat("  (", absl::StrJoin(parts, "; "), ")");
}

absl::StatusOr<KernelScore> ScoreKernel(const Dataset& data, const KernelExpr& kernel,
                                        const ScoreOptions& options,
                                        const ProgressCallback& progress) {
  return ScoreKernelImpl(data, kernel, options, nullptr, progress);
}

absl::StatusOr<KernelScore> ScoreKernelReusingFits(const Dataset& data, const KernelExpr& kernel,
                                                   const ScoreOptions& options,
                                                   const KernelScore& earlier,
                                                   const ProgressCallback& progress) {
  return ScoreKernelImpl(data, kernel, options, &earlier, progress);
}

namespace {

// ScoreOptions::search_starts applies to kernels of at most this many base kernels (at most
// 2^5 − 2 = 30 sub-kernels): an expanded SE[*] on ten columns would otherwise bring 1,022.
constexpr int kMaxBaseKernelsForSubKernelStarts = 5;

// The kernels left by removing one base kernel from `kernel` (a sum or product of two keeps the
// other operand; a change node keeps both operands, each reduced in turn). Canonical, distinct.
std::set<KernelExpr> OneBaseKernelFewer(const KernelExpr& kernel) {
  std::set<KernelExpr> out;
  if (kernel.is_base()) return out;
  const std::vector<KernelExpr>& ops = kernel.operands;
  for (size_t i = 0; i < ops.size(); ++i) {
    // nullopt: operand i dropped (a base operand of a sum or product).
    std::vector<std::optional<KernelExpr>> replacements;
    if (ops[i].is_base() && !kernel.is_change()) replacements.push_back(std::nullopt);
    for (const KernelExpr& smaller : OneBaseKernelFewer(ops[i])) replacements.push_back(smaller);
    for (const std::optional<KernelExpr>& replacement : replacements) {
      std::vector<KernelExpr> rest;
      for (size_t j = 0; j < ops.size(); ++j) {
        if (j != i) rest.push_back(ops[j]);
        else if (replacement.has_value()) rest.push_back(*replacement);
      }
      switch (kernel.kind) {
        case KernelExpr::Kind::kSum:
          out.insert(rest.size() == 1 ? rest[0] : KernelExpr::Sum(std::move(rest)));
          break;
        case KernelExpr::Kind::kProduct:
          out.insert(rest.size() == 1 ? rest[0] : KernelExpr::Product(std::move(rest)));
          break;
        case KernelExpr::Kind::kChangePoint:
          out.insert(KernelExpr::ChangePoint(rest[0], rest[1], kernel.active_dim));
          break;
        case KernelExpr::Kind::kChangeWindow:
          out.insert(KernelExpr::ChangeWindow(rest[0], rest[1], kernel.active_dim));
          break;
        case KernelExpr::Kind::kBase: break;
      }
    }
  }
  return out;
}

}  // namespace

std::vector<KernelExpr> SubKernelsForSearchStarts(const std::vector<KernelExpr>& kernels) {
  std::set<KernelExpr> seen(kernels.begin(), kernels.end());
  std::vector<KernelExpr> out;
  // Each new sub-kernel's own sub-kernels come after it: the loop runs over `out` as it grows.
  auto add_those_of = [&](const KernelExpr& kernel) {
    if (NumBaseKernels(kernel) > kMaxBaseKernelsForSubKernelStarts) return;
    for (const KernelExpr& smaller : OneBaseKernelFewer(kernel)) {
      if (seen.insert(smaller).second) out.push_back(smaller);
    }
  };
  for (const KernelExpr& kernel : kernels) add_those_of(kernel);
  for (size_t i = 0; i < out.size(); ++i) add_those_of(KernelExpr(out[i]));
  return out;
}

bool SubKernelErrorOffersNoStart(const absl::Status& status) {
  return !status.ok() && !absl::IsCancelled(status) && !absl::IsDeadlineExceeded(status);
}

absl::StatusOr<std::vector<KernelScore>> ScoreKernels(const Dataset& data,
                                                      const std::vector<KernelExpr>& given_kernels,
                                                      const ScoreOptions& options,
                                                      const ProgressCallback& progress,
                                                      int* failed_kernel,
                                                      const KernelRoundScorer& score_round) {
  // BASE[*] expanded first, so that containment (and the nested starts) sees pinned kernels.
  std::vector<KernelExpr> kernels;
  for (size_t i = 0; i < given_kernels.size(); ++i) {
    absl::StatusOr<KernelExpr> expanded =
        ExpandPerColumn(given_kernels[i], static_cast<int>(data.x.cols()));
    if (!expanded.ok()) {
      if (failed_kernel != nullptr) *failed_kernel = static_cast<int>(i);
      return expanded.status();
    }
    kernels.push_back(*std::move(expanded));
  }
  // Sub-kernels (ScoreOptions::search_starts) after the given kernels: scored, not returned.
  const size_t num_given = kernels.size();
  // The text a search would seed each kernel with (ScoreOptions::search_starts): as given (SE[*]
  // unexpanded), for the sub-kernels their own.
  std::vector<std::string> seed_texts;
  for (const KernelExpr& given : given_kernels) seed_texts.push_back(ToString(given));
  if (options.search_starts) {
    for (KernelExpr& smaller : SubKernelsForSearchStarts(kernels)) {
      seed_texts.push_back(ToString(smaller));
      kernels.push_back(std::move(smaller));
    }
  }
  auto fit_seed_of = [&](size_t i) {
    return options.search_starts ? CandidateSeed(options.fit.seed, seed_texts[i])
                                 : options.fit.seed;
  };
  // Fewer base kernels first: a kernel can only contain kernels of at most its size.
  std::vector<size_t> order(kernels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return NumBaseKernels(kernels[a]) < NumBaseKernels(kernels[b]);
  });
  // Rounds (0-based): a kernel comes after every kernel of the call that it contains (and, with
  // search_starts, after its sub-kernels one base kernel smaller, which it may not contain
  // exactly), so that when its round comes, every kernel of the call it may start from is
  // scored. Those come before it in `order` (they have fewer base kernels, or as many and come
  // first).
  std::vector<int> round_of(kernels.size(), 0);
  int rounds = 0;
  for (size_t position = 0; position < order.size(); ++position) {
    const size_t i = order[position];
    const std::set<KernelExpr> fewer =
        options.search_starts ? OneBaseKernelFewer(kernels[i]) : std::set<KernelExpr>{};
    for (size_t before = 0; before < position; ++before) {
      const size_t j = order[before];
      if (kernels[j] != kernels[i] &&
          (KernelContains(kernels[i], kernels[j]) || fewer.count(kernels[j]) > 0)) {
        round_of[i] = std::max(round_of[i], round_of[j] + 1);
      }
    }
    rounds = std::max(rounds, round_of[i] + 1);
  }

  std::vector<std::shared_ptr<const KernelScore>> scores(kernels.size());
  // The parents of the kernel at `position`: of the kernels scored before the call and those
  // before it in `order`, the largest it contains (LargestContainedParents), and with
  // search_starts its sub-kernels one base kernel smaller. In rounds, the kernels before it that
  // are not scored yet are ones it does not start from (their scores are still null, which both
  // rules skip), so the parents are the same either way.
  auto parents_of = [&](size_t position) {
    std::vector<NestedParent> scored = options.nested_parents;
    for (size_t before = 0; before < position; ++before) {
      scored.push_back({kernels[order[before]], scores[order[before]]});
    }
    std::vector<NestedParent> parents = LargestContainedParents(kernels[order[position]], scored);
    if (options.search_starts) {
      const std::set<KernelExpr> fewer = OneBaseKernelFewer(kernels[order[position]]);
      for (NestedParent parent : scored) {
        if (parent.score == nullptr || fewer.count(parent.kernel) == 0) continue;
        const bool already = std::any_of(parents.begin(), parents.end(), [&](const NestedParent& p) {
          return p.kernel == parent.kernel;
        });
        if (already) continue;
        parent.one_fewer_base_kernel = true;
        parents.push_back(std::move(parent));
      }
    }
    return parents;
  };
  // A sub-kernel that cannot be scored only offers no start; the given kernels' errors fail the
  // call with the index of the kernel.
  auto record = [&](size_t i, absl::StatusOr<KernelScore> score) -> absl::Status {
    if (!score.ok() && i >= num_given && SubKernelErrorOffersNoStart(score.status())) {
      return absl::OkStatus();
    }
    if (!score.ok()) {
      if (failed_kernel != nullptr && i < num_given) *failed_kernel = static_cast<int>(i);
      return score.status();
    }
    scores[i] = std::make_shared<const KernelScore>(*std::move(score));
    return absl::OkStatus();
  };
  if (score_round) {
    for (int round = 0; round < rounds; ++round) {
      std::vector<KernelToScore> batch;
      for (size_t position = 0; position < order.size(); ++position) {
        const size_t i = order[position];
        if (round_of[i] != round) continue;
        batch.push_back({i, kernels[i], fit_seed_of(i), parents_of(position), i >= num_given});
      }
      const ProgressCallback round_progress = [&progress, round, rounds](const Progress& inner) {
        if (inner.poll_only) return ReportProgress(progress, inner);
        Progress outer = inner;
        outer.fraction = (round + std::clamp(inner.fraction, 0.0, 1.0)) / rounds;
        return ReportProgress(progress, outer);
      };
      absl::StatusOr<std::vector<std::optional<KernelScore>>> scored =
          score_round(round + 1, batch, round_progress);
      if (!scored.ok()) return scored.status();
      if (scored->size() != batch.size()) {
        return absl::InternalError(absl::StrCat("ScoreKernels: ", scored->size(),
                                                " scores for a round of ", batch.size()));
      }
      for (size_t k = 0; k < batch.size(); ++k) {
        std::optional<KernelScore>& score = (*scored)[k];
        if (!score.has_value() && !batch[k].start_only) {
          return absl::InternalError(absl::StrCat("ScoreKernels: no score for ",
                                                  ToString(batch[k].kernel)));
        }
        if (score.has_value()) {
          scores[batch[k].index] = std::make_shared<const KernelScore>(*std::move(score));
        }
      }
    }
  } else {
    for (size_t position = 0; position < order.size(); ++position) {
      const size_t i = order[position];
      ScoreOptions kernel_options = options;
      kernel_options.nested_parents = parents_of(position);
      kernel_options.fit.seed = fit_seed_of(i);
      GPSEL_RETURN_IF_ERROR(record(i, ScoreKernel(data, kernels[i], kernel_options, progress)));
    }
  }
  std::vector<KernelScore> out;
  for (size_t i = 0; i < num_given; ++i) out.push_back(*scores[i]);
  return out;
}

std::vector<NestedParent> LargestContainedParents(const KernelExpr& kernel,
                                                  const std::vector<NestedParent>& scored) {
  std::vector<const NestedParent*> contained;
  for (const NestedParent& parent : scored) {
    if (parent.score == nullptr || parent.kernel == kernel ||
        !KernelContains(kernel, parent.kernel)) {
      continue;
    }
    const bool given_before = std::any_of(contained.begin(), contained.end(),
                                          [&](const NestedParent* p) {
                                            return p->kernel == parent.kernel;
                                          });
    if (!given_before) contained.push_back(&parent);
  }
  std::vector<NestedParent> largest;
  for (const NestedParent* parent : contained) {
    const bool inside_another =
        std::any_of(contained.begin(), contained.end(), [&](const NestedParent* other) {
          return other->kernel != parent->kernel && KernelContains(other->kernel, parent->kernel);
        });
    if (!inside_another) largest.push_back(*parent);
  }
  return largest;
}

std::map<std::string, double> ModelRawValues(const KernelScore& score, const FitResult& fit) {
  std::map<std::string, double> raw;
  // Fixed parameters appear in `values` only (natural, user units).
  for (const auto& [name, value] : fit.values) {
    const double model_value = value / UserUnitsPerModelUnit(name, score.x_scale, score.x_scales) -
                               (name == kNoiseName ? kNoiseFloor : 0.0);
    raw[name] = InverseSoftplus(std::max(model_value, 1e-300));
  }
  for (size_t k = 0; k < score.parameter_names.size(); ++k) {
    if (static_cast<Eigen::Index>(k) < fit.raw.size()) raw[score.parameter_names[k]] = fit.raw(k);
  }
  return raw;
}

std::map<std::string, double> ModelRawValues(const KernelScore& score, const FitResult& fit,
                                             double x_factor,
                                             const std::vector<double>& x_factors) {
  if (x_factor == score.x_scale && x_factors == score.x_scales) return ModelRawValues(score, fit);
  std::map<std::string, double> raw;
  // `values` holds every parameter, free and fixed, in the user's units (ScoreKernel).
  for (const auto& [name, value] : fit.values) {
    const double model_value = value / UserUnitsPerModelUnit(name, x_factor, x_factors) -
                               (name == kNoiseName ? kNoiseFloor : 0.0);
    raw[name] = InverseSoftplus(std::max(model_value, 1e-300));
  }
  return raw;
}

std::string KernelScore::Summary() const {
  std::string out = absl::StrFormat("kernel %s: n = %d, u = %d, y %s\n", kernel, num_points,
                                    num_hyperparameters,
                                    standardized ? "standardised" : "as given (not standardised)");
  if (x_scale != 1.0) {
    absl::StrAppendFormat(&out, "  x divided by %.6g for modelling (%s); values in x's units\n",
                          x_scale, x_scale_reason);
  }
  if (!x_scales.empty()) {
    absl::StrAppendFormat(&out, "  x's columns divided for modelling (%s); values in each "
                          "column's units\n", x_scale_reason);
  }  for (Metric m : AllMetrics()) {
    const std::string name(MetricName(m));
    if (auto it = metrics.find(name); it != metrics.end()) {
      absl::StrAppendFormat(&out, "  %-13s %12.4f\n", name, it->second);
    } else if (auto u = undefined_metrics.find(name); u != undefined_metrics.end()) {
      absl::StrAppendFormat(&out, "  %-13s    undefined: %s\n", name, u->second);
    }
  }
  for (const auto& [r, value] : laplace_r) {
    absl::StrAppendFormat(&out, "  %-13s %12.4f\n", FormatLaplaceRName(r), value);
  }
  if (method != "exact") {
    absl::StrAppendFormat(&out, "  method %s, m = %d", method, num_inducing);
    for (const auto& [name, interval] : intervals) {
      absl::StrAppendFormat(&out, "; %s in [%.4f, %.4f]", name, interval.lower, interval.upper);
    }
    absl::StrAppend(&out, "\n");
  }
  if (!approx_note.empty()) absl::StrAppend(&out, "  ", approx_note, "\n");
  if (mll_fit) absl::StrAppend(&out, mll_fit->Summary());
  if (map_fit) absl::StrAppend(&out, map_fit->Summary());
  if (laplace) {
    absl::StrAppend(&out, "  MAP Hessian eigenvalues:");
    for (Eigen::Index i = 0; i < laplace->eigenvalues.size(); ++i) {
      absl::StrAppendFormat(&out, " %.4g", laplace->eigenvalues(i));
    }
    absl::StrAppend(&out, "\n");
    for (const auto& [metric, directions] : laplace->clamped) {
      for (const auto& d : directions) {
        absl::StrAppendFormat(&out, "  %s clamps λ = %.4g, loading on:", metric, d.eigenvalue);
        for (const auto& [name, loading] : d.loadings) {
          absl::StrAppendFormat(&out, " %s (%.2f)", name, loading);
        }
        absl::StrAppend(&out, "\n");
      }
    }
  }
  for (const HeldOutLikelihood& h : held_out) {
    absl::StrAppendFormat(
        &out, "  held-out at the %s fit (%d points, y's scale): test log lik %.4f per point, "
              "predictive log density %.4f (%.4f per point)\n",
        h.objective == FitObjective::kMaximumLikelihood ? "MLL" : "MAP", h.num_test_points,
        h.test_log_likelihood, h.predictive_log_density, h.PredictiveLogDensityPerPoint());
  }
  for (const std::string& warning : warnings) absl::StrAppend(&out, "  warning: ", warning, "\n");
  absl::StrAppendFormat(&out, "  time %.3f s\n", seconds);
  return out;
}

}  // namespace gpsel
