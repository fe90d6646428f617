// GpModel: exact log marginal likelihood, gradient and Hessian in raw hyperparameter space.
#include "gpsel/core/gp_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpsel/core/instrumentation.h"
#include "gpsel/core/internal/kernel_evaluator.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

namespace {
constexpr double kLog2Pi = 1.8378770664093454836;

// Two ways to evaluate K and ∂K/∂r on the training inputs, chosen by n:
// - up to kWholeMatrixMaxPoints points, on whole n×n matrices from pairwise geometry computed
//   once per model: every matrix fits in the L2/L3 cache, and each entry's exp is taken once;
// - above it, in square tiles of the lower triangle, the geometry made per tile from x: a
//   tile's kernel tree (leaf values and derivatives, the sums and products above them) stays
//   in the L2 cache and only the root's K tile is written out. For the gradient the ∂K tiles
//   are made again and contracted with W at once, never stored. Whole n×n intermediates would
//   stream through memory instead (SE+LIN, n = 1000: 8 ms of 47 per evaluation with gradient),
//   and the model would keep 8n² bytes of geometry per input quantity.
// Both are exact; the tiles cost a second exp per entry, which only pays once the matrices
// leave the cache (bench/RESULTS.md, issue 2: n = 50 and 200 are faster whole, n = 1000 tiled).
constexpr int kWholeMatrixMaxPoints = 256;
constexpr int kTile = 64;

// Evaluates the kernel tree (with first derivatives if asked) on the square tiles covering the
// lower triangle of the n×n training matrix, and calls visit(row0, rows, col0, cols, root) with
// each tile's root value; diagonal tiles (row0 == col0) come whole. `poll` is asked after each
// column of tiles whether to stop; its error is returned.
template <typename Visit>
absl::Status ForEachLowerTile(const internal::KernelEvaluator& evaluator,
                              const Eigen::MatrixXd& x, const Eigen::VectorXd& full_raw,
                              bool with_gradient, const Visit& visit,
                              const ProgressCallback& poll = {}) {
  const int n = static_cast<int>(x.rows());
  internal::PairGeometry tile;
  std::vector<internal::KernelEvaluator::NodeValue> values;
  for (int col0 = 0; col0 < n; col0 += kTile) {
    const int cols = std::min(kTile, n - col0);
    for (int row0 = col0; row0 < n; row0 += kTile) {
      const int rows = std::min(kTile, n - row0);
      evaluator.MakeGeometryBlock(x, row0, rows, x, col0, cols, &tile);
      evaluator.Evaluate(tile, full_raw, with_gradient, &values);
      visit(row0, rows, col0, cols, evaluator.Root(values));
    }
    GPSEL_RETURN_IF_ERROR(ReportProgress(poll, CancellationPoll()));
  }
  return absl::OkStatus();
}
}  // namespace

GpModel::GpModel(GpModel&&) noexcept = default;
GpModel& GpModel::operator=(GpModel&&) noexcept = default;
GpModel::~GpModel() = default;

absl::StatusOr<GpModel> GpModel::Create(const KernelExpr& kernel, const Eigen::MatrixXd& x,
                                        const Eigen::VectorXd& y,
                                        const HyperparameterSettings& settings) {
  if (x.rows() != y.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("x: has ", x.rows(), " rows but y has ", y.size(), " values"));
  }
  if (ContainsPerColumn(kernel)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel: ", ToString(kernel), " holds BASE[*]: expand it to the data's columns "
        "(ExpandPerColumn) before building a model"));
  }
  if (MaxActiveDim(kernel) >= x.cols()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel: ", ToString(kernel), " uses input dimension ", MaxActiveDim(kernel),
                     " but the data has ", x.cols(), " input column(s) (dimensions count from 0)"));
  }
  absl::StatusOr<std::vector<HyperparameterInfo>> params =
      DescribeHyperparameters(kernel, settings);
  if (!params.ok()) return params.status();
  GpModel model;
  model.kernel_ = kernel;
  model.x_ = x;
  model.y_ = y;
  model.parameters_ = *std::move(params);
  for (int i = 0; i < static_cast<int>(model.parameters_.size()); ++i) {
    if (!model.parameters_[i].fixed) model.free_index_.push_back(i);
  }
  model.evaluator_ = std::make_unique<internal::KernelEvaluator>(kernel, x);
  if (x.rows() <= kWholeMatrixMaxPoints) {
    model.geometry_ =
        std::make_unique<internal::PairGeometry>(model.evaluator_->MakeGeometry(x, x));
  }
  return model;
}

