// The paper's metrics (MLL, MAP, AIC, BIC, Lap, Lap0, LapAIC, LapBIC, LapBIC½) for one kernel,
// Laplace diagnostics, and the posterior predictive of a fitted model.
#include "core/score.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include <Eigen/Eigenvalues>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/gp_model.h"
#include "core/linalg.h"

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

absl::Status ScoreOptions::Validate() const {
  if (absl::Status s = fit.Validate(); !s.ok()) return s;
  if (absl::Status s = hyperparameters.Validate(); !s.ok()) return s;
  for (double r : laplace_r) {
    if (!std::isfinite(r)) return absl::InvalidArgumentError("laplace_r: must be finite");
  }
  return absl::OkStatus();
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

// ScoreKernel, taking the fits `earlier` has (null: none).
absl::StatusOr<KernelScore> ScoreKernelImpl(const Dataset& data, const KernelExpr& kernel,
                                            const ScoreOptions& options,
                                            const KernelScore* earlier,
                                            const ProgressCallback& progress) {
  const auto started = std::chrono::steady_clock::now();
  if (absl::Status s = ValidateDataset(data); !s.ok()) return s;
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  absl::StatusOr<Standardization> standardization =
      ComputeStandardization(data.y, options.standardize);
  if (!standardization.ok()) return standardization.status();
  absl::StatusOr<GpModel> model = GpModel::Create(
      kernel, data.x, ApplyStandardization(*standardization, data.y), options.hyperparameters);
  if (!model.ok()) return model.status();

  const std::vector<Metric>& metrics = options.metrics.empty() ? PaperMetrics() : options.metrics;
  bool need_mll = false, need_map = !options.laplace_r.empty();
  for (Metric m : metrics) (NeedsMllFit(m) ? need_mll : need_map) = true;

  KernelScore score;
  score.kernel = ToString(kernel);
  score.num_points = data.num_points();
  score.num_hyperparameters = model->num_free();
  score.standardized = standardization->applied;
  score.standardization = *standardization;
  score.parameter_names = model->free_names();
  const double n = data.num_points();
  const double u = model->num_free();
  if (earlier != nullptr) {
    if (earlier->kernel != score.kernel || earlier->num_points != score.num_points ||
        earlier->parameter_names != score.parameter_names) {
      return absl::InvalidArgumentError(absl::StrCat(
          "earlier score is for '", earlier->kernel, "' on ", earlier->num_points,
          " points, not for '", score.kernel, "' on ", score.num_points));
    }
    if (need_mll && earlier->mll_fit.has_value()) score.mll_fit = earlier->mll_fit;
    if (need_map && earlier->map_fit.has_value()) score.map_fit = earlier->map_fit;
  }

  if (need_mll && need_map && !score.mll_fit && !score.map_fit &&
      (options.fit.threads > 1 || options.fit.pool != nullptr)) {
    // Both fits at once: their ten starts (the MLL ones, usually longer, first) balance over
    // the threads far better than two rounds of five, and the two Newton polishes overlap.
    // Same numbers as in turn.
    absl::StatusOr<std::vector<FitResult>> fits = FitHyperparametersJointly(
        *model, {FitObjective::kMaximumLikelihood, FitObjective::kMaximumAPosteriori},
        options.fit, progress);
    if (!fits.ok()) return fits.status();
    score.mll_fit = std::move((*fits)[0]);
    score.map_fit = std::move((*fits)[1]);
  } else if (need_mll && !score.mll_fit) {
    absl::StatusOr<FitResult> fit =
        FitHyperparameters(*model, FitObjective::kMaximumLikelihood, options.fit, progress);
    if (!fit.ok()) return fit.status();
    score.mll_fit = *std::move(fit);
  }
  if (need_map) {
    if (!score.map_fit.has_value()) {
      absl::StatusOr<FitResult> fit =
          FitHyperparameters(*model, FitObjective::kMaximumAPosteriori, options.fit, progress);
      if (!fit.ok()) return fit.status();
      score.map_fit = *std::move(fit);
    }

    if (absl::Status s = ReportProgress(progress, {"hessian", 0.95, "Laplace Hessian"}); !s.ok()) {
      return s;
    }
    // H = −∇²(log lik + log prior) at the MAP optimum: the fit's final Newton check computed
    // exactly this matrix at exactly this point, so it is reused when there.
    Eigen::MatrixXd h;
    double hessian_jitter = 0.0;
    if (u > 0 && score.map_fit->objective_hessian.rows() == u) {
      h = -score.map_fit->objective_hessian;
      hessian_jitter = score.map_fit->objective_hessian_jitter;
    } else {
      absl::StatusOr<LikelihoodHessian> objective = ObjectiveWithHessian(
          *model, FitObjective::kMaximumAPosteriori, score.map_fit->raw);
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
  score.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return score;
}

}  // namespace

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

std::string KernelScore::Summary() const {
  std::string out = absl::StrFormat("kernel %s: n = %d, u = %d, y %s\n", kernel, num_points,
                                    num_hyperparameters,
                                    standardized ? "standardised" : "as given (not standardised)");
  for (Metric m : AllMetrics()) {
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
  absl::StrAppendFormat(&out, "  time %.3f s\n", seconds);
  return out;
}

absl::StatusOr<Prediction> Predict(const Dataset& data, const KernelExpr& kernel,
                                   const std::map<std::string, double>& natural_values,
                                   const Standardization& standardization,
                                   const Eigen::MatrixXd& x_new) {
  if (absl::Status s = ValidateDataset(data); !s.ok()) return s;
  if (x_new.cols() != data.x.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("x_new: has ", x_new.cols(),
                                                   " columns, the training inputs have ",
                                                   data.x.cols()));
  }
  if (!x_new.allFinite()) return absl::InvalidArgumentError("x_new: values must be finite");
  // Every parameter fixed at its given value: the model then has no free parameters.
  HyperparameterSettings settings;
  settings.fixed_values = natural_values;
  absl::StatusOr<GpModel> model =
      GpModel::Create(kernel, data.x, ApplyStandardization(standardization, data.y), settings);
  if (!model.ok()) return model.status();
  if (model->num_free() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hyperparameters: values for all of the kernel's parameters and 'noise' are needed (",
        model->num_free(), " missing)"));
  }
  const Eigen::VectorXd none(0);
  const double noise = model->NoiseVariance(none);
  Eigen::MatrixXd k = model->CrossCovariance(none, data.x, data.x);
  k.diagonal().array() += noise;
  SpdFactorization cholesky;
  if (absl::Status s = cholesky.Compute(std::move(k)); !s.ok()) return s;
  const Eigen::MatrixXd k_star = model->CrossCovariance(none, data.x, x_new);  // n × m
  const Eigen::VectorXd alpha = cholesky.Solve(model->y());
  const Eigen::MatrixXd solved = cholesky.Solve(k_star);
  Prediction p;
  const double scale = standardization.applied ? standardization.scale : 1.0;
  const double shift = standardization.applied ? standardization.mean : 0.0;
  p.mean = (k_star.transpose() * alpha).array() * scale + shift;
  p.variance.resize(x_new.rows());
  for (Eigen::Index j = 0; j < x_new.rows(); ++j) {
    const double prior_var = model->CrossCovariance(none, x_new.row(j), x_new.row(j))(0, 0);
    p.variance(j) = std::max(0.0, prior_var - k_star.col(j).dot(solved.col(j))) * scale * scale;
  }
  p.noise_variance = Eigen::VectorXd::Constant(x_new.rows(), noise * scale * scale);
  return p;
}

}  // namespace gpsel
