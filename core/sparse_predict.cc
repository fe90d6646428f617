// The sparse posterior predictive (see sparse_predict.h).
#include "gpsel/core/sparse_predict.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/sparse_gp.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

namespace {
// Rows of the data (and of x_new) per block: a block's m×block cross-covariance stays small
// (8 MB at m = 256).
constexpr Eigen::Index kSparsePredictBlockRows = 4096;
}  // namespace

absl::StatusOr<SparsePrediction> PredictSparse(const Dataset& data, const KernelExpr& kernel,
                                               const std::map<std::string, double>& natural_values,
                                               bool standardize, const Eigen::MatrixXd& x_new,
                                               int inducing_points,
                                               const ProgressCallback& progress) {
  if (inducing_points < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("inducing_points: must be at least 1 for a sparse prediction, got ",
                     inducing_points));
  }
  if (x_new.cols() != data.x.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("x_new: has ", x_new.cols(),
                                                   " columns, the training inputs have ",
                                                   data.x.cols()));
  }
  if (!x_new.allFinite()) return absl::InvalidArgumentError("x_new: values must be finite");
  absl::StatusOr<PreparedModel> prepared =
      PrepareFixedModel(data, kernel, natural_values, standardize);
  if (!prepared.ok()) return prepared.status();
  const GpModel& model = prepared->model;
  const Eigen::VectorXd none(0);
  const double noise = model.NoiseVariance(none);
  InducingSelectionOptions selection_options;
  selection_options.max_points = inducing_points;
  absl::StatusOr<InducingSelection> selection =
      SelectInducingPoints(model, none, selection_options);
  if (!selection.ok()) return selection.status();
  const Eigen::MatrixXd& z = selection->points;
  const Eigen::Index m = z.rows();

  // L: K_uu + εI with the sparse bounds' jitter, so that this is the q(u) of the bound.
  Eigen::MatrixXd k_uu = model.CrossCovariance(none, z, z);
  k_uu.diagonal().array() += SparseGpOptions{}.jitter;
  const Eigen::LLT<Eigen::MatrixXd> l_uu(k_uu);
  if (l_uu.info() != Eigen::Success) {
    return absl::FailedPreconditionError(
        "sparse predict: K_uu + εI is not positive definite at these values");
  }
  const auto lower = l_uu.matrixL();

  // AAᵀ and Ay over blocks of data rows.
  const Eigen::Index n = data.num_points();
  Eigen::MatrixXd aat = Eigen::MatrixXd::Zero(m, m);
  Eigen::VectorXd ay = Eigen::VectorXd::Zero(m);
  const Eigen::Index total_blocks =
      (n + kSparsePredictBlockRows - 1) / kSparsePredictBlockRows +
      (x_new.rows() + kSparsePredictBlockRows - 1) / kSparsePredictBlockRows;
  Eigen::Index blocks_done = 0;
  for (Eigen::Index start = 0; start < n; start += kSparsePredictBlockRows) {
    GPSEL_RETURN_IF_ERROR(ReportProgress(
        progress, Progress{"predict", static_cast<double>(blocks_done++) / total_blocks,
                           absl::StrFormat("sparse posterior: %d of %d points", start, n)}));
    const Eigen::Index rows = std::min(kSparsePredictBlockRows, n - start);
    Eigen::MatrixXd a = model.CrossCovariance(none, z, model.x().middleRows(start, rows));
    lower.solveInPlace(a);
    aat.selfadjointView<Eigen::Lower>().rankUpdate(a);
    ay.noalias() += a * model.y().segment(start, rows);
  }
  Eigen::MatrixXd b = aat.selfadjointView<Eigen::Lower>();
  b /= noise;
  b.diagonal().array() += 1.0;
  const Eigen::LLT<Eigen::MatrixXd> l_b(b);
  if (l_b.info() != Eigen::Success) {
    return absl::FailedPreconditionError("sparse predict: I + AAᵀ/σ² could not be factorised");
  }
  // w = L_B⁻ᵀ c = B⁻¹ A y / σ²: mean(x*) = a*ᵀ w.
  const Eigen::VectorXd w = l_b.solve(ay) / noise;

  const Standardization& standardization = prepared->standardization;
  const double scale = standardization.applied ? standardization.scale : 1.0;
  const double shift = standardization.applied ? standardization.mean : 0.0;
  SparsePrediction out;
  Prediction& p = out.prediction;
  const Eigen::Index k = x_new.rows();
  p.mean.resize(k);
  p.variance.resize(k);
  for (Eigen::Index start = 0; start < k; start += kSparsePredictBlockRows) {
    GPSEL_RETURN_IF_ERROR(ReportProgress(
        progress, Progress{"predict", static_cast<double>(blocks_done++) / total_blocks,
                           absl::StrFormat("%d of %d new points", start, k)}));
    const Eigen::Index rows = std::min(kSparsePredictBlockRows, k - start);
    const auto x_block = x_new.middleRows(start, rows);
    Eigen::MatrixXd a_star = model.CrossCovariance(none, z, x_block);  // m × rows
    lower.solveInPlace(a_star);
    p.mean.segment(start, rows) = (a_star.transpose() * w).array() * scale + shift;
    const Eigen::MatrixXd b_star = l_b.matrixL().solve(a_star);
    for (Eigen::Index j = 0; j < rows; ++j) {
      const double prior = model.CrossCovariance(none, x_block.row(j), x_block.row(j))(0, 0);
      const double var =
          prior - a_star.col(j).squaredNorm() + b_star.col(j).squaredNorm();
      p.variance(start + j) = std::max(0.0, var) * scale * scale;
    }
  }
  p.noise_variance = Eigen::VectorXd::Constant(k, noise * scale * scale);
  out.standardization = standardization;
  out.num_inducing = static_cast<int>(m);
  return out;
}

}  // namespace gpsel