absl::StatusOr<GpModel> GpModel::Subset(const std::vector<int>& rows) const {
  if (rows.empty()) return absl::InvalidArgumentError("rows: must not be empty");
  Eigen::MatrixXd x(rows.size(), x_.cols());
  Eigen::VectorXd y(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= num_points()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rows[", i, "]: ", rows[i], " is outside [0, ", num_points(), ")"));
    }
    x.row(i) = x_.row(rows[i]);
    y(i) = y_(rows[i]);
  }
  GpModel model;
  model.kernel_ = kernel_;
  model.x_ = std::move(x);
  model.y_ = std::move(y);
  model.parameters_ = parameters_;
  model.free_index_ = free_index_;
  model.evaluator_ = std::make_unique<internal::KernelEvaluator>(kernel_, model.x_);
  if (model.x_.rows() <= kWholeMatrixMaxPoints) {
    model.geometry_ = std::make_unique<internal::PairGeometry>(
        model.evaluator_->MakeGeometry(model.x_, model.x_));
  }
  return model;
}

std::vector<HyperparameterInfo> GpModel::free_parameters() const {
  std::vector<HyperparameterInfo> free;
  for (int i : free_index_) free.push_back(parameters_[i]);
  return free;
}

std::vector<std::string> GpModel::free_names() const {
  std::vector<std::string> names;
  for (int i : free_index_) names.push_back(parameters_[i].name);
  return names;
}

Eigen::VectorXd GpModel::prior_mean() const {
  Eigen::VectorXd m(num_free());
  for (int k = 0; k < num_free(); ++k) m(k) = parameters_[free_index_[k]].prior.mean;
  return m;
}

Eigen::VectorXd GpModel::prior_sd() const {
  Eigen::VectorXd s(num_free());
  for (int k = 0; k < num_free(); ++k) s(k) = parameters_[free_index_[k]].prior.sd;
  return s;
}

Eigen::VectorXd GpModel::ExpandRaw(const Eigen::VectorXd& free_raw) const {
  Eigen::VectorXd full(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) full(i) = parameters_[i].fixed_raw;
  for (int k = 0; k < num_free(); ++k) full(free_index_[k]) = free_raw(k);
  return full;
}

std::map<std::string, double> GpModel::NaturalValues(const Eigen::VectorXd& free_raw) const {
  const Eigen::VectorXd full = ExpandRaw(free_raw);
  std::map<std::string, double> values;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    values[parameters_[i].name] =
        parameters_[i].name == kNoiseName ? kNoiseFloor + Softplus(full(i)) : Softplus(full(i));
  }
  return values;
}

double GpModel::NoiseVariance(const Eigen::VectorXd& free_raw) const {
  return kNoiseFloor + Softplus(ExpandRaw(free_raw)(parameters_.size() - 1));
}

Eigen::MatrixXd GpModel::CrossCovariance(const Eigen::VectorXd& free_raw, const Eigen::MatrixXd& x1,
                                         const Eigen::MatrixXd& x2) const {
  FlushDenormalsScope flush_denormals;
  const Eigen::VectorXd full = ExpandRaw(free_raw);
  std::vector<internal::KernelEvaluator::NodeValue> values;
  evaluator_->Evaluate(evaluator_->MakeGeometry(x1, x2), full, false, &values);
  return evaluator_->Root(values).k;
}

