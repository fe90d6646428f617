// SparseGp: certified bounds on the exact log marginal likelihood log p(y|θ) of a GpModel from m
// inducing inputs Z (m ≪ n), in O(n m²) time and O(m² + m·block) memory, with analytic gradients in
// the raw hyperparameters (Z held fixed); and the greedy choice of Z (a partial pivoted Cholesky).
//
// With Q = K_fu (K_uu + εI)⁻¹ K_uf (ε: SparseGpOptions::jitter), Σ = Q + σ²I and the residual
// trace t = tr(K_ff − Q) ≥ 0:
//   lower (Titsias 2009, the collapsed VFE bound)
//     ELBO = log N(y | 0, Σ) − t / (2σ²)
//   upper (Titsias 2014: log|K+σ²I| ≥ log|Σ| as K ⪰ Q, and K + σ²I ⪯ Q + (σ² + t)I as the
//   largest eigenvalue of K_ff − Q is at most its trace)
//     UB = −½ n log 2π − ½ log|Σ| − ½ yᵀ(Q + (σ² + t)I)⁻¹ y
// so ELBO ≤ log p(y|θ) ≤ UB for every Z, θ and ε ≥ 0 (the jitter only makes Q smaller, which is
// the exact Q of noisy inducing variables u + N(0, εI); both bounds stay valid). With Z = X and
// ε = 0 both equal log p(y|θ).
//
// Gradients: both bounds are functions of Q, K_ff's diagonal and σ². With G the derivative with
// respect to Q (n×n, never formed), P = (K_uu + εI)⁻¹ and the chain rule through Q:
//   ∂/∂r = Σ W_uf ∘ ∂K_uf + Σ W_uu ∘ ∂K_uu + c_diag · Σ ∂diag(K_ff) (+ the noise term),
//   W_uf = 2 P K_uf G,  W_uu = −P K_uf G K_fu P,
// where G = −½Σ⁻¹ + ½ββᵀ + c₃ I (lower: β = Σ⁻¹y, c₃ = 1/(2σ²), c_diag = −1/(2σ²); upper:
// β = (Q + (σ²+t)I)⁻¹y, c₃ = −½βᵀβ, c_diag = ½βᵀβ). With L the Cholesky factor of K_uu + εI,
// A = L⁻¹K_uf and B = I + AAᵀ/σ² (Woodbury): P K_uf Σ⁻¹ = L⁻ᵀ B⁻¹A/σ², so
//   W_uf = R A + L⁻ᵀ(Aβ)βᵀ with R = 2 L⁻ᵀ (c₃ I − B⁻¹/(2σ²)),
// made a block of columns at a time next to the ∂K_uf block it is contracted with. Two passes
// over n: the first sums AAᵀ, Ay and tr(K_ff); the second remakes each K_ub with its
// derivatives, takes A_b = L⁻¹K_ub kept from the first (or remakes it when A exceeds
// SparseGpOptions::max_cached_factor_bytes: then nothing of size n×m is held, and the greedy
// selection's factor is the fit's only n×m matrix) and sums the contractions; the passes run
// in kSparseChunks fixed chunks on
// SparseGpOptions::threads threads, summed in order (same bits for any thread count).
// core/sparse_gp.cc spells out every step.
//
//   absl::StatusOr<InducingSelection> z = SelectInducingPoints(model, raw, {.max_points = 256});
//   absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, z->points);
//   absl::StatusOr<SparseBounds> b = sparse->Bounds(raw, /*with_gradient=*/true);
#ifndef GPSEL_CORE_SPARSE_GP_H_
#define GPSEL_CORE_SPARSE_GP_H_

#include <memory>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/gp_model.h"

