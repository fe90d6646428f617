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
#include "gpsel/core/sparse_cost.h"
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

std::string SampleSizeProblem(int64_t samples, int64_t points) {
  if (samples <= 0) return "";
  if (points > kMaxSamplePoints) {
    return absl::StrCat("joint samples at ", points, " new inputs need their ", points, " × ",
                        points, " covariance; at most ", kMaxSamplePoints,
                        " inputs (sample a coarser grid)");
  }
  if (samples * points > kMaxSampleValues) {
    return absl::StrCat(samples, " samples × ", points, " inputs = ", samples * points,
                        " values, more than the limit of ", kMaxSampleValues,
                        " (fewer samples or inputs)");
  }
  return "";
}

namespace {

// The sample limits of PredictOptions::samples; INVALID_ARGUMENT naming "samples".
absl::Status CheckSampleSize(int64_t samples, int64_t points) {
  const std::string problem = SampleSizeProblem(samples, points);
  if (problem.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("samples: ", problem));
}

// One component of the prediction: a top-level summand of a kernel, or one regime of a
// summand that is a change, as a model of its own with every parameter fixed at the value the
// whole kernel's parameter of the same leaf has (its noise too, though unused: only its kernel
// matrices are formed). A regime's model is its operand's (k1 or k2); its weight multiplies
// that kernel on both sides: K(x, x') = w(x) k_op(x, x') w(x').
struct SummandModel {
  KernelExpr kernel;
  PreparedModel prepared;
  std::string regime{};  // PredictionComponent::regime; empty for a summand
  // For a regime: the change in the user's x units and which side of it.
  KernelExpr::Kind change_kind = KernelExpr::Kind::kChangePoint;
  int column = 0;
  double location = 0.0, transition = 1.0, width = 0.0;
  bool second = false;  // σ (CP after, CW inside) rather than 1 − σ
};

// The weight w(x) of a regime at the rows of `x`: σ(x) or 1 − σ(x), with σ as the kernel
// evaluator forms it (core/internal/kernel_evaluator.h) but in x units: CP σ((x − ℓ)/τ), CW
// σ((x − ℓ + w/2)/τ) σ((ℓ + w/2 − x)/τ), σ(u) = ½(1 + tanh u).
Eigen::ArrayXd RegimeWeight(const SummandModel& regime, const Eigen::MatrixXd& x) {
  const Eigen::ArrayXd column = x.col(regime.column).array();
  auto sigmoid = [](const Eigen::ArrayXd& u) -> Eigen::ArrayXd { return 0.5 * (1.0 + u.tanh()); };
  Eigen::ArrayXd v;
  if (regime.change_kind == KernelExpr::Kind::kChangePoint) {
    v = sigmoid((column - regime.location) / regime.transition);
  } else {
    v = sigmoid((column - regime.location + 0.5 * regime.width) / regime.transition) *
        sigmoid((regime.location + 0.5 * regime.width - column) / regime.transition);
  }
  return regime.second ? v : 1.0 - v;
}

// A model of `part` alone, its parameters given in its own order (DescribeHyperparameters,
// noise excluded) as `values`.
absl::StatusOr<PreparedModel> FixedModel(const Dataset& data, const KernelExpr& part,
                                         const std::vector<double>& values, double noise,
                                         bool standardize) {
  absl::StatusOr<std::vector<HyperparameterInfo>> own = DescribeHyperparameters(part, {});
  if (!own.ok()) return own.status();
  HyperparameterSettings settings;
  size_t k = 0;
  for (const HyperparameterInfo& info : *own) {
    settings.fixed_values[info.name] = info.name == kNoiseName ? noise : values.at(k++);
  }
  return PrepareModel(data, part, standardize, XScaling{}, settings);
}

// The components of `kernel`: its summands (the kernel itself when it is not a sum), a change
// summand split into its two regimes. Parameter names are numbered over the whole kernel
// ("SE#2.lengthscale") but over a part alone in its own model ("SE.lengthscale"); both lists
// follow the numerics' post-order (base leaves, a change node after its operands) and a
// summand's, or an operand's, parameters are a contiguous run of the whole kernel's
// (DescribeHyperparameters, core/hyperparameters.h), so names are matched by position.
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
  auto value_of = [&](const std::string& name) -> absl::StatusOr<double> {
    auto it = natural_values.find(name);
    if (it == natural_values.end()) {
      return absl::InvalidArgumentError(absl::StrCat("hyperparameters: no value for '", name, "'"));
    }
    return it->second;
  };
  absl::StatusOr<double> noise = value_of(std::string(kNoiseName));
  if (!noise.ok()) return noise.status();
  auto count = [](const KernelExpr& part) -> absl::StatusOr<size_t> {
    absl::StatusOr<std::vector<HyperparameterInfo>> own = DescribeHyperparameters(part, {});
    if (!own.ok()) return own.status();
    return own->size() - 1;  // without the noise
  };
  std::vector<SummandModel> out;
  size_t offset = 0;
  for (const KernelExpr& part : parts) {
    absl::StatusOr<size_t> n_part = count(part);
    if (!n_part.ok()) return n_part.status();
    std::vector<double> values;
    for (size_t k = 0; k < *n_part; ++k) {
      absl::StatusOr<double> v = value_of((*whole)[offset + k].name);
      if (!v.ok()) return v.status();
      values.push_back(*v);
    }
    if (!part.is_change()) {
      absl::StatusOr<PreparedModel> prepared =
          FixedModel(data, part, values, *noise, standardize);
      if (!prepared.ok()) return prepared.status();
      out.push_back(SummandModel{part, *std::move(prepared)});
      offset += *n_part;
      continue;
    }
    // A change: its operands' parameters, then its own (location, transition[, width]) last.
    absl::StatusOr<size_t> n_first = count(part.operands[0]);
    if (!n_first.ok()) return n_first.status();
    absl::StatusOr<size_t> n_second = count(part.operands[1]);
    if (!n_second.ok()) return n_second.status();
    const size_t own_start = *n_first + *n_second;
    const std::string& own_name = (*whole)[offset + own_start].name;  // "CP#2.location"
    const std::string label = own_name.substr(0, own_name.rfind('.'));
    const int column = std::max(part.active_dim, 0);
    if (column >= data.num_dims()) {
      return absl::InvalidArgumentError(absl::StrCat("kernel: ", label, " reads input column ",
                                                     column, " but the data have ",
                                                     data.num_dims()));
    }
    // The training inputs' frame of the kernel evaluator (SetInputFrame).
    const double lo = data.x.col(column).minCoeff(), hi = data.x.col(column).maxCoeff();
    const double range = hi > lo ? hi - lo : 1.0;
    const bool point = part.kind == KernelExpr::Kind::kChangePoint;
    for (int side = 0; side < 2; ++side) {
      const size_t start = side == 0 ? 0 : *n_first;
      const size_t size = side == 0 ? *n_first : *n_second;
      std::vector<double> operand_values(values.begin() + start, values.begin() + start + size);
      absl::StatusOr<PreparedModel> prepared =
          FixedModel(data, part.operands[side], operand_values, *noise, standardize);
      if (!prepared.ok()) return prepared.status();
      SummandModel regime{part.operands[side], *std::move(prepared)};
      regime.regime = absl::StrCat(label, " ",
                                   point ? (side == 0 ? "before" : "after")
                                         : (side == 0 ? "outside" : "inside"));
      regime.change_kind = part.kind;
      regime.column = column;
      regime.location = lo + (values[own_start] - 1.0) * range;
      regime.transition = values[own_start + 1] * range;
      if (!point) regime.width = values[own_start + 2] * range;
      regime.second = side == 1;
      out.push_back(std::move(regime));
    }
    offset += *n_part;
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
  GPSEL_ASSIGN_OR_RETURN(const KernelExpr expanded,
                         ExpandPerColumn(kernel, static_cast<int>(data.x.cols())));
  if (ContainsPerColumn(kernel)) {
    return PredictAtValues(data, expanded, natural_values, standardize, x_new, progress,
                           block_columns, components, samples, seed, used);
  }
  if (x_new.cols() != data.x.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("x_new: has ", x_new.cols(),
                                                   " columns, the training inputs have ",
                                                   data.x.cols()));
  }
  if (!x_new.allFinite()) return absl::InvalidArgumentError("x_new: values must be finite");
  GPSEL_RETURN_IF_ERROR(CheckSampleSize(samples, x_new.rows()));
  absl::StatusOr<PreparedModel> prepared =
      PrepareFixedModel(data, kernel, natural_values, standardize);
  if (!prepared.ok()) return prepared.status();
  const GpModel& model = prepared->model;
  const Eigen::VectorXd none(0);
  const double noise = model.NoiseVariance(none);
  // K(X, X) in blocks of columns from kPolledMinPoints points on, polling between them: made
  // whole, its kernel tree's n × n temporaries took seconds at n = 8,759 without a poll.
  const Eigen::Index n_train = data.num_points();
  Eigen::MatrixXd k;
  if (n_train < kPolledMinPoints) {
    k = model.CrossCovariance(none, data.x, data.x);
  } else {
    k.resize(n_train, n_train);
    for (Eigen::Index col = 0; col < n_train; col += kPolledBlockPoints) {
      GPSEL_RETURN_IF_ERROR(ReportProgress(progress, CancellationPoll()));
      const Eigen::Index cols = std::min<Eigen::Index>(kPolledBlockPoints, n_train - col);
      k.middleCols(col, cols) = model.CrossCovariance(none, data.x, data.x.middleRows(col, cols));
    }
  }
  k.diagonal().array() += noise;
  // Polled between blocks of columns (core/linalg.h): at n = 8,759 the factorisation alone took
  // 15–40 s of a cancelled Predict's worker (issue 33, bench/RESULTS.md).
  SpdFactorization cholesky;
  GPSEL_RETURN_IF_ERROR(cholesky.Compute(std::move(k), progress));
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
      c.regime = summand.regime;
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
      const SummandModel& summand = summands[c];
      const GpModel& part = summand.prepared.model;
      Eigen::MatrixXd k_part = part.CrossCovariance(none, data.x, rows);  // K_k(X, x*)
      Eigen::ArrayXd weight_new = Eigen::ArrayXd::Ones(cols);
      if (!summand.regime.empty()) {
        weight_new = RegimeWeight(summand, rows);
        k_part = RegimeWeight(summand, data.x).matrix().asDiagonal() * k_part *
                 weight_new.matrix().asDiagonal();
      }
      PredictionComponent& out = p.components[c];
      out.mean.segment(start, cols) = (k_part.transpose() * alpha).array() * scale;
      const Eigen::MatrixXd v_part = cholesky.lower().triangularView<Eigen::Lower>().solve(k_part);
      for (Eigen::Index j = 0; j < cols; ++j) {
        const double prior_var = weight_new(j) * weight_new(j) *
                                 part.CrossCovariance(none, rows.row(j), rows.row(j))(0, 0);
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
    // V for all m ≤ kMaxSamplePoints inputs at once is m n² flops: solved in polled blocks.
    GPSEL_ASSIGN_OR_RETURN(const Eigen::MatrixXd v,
                           cholesky.SolveLower(model.CrossCovariance(none, data.x, x_new),
                                               progress));
    Eigen::MatrixXd covariance = model.CrossCovariance(none, x_new, x_new);
    covariance.noalias() -= v.transpose() * v;
    covariance *= scale * scale;
    absl::StatusOr<Eigen::MatrixXd> drawn = SampleMultivariateNormal(
        p.mean, std::move(covariance), samples, seed, &p.sample_jitter, progress);
    if (!drawn.ok()) return drawn.status();
    p.samples = *std::move(drawn);
  }
  if (used != nullptr) *used = standardization;
  return p;
}

}  // namespace