double GpModel::LogPrior(const Eigen::VectorXd& free_raw, Eigen::VectorXd* gradient,
                         Eigen::MatrixXd* hessian) const {
  const int u = num_free();
  double value = 0.0;
  if (gradient) gradient->resize(u);
  if (hessian) hessian->setZero(u, u);
  for (int k = 0; k < u; ++k) {
    const NormalPrior& prior = parameters_[free_index_[k]].prior;
    const double z = (free_raw(k) - prior.mean) / prior.sd;
    value += -0.5 * z * z - std::log(prior.sd) - 0.5 * kLog2Pi;
    if (gradient) (*gradient)(k) = -z / prior.sd;
    if (hessian) (*hessian)(k, k) = -1.0 / (prior.sd * prior.sd);
  }
  return value;
}

struct GpModel::Factorized {
  Eigen::VectorXd full_raw;
  // Whole-matrix path (geometry_ set) with derivatives asked: the kernel tree's node values,
  // ∂K/∂r in the root's dk (the root's own k is moved into the factorisation).
  std::vector<internal::KernelEvaluator::NodeValue> values;
  SpdFactorization cholesky;
  Eigen::VectorXd alpha;
  double value = 0.0;
  double noise_slope = 0.0;  // dσ²/dr_noise = sigmoid(r_noise)
};

absl::Status GpModel::Factorize(const Eigen::VectorXd& free_raw, bool with_derivatives,
                                Factorized* out, const ProgressCallback& poll) const {
  if (free_raw.size() != num_free()) {
    return absl::InvalidArgumentError(absl::StrCat("raw parameter vector has ", free_raw.size(),
                                                   " entries, expected ", num_free()));
  }
  if (!free_raw.allFinite()) return absl::InvalidArgumentError("raw parameters must be finite");
  out->full_raw = ExpandRaw(free_raw);
  const double noise_raw = out->full_raw(out->full_raw.size() - 1);
  const double noise_variance = kNoiseFloor + Softplus(noise_raw);
  out->noise_slope = Sigmoid(noise_raw);
  const int n = num_points();
  absl::Status factorized;
  if (geometry_) {
    evaluator_->Evaluate(*geometry_, out->full_raw, with_derivatives, &out->values);
    Eigen::MatrixXd k = std::move(evaluator_->Root(out->values).k);
    k.diagonal().array() += noise_variance;
    factorized = out->cholesky.Compute(std::move(k), poll);
  } else {
    // The fill polls too (after each column of tiles): at n = 10⁴ it takes seconds for a
    // composite kernel, and a cancelled request must not wait for it. A stopped fill marks its
    // half-made matrix non-finite, so that ComputeFromLower refuses it before factorising, and
    // its status is returned.
    absl::Status fill_status;
    factorized = out->cholesky.ComputeFromLower(n, [&](Eigen::MatrixXd* k) {
      k->resize(n, n);
      fill_status = ForEachLowerTile(*evaluator_, x_, out->full_raw, /*with_gradient=*/false,
                                     [&](int row0, int rows, int col0, int cols,
                                         const internal::KernelEvaluator::NodeValue& root) {
                                       k->block(row0, col0, rows, cols) = root.k;
                                     },
                                     poll);
      if (fill_status.ok()) {
        k->diagonal().array() += noise_variance;
      } else {
        k->diagonal().setConstant(std::numeric_limits<double>::quiet_NaN());
      }
    }, poll);
    if (!fill_status.ok()) return fill_status;
  }
  if (!factorized.ok()) return factorized;
  out->alpha = out->cholesky.Solve(y_);
  out->value = -0.5 * y_.dot(out->alpha) - 0.5 * out->cholesky.LogDeterminant() -
               0.5 * static_cast<double>(n) * kLog2Pi;
  if (!std::isfinite(out->value)) {
    return absl::FailedPreconditionError("log likelihood is not finite at these parameters");
  }
  return absl::OkStatus();
}

