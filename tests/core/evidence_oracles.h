// Closed-form evidence problems shared by the nested-sampling and importance-sampling tests:
// a likelihood, an independent Gaussian prior and the exact log Z (closed form, or a 1-D
// quadrature for the banana).
#ifndef GPSEL_TESTS_CORE_EVIDENCE_ORACLES_H_
#define GPSEL_TESTS_CORE_EVIDENCE_ORACLES_H_

#include <algorithm>
#include <cmath>

#include "Eigen/Dense"
#include "gpsel/core/nested_sampling.h"

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

// A banana: L(θ) = N(θ₁; 0, s₁²) N(θ₂; b θ₁², s₂²) under a N(0, I) prior. Integrating θ₂ in closed
// form leaves Z = ∫ N(θ₁; 0, s₁²) φ(θ₁) N(b θ₁²; 0, 1 + s₂²) dθ₁, a 1-D integral that a fine
// midpoint rule computes to 1e-10.
struct Banana {
  double b = 1.0, s1 = 0.5, s2 = 0.25;
  double LogLikelihood(const Eigen::VectorXd& x) const {
    const double r = x[1] - b * x[0] * x[0];
    return -0.5 * x[0] * x[0] / (s1 * s1) - 0.5 * r * r / (s2 * s2) - std::log(2 * M_PI * s1 * s2);
  }
  double ExactLogEvidence() const {
    double z = 0.0;
    const int m = 200000;
    const double lo = -10 * s1, h = 20 * s1 / m;
    const double v = 1 + s2 * s2;
    for (int k = 0; k < m; ++k) {
      const double t = lo + (k + 0.5) * h;
      const double c = b * t * t;
      z += std::exp(-0.5 * t * t / (s1 * s1) - 0.5 * t * t - 0.5 * c * c / v) /
           (2 * M_PI * s1 * std::sqrt(2 * M_PI * v)) * h;
    }
    return std::log(z);
  }
};

inline EvidenceProblem BananaProblem(const Banana& banana = Banana()) {
  EvidenceProblem p;
  p.prior_mean = Eigen::VectorXd::Zero(2);
  p.prior_sd = Eigen::VectorXd::Ones(2);
  p.log_z = banana.ExactLogEvidence();
  p.loglik = [banana](const Eigen::VectorXd& x) { return banana.LogLikelihood(x); };
  return p;
}

}  // namespace gpsel

#endif  // GPSEL_TESTS_CORE_EVIDENCE_ORACLES_H_