absl::StatusOr<Eigen::MatrixXd> SampleMultivariateNormal(const Eigen::VectorXd& mean,
                                                         Eigen::MatrixXd covariance, int samples,
                                                         uint64_t seed, double* jitter,
                                                         const ProgressCallback& poll) {
  const Eigen::Index m = mean.size();
  if (covariance.rows() != m || covariance.cols() != m) {
    return absl::InvalidArgumentError("covariance: must be m × m for a mean of m values");
  }
  GPSEL_RETURN_IF_ERROR(CheckSampleSize(samples, m));
  SpdFactorization cholesky;
  if (absl::Status s = cholesky.Compute(std::move(covariance), poll); !s.ok()) {
    if (!absl::IsFailedPrecondition(s)) return s;  // the poll's stop, not the covariance's fault
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

absl::StatusOr<PredictResult> FitAndPredict(const Dataset& data, const KernelExpr& given_kernel,
                                            const Eigen::MatrixXd& x_new,
                                            const PredictOptions& options,
                                            const ProgressCallback& progress) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  // BASE[*] as its per-column copies (core/kernel_expr.h): the kernel a saved model holds.
  GPSEL_ASSIGN_OR_RETURN(const KernelExpr kernel,
                         ExpandPerColumn(given_kernel, static_cast<int>(data.x.cols())));
  PredictResult out;
  out.kernel = ToString(kernel);
  out.hyperparameters = options.hyperparameters;
  const ApproxChoice choice = ChoosePredictApproximation(data, kernel, x_new.rows(), options);
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
    // m: the fit's when it was fitted sparsely, else the one asked for (or the default cap)
    // within the memory budget, as EstimatePredictMemory costs it (the selection's n×m factor).
    int inducing = static_cast<int>(std::max<int64_t>(
        1, SparseInducingCap(data.num_points(), options.fit.approx.MaxInducing(data.num_points()),
                             kernel, std::max(1, options.fit.fit.threads), data.num_dims(),
                             options.fit.approx.memory_budget_bytes)));
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
