// Peak-memory estimates of gpsel's work (score, search, predict, evidence), computed from the
// sizes of a request before anything is allocated. gpsel-server refuses a request whose estimate
// exceeds its per-request budget (`--max-request-bytes`, RESOURCE_EXHAUSTED with the estimate);
// see README "Limits and memory".
//
// The model counts the n×n matrices each phase holds at once (the dominant term; everything
// else is O(n·u) or smaller) and errs on the high side. bench/memory_estimate.sh checks it
// against the peak RSS that /usr/bin/time -v measures, recorded in bench/RESULTS.md.
//
//   gpsel::MemoryEstimate m = gpsel::EstimateScoreMemory(data, kernels, options);
//   if (m.bytes > budget) std::cerr << m.Summary();
#ifndef GPSEL_CORE_MEMORY_ESTIMATE_H_
#define GPSEL_CORE_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"

namespace gpsel {

struct MemoryEstimate {
  int64_t bytes = 0;      // estimated peak, above the process's resting footprint
  std::string breakdown;  // what dominates, e.g. "1 fit at a time × Hessian of 7 parameters ..."
  std::string Summary() const;  // "2.3 GB (breakdown)"
};

// "512 B", "3.1 MB", "2.3 GB" (decimal units, as /usr/bin/time and Prometheus print bytes).
std::string FormatBytes(int64_t bytes);

// Bytes of one likelihood-and-gradient evaluation at n points with u free parameters (the
// optimiser's working set per concurrently fitted start).
int64_t LikelihoodEvaluationBytes(int64_t n, int num_parameters);
// Bytes of the exact Hessian of `kernel` at n points (core/gp_model.cc LogLikelihoodHessian):
// L⁻¹, K⁻¹ and the panels of C_i = L⁻¹K_iL⁻ᵀ, at most 4 n² doubles, plus O(n·u).
int64_t LikelihoodHessianBytes(int64_t n, const KernelExpr& kernel);

MemoryEstimate EstimateScoreMemory(const Dataset& data, const std::vector<KernelExpr>& kernels,
                                   const ScoreOptions& options);
// Bounds every candidate the search may fit: up to options.max_depth base kernels, the
// widest base kernel at each leaf, `threads` candidates at once.
MemoryEstimate EstimateSearchMemory(const Dataset& data, const SearchOptions& options);
// `num_new_points` rows of x_new; includes the fit when options.hyperparameters is empty.
MemoryEstimate EstimatePredictMemory(const Dataset& data, const KernelExpr& kernel,
                                     int64_t num_new_points, const PredictOptions& options);
// One likelihood at a time, plus the sampler's stored points (at most max_likelihood_calls).
MemoryEstimate EstimateEvidenceMemory(const Dataset& data, const KernelExpr& kernel,
                                      const EvidenceOptions& options);

// A per-request memory budget (gpsel-server's --max-request-bytes) passed down to the sparse
// fits: ApproxOptions::memory_budget_bytes becomes the budget less what the estimates above
// count beside the fits (the request's fixed part and copies of `data`, the BLAS buffer, a
// prediction's new points), shared by the fits that run at once (a search's `threads`
// candidates). Then the estimate of a sparse request is within the budget whenever one inducing
// point fits, and the request runs with the m that budget holds instead of being refused; with
// less than that the estimate exceeds the budget and the refusal stands. The server's budget replaces the default
// (kSparseMemoryBudgetBytes) both ways: smaller, it lowers the cap on m; larger, it raises it
// (m still at most ApproxOptions::MaxInducing). `request_bytes` ≤ 0 (no budget): unchanged.
// docs/scaling.md, "The memory budget".
void ApplyRequestBudget(int64_t request_bytes, const Dataset& data, ScoreOptions& options);
void ApplyRequestBudget(int64_t request_bytes, const Dataset& data, SearchOptions& options);
// `num_new_points` rows of x_new.
void ApplyRequestBudget(int64_t request_bytes, const Dataset& data, int64_t num_new_points,
                        PredictOptions& options);

}  // namespace gpsel

#endif  // GPSEL_CORE_MEMORY_ESTIMATE_H_
