// SparseGp: the collapsed VFE lower bound and Titsias' upper bound of log p(y|θ), their
// gradients, and the greedy conditional-variance choice of inducing inputs (see sparse_gp.h).
#include "gpsel/core/sparse_gp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/internal/kernel_evaluator.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

namespace {

constexpr double kLog2Pi = 1.8378770664093454836;

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;
using NodeValues = std::vector<internal::KernelEvaluator::NodeValue>;

// The geometry of rows [row0, row0 + rows) of x each with itself, as a rows×1 "matrix": the
// kernel tree is elementwise in its geometry, so evaluating it here gives diag(K_ff) and its
// derivatives without any n×n work. Distances are zero; LIN's x·x is the row's squared norm. Which
// quantities a dimension needs is read off a 1×1 geometry the evaluator makes itself.
void MakeDiagonalGeometry(const internal::KernelEvaluator& evaluator, const MatrixXd& x,
                          Index row0, Index rows, internal::PairGeometry* out) {
  internal::PairGeometry probe;
  evaluator.MakeGeometryBlock(x, 0, 1, x, 0, 1, &probe);
  out->rows = rows;
  out->cols = 1;
  out->symmetric = false;
  for (const auto& [dim, use] : probe.by_dim) {
    internal::PairGeometry::ForDim& g = out->by_dim[dim];
    if (use.squared_distance.size() > 0) g.squared_distance.setZero(rows, 1);
    if (use.distance.size() > 0) g.distance.setZero(rows, 1);
    if (use.dot.size() > 0) {
      const Index first = dim < 0 ? 0 : dim;
      const Index count = dim < 0 ? x.cols() : 1;
      g.dot = x.block(row0, first, rows, count).rowwise().squaredNorm();
    }
  }
}

// Free parameter k → index into the model's parameters (kernel parameters, then the noise).
std::vector<int> FreeIndex(const GpModel& model) {
  std::vector<int> index;
  for (int i = 0; i < static_cast<int>(model.parameters().size()); ++i) {
    if (!model.parameters()[i].fixed) index.push_back(i);
  }
  return index;
}

absl::Status CheckRaw(const GpModel& model, const VectorXd& free_raw) {
  if (free_raw.size() != model.num_free()) {
    return absl::InvalidArgumentError(absl::StrCat("raw parameter vector has ", free_raw.size(),
                                                   " entries, expected ", model.num_free()));
  }
  if (!free_raw.allFinite()) return absl::InvalidArgumentError("raw parameters must be finite");
  return absl::OkStatus();
}

}  // namespace

absl::Status SparseGpOptions::Validate() const {
  if (!(jitter >= 0.0) || !std::isfinite(jitter)) {
    return absl::InvalidArgumentError("jitter: must be finite and >= 0");
  }
  if (block_columns < 1) return absl::InvalidArgumentError("block_columns: must be >= 1");
  return absl::OkStatus();
}

absl::Status InducingSelectionOptions::Validate() const {
  if (max_points < 1) return absl::InvalidArgumentError("max_points: must be >= 1");
  if (!(relative_tolerance >= 0.0) || !std::isfinite(relative_tolerance)) {
    return absl::InvalidArgumentError("relative_tolerance: must be finite and >= 0");
  }
  return absl::OkStatus();
}

SparseGp::SparseGp(SparseGp&&) noexcept = default;
SparseGp& SparseGp::operator=(SparseGp&&) noexcept = default;
SparseGp::~SparseGp() = default;

absl::StatusOr<SparseGp> SparseGp::Create(const GpModel& model, Eigen::MatrixXd inducing,
                                          const SparseGpOptions& options) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  if (inducing.rows() == 0) return absl::InvalidArgumentError("inducing: no points");
  if (inducing.cols() != model.x().cols()) {
    return absl::InvalidArgumentError(absl::StrCat("inducing: has ", inducing.cols(),
                                                   " columns but x has ", model.x().cols()));
  }
  if (!inducing.allFinite()) return absl::InvalidArgumentError("inducing: values must be finite");
  SparseGp sparse;
  sparse.model_ = &model;
  sparse.options_ = options;
  sparse.inducing_ = std::move(inducing);
  sparse.evaluator_ = std::make_unique<internal::KernelEvaluator>(model.kernel());
  sparse.inducing_geometry_ = std::make_unique<internal::PairGeometry>(
      sparse.evaluator_->MakeGeometry(sparse.inducing_, sparse.inducing_));
  return sparse;
}

