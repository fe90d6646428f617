// GpModel: exact log marginal likelihood, gradient and Hessian in raw hyperparameter space.
#include "core/gp_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/instrumentation.h"
#include "core/kernel_evaluator.h"
#include "core/linalg.h"

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
// each tile's root value; diagonal tiles (row0 == col0) come whole.
template <typename Visit>
void ForEachLowerTile(const internal::KernelEvaluator& evaluator, const Eigen::MatrixXd& x,
                      const Eigen::VectorXd& full_raw, bool with_gradient, const Visit& visit) {
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
  }
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
  if (MaxActiveDim(kernel) >= x.cols()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel: ", ToString(kernel), " uses input dimension ", MaxActiveDim(kernel),
        " but the data has ", x.cols(), " input column(s) (dimensions count from 0)"));
  }
  absl::StatusOr<std::vector<HyperparameterInfo>> params = DescribeHyperparameters(kernel, settings);
  if (!params.ok()) return params.status();
  GpModel model;
  model.kernel_ = kernel;
  model.x_ = x;
  model.y_ = y;
  model.parameters_ = *std::move(params);
  for (int i = 0; i < static_cast<int>(model.parameters_.size()); ++i) {
    if (!model.parameters_[i].fixed) model.free_index_.push_back(i);
  }
  model.evaluator_ = std::make_unique<internal::KernelEvaluator>(kernel);
  if (x.rows() <= kWholeMatrixMaxPoints) {
    model.geometry_ =
        std::make_unique<internal::PairGeometry>(model.evaluator_->MakeGeometry(x, x));
  }
  return model;
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
    values[parameters_[i].name] = parameters_[i].name == kNoiseName
                                      ? kNoiseFloor + Softplus(full(i))
                                      : Softplus(full(i));
  }
  return values;
}

double GpModel::NoiseVariance(const Eigen::VectorXd& free_raw) const {
  return kNoiseFloor + Softplus(ExpandRaw(free_raw)(parameters_.size() - 1));
}

Eigen::MatrixXd GpModel::CrossCovariance(const Eigen::VectorXd& free_raw,
                                         const Eigen::MatrixXd& x1,
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
                                Factorized* out) const {
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
    factorized = out->cholesky.Compute(std::move(k));
  } else {
    factorized = out->cholesky.ComputeFromLower(n, [&](Eigen::MatrixXd* k) {
      k->resize(n, n);
      ForEachLowerTile(*evaluator_, x_, out->full_raw, /*with_gradient=*/false,
                       [&](int row0, int rows, int col0, int cols,
                           const internal::KernelEvaluator::NodeValue& root) {
                         k->block(row0, col0, rows, cols) = root.k;
                       });
      k->diagonal().array() += noise_variance;
    });
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
                                              Eigen::VectorXd* gradient) const {
  ScopedLikelihoodEvaluation observed(num_free(), num_points());  // core/instrumentation.h
  FlushDenormalsScope flush_denormals;
  Factorized f;
  if (absl::Status s = Factorize(free_raw, gradient != nullptr, &f); !s.ok()) return s;
  if (gradient) {
    // ∂L/∂r_i = ½ Σ (W ∘ K_i) with W = ααᵀ − K⁻¹ and K_i = ∂K/∂r_i (Rasmussen & Williams
    // eq. 5.9); for the noise K_i = σ'(r)·I. W and K_i are symmetric, so the sum is the strict
    // lower triangle plus half the diagonal, read a column (whole matrices) or a tile (tiled
    // path, K_i made again per tile) at a time. K⁻¹ takes the factor's storage.
    const int noise_index = static_cast<int>(parameters_.size()) - 1;
    const Eigen::MatrixXd k_inverse = std::move(f.cholesky).TakeInverseLowerTriangle();
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
      ForEachLowerTile(
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
          });
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

absl::StatusOr<LikelihoodHessian> GpModel::LogLikelihoodHessian(
    const Eigen::VectorXd& free_raw, const ProgressCallback& poll) const {
  const Progress poll_message = CancellationPoll();
  ScopedLikelihoodEvaluation observed(num_free(), num_points());
  FlushDenormalsScope flush_denormals;
  Factorized f;
  if (absl::Status s = Factorize(free_raw, true, &f); !s.ok()) return s;
  const int noise_index = static_cast<int>(parameters_.size()) - 1;
  const Eigen::VectorXd& full = f.full_raw;
  const Eigen::VectorXd& alpha = f.alpha;
  // The Hessian needs the whole n×n ∂K/∂r and the operands' values (second derivatives); the
  // tiled path made neither, so they are made here, with the geometry, for this call.
  internal::PairGeometry tiled_geometry;
  if (!geometry_) tiled_geometry = evaluator_->MakeGeometry(x_, x_);
  const internal::PairGeometry& geometry = geometry_ ? *geometry_ : tiled_geometry;
  std::vector<internal::KernelEvaluator::NodeValue> values = std::move(f.values);
  if (!geometry_) evaluator_->Evaluate(geometry, full, true, &values);
  const double noise_slope = f.noise_slope;
  const Eigen::MatrixXd k_inverse = f.cholesky.Inverse();
  const Eigen::MatrixXd w = alpha * alpha.transpose() - k_inverse;
  const int n = static_cast<int>(y_.size());
  const int u = num_free();

  LikelihoodHessian result;
  result.jitter = f.cholesky.jitter();
  result.value = f.value;

  // Per free parameter: K_i, B_i = K⁻¹K_i and v_i = K_i α.
  const auto& dk = evaluator_->Root(values).dk;
  std::vector<Eigen::MatrixXd> b(u);
  Eigen::MatrixXd v(n, u);
  result.gradient.resize(u);
  for (int f = 0; f < u; ++f) {
    if (absl::Status s = ReportProgress(poll, poll_message); !s.ok()) return s;
    const int i = free_index_[f];
    if (i == noise_index) {
      b[f] = noise_slope * k_inverse;
      v.col(f) = noise_slope * alpha;
      result.gradient(f) = 0.5 * noise_slope * w.trace();
    } else {
      b[f].noalias() = k_inverse * dk[i];
      v.col(f).noalias() = dk[i] * alpha;
      result.gradient(f) = 0.5 * (w.array() * dk[i].array()).sum();
    }
  }
  const Eigen::MatrixXd k_inverse_v = k_inverse * v;
  // ∂²L/∂r_i∂r_j = ½ Σ (W ∘ K_ij) − (K_iα)ᵀ K⁻¹ (K_jα) + ½ tr(B_i B_j).
  result.hessian.resize(u, u);
  Eigen::MatrixXd k_ij;
  for (int fi = 0; fi < u; ++fi) {
    if (absl::Status s = ReportProgress(poll, poll_message); !s.ok()) return s;
    for (int fj = fi; fj < u; ++fj) {
      const int i = free_index_[fi], j = free_index_[fj];
      double second = 0.0;
      if (i == noise_index && j == noise_index) {
        second = 0.5 * noise_slope * (1.0 - noise_slope) * w.trace();
      } else if (i != noise_index && j != noise_index &&
                 evaluator_->SecondDerivative(geometry, full, values, i, j, &k_ij)) {
        second = 0.5 * (w.array() * k_ij.array()).sum();
      }
      const double trace_term = 0.5 * (b[fi].array() * b[fj].transpose().array()).sum();
      const double h = second - v.col(fi).dot(k_inverse_v.col(fj)) + trace_term;
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
