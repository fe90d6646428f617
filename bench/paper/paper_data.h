// The paper's synthetic data (its kernel-search experiment, Tables 1–3), shared by the benches
// that run on it (bench/paper/paper_repro.cc, bench/changepoint_table.cc). It follows the
// authors' code (ABesginow/LaplaceKernelSearch, main.py at the ICML state): a zero-mean GP with
// every raw hyperparameter 0 (GPyTorch's default, each value softplus(0) ≈ 0.693, no output
// scale), at x = linspace(−5, 5, N) z-scored, the latent draw f plus noise of sd 0.1.
#ifndef GPSEL_BENCH_PAPER_PAPER_DATA_H_
#define GPSEL_BENCH_PAPER_PAPER_DATA_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/kernel_expr.h"

namespace gpsel::paper {

// x = linspace(−5, 5, n), z-scored with the sample sd (torch.std is unbiased).
inline Eigen::MatrixXd PaperInputs(int n) {
  Eigen::VectorXd x = Eigen::VectorXd::LinSpaced(n, -5.0, 5.0);
  const double mean = x.mean();
  const double sd = std::sqrt((x.array() - mean).square().sum() / (n - 1));
  return ((x.array() - mean) / sd).matrix();
}

// Draws of the latent GP with every raw hyperparameter 0, each plus N(0, 0.1²) noise.
inline absl::StatusOr<std::vector<Eigen::VectorXd>> NoisyPriorDraws(const KernelExpr& kernel,
                                                                    const Eigen::MatrixXd& x,
                                                                    int draws, uint64_t seed) {
  const int n = static_cast<int>(x.rows());
  absl::StatusOr<GpModel> model = GpModel::Create(kernel, x, Eigen::VectorXd::Zero(n));
  if (!model.ok()) return model.status();
  const Eigen::VectorXd raw = Eigen::VectorXd::Zero(model->num_free());
  Eigen::MatrixXd k = model->CrossCovariance(raw, x, x);
  // A latent draw needs K's square root only; LIN's K has rank 1, so a tiny jitter.
  k.diagonal().array() += 1e-10 * std::max(1.0, k.diagonal().mean());
  Eigen::LDLT<Eigen::MatrixXd> ldlt(k);
  if (ldlt.info() != Eigen::Success) return absl::InternalError("prior covariance not PSD");
  Eigen::MatrixXd root = ldlt.transpositionsP().transpose() *
                         Eigen::MatrixXd(ldlt.matrixL()) *
                         ldlt.vectorD().cwiseMax(0.0).cwiseSqrt().asDiagonal();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<Eigen::VectorXd> out;
  for (int d = 0; d < draws; ++d) {
    Eigen::VectorXd z(n), e(n);
    for (int i = 0; i < n; ++i) z(i) = normal(rng);
    for (int i = 0; i < n; ++i) e(i) = normal(rng);
    out.push_back(root * z + 0.1 * e);
  }
  return out;
}

}  // namespace gpsel::paper

#endif  // GPSEL_BENCH_PAPER_PAPER_DATA_H_
