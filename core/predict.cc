// FitAndPredict and Predict; see predict.h. The predictive follows the standard GP equations
// (the paper's Sec. 2): mean k*ᵀ K⁻¹ y, variance k(x*, x*) − k*ᵀ K⁻¹ k*, with K = K_f + σ²I
// factorised once and k* formed one block of new inputs at a time.
#include "gpsel/core/predict.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/approx_score.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/sparse_predict.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

absl::Status PredictOptions::Validate() const {
  if (block_columns < 0) return absl::InvalidArgumentError("block_columns: must be >= 0");
  if (samples < 0) return absl::InvalidArgumentError("samples: must be >= 0");
  if (samples > kMaxSampleValues) {
    return absl::InvalidArgumentError(
        absl::StrCat("samples: ", samples, " is more than the limit of ", kMaxSampleValues));
  }
  if (model && !hyperparameters.empty()) {
    return absl::InvalidArgumentError(
        "hyperparameters: give either a model or hyperparameter values, not both");
  }
  for (const auto& [name, value] : hyperparameters) {
    if (!std::isfinite(value) || value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("hyperparameters[", name, "]: must be finite and > 0 (natural scale)"));
    }
  }
  return fit.Validate();
}

std::string PredictResult::Summary() const {
  std::string out = absl::StrCat("kernel ", kernel, " (y ",
                                 standardization.applied ? "standardised" : "as given", ", ",
                                 fit ? "fitted" : "given values", ")\n");
  for (const auto& [name, value] : hyperparameters) {
    absl::StrAppendFormat(&out, "  %-24s %.6g\n", name, value);
  }
  absl::StrAppendFormat(&out, "  %d prediction(s)\n", static_cast<int>(prediction.mean.size()));
  return out;
}

namespace {

// The sample limits of PredictOptions::samples; INVALID_ARGUMENT naming "samples".
absl::Status CheckSampleSize(int64_t samples, int64_t points) {
  if (samples <= 0) return absl::OkStatus();
  if (points > kMaxSamplePoints) {
    return absl::InvalidArgumentError(absl::StrCat(
        "samples: joint samples at ", points, " new inputs need their ", points, " × ", points,
        " covariance; at most ", kMaxSamplePoints, " inputs (sample a coarser grid)"));
  }
  if (samples * points > kMaxSampleValues) {
    return absl::InvalidArgumentError(absl::StrCat(
        "samples: ", samples, " samples × ", points, " inputs = ", samples * points,
        " values, more than the limit of ", kMaxSampleValues, " (fewer samples or inputs)"));
  }
  return absl::OkStatus();
}

// One top-level summand of a kernel as a model of its own, every parameter fixed at the value
// the whole kernel's parameter of the same leaf has (its noise too, though unused: only its
// kernel matrices are formed).
struct SummandModel {
  KernelExpr kernel;
  PreparedModel prepared;
};

// The summands of `kernel` (the kernel itself when it is not a sum). Parameter names are
// numbered over the whole kernel ("SE#2.lengthscale") but over the summand alone in its own
// model ("SE.lengthscale"); both lists follow the canonical leaf order and a summand's leaves
// are a contiguous run of the whole kernel's (DescribeHyperparameters, core/hyperparameters.h),
// so names are matched by position.
absl::StatusOr<std::vector<SummandModel>> SummandModels(
    const Dataset& data, const KernelExpr& kernel,
    const std::map<std::string, double>& natural_values, bool standardize) {
  std::vector<KernelExpr> parts;
  if (kernel.kind == KernelExpr::Kind::kSum) {
    parts = kernel.operands;
  } else {
    parts = {kernel};
  }
  absl::StatusOr<std::vector<HyperparameterInfo>> whole = DescribeHyperparameters(kernel, {});
  if (!whole.ok()) return whole.status();
  std::vector<SummandModel> out;
  size_t offset = 0;
  for (const KernelExpr& part : parts) {
    absl::StatusOr<std::vector<HyperparameterInfo>> own = DescribeHyperparameters(part, {});
    if (!own.ok()) return own.status();
    HyperparameterSettings settings;
    for (const HyperparameterInfo& info : *own) {
      const std::string& whole_name =
          info.name == kNoiseName ? std::string(kNoiseName) : (*whole)[offset++].name;
      auto it = natural_values.find(whole_name);
      if (it == natural_values.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("hyperparameters: no value for '", whole_name, "'"));
      }
      settings.fixed_values[info.name] = it->second;
    }
    absl::StatusOr<PreparedModel> prepared =
        PrepareModel(data, part, standardize, XScaling{}, settings);
    if (!prepared.ok()) return prepared.status();
    out.push_back(SummandModel{part, *std::move(prepared)});
  }
  return out;
}