absl::StatusOr<SparseBounds> SparseGp::Bounds(const Eigen::VectorXd& free_raw,
                                              bool with_gradient) const {
  GPSEL_RETURN_IF_ERROR(CheckRaw(*model_, free_raw));
  FlushDenormalsScope flush_denormals;
  const MatrixXd& x = model_->x();
  const VectorXd& y = model_->y();
  const Index n = x.rows();
  const Index m = inducing_.rows();
  const double n_d = static_cast<double>(n);
  const VectorXd full = model_->ExpandRaw(free_raw);
  const int noise_index = static_cast<int>(full.size()) - 1;
  const double s2 = kNoiseFloor + Softplus(full(noise_index));
  const double noise_slope = Sigmoid(full(noise_index));

  // K_uu + εI = L Lᵀ.
  NodeValues uu_values;
  evaluator_->Evaluate(*inducing_geometry_, full, with_gradient, &uu_values);
  MatrixXd k_uu = evaluator_->Root(uu_values).k;
  k_uu.diagonal().array() += options_.jitter;
  Eigen::LLT<MatrixXd> chol_uu(k_uu);
  if (chol_uu.info() != Eigen::Success) {
    return absl::FailedPreconditionError(
        "K_uu + jitter·I is not positive definite at these parameters");
  }

  // A = L⁻¹ K_uf (m×n, the one n-sized matrix held) and diag(K_ff), a block of columns at a time.
  MatrixXd a(m, n);
  VectorXd k_diag(n);
  {
    internal::PairGeometry geometry;
    NodeValues values;
    for (Index c0 = 0; c0 < n; c0 += options_.block_columns) {
      const Index cols = std::min<Index>(options_.block_columns, n - c0);
      evaluator_->MakeGeometryBlock(inducing_, 0, m, x, c0, cols, &geometry);
      evaluator_->Evaluate(geometry, full, false, &values);
      a.middleCols(c0, cols) = evaluator_->Root(values).k;
      MakeDiagonalGeometry(*evaluator_, x, c0, cols, &geometry);
      evaluator_->Evaluate(geometry, full, false, &values);
      k_diag.segment(c0, cols) = evaluator_->Root(values).k.col(0);
    }
  }
  chol_uu.matrixL().solveInPlace(a);
  MatrixXd aat = MatrixXd::Zero(m, m);  // A Aᵀ = L⁻¹ K_uf K_fu L⁻ᵀ
  aat.selfadjointView<Eigen::Lower>().rankUpdate(a);
  aat.triangularView<Eigen::StrictlyUpper>() = aat.transpose();
  const VectorXd ay = a * y;
  const double yy = y.squaredNorm();
  const MatrixXd identity = MatrixXd::Identity(m, m);

  SparseBounds bounds;
  // t = tr(K_ff) − tr(Q), tr(Q) = tr(AᵀA) = tr(AAᵀ).
  const double t = k_diag.sum() - aat.trace();
  bounds.residual_trace = t;

  // Lower: Σ = Q + σ²I = σ²(I + AᵀA/σ²); with B = I + AAᵀ/σ² (m×m),
  //   log|Σ| = n log σ² + log|B|,  yᵀΣ⁻¹y = (yᵀy − (Ay)ᵀB⁻¹(Ay)/σ²)/σ².
  Eigen::LLT<MatrixXd> chol_b(identity + aat / s2);
  if (chol_b.info() != Eigen::Success) {
    return absl::FailedPreconditionError("I + AAᵀ/σ² is not positive definite");
  }
  const double log_det_b = 2.0 * chol_b.matrixL().toDenseMatrix().diagonal().array().log().sum();
  const double log_det_sigma = n_d * std::log(s2) + log_det_b;
  const VectorXd b_inv_ay = chol_b.solve(ay);
  const double quad_lower = (yy - ay.dot(b_inv_ay) / s2) / s2;
  bounds.lower = -0.5 * n_d * kLog2Pi - 0.5 * log_det_sigma - 0.5 * quad_lower - 0.5 * t / s2;

  // Upper: the same log|Σ|, and the quadratic form with v = σ² + t in place of σ².
  const double v = s2 + t;
  if (!(v > 0.0)) return absl::FailedPreconditionError("σ² + tr(K_ff − Q) is not positive");
  Eigen::LLT<MatrixXd> chol_bv(identity + aat / v);
  if (chol_bv.info() != Eigen::Success) {
    return absl::FailedPreconditionError("I + AAᵀ/(σ² + t) is not positive definite");
  }
  const VectorXd bv_inv_ay = chol_bv.solve(ay);
  const double quad_upper = (yy - ay.dot(bv_inv_ay) / v) / v;
  bounds.upper = -0.5 * n_d * kLog2Pi - 0.5 * log_det_sigma - 0.5 * quad_upper;
  if (!std::isfinite(bounds.lower) || !std::isfinite(bounds.upper)) {
    return absl::FailedPreconditionError("sparse bounds are not finite at these parameters");
  }
  if (!with_gradient) return bounds;

  // ---- Gradients (sparse_gp.h). Both bounds share L, A and B⁻¹.
  const MatrixXd b_inverse = chol_b.solve(identity);
  const double trace_sigma_inverse = (n_d - static_cast<double>(m) + b_inverse.trace()) / s2;
  struct Bound {
    VectorXd beta;     // the β of G
    double c3 = 0.0;   // G's multiple of I
    double c_diag = 0.0;
    double noise = 0.0;  // ∂/∂σ² (besides nothing: σ² does not enter Q)
    MatrixXd r;        // 2 L⁻ᵀ (c₃I − B⁻¹/(2σ²))
    VectorXd r_beta;   // L⁻ᵀ A β
    MatrixXd w_uu;     // −L⁻ᵀ (M Aᵀ) L⁻¹
    VectorXd gradient;
  };
  Bound lower, upper;
  lower.beta = (y - a.transpose() * b_inv_ay / s2) / s2;  // Σ⁻¹y (Woodbury)
  lower.c3 = 0.5 / s2;
  lower.c_diag = -0.5 / s2;
  lower.noise = 0.5 * (lower.beta.squaredNorm() - trace_sigma_inverse) + 0.5 * t / (s2 * s2);
  upper.beta = (y - a.transpose() * bv_inv_ay / v) / v;  // (Q + vI)⁻¹y
  const double beta_squared = upper.beta.squaredNorm();
  upper.c3 = -0.5 * beta_squared;
  upper.c_diag = 0.5 * beta_squared;
  upper.noise = -0.5 * trace_sigma_inverse + 0.5 * beta_squared;
  const auto upper_factor = chol_uu.matrixU();  // Lᵀ: solving with it applies L⁻ᵀ
  for (Bound* bound : {&lower, &upper}) {
    const VectorXd a_beta = a * bound->beta;
    bound->r = upper_factor.solve(2.0 * (bound->c3 * identity - b_inverse / (2.0 * s2)));
    bound->r_beta = upper_factor.solve(a_beta);
    // M Aᵀ with M = −B⁻¹A/(2σ²) + ½(Aβ)βᵀ + c₃A and B⁻¹AAᵀ = σ²(I − B⁻¹) (symmetric):
    const MatrixXd m_at = -0.5 * (identity - b_inverse) + 0.5 * a_beta * a_beta.transpose() +
                          bound->c3 * aat;
    // L⁻ᵀ S L⁻¹ = (L⁻ᵀ (L⁻ᵀ S)ᵀ)ᵀ for S = M Aᵀ.
    const MatrixXd left = upper_factor.solve(m_at);
    bound->w_uu = -upper_factor.solve(MatrixXd(left.transpose())).transpose();
    bound->gradient = VectorXd::Zero(full.size());
  }

  const std::vector<int> free_index = FreeIndex(*model_);
  std::vector<int> kernel_params;
  for (int i : free_index) {
    if (i != noise_index) kernel_params.push_back(i);
  }
  const std::vector<MatrixXd>& d_uu = evaluator_->Root(uu_values).dk;
  for (Bound* bound : {&lower, &upper}) {
    for (int i : kernel_params) {
      bound->gradient(i) = (bound->w_uu.array() * d_uu[i].array()).sum();
    }
  }
  if (!kernel_params.empty()) {
    internal::PairGeometry geometry;
    NodeValues values;
    MatrixXd w_uf;
    for (Index c0 = 0; c0 < n; c0 += options_.block_columns) {
      const Index cols = std::min<Index>(options_.block_columns, n - c0);
      evaluator_->MakeGeometryBlock(inducing_, 0, m, x, c0, cols, &geometry);
      evaluator_->Evaluate(geometry, full, true, &values);
      const std::vector<MatrixXd>& d_uf = evaluator_->Root(values).dk;
      for (Bound* bound : {&lower, &upper}) {
        // W_uf's columns [c0, c0+cols): R A + (L⁻ᵀAβ) βᵀ.
        w_uf.noalias() = bound->r * a.middleCols(c0, cols);
        w_uf.noalias() += bound->r_beta * bound->beta.segment(c0, cols).transpose();
        for (int i : kernel_params) {
          bound->gradient(i) += (w_uf.array() * d_uf[i].array()).sum();
        }
      }
      MakeDiagonalGeometry(*evaluator_, x, c0, cols, &geometry);
      evaluator_->Evaluate(geometry, full, true, &values);
      const std::vector<MatrixXd>& d_diag = evaluator_->Root(values).dk;
      for (Bound* bound : {&lower, &upper}) {
        for (int i : kernel_params) bound->gradient(i) += bound->c_diag * d_diag[i].sum();
      }
    }
  }
  for (Bound* bound : {&lower, &upper}) bound->gradient(noise_index) = bound->noise * noise_slope;

  bounds.lower_gradient.resize(free_index.size());
  bounds.upper_gradient.resize(free_index.size());
  for (size_t k = 0; k < free_index.size(); ++k) {
    bounds.lower_gradient(k) = lower.gradient(free_index[k]);
    bounds.upper_gradient(k) = upper.gradient(free_index[k]);
  }
  if (!bounds.lower_gradient.allFinite() || !bounds.upper_gradient.allFinite()) {
    return absl::FailedPreconditionError("sparse bound gradients are not finite");
  }
  return bounds;
}