absl::StatusOr<double> GpModel::LogLikelihood(const Eigen::VectorXd& free_raw,
                                              Eigen::VectorXd* gradient,
                                              const ProgressCallback& poll) const {
  ScopedLikelihoodEvaluation observed(num_free(), num_points());  // core/instrumentation.h
  FlushDenormalsScope flush_denormals;
  Factorized f;
  GPSEL_RETURN_IF_ERROR(Factorize(free_raw, gradient != nullptr, &f, poll));
  if (gradient) {
    // ∂L/∂r_i = ½ Σ (W ∘ K_i) with W = ααᵀ − K⁻¹ and K_i = ∂K/∂r_i (Rasmussen & Williams
    // eq. 5.9); for the noise K_i = σ'(r)·I. W and K_i are symmetric, so the sum is the strict
    // lower triangle plus half the diagonal, read a column (whole matrices) or a tile (tiled
    // path, K_i made again per tile) at a time. K⁻¹ takes the factor's storage.
    const int noise_index = static_cast<int>(parameters_.size()) - 1;
    GPSEL_ASSIGN_OR_RETURN(const Eigen::MatrixXd k_inverse,
                           std::move(f.cholesky).TakeInverseLowerTriangle(poll));
    std::vector<int> kernel_params;  // free index k → parameter index i, noise excluded
    std::vector<int> kernel_free;
    for (int k = 0; k < num_free(); ++k) {
      if (free_index_[k] != noise_index) {
        kernel_params.push_back(free_index_[k]);
        kernel_free.push_back(k);
      }
    }
    Eigen::VectorXd sums = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(kernel_params.size()));
    if (geometry_) {
      const std::vector<Eigen::MatrixXd>& dk = evaluator_->Root(f.values).dk;
      const int n = num_points();
      Eigen::VectorXd w_column(n);
      for (int j = 0; j < n; ++j) {
        const int len = n - j;
        w_column.head(len) = f.alpha.tail(len) * f.alpha(j) - k_inverse.col(j).tail(len);
        w_column(0) *= 0.5;
        for (size_t p = 0; p < kernel_params.size(); ++p) {
          sums(static_cast<Eigen::Index>(p)) +=
              dk[kernel_params[p]].col(j).tail(len).dot(w_column.head(len));
        }
      }
    } else if (!kernel_params.empty()) {
      Eigen::MatrixXd w;
      const absl::Status tiles = ForEachLowerTile(
          *evaluator_, x_, f.full_raw, /*with_gradient=*/true,
          [&](int row0, int rows, int col0, int cols,
              const internal::KernelEvaluator::NodeValue& root) {
            w.noalias() = f.alpha.segment(row0, rows) * f.alpha.segment(col0, cols).transpose();
            w -= k_inverse.block(row0, col0, rows, cols);
            if (row0 == col0) {
              w.triangularView<Eigen::StrictlyUpper>().setZero();
              w.diagonal() *= 0.5;
            }
            for (size_t p = 0; p < kernel_params.size(); ++p) {
              sums(static_cast<Eigen::Index>(p)) +=
                  (w.array() * root.dk[kernel_params[p]].array()).sum();
            }
          },
          poll);
      if (!tiles.ok()) return tiles;
    }
    gradient->resize(num_free());
    for (size_t p = 0; p < kernel_params.size(); ++p) {
      (*gradient)(kernel_free[p]) = sums(static_cast<Eigen::Index>(p));
    }
    for (int k = 0; k < num_free(); ++k) {
      if (free_index_[k] == noise_index) {
        (*gradient)(k) = 0.5 * f.noise_slope * (f.alpha.squaredNorm() - k_inverse.trace());
      }
    }
  }
  return f.value;
}

absl::Status HessianTiling::Validate() const {
  if (tile < 0) return absl::InvalidArgumentError("tiling.tile: must be >= 0 (0 = automatic)");
  if (panel_rows < 0) {
    return absl::InvalidArgumentError("tiling.panel_rows: must be >= 0 (0 = automatic)");
  }
  return absl::OkStatus();
}