// Predict, also handing back the standardisation of y it used (when `used` is not null), so that
// FitAndPredict reports it without computing it again.
absl::StatusOr<Prediction> PredictAtValues(const Dataset& data, const KernelExpr& kernel,
                                           const std::map<std::string, double>& natural_values,
                                           bool standardize, const Eigen::MatrixXd& x_new,
                                           const ProgressCallback& progress, int block_columns,
                                           bool components, int samples, uint64_t seed,
                                           Standardization* used) {
  if (x_new.cols() != data.x.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("x_new: has ", x_new.cols(),
                                                   " columns, the training inputs have ",
                                                   data.x.cols()));
  }
  if (!x_new.allFinite()) return absl::InvalidArgumentError("x_new: values must be finite");
  GPSEL_RETURN_IF_ERROR(CheckSampleSize(samples, x_new.rows()));
  // Every parameter fixed at its given value: the model then has no free parameters. The values
  // are in the user's units, so x is not rescaled.
  HyperparameterSettings settings;
  settings.fixed_values = natural_values;
  absl::StatusOr<PreparedModel> prepared =
      PrepareModel(data, kernel, standardize, XScaling{}, settings);
  if (!prepared.ok()) return prepared.status();
  const GpModel& model = prepared->model;
  if (model.num_free() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hyperparameters: values for all of the kernel's parameters and 'noise' are needed (",
        model.num_free(), " missing)"));
  }
  const Eigen::VectorXd none(0);
  const double noise = model.NoiseVariance(none);
  Eigen::MatrixXd k = model.CrossCovariance(none, data.x, data.x);
  k.diagonal().array() += noise;
  SpdFactorization cholesky;
  GPSEL_RETURN_IF_ERROR(cholesky.Compute(std::move(k)));
  const Eigen::VectorXd alpha = cholesky.Solve(model.y());
  const Standardization& standardization = prepared->standardization;
  const double scale = standardization.applied ? standardization.scale : 1.0;
  const double shift = standardization.applied ? standardization.mean : 0.0;

  const Eigen::Index n = data.num_points();
  const Eigen::Index m = x_new.rows();
  const Eigen::Index block = block_columns > 0 ? block_columns : PredictBlockColumns(n);
  Prediction p;
  p.mean.resize(m);
  p.variance.resize(m);
  std::vector<SummandModel> summands;
  if (components) {
    absl::StatusOr<std::vector<SummandModel>> built =
        SummandModels(data, kernel, natural_values, standardize);
    if (!built.ok()) return built.status();
    summands = *std::move(built);
    for (const SummandModel& summand : summands) {
      PredictionComponent c;
      c.kernel = ToString(summand.kernel);
      c.mean.resize(m);
      c.variance.resize(m);
      p.components.push_back(std::move(c));
    }
  }
  for (Eigen::Index start = 0; start < m; start += block) {
    GPSEL_RETURN_IF_ERROR(
        ReportProgress(progress, Progress{"predict", static_cast<double>(start) / m,
                                          absl::StrFormat("%d of %d points", start, m)}));
    const Eigen::Index cols = std::min(block, m - start);
    const auto rows = x_new.middleRows(start, cols);
    const Eigen::MatrixXd k_star = model.CrossCovariance(none, data.x, rows);  // n × cols
    p.mean.segment(start, cols) = (k_star.transpose() * alpha).array() * scale + shift;
    // k*ᵀ K⁻¹ k* = ‖L⁻¹ k*‖² column by column.
    const Eigen::MatrixXd v =
        cholesky.lower().triangularView<Eigen::Lower>().solve(k_star);
    for (Eigen::Index j = 0; j < cols; ++j) {
      const double prior_var = model.CrossCovariance(none, rows.row(j), rows.row(j))(0, 0);
      p.variance(start + j) = std::max(0.0, prior_var - v.col(j).squaredNorm()) * scale * scale;
    }
    for (size_t c = 0; c < summands.size(); ++c) {
      const GpModel& part = summands[c].prepared.model;
      const Eigen::MatrixXd k_part = part.CrossCovariance(none, data.x, rows);  // K_k(X, x*)
      PredictionComponent& out = p.components[c];
      out.mean.segment(start, cols) = (k_part.transpose() * alpha).array() * scale;
      const Eigen::MatrixXd v_part = cholesky.lower().triangularView<Eigen::Lower>().solve(k_part);
      for (Eigen::Index j = 0; j < cols; ++j) {
        const double prior_var = part.CrossCovariance(none, rows.row(j), rows.row(j))(0, 0);
        out.variance(start + j) =
            std::max(0.0, prior_var - v_part.col(j).squaredNorm()) * scale * scale;
      }
    }
  }
  p.noise_variance = Eigen::VectorXd::Constant(m, noise * scale * scale);
  if (samples > 0) {
    // The joint posterior covariance of f at all new inputs, Σ* = K** − Vᵀ V with V = L⁻¹ K(X, x*)
    // (the variances above are its diagonal), on the original scale.
    GPSEL_RETURN_IF_ERROR(ReportProgress(
        progress, Progress{"predict", 1.0, absl::StrFormat("%d joint samples", samples)}));
    const Eigen::MatrixXd k_star = model.CrossCovariance(none, data.x, x_new);
    const Eigen::MatrixXd v = cholesky.lower().triangularView<Eigen::Lower>().solve(k_star);
    Eigen::MatrixXd covariance = model.CrossCovariance(none, x_new, x_new);
    covariance.noalias() -= v.transpose() * v;
    covariance *= scale * scale;
    absl::StatusOr<Eigen::MatrixXd> drawn =
        SampleMultivariateNormal(p.mean, std::move(covariance), samples, seed, &p.sample_jitter);
    if (!drawn.ok()) return drawn.status();
    p.samples = *std::move(drawn);
  }
  if (used != nullptr) *used = standardization;
  return p;
}

}  // namespace

