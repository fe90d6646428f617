// Closed-form evidence problems shared by the nested-sampling and importance-sampling tests:
// a likelihood, an independent Gaussian prior and the exact log Z.
#ifndef GPSEL_TESTS_CORE_EVIDENCE_ORACLES_H_
#define GPSEL_TESTS_CORE_EVIDENCE_ORACLES_H_

#include <algorithm>
#include <cmath>

#include "Eigen/Dense"
#include "core/nested_sampling.h"

namespace gpsel {

struct EvidenceProblem {
  Eigen::VectorXd prior_mean, prior_sd;
  double log_z = 0.0;  // exact
  LogLikelihoodFn loglik;
};

// L(θ) = N(θ; mu, cov) with prior N(mean, diag(sd²)): Z = N(mu; mean, cov + diag(sd²)).
inline EvidenceProblem GaussianProblem(const Eigen::VectorXd& mu, const Eigen::MatrixXd& cov,
                                       const Eigen::VectorXd& mean, const Eigen::VectorXd& sd) {
  const int d = static_cast<int>(mu.size());
  EvidenceProblem p;
  p.prior_mean = mean;
  p.prior_sd = sd;
  Eigen::MatrixXd s = cov;
  s.diagonal() += sd.array().square().matrix();
  Eigen::LLT<Eigen::MatrixXd> llt_s(s);
  const Eigen::VectorXd r = llt_s.matrixL().solve(mu - mean);
  p.log_z = -0.5 * r.squaredNorm() -
            Eigen::MatrixXd(llt_s.matrixL()).diagonal().array().log().sum() -
            0.5 * d * std::log(2 * M_PI);
  const Eigen::MatrixXd l = Eigen::LLT<Eigen::MatrixXd>(cov).matrixL();
  const double log_det_half = l.diagonal().array().log().sum();
  p.loglik = [l, mu, log_det_half, d](const Eigen::VectorXd& x) {
    const Eigen::VectorXd z = l.triangularView<Eigen::Lower>().solve(x - mu);
    return -0.5 * z.squaredNorm() - log_det_half - 0.5 * d * std::log(2 * M_PI);
  };
  return p;
}

inline EvidenceProblem IsotropicProblem(int d, double width, double offset) {
  return GaussianProblem(Eigen::VectorXd::Constant(d, offset),
                         Eigen::MatrixXd::Identity(d, d) * width * width, Eigen::VectorXd::Zero(d),
                         Eigen::VectorXd::Ones(d));
}

// Equal mixture of N(+a·1, w²I) and N(-a·1, w²I) under a N(0, I) prior.
inline EvidenceProblem BimodalProblem(int d, double w, double a) {
  EvidenceProblem p;
  p.prior_mean = Eigen::VectorXd::Zero(d);
  p.prior_sd = Eigen::VectorXd::Ones(d);
  const double v = 1 + w * w;
  p.log_z = -0.5 * d * a * a / v - 0.5 * d * std::log(2 * M_PI * v);
  p.loglik = [d, w, a](const Eigen::VectorXd& x) {
    const double l1 = -0.5 * (x.array() - a).square().sum() / (w * w);
    const double l2 = -0.5 * (x.array() + a).square().sum() / (w * w);
    const double m = std::max(l1, l2);
    return m + std::log(std::exp(l1 - m) + std::exp(l2 - m)) + std::log(0.5) - d * std::log(w) -
           0.5 * d * std::log(2 * M_PI);
  };
  return p;
}

}  // namespace gpsel

#endif  // GPSEL_TESTS_CORE_EVIDENCE_ORACLES_H_