Eigen::VectorXd KernelDiagonal(const GpModel& model, const Eigen::VectorXd& free_raw,
                               Eigen::MatrixXd* gradient) {
  FlushDenormalsScope flush_denormals;
  const internal::KernelEvaluator evaluator(model.kernel());
  const VectorXd full = model.ExpandRaw(free_raw);
  const Index n = model.x().rows();
  const std::vector<int> free_index = FreeIndex(model);
  const int noise_index = static_cast<int>(full.size()) - 1;
  VectorXd diagonal(n);
  if (gradient) gradient->setZero(n, static_cast<Index>(free_index.size()));
  constexpr Index kBlock = 4096;
  internal::PairGeometry geometry;
  NodeValues values;
  for (Index r0 = 0; r0 < n; r0 += kBlock) {
    const Index rows = std::min(kBlock, n - r0);
    MakeDiagonalGeometry(evaluator, model.x(), r0, rows, &geometry);
    evaluator.Evaluate(geometry, full, gradient != nullptr, &values);
    diagonal.segment(r0, rows) = evaluator.Root(values).k.col(0);
    if (gradient) {
      for (size_t k = 0; k < free_index.size(); ++k) {
        if (free_index[k] == noise_index) continue;
        gradient->col(static_cast<Index>(k)).segment(r0, rows) =
            evaluator.Root(values).dk[free_index[k]].col(0);
      }
    }
  }
  return diagonal;
}