absl::StatusOr<Eigen::MatrixXd> SampleMultivariateNormal(const Eigen::VectorXd& mean,
                                                         Eigen::MatrixXd covariance, int samples,
                                                         uint64_t seed, double* jitter) {
  const Eigen::Index m = mean.size();
  if (covariance.rows() != m || covariance.cols() != m) {
    return absl::InvalidArgumentError("covariance: must be m × m for a mean of m values");
  }
  GPSEL_RETURN_IF_ERROR(CheckSampleSize(samples, m));
  SpdFactorization cholesky;
  if (absl::Status s = cholesky.Compute(std::move(covariance)); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "samples: the posterior covariance of the new inputs is not positive semi-definite even "
        "with jitter (",
        s.message(), ")"));
  }
  if (jitter != nullptr) *jitter = cholesky.jitter();
  // Standard normals in a fixed order, one sample after the other: the draws depend on the seed
  // only. The product L Z is one BLAS call in this thread (core/linalg.h), so the bits do not
  // depend on the thread count either.
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::MatrixXd z(m, samples);
  for (int k = 0; k < samples; ++k) {
    for (Eigen::Index j = 0; j < m; ++j) z(j, k) = normal(rng);
  }
  const Eigen::MatrixXd lower = cholesky.lower().triangularView<Eigen::Lower>();
  Eigen::MatrixXd draws = (lower * z).transpose();  // samples × m
  draws.rowwise() += mean.transpose();
  return draws;
}

int64_t PredictBlockColumns(int64_t n) {
  n = std::max<int64_t>(n, 1);
  return std::max<int64_t>(1, std::min(kPredictBlockDoubles / n, kPredictBlockFlops / (n * n)));
}

