// The cost model of the sparse (VFE) path, from n, m and the kernel, before anything runs: the
// time of a sparse score (the MLL and MAP fits with their growth of m, and the Hessian) and its
// peak memory. `--approx auto` compares it with the exact estimate (core/time_estimate.h); the
// refusal and the printed estimate use the bytes. docs/scaling.md ("Exact or sparse") states
// the formulas and bench/RESULTS.md (issue 28) the measurements they were checked against.
//
// Time. One evaluation of both bounds with their gradients (core/sparse_gp.cc) is two passes
// over n in blocks: pass 1 makes K_ub, A_b = L⁻¹K_ub (a triangular solve) and Σ A_bA_bᵀ (a rank
// update), pass 2 remakes K_ub with its u derivatives and one GEMM [M₁; M₂]K_ub, so about
//   6·n·m² flops  +  n·m·(u + 2) kernel entries (exp/sin/… per entry and parameter),
// spread over `threads` (the passes split into kSparseChunks chunks). How many a fit makes, and
// at which m, is core/time_estimate.cc's (SparseKernelFitCost, after core/sparse_fit.h).
//
// Memory. The greedy selection holds its n×m factor (the peak), an evaluation with the gradient
// keeps A = L⁻¹K_uf (n×m) between its passes when that is at most 512 MiB, plus per thread
// u + 3 blocks of m × block_columns, and O(m²) matrices. The fit caps m
// where that peak meets its budget (SparseFitOptions::memory_budget_bytes, by default
// kSparseMemoryBudgetBytes): at n = 10⁶ about m = 260.
//
//   double s = gpsel::SparseEvaluationSeconds(n, m, /*num_parameters=*/3);
//   int64_t b = gpsel::EstimateSparseBytes(n, m, kernel, /*threads=*/2);
//   int64_t cap = gpsel::SparseInducingCap(n, 512, kernel, /*threads=*/2, /*num_columns=*/1);
#ifndef GPSEL_CORE_SPARSE_COST_H_
#define GPSEL_CORE_SPARSE_COST_H_

#include <cstdint>

#include "gpsel/core/kernel_expr.h"

namespace gpsel {

// Bytes a sparse fit may hold unless told otherwise (SparseFitOptions::memory_budget_bytes).
inline constexpr int64_t kSparseMemoryBudgetBytes = int64_t{2} << 30;

// Seconds of one evaluation of both bounds and the ELBO's gradient (what the fits ask for) at n
// points, m inducing inputs and u free parameters, on one core.
double SparseEvaluationSeconds(int64_t n, int64_t m, int num_parameters);

// Peak bytes of a sparse fit at n points with m inducing inputs and d input columns (the data,
// the selection's n×m factor, the per-thread blocks), on `threads` threads.
int64_t EstimateSparseBytes(int64_t n, int64_t m, const KernelExpr& kernel, int threads = 1,
                            int num_columns = 1);

// The largest m ≤ max_inducing (≤ 0: n; never above n) whose EstimateSparseBytes fits
// `budget_bytes`: the m at which a fit stops growing. 0 when not even one inducing point fits.
// The fits (core/sparse_fit.cc) and the estimates (core/time_estimate.cc, memory_estimate.cc)
// share it.
int64_t SparseInducingCap(int64_t n, int64_t max_inducing, const KernelExpr& kernel,
                          int threads = 1, int num_columns = 1,
                          int64_t budget_bytes = kSparseMemoryBudgetBytes);

}  // namespace gpsel

#endif  // GPSEL_CORE_SPARSE_COST_H_
