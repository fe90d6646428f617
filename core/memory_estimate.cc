// Peak-memory estimates; see memory_estimate.h. The counts of n×n matrices follow the code they
// describe (core/gp_model.cc, core/predict.cc, core/nested_sampling.cc); the constants were
// checked against /usr/bin/time -v by bench/memory_estimate.sh (bench/RESULTS.md).
#include "gpsel/core/memory_estimate.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"
#include "gpsel/core/approx_score.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/sparse_cost.h"

namespace gpsel {
namespace {

constexpr int64_t kDouble = sizeof(double);
// Fixed overhead of a request's own copies (dataset, options, result) beyond the n×n terms.
constexpr int64_t kRequestOverheadBytes = int64_t{4} << 20;
// OpenBLAS's work buffer, per thread that calls it with large products (its GEMM blocking): the
// remainder bench/memory_estimate.sh measured beyond the counted matrices (16-20 MB at
// n = 2,000-10,000), which the baseline run without any product does not have.
constexpr int64_t kBlasBufferBytes = int64_t{32} << 20;
// n×n matrices of one likelihood-and-gradient evaluation: K, factorised in place and turned
// into K⁻¹ in the factor's storage, plus the copy a jitter retry factorises. The gradient is
// accumulated over 64×64 tiles (O(u) tiles), not whole ∂K/∂θ matrices.
constexpr int64_t kEvaluationMatrices = 2;
// Below this many points the model keeps the whole pairwise geometry and every ∂K/∂θ
// (core/gp_model.cc); above, tiles. Either way the small-n case costs little.
constexpr int64_t kWholeMatricesBelow = 256;
// Parameters of the widest base kernel (PER, RQ: two each) and of one leaf's variance C.
constexpr int kWidestBaseParameters = 2;
// The sampler keeps at most this many points for importance nested sampling
// (core/nested_sampling.cc kMaxImportancePoints); a vector may double once while growing.
constexpr int64_t kImportancePoints = 600000;

int64_t Square(int64_t n) { return n * n; }

struct KernelShape {
  int nodes = 0;           // base kernels, sums and products
  int parameters = 0;      // kernel parameters (without noise)
  std::set<int> dims;      // input columns read (-1 = all)
  int geometry_kinds = 0;  // d², d, x·x' matrices per column, at most 3
};

int Walk(const KernelExpr& k, KernelShape& shape, std::set<std::string>& kinds) {
  ++shape.nodes;
  if (k.is_base()) {
    const int p = static_cast<int>(BaseKernelParameterNames(k.base).size());
    shape.parameters += p;
    shape.dims.insert(k.active_dim);
    switch (k.base) {
      case BaseKernel::kSE:
      case BaseKernel::kRQ:
        kinds.insert("squared_distance");
        break;
      case BaseKernel::kLIN:
        kinds.insert("dot");
        break;
      case BaseKernel::kConst:
        break;
      default:
        kinds.insert("distance");
    }
    return p;
  }
  int below = 0;
  for (const KernelExpr& operand : k.operands) below += Walk(operand, shape, kinds);
  if (k.is_change()) {  // its own parameters (location, transition[, width])
    const int own = static_cast<int>(ChangeParameterNames(k.kind).size());
    shape.parameters += own;
    below += own;
  }
  return below;
}

KernelShape ShapeOf(const KernelExpr& kernel) {
  KernelShape shape;
  std::set<std::string> kinds;
  Walk(kernel, shape, kinds);
  shape.geometry_kinds = static_cast<int>(kinds.size());
  return shape;
}

// The exact Hessian (core/gp_model.cc LogLikelihoodHessian) holds L⁻¹ and K⁻¹ (two n×n
// matrices), its panels of C_i = L⁻¹K_iL⁻ᵀ (u·panel·n doubles: at most two n×n more, u/4 of one
// below u = 8), one row block of every kernel parameter's K_i (at most n²/2, 256 rows each from
// n ≈ 512·u on), and O(n·u) vectors (K_iα and their solves). Nothing of it depends on the
// kernel's tree beyond u: the derivatives are made in 64×64 tiles.
int64_t HessianBytes(int64_t n, int u) {
  const HessianLayout layout = ResolveHessianLayout(static_cast<int>(n), u, std::max(u - 1, 0));
  const int64_t doubles = 2 * Square(n) + int64_t{layout.panel_rows} * n * u +
                          int64_t{layout.block_rows} * n * std::max(u - 1, 0) + 8 * n * u;
  return kDouble * doubles;
}

// The worst candidate a search of `depth` steps can build: `depth` leaves of the widest base
// kernel, so u = 2·depth + 1 with the noise.
int64_t WorstSearchHessianBytes(int64_t n, int depth) {
  return HessianBytes(n, std::max(depth, 1) * kWidestBaseParameters + 1);
}

MemoryEstimate Make(int64_t bytes, std::string breakdown) {
  MemoryEstimate m;
  m.bytes = bytes + kRequestOverheadBytes;
  m.breakdown = std::move(breakdown);
  return m;
}

// A sparse fit's peak (core/sparse_cost.h) at the largest m it may reach: the M asked for or
// the default cap, within the fit's memory budget (ApproxOptions::memory_budget_bytes).
int64_t SparseFitBytes(int64_t n, int64_t d, const ApproxOptions& approx, const KernelExpr& kernel,
                       int threads) {
  const int64_t m = std::max<int64_t>(
      1, SparseInducingCap(n, approx.MaxInducing(n), kernel, threads, static_cast<int>(d),
                           approx.memory_budget_bytes));
  return EstimateSparseBytes(n, m, kernel, threads, static_cast<int>(d)) + kBlasBufferBytes;
}

// The request's own copies of its data beside the sparse fits' (which EstimateSparseBytes
// counts): the message as received (gRPC's slices and the flat buffer it is parsed from) and as
// parsed, the validated Dataset, and the score's prepared model (standardised y, scaled x),
// n·(d + 1) doubles each. Tens of MB at 10⁶ points (nothing beside an exact request's n²
// terms): a 10⁶-point sparse score on gpsel-server at a 1 GiB budget peaked 80 MB above the
// estimate without them, and 16 MB (1.5 %) above it with four (bench/RESULTS.md, issue 28,
// twenty-first session).
constexpr int64_t kRequestDataCopies = 5;

int64_t RequestDataBytes(const Dataset& data) {
  return kRequestDataCopies * kDouble * data.num_points() * (data.num_dims() + 1);
}

// The bytes each of `fits_at_once` sparse fits may hold (beside its kBlasBufferBytes, which
// SparseFitBytes adds) when the request's estimate — the fits, `other_bytes` (the data's copies
// and what else the request holds), and the request's fixed part (kRequestOverheadBytes, which
// Make adds) — is to stay within `request_bytes`; at least 1 (ApproxOptions::Validate), so that
// a budget too small for one inducing point is refused by its estimate rather than failing
// inside the fit.
int64_t SparseShareOfRequest(int64_t request_bytes, int64_t fits_at_once, int64_t other_bytes) {
  const int64_t share =
      (request_bytes - kRequestOverheadBytes - other_bytes) / std::max<int64_t>(fits_at_once, 1) -
      kBlasBufferBytes;
  return std::max<int64_t>(share, 1);
}

// A prediction's own arrays beside the sparse fit (EstimatePredictMemory).
int64_t SparsePredictionBytes(int64_t num_new_points, int64_t num_dims) {
  return kDouble * num_new_points * (num_dims + 4);
}

int FitThreads(const FitOptions& fit) { return std::max(1, fit.pool != nullptr ? 1 : fit.threads); }

}  // namespace

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b < 1e3) return absl::StrFormat("%d B", bytes);
  if (b < 1e6) return absl::StrFormat("%.1f kB", b / 1e3);
  if (b < 1e9) return absl::StrFormat("%.1f MB", b / 1e6);
  return absl::StrFormat("%.2f GB", b / 1e9);
}