namespace gpsel {

class ThreadPool;  // core/internal/thread_pool.h

namespace internal {
class KernelEvaluator;
struct PairGeometry;
}  // namespace internal

struct SparseGpOptions {
  // ε added to K_uu's diagonal, relative to the signal's scale: ε = jitter × mean diag(K_uu) at
  // θ (so the same on y in any unit; its dependence on θ is in the gradients). Both bounds hold
  // for any ε ≥ 0 (Q_ε is the exact Q of noisy inducing variables u + N(0, εI)), but ε takes
  // about n·ε or more out of tr(Q), which the upper bound's σ² + t feels directly: with an
  // absolute 1e-6 and σ² = 5e-4 (Mauna Loa, n = 261) the gap stayed at 28 nats however many
  // points were added, and 1e-8 absolute is already ≈ σ² at the noise floor (1e-4) for n = 10⁴.
  // The upper bound feels t about n times over (its quadratic form yᵀ(Q + (σ² + t)I)⁻¹y moves by
  // ≈ t·‖Σ⁻¹y‖²/2 ≈ t·n/(2σ²)), so ε's share of the gap grows like n²ε/σ²: on a 10⁵-point series
  // (bench/sparse_scale_data.py, σ² = 1.3·10⁻³) with Z run to its end the gap was 720 nats with
  // 10⁻¹⁰, 1.5 with 10⁻¹³ (bench/RESULTS.md, issue 28, twentieth session). When K_uu + εI is
  // not positive definite at some θ the factorisation is retried with ε × 100 (up to
  // max_jitter) and SparseBounds::jitter says which ε the bounds used. The greedy selection
  // keeps K_uu's pivots above 10⁻¹²·max k(x,x) at the θ it chose Z at, ten times ε and far above
  // the factorisation's rounding (≈ m·10⁻¹⁶).
  double jitter = 1e-13;
  double max_jitter = 1e-6;
  // Columns of K_uf made at once (the derivative blocks hold u·m·block_columns doubles per
  // thread).
  int block_columns = 512;
  // An evaluation with the gradient keeps A = L⁻¹K_uf (m×n doubles) between its two passes when
  // it takes at most this many bytes, else remakes it block by block (core/sparse_gp.cc): ~10 %
  // of an evaluation's time. The greedy selection's n×m factor, the fit's peak
  // (core/sparse_cost.h), is freed before any evaluation, so a kept A is within the same peak.
  int64_t max_cached_factor_bytes = int64_t{512} << 20;
  // The n-sized passes run over this many threads (1 = the caller's). The blocks are summed in
  // a fixed order over a fixed partition (kSparseChunks chunks), so the numbers are the same
  // bits whatever the thread count.
  int threads = 1;
  absl::Status Validate() const;  // 0 ≤ jitter ≤ max_jitter finite, block_columns ≥ 1, threads ≥ 1
};

// The n-sized passes are cut into this many chunks of consecutive blocks (fewer when there are
// fewer blocks), each summed on its own and then in order: the partition does not depend on the
// thread count, which keeps the bits identical.
inline constexpr int kSparseChunks = 8;

struct SparseBounds {
  double lower = 0.0;           // ELBO (Titsias 2009)
  double upper = 0.0;           // Titsias 2014
  double residual_trace = 0.0;  // t = tr(K_ff − Q)
  double jitter = 0.0;          // the absolute ε the bounds used (SparseGpOptions::jitter)
  Eigen::VectorXd lower_gradient;  // ∂/∂(free raw), filled when asked
  Eigen::VectorXd upper_gradient;
  double gap() const { return upper - lower; }
};

class SparseGp {
 public:
  // `model` must outlive the SparseGp (its data, kernel and parameters are read, not copied).
  // INVALID_ARGUMENT when `inducing` is empty or has a different number of columns than x.
  static absl::StatusOr<SparseGp> Create(const GpModel& model, Eigen::MatrixXd inducing,
                                         const SparseGpOptions& options = {});
  SparseGp(SparseGp&&) noexcept;
  SparseGp& operator=(SparseGp&&) noexcept;
  ~SparseGp();

  int num_inducing() const { return static_cast<int>(inducing_.rows()); }
  const Eigen::MatrixXd& inducing() const { return inducing_; }
  const GpModel& model() const { return *model_; }

  // Both bounds at `free_raw` (the GpModel's free parameters), with their gradients if asked:
  // both, or with `upper_gradient` false only the ELBO's (upper_gradient left empty), which is
  // all a fit needs and costs about a quarter less at large m (one m×m×n product in the
  // gradient pass instead of two, core/sparse_gp.cc).
  // FAILED_PRECONDITION when K_uu + εI is not positive definite or a value is not finite;
  // INVALID_ARGUMENT on a wrong size.
  absl::StatusOr<SparseBounds> Bounds(const Eigen::VectorXd& free_raw, bool with_gradient = false,
                                      bool upper_gradient = true) const;

 private:
  SparseGp() = default;
  const GpModel* model_ = nullptr;
  SparseGpOptions options_;
  Eigen::MatrixXd inducing_;
  std::unique_ptr<internal::KernelEvaluator> evaluator_;
  std::unique_ptr<internal::PairGeometry> inducing_geometry_;  // Z with Z
  std::unique_ptr<ThreadPool> pool_;  // threads − 1 workers (the caller helps); null for 1
};

// K_ff's diagonal k(x_i, x_i) at the model's free raw values (no noise), O(n) memory; with
// `gradient` non-null also its derivatives, one column per free parameter (the noise's is 0).
Eigen::VectorXd KernelDiagonal(const GpModel& model, const Eigen::VectorXd& free_raw,
                               Eigen::MatrixXd* gradient = nullptr);

struct InducingSelectionOptions {
  int max_points = 256;  // m at most (capped at n)
  // Stop early when the largest conditional variance left, k(x,x) − Q(x,x), is at most this
  // times the largest prior variance k(x,x): the remaining points add nothing the jitter
  // (SparseGpOptions::jitter, ten times smaller) would not swamp.
  double relative_tolerance = 1e-12;
  absl::Status Validate() const;  // max_points ≥ 1, tolerance ≥ 0 and finite
};

struct InducingSelection {
  Eigen::MatrixXd points;      // m×d, rows of x in the order chosen
  std::vector<int> indices;    // their row indices in x
  double residual_trace = 0;   // Σ_i (k(x_i,x_i) − Q(x_i,x_i)) after the last choice (ε = 0)
  double max_residual = 0;     // the largest conditional variance left
  // residual_trace_path[j]: the residual trace with the first j + 1 points only. The greedy
  // choice is nested (the first j points of a larger selection are the selection of j), so one
  // selection at the cap tells every smaller m's trace: FitSparse reads the smallest m whose
  // trace term t/(2σ²) — a lower bound on UB − ELBO — is within the gap tolerance.
  std::vector<double> residual_trace_path;
};

// Greedy conditional variance (Burt, Rasmussen & van der Wilk 2020): repeatedly the point whose
// variance given the points chosen so far is largest, i.e. the pivots of a partial pivoted
// Cholesky of K_ff. O(n m²) time, n·m doubles. Ties go to the lowest row index (deterministic).
// INVALID_ARGUMENT on bad options or a wrong-sized `free_raw`.
absl::StatusOr<InducingSelection> SelectInducingPoints(const GpModel& model,
                                                       const Eigen::VectorXd& free_raw,
                                                       const InducingSelectionOptions& options);

}  // namespace gpsel

#endif  // GPSEL_CORE_SPARSE_GP_H_
