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
#include "gpsel/core/internal/thread_pool.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

namespace {

constexpr double kLog2Pi = 1.8378770664093454836;

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;
using NodeValues = std::vector<internal::KernelEvaluator::NodeValue>;

// The geometry of rows [row0, row0 + rows) of x each with itself, as a rows×1 diagonal geometry
// (PairGeometry::diagonal): the kernel tree is entrywise in it, so evaluating it here gives
// diag(K_ff) and its derivatives without any n×n work. Distances are zero; LIN's x·x is the
// row's squared norm; a CP/CW's positions z are the rows' own on both sides. Which quantities a
// dimension needs is read off the geometry of the rows with one of them, which the evaluator
// makes itself (in its input frame).
void MakeDiagonalGeometry(const internal::KernelEvaluator& evaluator, const MatrixXd& x, Index row0,
                          Index rows, internal::PairGeometry* out) {
  evaluator.MakeGeometryBlock(x, row0, rows, x, row0, 1, out);
  out->symmetric = false;
  out->diagonal = true;
  for (auto& [dim, g] : out->by_dim) {
    if (g.squared_distance.size() > 0) g.squared_distance.setZero(rows, 1);
    if (g.distance.size() > 0) g.distance.setZero(rows, 1);
    if (g.dot.size() > 0) {
      const Index first = dim < 0 ? 0 : dim;
      const Index count = dim < 0 ? x.cols() : 1;
      g.dot = x.block(row0, first, rows, count).rowwise().squaredNorm();
    }
    if (g.z1.size() > 0) g.z2 = g.z1;
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
  if (!(max_jitter >= jitter) || !std::isfinite(max_jitter)) {
    return absl::InvalidArgumentError("max_jitter: must be finite and >= jitter");
  }
  if (block_columns < 1) return absl::InvalidArgumentError("block_columns: must be >= 1");
  if (threads < 1) return absl::InvalidArgumentError("threads: must be >= 1");
  if (max_cached_factor_bytes < 0) {
    return absl::InvalidArgumentError("max_cached_factor_bytes: must be >= 0");
  }
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
    return absl::InvalidArgumentError(
        absl::StrCat("inducing: has ", inducing.cols(), " columns but x has ", model.x().cols()));
  }
  if (!inducing.allFinite()) return absl::InvalidArgumentError("inducing: values must be finite");
  SparseGp sparse;
  sparse.model_ = &model;
  sparse.options_ = options;
  sparse.inducing_ = std::move(inducing);
  // With the training inputs' frame, as GpModel's evaluator: CP/CW read positions on it.
  sparse.evaluator_ = std::make_unique<internal::KernelEvaluator>(model.kernel(), model.x());
  if (options.threads > 1) sparse.pool_ = std::make_unique<ThreadPool>(options.threads - 1);
  sparse.inducing_geometry_ = std::make_unique<internal::PairGeometry>(
      sparse.evaluator_->MakeGeometry(sparse.inducing_, sparse.inducing_));
  return sparse;
}

namespace {

// Runs body(chunk) for chunk = 0 .. chunks−1 on `pool` (or inline), each chunk writing only its
// own slot: the caller sums the slots in chunk order, so the result does not depend on threads.
template <typename Body>
void ForEachChunk(ThreadPool* pool, int chunks, const Body& body) {
  TaskGroup group(pool);
  for (int c = 0; c < chunks; ++c) group.Schedule([&body, c] { body(c); });
  group.Wait();
}

// The blocks of columns [c0, c0 + cols) of chunk `chunk` of `chunks` over n columns in blocks of
// `block` columns.
struct BlockRange {
  Index first_block = 0, end_block = 0;
};
BlockRange ChunkBlocks(Index num_blocks, int chunks, int chunk) {
  return {num_blocks * chunk / chunks, num_blocks * (chunk + 1) / chunks};
}

}  // namespace

absl::StatusOr<SparseBounds> SparseGp::Bounds(const Eigen::VectorXd& free_raw,
                                              bool with_gradient, bool upper_gradient) const {
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
  const Index block = options_.block_columns;
  const Index num_blocks = (n + block - 1) / block;
  const int chunks = static_cast<int>(std::min<Index>(kSparseChunks, num_blocks));
  ThreadPool* pool = pool_.get();

  // K_uu + εI = L Lᵀ, ε = jitter × mean diag(K_uu) (scale-aware), escalated if needed.
  NodeValues uu_values;
  evaluator_->Evaluate(*inducing_geometry_, full, with_gradient, &uu_values);
  const MatrixXd& k_uu_plain = evaluator_->Root(uu_values).k;
  const double scale = std::max(k_uu_plain.diagonal().mean(), 0.0);
  double relative_jitter = options_.jitter;
  double epsilon = 0.0;
  Eigen::LLT<MatrixXd> chol_uu;
  for (;;) {
    epsilon = relative_jitter * scale;
    MatrixXd k_uu = k_uu_plain;
    k_uu.diagonal().array() += epsilon;
    chol_uu.compute(k_uu);
    if (chol_uu.info() == Eigen::Success) break;
    if (!(relative_jitter > 0.0) || relative_jitter * 100.0 > options_.max_jitter * (1 + 1e-12)) {
      return absl::FailedPreconditionError(
          "K_uu + jitter·I is not positive definite at these parameters");
    }
    relative_jitter *= 100.0;
  }
  const MatrixXd l_factor = chol_uu.matrixL();
  const auto lower_factor = l_factor.triangularView<Eigen::Lower>();

  // ---- Pass 1 (blocks of columns, chunks in parallel): A_b = L⁻¹ K_ub, Σ A_b A_bᵀ, Σ A_b y_b
  // and Σ k(x_i, x_i). Nothing of size n×m is kept: pass 2 remakes what it needs from K_ub.
  struct Pass1 {
    MatrixXd aat;  // lower triangle
    VectorXd ay;
    // Σ_i (k(x_i, x_i) − ‖a_i‖²): t summed point by point. tr(K_ff) − tr(AAᵀ) as a difference
    // of two sums of n terms loses digits that the upper bound multiplies by about n/(2σ²)
    // (its quadratic form has σ² + t): at n = 10⁶, tr(K_ff) ≈ 10⁶ and t ≈ 10⁻⁶.
    double residual_trace = 0.0;
  };
  // With the gradient, pass 2 needs A_b again: kept from pass 1 when A (m×n) fits
  // options_.max_cached_factor_bytes, which spares pass 2 its triangular solve (m²·n of the
  // evaluation's ~5m²·n flops), else remade there from K_ub. The same bits either way.
  const bool keep_a = with_gradient && 8.0 * static_cast<double>(n) * static_cast<double>(m) <=
                                           static_cast<double>(options_.max_cached_factor_bytes);
  MatrixXd a_kept(keep_a ? m : 0, keep_a ? n : 0);
  std::vector<Pass1> pass1(chunks);
  ForEachChunk(pool, chunks, [&](int chunk) {
    Pass1& out = pass1[chunk];
    out.aat = MatrixXd::Zero(m, m);
    out.ay = VectorXd::Zero(m);
    internal::PairGeometry geometry;
    NodeValues values;
    MatrixXd a_block;
    const BlockRange range = ChunkBlocks(num_blocks, chunks, chunk);
    for (Index b = range.first_block; b < range.end_block; ++b) {
      const Index c0 = b * block, cols = std::min(block, n - c0);
      evaluator_->MakeGeometryBlock(inducing_, 0, m, x, c0, cols, &geometry);
      geometry.vectorised = true;
      evaluator_->Evaluate(geometry, full, false, &values);
      a_block = evaluator_->Root(values).k;
      lower_factor.solveInPlace(a_block);
      if (keep_a) a_kept.middleCols(c0, cols) = a_block;
      out.aat.selfadjointView<Eigen::Lower>().rankUpdate(a_block);
      out.ay.noalias() += a_block * y.segment(c0, cols);
      MakeDiagonalGeometry(*evaluator_, x, c0, cols, &geometry);
      evaluator_->Evaluate(geometry, full, false, &values);
      out.residual_trace +=
          (evaluator_->Root(values).k.col(0) - a_block.colwise().squaredNorm().transpose()).sum();
    }
  });
  MatrixXd aat = MatrixXd::Zero(m, m);  // A Aᵀ = L⁻¹ K_uf K_fu L⁻ᵀ
  VectorXd ay = VectorXd::Zero(m);
  double t = 0.0;  // tr(K_ff − Q), Q = AᵀA
  for (const Pass1& part : pass1) {
    aat += part.aat;
    ay += part.ay;
    t += part.residual_trace;
  }
  aat.triangularView<Eigen::StrictlyUpper>() = aat.transpose();
  const double yy = y.squaredNorm();
  const MatrixXd identity = MatrixXd::Identity(m, m);

  SparseBounds bounds;
  bounds.jitter = epsilon;
  bounds.residual_trace = t;

  // Lower: Σ = Q + σ²I = σ²(I + AᵀA/σ²); with B = I + AAᵀ/σ² (m×m),
  //   log|Σ| = n log σ² + log|B|,  yᵀΣ⁻¹y = (yᵀy − (Ay)ᵀB⁻¹(Ay)/σ²)/σ².
  Eigen::LLT<MatrixXd> chol_b(identity + aat / s2);
  if (chol_b.info() != Eigen::Success) {
    return absl::FailedPreconditionError("I + AAᵀ/σ² is not positive definite");
  }
  const double log_det_b = 2.0 * chol_b.matrixLLT().diagonal().array().log().sum();
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

  // ---- Gradients (sparse_gp.h). Per bound, with β = (y − Aᵀc)/s (lower: s = σ², c = B⁻¹Ay/σ²;
  // upper: s = v, c = B_v⁻¹Ay/v) and R = 2c₃ L⁻ᵀ − L⁻ᵀB⁻¹/σ²:
  //   W_uf = R A + r βᵀ = 2c₃ (L⁻ᵀA) − (L⁻ᵀB⁻¹A)/σ² + r βᵀ,  r = L⁻ᵀAβ,
  // so Σ W_uf ∘ ∂K_uf = 2c₃ Σ(L⁻ᵀA)∘∂K − Σ(L⁻ᵀB⁻¹A)∘∂K/σ² + rᵀ(∂K β): pass 2 remakes
  // A_b = L⁻¹K_ub and sums the two contractions, the m-vectors ∂K β, Aβ and βᵀβ per parameter
  // and bound, block by block; the constants c₃ (which needs βᵀβ) and r are applied afterwards.
  // One GEMM [L⁻ᵀ; L⁻ᵀB⁻¹]A_b per block: the m×m factors carry L⁻ᵀ's large entries once, on
  // the well-scaled A_b (‖A_b‖ ≤ ‖K‖); (K_uu + εI)⁻¹K_ub as one product loses digits when K_uu
  // is ill-conditioned (Z = X).
  const std::vector<int> free_index = FreeIndex(*model_);
  std::vector<int> kernel_params;
  for (int i : free_index) {
    if (i != noise_index) kernel_params.push_back(i);
  }
  const int u_k = static_cast<int>(kernel_params.size());
  const MatrixXd b_inverse = chol_b.solve(identity);
  const double trace_sigma_inverse = (n_d - static_cast<double>(m) + b_inverse.trace()) / s2;
  const auto upper_factor = chol_uu.matrixU();  // Lᵀ: solving with it applies L⁻ᵀ
  // Bounds whose gradient is made: the ELBO's (j = 0) and, if asked, the upper bound's (j = 1).
  const int num_bounds = upper_gradient ? 2 : 1;
  // Both: stacked [L⁻ᵀ; L⁻ᵀB⁻¹] (2m×m), as the upper bound's c₃ needs βᵀβ, known only after
  // pass 2. The ELBO's alone: c₃ = 1/(2σ²) is known, so its R is one m×m matrix,
  // R = (L⁻ᵀ − L⁻ᵀB⁻¹)/σ² = L⁻ᵀ B⁻¹(AAᵀ/σ²)/σ² (I − B⁻¹ = B⁻¹AAᵀ/σ², no cancellation), and
  // pass 2 makes R A_b: half the product's flops.
  MatrixXd stacked;
  if (upper_gradient) {
    stacked.resize(2 * m, m);
    stacked.topRows(m) = upper_factor.solve(identity);
    stacked.bottomRows(m) = upper_factor.solve(b_inverse);
  } else {
    stacked = upper_factor.solve(MatrixXd(chol_b.solve(aat / s2))) / s2;
  }
  // The vectors c of the bounds (β_b = (y_b − A_bᵀc)/s).
  MatrixXd c_both(m, num_bounds);
  c_both.col(0) = b_inv_ay / s2;
  if (upper_gradient) c_both.col(1) = bv_inv_ay / v;
  const double scale_both[2] = {s2, v};

  struct Pass2 {
    // Both bounds: Σ(L⁻ᵀA)∘∂K_i, Σ(L⁻ᵀB⁻¹A)∘∂K_i; the ELBO's alone: Σ(RA)∘∂K_i in `first`.
    VectorXd first, second;
    MatrixXd d_beta[2];      // column i: Σ_b ∂K_i,b β_b, per bound
    MatrixXd a_beta;         // column j: Σ_b A_b β_b of bound j
    double beta_squared[2] = {0.0, 0.0};
    VectorXd diag;  // Σ ∂k(x_i, x_i)
  };
  std::vector<Pass2> pass2(chunks);
  ForEachChunk(pool, chunks, [&](int chunk) {
    Pass2& out = pass2[chunk];
    out.first = VectorXd::Zero(u_k);
    out.second = VectorXd::Zero(u_k);
    out.d_beta[0] = MatrixXd::Zero(m, u_k);
    out.d_beta[1] = MatrixXd::Zero(m, u_k);
    out.a_beta = MatrixXd::Zero(m, num_bounds);
    out.diag = VectorXd::Zero(u_k);
    internal::PairGeometry geometry;
    NodeValues values;
    MatrixXd products, beta, a_block;
    const BlockRange range = ChunkBlocks(num_blocks, chunks, chunk);
    for (Index b = range.first_block; b < range.end_block; ++b) {
      const Index c0 = b * block, cols = std::min(block, n - c0);
      evaluator_->MakeGeometryBlock(inducing_, 0, m, x, c0, cols, &geometry);
      geometry.vectorised = true;
      evaluator_->Evaluate(geometry, full, true, &values);
      const MatrixXd& k_block = evaluator_->Root(values).k;
      const std::vector<MatrixXd>& d_uf = evaluator_->Root(values).dk;
      if (keep_a) {
        a_block = a_kept.middleCols(c0, cols);
      } else {
        a_block = k_block;
        lower_factor.solveInPlace(a_block);
      }
      beta.noalias() = -a_block.transpose() * c_both;  // cols×num_bounds
      beta.colwise() += y.segment(c0, cols);
      for (int j = 0; j < num_bounds; ++j) {
        beta.col(j) /= scale_both[j];
        out.beta_squared[j] += beta.col(j).squaredNorm();
      }
      out.a_beta.noalias() += a_block * beta;
      products.noalias() = stacked * a_block;  // [L⁻ᵀA_b; L⁻ᵀB⁻¹A_b], or R A_b
      for (int q = 0; q < u_k; ++q) {
        const MatrixXd& d = d_uf[kernel_params[q]];
        out.first(q) += (products.topRows(m).array() * d.array()).sum();
        if (upper_gradient) out.second(q) += (products.bottomRows(m).array() * d.array()).sum();
        for (int j = 0; j < num_bounds; ++j) out.d_beta[j].col(q).noalias() += d * beta.col(j);
      }
      MakeDiagonalGeometry(*evaluator_, x, c0, cols, &geometry);
      evaluator_->Evaluate(geometry, full, true, &values);
      const std::vector<MatrixXd>& d_diag = evaluator_->Root(values).dk;
      for (int q = 0; q < u_k; ++q) out.diag(q) += d_diag[kernel_params[q]].sum();
    }
  });
  Pass2 sum = pass2[0];
  for (int c = 1; c < chunks; ++c) {
    sum.first += pass2[c].first;
    sum.second += pass2[c].second;
    for (int j = 0; j < 2; ++j) {
      sum.d_beta[j] += pass2[c].d_beta[j];
      sum.beta_squared[j] += pass2[c].beta_squared[j];
    }
    sum.a_beta += pass2[c].a_beta;
    sum.diag += pass2[c].diag;
  }
  const MatrixXd& a_beta_both = sum.a_beta;  // Aβ of both bounds

  struct Bound {
    double c3 = 0.0;  // G's multiple of I
    double c_diag = 0.0;
    double noise = 0.0;  // ∂/∂σ²
    VectorXd gradient;
  };
  Bound bound[2];  // [1] only with upper_gradient
  const double beta_squared_lower = sum.beta_squared[0];
  const double beta_squared_upper = sum.beta_squared[1];
  bound[0].c3 = 0.5 / s2;
  bound[0].c_diag = -0.5 / s2;
  bound[0].noise = 0.5 * (beta_squared_lower - trace_sigma_inverse) + 0.5 * t / (s2 * s2);
  bound[1].c3 = -0.5 * beta_squared_upper;
  bound[1].c_diag = 0.5 * beta_squared_upper;
  bound[1].noise = -0.5 * trace_sigma_inverse + 0.5 * beta_squared_upper;
  const std::vector<MatrixXd>& d_uu = evaluator_->Root(uu_values).dk;
  for (int j = 0; j < num_bounds; ++j) {
    Bound& bd = bound[j];
    bd.gradient = VectorXd::Zero(full.size());
    const VectorXd a_beta = a_beta_both.col(j);
    const VectorXd r_beta = upper_factor.solve(a_beta);  // r = L⁻ᵀAβ
    // W_uu = −L⁻ᵀ (M Aᵀ) L⁻¹ with M Aᵀ = −½(I − B⁻¹) + ½(Aβ)(Aβ)ᵀ + c₃AAᵀ (B⁻¹AAᵀ = σ²(I − B⁻¹)).
    const MatrixXd m_at =
        -0.5 * (identity - b_inverse) + 0.5 * a_beta * a_beta.transpose() + bd.c3 * aat;
    const MatrixXd left = upper_factor.solve(m_at);
    const MatrixXd w_uu = -upper_factor.solve(MatrixXd(left.transpose())).transpose();
    // ε = jitter·mean diag(K_uu) moves with θ: ∂(K_uu + εI) = ∂K_uu + ∂ε I.
    const double w_uu_trace = w_uu.trace();
    for (int q = 0; q < u_k; ++q) {
      const int i = kernel_params[q];
      const double d_epsilon = relative_jitter * d_uu[i].diagonal().mean();
      // Σ W_uf ∘ ∂K_uf's R A part: 2c₃ Σ(L⁻ᵀA)∘∂K − Σ(L⁻ᵀB⁻¹A)∘∂K/σ², or Σ(RA)∘∂K.
      const double r_a = upper_gradient ? 2.0 * bd.c3 * sum.first(q) - sum.second(q) / s2
                                        : sum.first(q);
      bd.gradient(i) = (w_uu.array() * d_uu[i].array()).sum() + d_epsilon * w_uu_trace + r_a +
                       r_beta.dot(sum.d_beta[j].col(q)) + bd.c_diag * sum.diag(q);
    }
    bd.gradient(noise_index) = bd.noise * noise_slope;
  }

  bounds.lower_gradient.resize(free_index.size());
  if (upper_gradient) bounds.upper_gradient.resize(free_index.size());
  for (size_t k = 0; k < free_index.size(); ++k) {
    bounds.lower_gradient(k) = bound[0].gradient(free_index[k]);
    if (upper_gradient) bounds.upper_gradient(k) = bound[1].gradient(free_index[k]);
  }
  if (!bounds.lower_gradient.allFinite() || !bounds.upper_gradient.allFinite()) {
    return absl::FailedPreconditionError("sparse bound gradients are not finite");
  }
  return bounds;
}

Eigen::VectorXd KernelDiagonal(const GpModel& model, const Eigen::VectorXd& free_raw,
                               Eigen::MatrixXd* gradient) {
  FlushDenormalsScope flush_denormals;
  const internal::KernelEvaluator evaluator(model.kernel(), model.x());
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
  const internal::KernelEvaluator evaluator(model.kernel(), model.x());
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
    selection.residual_trace_path.push_back(residual.cwiseMax(0.0).sum());
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