HessianLayout ResolveHessianLayout(int n, int num_free, int num_kernel_free,
                                   const HessianTiling& tiling) {
  n = std::max(n, 1);
  HessianLayout layout;
  // Up to kWholeMatrixMaxPoints the whole matrix is one tile, one block and one panel: each
  // piece is then at most kWholeMatrixMaxPoints·n doubles per parameter, O(n·u).
  const bool whole = n <= kWholeMatrixMaxPoints;
  // Row blocks of K_i streamed into a panel: up to 256 rows of whole tiles (the products' inner
  // dimension), fewer where k blocks of 256 rows would exceed n²/2 doubles (many parameters);
  // the tiles shrink with them (to 16 at the least) when a block is narrower than 64 rows.
  const int block_budget = n / (2 * std::max(num_kernel_free, 1));
  if (tiling.tile > 0) {
    layout.tile = std::min(tiling.tile, n);
  } else if (whole) {
    layout.tile = n;
  } else {
    layout.tile = block_budget >= kTile ? kTile : std::max(16, block_budget / 16 * 16);
  }
  const int tile = layout.tile;
  layout.block_rows = std::min(std::max(tile, std::min(256, block_budget) / tile * tile), n);
  if (tiling.tile == 0 && whole) layout.block_rows = n;
  // Panels: at most 2 n² doubles for all u, and at least four panels once the tiles are small,
  // so that the triangular shape of L⁻¹ saves flops (one panel costs 3n³ per parameter, four
  // 1.4n³); whole tiles where the budget allows one.
  int panel = tiling.panel_rows;
  if (panel == 0) {
    const int64_t budget_rows = 2 * static_cast<int64_t>(n) / std::max(num_free, 1);
    panel = static_cast<int>(std::min<int64_t>(budget_rows, (n + 3) / 4));
    panel = panel >= tile ? panel / tile * tile : std::max(panel, 1);
    if (whole) panel = n;
  }
  layout.panel_rows = std::min(panel, n);
  return layout;
}