absl::StatusOr<InducingSelection> SelectInducingPoints(const GpModel& model,
                                                       const Eigen::VectorXd& free_raw,
                                                       const InducingSelectionOptions& options) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  GPSEL_RETURN_IF_ERROR(CheckRaw(model, free_raw));
  const MatrixXd& x = model.x();
  const Index n = x.rows();
  const VectorXd full = model.ExpandRaw(free_raw);
  VectorXd residual = KernelDiagonal(model, free_raw);  // conditional variances
  FlushDenormalsScope flush_denormals;
  const double largest_prior = residual.maxCoeff();
  const double stop_below = options.relative_tolerance * std::max(largest_prior, 0.0);
  const Index max_points = std::min<Index>(options.max_points, n);
  const internal::KernelEvaluator evaluator(model.kernel());
  // Columns of the partial pivoted Cholesky factor: K_ff ≈ F Fᵀ with F = K_fu L⁻ᵀ.
  MatrixXd factor(n, max_points);
  std::vector<bool> chosen(n, false);
  InducingSelection selection;
  internal::PairGeometry geometry;
  NodeValues values;
  for (Index j = 0; j < max_points; ++j) {
    // The largest conditional variance among the points not chosen; the first on a tie.
    Index pivot = -1;
    double best = -std::numeric_limits<double>::infinity();
    for (Index i = 0; i < n; ++i) {
      if (!chosen[i] && residual(i) > best) {
        best = residual(i);
        pivot = i;
      }
    }
    if (pivot < 0 || (j > 0 && !(best > stop_below))) break;
    if (!(best > 0.0)) {
      if (j == 0) return absl::FailedPreconditionError("the kernel has no variance at any point");
      break;
    }
    evaluator.MakeGeometryBlock(x, 0, n, x, pivot, 1, &geometry);
    evaluator.Evaluate(geometry, full, false, &values);
    VectorXd column = evaluator.Root(values).k.col(0);
    if (j > 0) column.noalias() -= factor.leftCols(j) * factor.row(pivot).head(j).transpose();
    column /= std::sqrt(best);
    factor.col(j) = column;
    residual.array() -= column.array().square();
    residual(pivot) = 0.0;
    chosen[pivot] = true;
    selection.indices.push_back(static_cast<int>(pivot));
  }
  const Index m = static_cast<Index>(selection.indices.size());
  selection.points.resize(m, x.cols());
  for (Index j = 0; j < m; ++j) selection.points.row(j) = x.row(selection.indices[j]);
  double trace = 0.0, largest = 0.0;
  for (Index i = 0; i < n; ++i) {
    if (chosen[i]) continue;
    trace += std::max(residual(i), 0.0);
    largest = std::max(largest, residual(i));
  }
  selection.residual_trace = trace;
  selection.max_residual = largest;
  return selection;
}

}  // namespace gpsel
