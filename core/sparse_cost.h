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
// spread over `threads` (the passes split into kSparseChunks chunks). A fit is a few tens of
// such evaluations at its final m, plus the cheaper ones at the m it grew through (each level
// costs a quarter of the next with growth 2); the Laplace metrics add 4u evaluations (the
// five-point Hessian).
//
// Memory. No n×m matrix is held by the bounds; the greedy selection holds its n×m factor (the
// peak), plus per thread u + 3 blocks of m × block_columns, and O(m²) matrices.
//
//   double s = gpsel::EstimateSparseSeconds(n, m, kernel, /*threads=*/2);
//   int64_t b = gpsel::EstimateSparseBytes(n, m, kernel, /*threads=*/2);
#ifndef GPSEL_CORE_SPARSE_COST_H_
#define GPSEL_CORE_SPARSE_COST_H_

#include <cstdint>

#include "gpsel/core/kernel_expr.h"

namespace gpsel {

// Seconds of one evaluation of both bounds and their gradients at n points, m inducing inputs
// and u free parameters, on one core.
double SparseEvaluationSeconds(int64_t n, int64_t m, int num_parameters);

// Seconds of a sparse score of `kernel` (MLL and MAP fits, Hessian) ending at m inducing inputs
// on `threads` threads. m is what the fit will reach: the caller's --inducing, or a guess (the
// fit grows m until the gap closes; RESULTS gives typical m).
double EstimateSparseSeconds(int64_t n, int64_t m, const KernelExpr& kernel, int threads = 1);

// Peak bytes of a sparse fit at n points with m inducing inputs and d input columns (the data,
// the selection's n×m factor, the per-thread blocks), on `threads` threads.
int64_t EstimateSparseBytes(int64_t n, int64_t m, const KernelExpr& kernel, int threads = 1,
                            int num_columns = 1);

}  // namespace gpsel

#endif  // GPSEL_CORE_SPARSE_COST_H_