std::string MemoryEstimate::Summary() const {
  return absl::StrCat(FormatBytes(bytes), " (", breakdown, ")");
}

int64_t LikelihoodEvaluationBytes(int64_t n, int num_parameters) {
  const int64_t whole = n < kWholeMatricesBelow ? num_parameters + 3 : 0;
  return kDouble * (Square(n) * (kEvaluationMatrices + whole) + n * (num_parameters + 8));
}

int64_t LikelihoodHessianBytes(int64_t n, const KernelExpr& kernel) {
  return HessianBytes(n, ShapeOf(kernel).parameters + 1);
}

MemoryEstimate EstimateScoreMemory(const Dataset& data, const std::vector<KernelExpr>& kernels,
                                   const ScoreOptions& options) {
  const int64_t n = data.num_points();
  const int threads = FitThreads(options.fit);
  int64_t worst = 0;
  std::string worst_kernel;
  for (const KernelExpr& kernel : kernels) {
    if (ChooseApproximation(data, kernel, options).sparse) {
      const int64_t bytes = SparseFitBytes(n, data.num_dims(), options.approx, kernel, threads) +
                            RequestDataBytes(data);
      if (bytes > worst) {
        worst = bytes;
        worst_kernel = ToString(kernel) + " (sparse)";
      }
      continue;
    }
    const int u = ShapeOf(kernel).parameters + 1;
    // Kernels are scored one after another. Within one, `threads` starts evaluate at once;
    // the MLL and MAP fits run as one batch, so with two threads or more both winners' Newton
    // polishes (each with its exact Hessian) can run at once, beside evaluations of the other
    // threads. A thread's Hessian comes after its evaluations, never beside them.
    const int concurrent_hessians = std::min(threads, 2);
    const int64_t bytes =
        threads * kBlasBufferBytes +
        std::max<int64_t>(threads * LikelihoodEvaluationBytes(n, u),
                          concurrent_hessians * LikelihoodHessianBytes(n, kernel) +
                              (threads - concurrent_hessians) * LikelihoodEvaluationBytes(n, u));
    if (bytes > worst) {
      worst = bytes;
      worst_kernel = ToString(kernel);
    }
  }
  std::string breakdown = absl::StrFormat("n = %d, largest need: the Hessian of %s, %d fit thread(s)",
                                          n, worst_kernel, threads);
  if (options.test != nullptr) {
    // Held-out likelihoods (core/held_out.cc), after the fits: K, the test block twice and the
    // cross-covariance twice.
    const int64_t t = options.test->num_points();
    worst = std::max(worst, kDouble * (Square(n) + 2 * Square(t) + 2 * n * t));
    breakdown += absl::StrFormat(", %d held-out point(s)", t);
  }
  return Make(worst, breakdown);
}