absl::StatusOr<Prediction> Predict(const Dataset& data, const KernelExpr& kernel,
                                   const std::map<std::string, double>& natural_values,
                                   bool standardize, const Eigen::MatrixXd& x_new,
                                   const ProgressCallback& progress, int block_columns,
                                   bool components, int samples, uint64_t seed) {
  return PredictAtValues(data, kernel, natural_values, standardize, x_new, progress, block_columns,
                         components, samples, seed, /*used=*/nullptr);
}

absl::StatusOr<PredictResult> FitAndPredict(const Dataset& data, const KernelExpr& kernel,
                                            const Eigen::MatrixXd& x_new,
                                            const PredictOptions& options,
                                            const ProgressCallback& progress) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  PredictResult out;
  out.kernel = ToString(kernel);
  out.hyperparameters = options.hyperparameters;
  const ApproxChoice choice = ChooseApproximation(data, kernel, options.fit);
  out.approx_note = choice.note;
  if (choice.sparse && options.components) {
    return absl::InvalidArgumentError(
        "components: the per-summand posterior is only computed by the exact GP (approx = "
        "exact)");
  }
  if (choice.sparse && options.samples > 0) {
    return absl::InvalidArgumentError(
        "samples: joint posterior samples are only drawn from the exact GP (approx = exact)");
  }
  int fit_inducing = 0;
  bool standardize = options.fit.standardize;
  if (options.model) {
    // A saved model: its values, on its training data only (the same numbers as giving those
    // values by hand with its standardisation).
    const SavedModel& model = *options.model;
    GPSEL_RETURN_IF_ERROR(CheckModelMatchesData(model, data));
    absl::StatusOr<KernelExpr> model_kernel = ParseKernel(model.kernel);
    if (!model_kernel.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.kernel: ", model_kernel.status().message()));
    }
    if (ToString(*model_kernel) != out.kernel) {
      return absl::InvalidArgumentError(absl::StrCat("model.kernel: is ", model.kernel,
                                                     ", the kernel to predict with is ",
                                                     out.kernel));
    }
    GPSEL_ASSIGN_OR_RETURN(out.hyperparameters, ModelValues(model, options.objective));
    standardize = model.standardized;
  } else if (options.hyperparameters.empty()) {
    ScoreOptions fit = options.fit;
    const bool mll = options.objective == FitObjective::kMaximumLikelihood;
    fit.metrics = {mll ? Metric::kMll : Metric::kMap};
    fit.laplace_r.clear();
    fit.compute_laplace_covariance = false;
    // The choice made above, not made again on the single fit's (smaller) estimate.
    fit.approx.mode = choice.sparse ? ApproxMode::kSparse : ApproxMode::kExact;
    absl::StatusOr<KernelScore> score = ScoreKernel(data, kernel, fit, progress);
    if (!score.ok()) return score.status();
    const std::optional<FitResult>& result = mll ? score->mll_fit : score->map_fit;
    if (!result) return absl::InternalError("the fit made no result");
    out.hyperparameters = result->values;
    out.fit = *result;
    fit_inducing = score->num_inducing;
  }
  if (choice.sparse) {
    // m: the fit's when it was fitted sparsely, else the one asked for (or the default cap).
    int inducing = options.fit.approx.inducing_points > 0 ? options.fit.approx.inducing_points
                                                          : kDefaultMaxInducingPoints;
    if (out.fit.has_value() && fit_inducing > 0) inducing = fit_inducing;
    absl::StatusOr<SparsePrediction> sparse =
        PredictSparse(data, kernel, out.hyperparameters, standardize, x_new,
                      inducing, progress);
    if (!sparse.ok()) return sparse.status();
    out.prediction = std::move(sparse->prediction);
    out.standardization = sparse->standardization;
    out.method = "sparse";
    out.num_inducing = sparse->num_inducing;
    return out;
  }
  absl::StatusOr<Prediction> prediction =
      PredictAtValues(data, kernel, out.hyperparameters, standardize, x_new, progress,
                      options.block_columns, options.components, options.samples, options.seed,
                      &out.standardization);
  if (!prediction.ok()) return prediction.status();
  out.prediction = *std::move(prediction);
  return out;
}

}  // namespace gpsel