// The exact Hessian without any whole n×n derivative matrix. With K = LLᵀ, α = K⁻¹y,
// W = ααᵀ − K⁻¹, K_i = ∂K/∂r_i and K_ij = ∂²K/∂r_i∂r_j (R&W eq. 5.9 differentiated once more):
//   ∂²L/∂r_i∂r_j = ½ Σ (W ∘ K_ij) − (K_iα)ᵀ K⁻¹ (K_jα) + ½ tr(K⁻¹K_i K⁻¹K_j).
// The first two terms need only tiles of K_i and K_ij, contracted with W as the gradient is,
// and the vectors v_i = K_iα. The trace is the Frobenius product of the symmetric matrices
// C_i = L⁻¹K_iL⁻ᵀ: tr(K⁻¹K_iK⁻¹K_j) = Σ C_i ∘ C_j. It is accumulated over row panels
// P = [p0, p1): since L⁻¹ is lower triangular, C_i's rows P left of column p1 (which hold the
// panel's share of the lower triangle, its diagonal block whole) are
//   C_i[P, :p1] = (L⁻¹[P, :p1] K_i[:p1, :p1]) (L⁻¹[:p1, :p1])ᵀ,
// a product (dgemm, K_i streamed in row blocks made from tiles) and a triangular product
// (dtrmm), about n³ flops per parameter over all panels (the explicit K⁻¹K_i took 2n³). Every
// panel's C_i are contracted at once: Σ over the strict lower triangle counts twice, the
// diagonal blocks once. The noise's K_i = σ'(r)·I needs no kernel at all.
// Held at once: L⁻¹ and K⁻¹ (2 n²), the panels (≤ 2 n² by default), the row blocks (≤ ½ n², and
// 256 rows per kernel parameter, O(n·u), from n ≈ 512·u on) and O(n·u) of vectors; the last
// panel (p1 = n) streams every tile, so the W terms ride along with it.
absl::StatusOr<LikelihoodHessian> GpModel::LogLikelihoodHessian(const Eigen::VectorXd& free_raw,
                                                                const ProgressCallback& poll,
                                                                const HessianTiling& tiling) const {
  GPSEL_RETURN_IF_ERROR(tiling.Validate());
  const Progress poll_message = CancellationPoll();
  ScopedLikelihoodEvaluation observed(num_free(), num_points());
  FlushDenormalsScope flush_denormals;
  Factorized f;
  GPSEL_RETURN_IF_ERROR(Factorize(free_raw, /*with_derivatives=*/false, &f, poll));
  const int n = num_points();
  const int u = num_free();
  const int noise_index = static_cast<int>(parameters_.size()) - 1;
  const Eigen::VectorXd& full = f.full_raw;
  const Eigen::VectorXd& alpha = f.alpha;
  const double noise_slope = f.noise_slope;

  LikelihoodHessian result;
  result.jitter = f.cholesky.jitter();
  result.value = f.value;

  // Free kernel parameters (noise excluded): free index and parameter index (= the root's dk).
  std::vector<int> kernel_free, kernel_param;
  int noise_free = -1;
  for (int k = 0; k < u; ++k) {
    if (free_index_[k] == noise_index) {
      noise_free = k;
    } else {
      kernel_free.push_back(k);
      kernel_param.push_back(free_index_[k]);
    }
  }
  const int kernel_count = static_cast<int>(kernel_free.size());

  const HessianLayout layout = ResolveHessianLayout(n, u, kernel_count, tiling);
  const int tile = layout.tile, panel = layout.panel_rows, block_rows = layout.block_rows;

  GPSEL_ASSIGN_OR_RETURN(SpdFactorization::InverseParts inverse,
                         std::move(f.cholesky).TakeInverseFactorAndInverse(poll));
  const Eigen::MatrixXd& l_inverse = inverse.inverse_factor;
  const Eigen::MatrixXd& k_inverse = inverse.inverse_lower;  // lower triangle only

  Eigen::VectorXd gradient = Eigen::VectorXd::Zero(u);
  Eigen::MatrixXd second = Eigen::MatrixXd::Zero(u, u);  // ½ Σ W ∘ K_ij, for i ≤ j
  Eigen::MatrixXd v = Eigen::MatrixXd::Zero(n, u);       // K_i α
  Eigen::MatrixXd trace = Eigen::MatrixXd::Zero(u, u);   // Σ C_i ∘ C_j
  if (noise_free >= 0) {
    const double w_trace = alpha.squaredNorm() - k_inverse.trace();
    gradient(noise_free) = 0.5 * noise_slope * w_trace;
    second(noise_free, noise_free) = 0.5 * noise_slope * (1.0 - noise_slope) * w_trace;
    v.col(noise_free) = noise_slope * alpha;
  }

  // The W terms of one lower tile (row0 ≥ col0): the gradient, v and ½ Σ W ∘ K_ij. W and the
  // K's are symmetric, so the strict lower triangle counts once and the diagonal half.
  Eigen::MatrixXd w, k_ij;
  auto add_w_terms = [&](int row0, int rows, int col0, int cols,
                         const internal::PairGeometry& geometry,
                         const std::vector<internal::KernelEvaluator::NodeValue>& values) {
    const internal::KernelEvaluator::NodeValue& root = evaluator_->Root(values);
    w.noalias() = alpha.segment(row0, rows) * alpha.segment(col0, cols).transpose();
    w -= k_inverse.block(row0, col0, rows, cols);
    if (row0 == col0) {
      w.triangularView<Eigen::StrictlyUpper>().setZero();
      w.diagonal() *= 0.5;
    }
    for (int a = 0; a < kernel_count; ++a) {
      const Eigen::MatrixXd& k_a = root.dk[kernel_param[a]];
      const int fa = kernel_free[a];
      gradient(fa) += (w.array() * k_a.array()).sum();
      v.col(fa).segment(row0, rows).noalias() += k_a * alpha.segment(col0, cols);
      if (row0 != col0) {
        v.col(fa).segment(col0, cols).noalias() += k_a.transpose() * alpha.segment(row0, rows);
      }
      for (int b = a; b < kernel_count; ++b) {
        if (evaluator_->SecondDerivative(geometry, full, values, kernel_param[a], kernel_param[b],
                                         &k_ij)) {
          second(fa, kernel_free[b]) += (w.array() * k_ij.array()).sum();
        }
      }
    }
  };

  // Panel buffers: column a holds C_a's rows P, columns [0, p1), column-major with leading
  // dimension |P|; one row block of every K_a at a time.
  Eigen::MatrixXd panels(static_cast<Eigen::Index>(panel) * n, u);
  std::vector<Eigen::MatrixXd> k_block(kernel_count, Eigen::MatrixXd(block_rows, n));
  internal::PairGeometry geometry;
  std::vector<internal::KernelEvaluator::NodeValue> values;
  for (int p0 = 0; p0 < n; p0 += panel) {
    GPSEL_RETURN_IF_ERROR(ReportProgress(poll, poll_message));
    const int rows = std::min(panel, n - p0), p1 = p0 + rows;
    const bool last = p1 == n;
    auto c_panel = [&](int k) {
      return Eigen::Map<Eigen::MatrixXd>(panels.col(k).data(), rows, p1);
    };
    for (int k = 0; k < u; ++k) {
      if (k == noise_free) {
        c_panel(k) = noise_slope * l_inverse.block(p0, 0, rows, p1);
      } else {
        c_panel(k).setZero();
      }
    }
    for (int q0 = 0; q0 < p1 && kernel_count > 0; q0 += block_rows) {
      // Polled per row block: a block's products are at most u·2·(n/4)·256·n flops (about 2 s at
      // n = 10,000 and u = 7), so a cancelled request stops about that long after.
      GPSEL_RETURN_IF_ERROR(ReportProgress(poll, poll_message));
      const int q_rows = std::min(block_rows, p1 - q0);
      for (int c0 = 0; c0 < p1; c0 += tile) {
        const int cols = std::min(tile, p1 - c0);
        for (int r0 = q0; r0 < q0 + q_rows; r0 += tile) {
          const int t_rows = std::min(tile, q0 + q_rows - r0);
          evaluator_->MakeGeometryBlock(x_, r0, t_rows, x_, c0, cols, &geometry);
          evaluator_->Evaluate(geometry, full, /*with_gradient=*/true, &values);
          const internal::KernelEvaluator::NodeValue& root = evaluator_->Root(values);
          for (int a = 0; a < kernel_count; ++a) {
            k_block[a].block(r0 - q0, c0, t_rows, cols) = root.dk[kernel_param[a]];
          }
          if (last && r0 >= c0) add_w_terms(r0, t_rows, c0, cols, geometry, values);
        }
      }
      for (int a = 0; a < kernel_count; ++a) {
        c_panel(kernel_free[a]).noalias() +=
            l_inverse.block(p0, q0, rows, q_rows) * k_block[a].topLeftCorner(q_rows, p1);
      }
    }
    for (int k = 0; k < u; ++k) {
      MultiplyByLowerTransposeOnRight(l_inverse.topLeftCorner(p1, p1), c_panel(k));
    }
    const Eigen::Index below = static_cast<Eigen::Index>(rows) * p0;
    const Eigen::Index diagonal = static_cast<Eigen::Index>(rows) * rows;
    if (below > 0) {
      trace.noalias() += 2.0 * (panels.topRows(below).transpose() * panels.topRows(below));
    }
    trace.noalias() +=
        panels.middleRows(below, diagonal).transpose() * panels.middleRows(below, diagonal);
  }

  GPSEL_RETURN_IF_ERROR(ReportProgress(poll, poll_message));
  // With nothing free (u = 0) v is n×0, and Eigen's self-adjoint product would bind a reference
  // to the first coefficient of an empty result (undefined behaviour, which UBSan reports): there
  // is no term to make then.
  Eigen::MatrixXd k_inverse_v(n, u);
  if (u > 0) k_inverse_v.noalias() = k_inverse.selfadjointView<Eigen::Lower>() * v;
  result.gradient = gradient;
  result.hessian.resize(u, u);
  for (int fi = 0; fi < u; ++fi) {
    for (int fj = fi; fj < u; ++fj) {
      const double h = second(fi, fj) - v.col(fi).dot(k_inverse_v.col(fj)) + 0.5 * trace(fi, fj);
      result.hessian(fi, fj) = h;
      result.hessian(fj, fi) = h;
    }
  }
  if (!std::isfinite(result.value) || !result.hessian.allFinite()) {
    return absl::FailedPreconditionError("likelihood Hessian is not finite at these parameters");
  }
  return result;
}

}  // namespace gpsel