MemoryEstimate EstimateSearchMemory(const Dataset& data, const SearchOptions& options) {
  const int64_t n = data.num_points();
  const int threads = std::max(1, options.threads);
  const int depth = std::max(1, options.max_depth);
  if (ChooseSearchApproximation(data, options).sparse) {
    // The widest candidate: `depth` copies of SE summed (2 parameters each, as the widest base).
    const KernelExpr widest =
        KernelExpr::Sum(std::vector<KernelExpr>(depth, KernelExpr::Base(BaseKernel::kSE)));
    return Make(threads * SparseFitBytes(n, data.num_dims(), options.score.approx, widest, 1) +
                    RequestDataBytes(data),
                absl::StrFormat("n = %d, %d sparse candidate(s) at once", n, threads));
  }
  // Each candidate's fit runs in its thread: its Hessian comes after its evaluations.
  const int64_t per_candidate =
      kBlasBufferBytes + std::max(WorstSearchHessianBytes(n, depth),
                                  LikelihoodEvaluationBytes(n, depth * kWidestBaseParameters + 1));
  return Make(threads * per_candidate,
              absl::StrFormat("n = %d, %d candidate(s) at once, each up to %d base kernels "
                              "with its Hessian",
                              n, threads, depth));
}

MemoryEstimate EstimatePredictMemory(const Dataset& data, const KernelExpr& kernel,
                                     int64_t num_new_points, const PredictOptions& options) {
  const int64_t n = data.num_points();
  if (ChooseApproximation(data, kernel, options.fit).sparse) {
    return Make(SparseFitBytes(n, data.num_dims(), options.fit.approx, kernel,
                               std::max(1, options.fit.fit.threads)) +
                    SparsePredictionBytes(num_new_points, data.num_dims()) +
                    RequestDataBytes(data),
                absl::StrFormat("n = %d, %d new points, sparse", n, num_new_points));
  }
  const int64_t block = options.block_columns > 0
                            ? std::min<int64_t>(options.block_columns, num_new_points)
                            : std::min(PredictBlockColumns(n), num_new_points);
  // K is evaluated like any kernel matrix: the pairwise geometry and every node's value exist
  // at once (measured: 129 MB for C*SE at n = 2,000, four n×n matrices), then it is factorised
  // in place. Each block's cross-covariance is made the same way, plus its solve; then the
  // results.
  const KernelShape shape = ShapeOf(kernel);
  const int64_t evaluation_matrices =
      shape.nodes + static_cast<int64_t>(shape.dims.size()) * shape.geometry_kinds + 1;
  int64_t bytes = kDouble * (Square(n) * evaluation_matrices +
                             n * block * (evaluation_matrices + 1) +
                             num_new_points * (data.num_dims() + 4));
  std::string breakdown = absl::StrFormat("n = %d, m = %d in blocks of %d", n, num_new_points,
                                          block);
  if (options.components) {
    // Each summand's block cross-covariance and solve while the whole kernel's are still held
    // (a summand has no more nodes than the whole), and two more results per summand.
    const int64_t summands =
        kernel.kind == KernelExpr::Kind::kSum ? static_cast<int64_t>(kernel.operands.size()) : 1;
    bytes += kDouble * (n * block * (evaluation_matrices + 1) + num_new_points * 2 * summands);
    breakdown += absl::StrFormat(", %d component(s)", summands);
  }
  if (options.samples > 0) {
    // Joint samples (core/predict.cc): the cross-covariance and its solve (n × new points each),
    // the posterior covariance and its factor, and the draws.
    bytes += kDouble * (2 * n * num_new_points + 2 * Square(num_new_points) +
                        int64_t{options.samples} * num_new_points);
    breakdown += absl::StrFormat(", %d joint sample(s)", options.samples);
  }
  if (options.hyperparameters.empty() && !options.model) {
    // The fit (no Laplace Hessian, but the winner's polish makes one) comes first and is freed.
    ScoreOptions fit = options.fit;
    const MemoryEstimate fitted = EstimateScoreMemory(data, {kernel}, fit);
    bytes = std::max(bytes, fitted.bytes - kRequestOverheadBytes);
    breakdown += ", after the fit";
  }
  return Make(bytes, breakdown);
}

