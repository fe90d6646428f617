// FitAndPredict and Predict; see predict.h. The predictive follows the standard GP equations
// (the paper's Sec. 2): mean k*ᵀ K⁻¹ y, variance k(x*, x*) − k*ᵀ K⁻¹ k*, with K = K_f + σ²I
// factorised once and k* formed one block of new inputs at a time.
#include "gpsel/core/predict.h"

#include <algorithm>
#include <cmath>
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
                                           bool components, Standardization* used) {
  if (x_new.cols() != data.x.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("x_new: has ", x_new.cols(),
                                                   " columns, the training inputs have ",
                                                   data.x.cols()));
  }
  if (!x_new.allFinite()) return absl::InvalidArgumentError("x_new: values must be finite");
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
  if (used != nullptr) *used = standardization;
  return p;
}

}  // namespace

int64_t PredictBlockColumns(int64_t n) {
  n = std::max<int64_t>(n, 1);
  return std::max<int64_t>(1, std::min(kPredictBlockDoubles / n, kPredictBlockFlops / (n * n)));
}

absl::StatusOr<Prediction> Predict(const Dataset& data, const KernelExpr& kernel,
                                   const std::map<std::string, double>& natural_values,
                                   bool standardize, const Eigen::MatrixXd& x_new,
                                   const ProgressCallback& progress, int block_columns,
                                   bool components) {
  return PredictAtValues(data, kernel, natural_values, standardize, x_new, progress, block_columns,
                         components, /*used=*/nullptr);
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
  int fit_inducing = 0;
  if (options.hyperparameters.empty()) {
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
        PredictSparse(data, kernel, out.hyperparameters, options.fit.standardize, x_new,
                      inducing, progress);
    if (!sparse.ok()) return sparse.status();
    out.prediction = std::move(sparse->prediction);
    out.standardization = sparse->standardization;
    out.method = "sparse";
    out.num_inducing = sparse->num_inducing;
    return out;
  }
  absl::StatusOr<Prediction> prediction =
      PredictAtValues(data, kernel, out.hyperparameters, options.fit.standardize, x_new, progress,
                      options.block_columns, options.components, &out.standardization);
  if (!prediction.ok()) return prediction.status();
  out.prediction = *std::move(prediction);
  return out;
}

}  // namespace gpsel
