// The sparse path's time and memory model (see sparse_cost.h).
#include "gpsel/core/sparse_cost.h"

#include <algorithm>
#include <cmath>

#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/sparse_gp.h"

namespace gpsel {

namespace {

// Calibrated on the bench machine (bench/RESULTS.md, issue 28, twenty-first session:
// `sparse_bench --csv data/sf_temps.csv --evaluations-only 4 --threads 1` at m = 128, 256, 512,
// CPU seconds of an evaluation with the ELBO's gradient against n·m² and n·m·(u + 2); the
// kernel entries' part fell by half with the vectorised sin and the flushed exp underflow,
// core/internal/vector_math.cc). An SE-only kernel is cheaper per entry than this (no sin):
// C*SE at n = 10⁵, m = 128 measured 0.45 s against 0.70 s here.
constexpr double kSecondsPerFlop = 1.0 / 25e9;     // the passes' BLAS 3 work, one core
constexpr double kSecondsPerKernelEntry = 4.9e-9;  // one kernel entry and its derivatives

int NumFreeParameters(const KernelExpr& kernel) {
  absl::StatusOr<std::vector<HyperparameterInfo>> info = DescribeHyperparameters(kernel, {});
  return info.ok() ? static_cast<int>(info->size()) : 1 + 2 * NumBaseKernels(kernel);
}

}  // namespace

double SparseEvaluationSeconds(int64_t n, int64_t m, int num_parameters) {
  const double nd = static_cast<double>(n), md = static_cast<double>(m);
  return 6.0 * nd * md * md * kSecondsPerFlop +
         nd * md * (num_parameters + 2) * kSecondsPerKernelEntry;
}

int64_t EstimateSparseBytes(int64_t n, int64_t m, const KernelExpr& kernel, int threads,
                            int num_columns) {
  const int64_t u = NumFreeParameters(kernel);
  const int64_t data = 8 * n * (num_columns + 2);  // x, y, diag(K_ff)/residuals
  const int64_t selection = 8 * n * m;             // the greedy selection's factor
  const int64_t blocks =
      8 * int64_t{std::max(threads, 1)} * (u + 3) * m * SparseGpOptions{}.block_columns;
  // An evaluation's A = L⁻¹K_uf kept between its passes (SparseGpOptions::
  // max_cached_factor_bytes), beside the blocks; the selection's factor is freed by then.
  const int64_t kept = selection <= SparseGpOptions{}.max_cached_factor_bytes ? selection : 0;
  const int64_t small = 8 * (kSparseChunks + 16) * m * m;
  return data + std::max(selection, kept + blocks) + small;
}

int64_t SparseInducingCap(int64_t n, int64_t max_inducing, const KernelExpr& kernel, int threads,
                          int num_columns, int64_t budget_bytes) {
  const int64_t most = max_inducing > 0 ? std::min(max_inducing, n) : n;
  int64_t cap = 0;  // bytes grow with m: bisect for the last m within the budget
  for (int64_t lo = 1, hi = std::max<int64_t>(most, 1); lo <= hi;) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (EstimateSparseBytes(n, mid, kernel, threads, num_columns) <= budget_bytes) {
      cap = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return std::min(cap, most);
}

}  // namespace gpsel