void ApplyRequestBudget(int64_t request_bytes, const Dataset& data, ScoreOptions& options) {
  if (request_bytes <= 0) return;
  // Kernels are scored one after another, each fit in turn (core/sparse_score.cc): one at once.
  options.approx.memory_budget_bytes =
      SparseShareOfRequest(request_bytes, 1, RequestDataBytes(data));
}

void ApplyRequestBudget(int64_t request_bytes, const Dataset& data, SearchOptions& options) {
  if (request_bytes <= 0) return;
  // `threads` candidates are fitted at once (EstimateSearchMemory).
  options.score.approx.memory_budget_bytes = SparseShareOfRequest(
      request_bytes, std::max(1, options.threads), RequestDataBytes(data));
}

void ApplyRequestBudget(int64_t request_bytes, const Dataset& data, int64_t num_new_points,
                        PredictOptions& options) {
  if (request_bytes <= 0) return;
  options.fit.approx.memory_budget_bytes = SparseShareOfRequest(
      request_bytes, 1,
      RequestDataBytes(data) + SparsePredictionBytes(num_new_points, data.num_dims()));
}

MemoryEstimate EstimateEvidenceMemory(const Dataset& data, const KernelExpr& kernel,
                                      const EvidenceOptions& options) {
  const int64_t n = data.num_points();
  const int u = ShapeOf(kernel).parameters + 1;
  // Nested sampling: min(threads, runs) runs at once, each one likelihood at a time; every dead
  // point of every run (at most one per call) keeps its position and weights; a run's
  // importance points are capped, and their vectors may double once while growing.
  const NestedSamplingOptions& ns = options.sampling;
  const int64_t calls = std::max<int64_t>(ns.max_likelihood_calls, 1);
  const int64_t runs_at_once = std::max(1, std::min(ns.threads, ns.num_runs));
  const int64_t nested =
      runs_at_once * (LikelihoodEvaluationBytes(n, u) + kBlasBufferBytes) +
      ns.num_runs * (kDouble * calls * (u + 4) +
                     2 * (kDouble * (u + 1) + 4) * std::min(calls, kImportancePoints));
  if (options.method == EvidenceMethod::kNested) {
    return Make(nested, absl::StrFormat("n = %d, u = %d, %d run(s) of up to %d samples, %d at "
                                        "once",
                                        n, u, ns.num_runs, calls, runs_at_once));
  }
  // Importance sampling: the mode search's fit (threads starts at once, one Hessian at a time
  // for the polish), then threads likelihoods at once; every sample keeps its position, log
  // likelihood, log prior, weight and its density under each of the (at most 1 + max_adaptations)
  // proposals, and doubles once while growing.
  const ImportanceSamplingOptions& is = options.importance;
  const int64_t threads = std::max(1, is.threads);
  const int64_t importance = threads * (LikelihoodEvaluationBytes(n, u) + kBlasBufferBytes) +
                             LikelihoodHessianBytes(n, kernel) +
                             2 * kDouble * is.max_samples * (u + 5 + is.max_adaptations);
  const int64_t bytes =
      options.method == EvidenceMethod::kAuto ? std::max(nested, importance) : importance;
  return Make(bytes, absl::StrFormat("n = %d, u = %d, importance sampling on %d threads, up to "
                                     "%d samples%s",
                                     n, u, threads, is.max_samples,
                                     options.method == EvidenceMethod::kAuto
                                         ? ", or nested sampling if its diagnostics fail"
                                         : ""));
}

}  // namespace gpsel
