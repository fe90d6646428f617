// SpdFactorization (core/linalg.cc): Cholesky, solves, log-determinant and inverse against Eigen's
// own LLT, and the same answers when many threads factorise at once (the search's thread pool and
// the server's workers do; Debian's serial OpenBLAS gets this wrong).
#include "gpsel/core/linalg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

namespace gpsel {
namespace {

// An SE-kernel-like covariance plus noise: SPD, condition number ~1e4.
Eigen::MatrixXd RandomSpd(int n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 5.0);
  Eigen::VectorXd x(n);
  for (int i = 0; i < n; ++i) x(i) = uniform(rng);
  Eigen::MatrixXd k(n, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) k(i, j) = std::exp(-0.5 * (x(i) - x(j)) * (x(i) - x(j)));
  }
  k.diagonal().array() += 1e-3;
  return k;
}

double RelativeError(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return (a - b).norm() / b.norm();
}

TEST(SpdFactorizationTest, MatchesEigenLlt) {
  for (int n : {1, 7, 16, 17, 64, 150, 301}) {
    const Eigen::MatrixXd k = RandomSpd(n, 100 + n);
    SpdFactorization factor;
    ASSERT_TRUE(factor.Compute(k).ok());
    EXPECT_EQ(factor.jitter(), 0.0);
    const Eigen::LLT<Eigen::MatrixXd> llt(k);
    const Eigen::MatrixXd l_ref = llt.matrixL();
    const Eigen::MatrixXd l = factor.lower().triangularView<Eigen::Lower>();
    EXPECT_LT(RelativeError(l, l_ref), 1e-12) << "n=" << n;
    const double logdet_ref = 2.0 * l_ref.diagonal().array().log().sum();
    EXPECT_NEAR(factor.LogDeterminant(), logdet_ref, 1e-9 * (1 + std::abs(logdet_ref)));
    const Eigen::MatrixXd rhs = Eigen::MatrixXd::Ones(n, 3);
    EXPECT_LT(RelativeError(factor.Solve(rhs), llt.solve(rhs)), 1e-8) << "n=" << n;
    // The inverse from the factor (recursive triangular inverse + dlauum) times K is I.
    const Eigen::MatrixXd inverse = factor.Inverse();
    EXPECT_LT((inverse * k - Eigen::MatrixXd::Identity(n, n)).norm(), 1e-7 * n) << "n=" << n;
    EXPECT_EQ((inverse - inverse.transpose()).norm(), 0.0);
    // Formed in the factor's own storage: the same lower triangle, bit for bit.
    const Eigen::MatrixXd taken = SpdFactorization(factor).TakeInverseLowerTriangle();
    EXPECT_EQ(Eigen::MatrixXd(taken.triangularView<Eigen::Lower>()),
              Eigen::MatrixXd(inverse.triangularView<Eigen::Lower>()))
        << "n=" << n;
  }
}

TEST(SpdFactorizationTest, FromTheLowerTriangleAloneGivesComputesFactorAndRemakesOnRetry) {
  // The strict upper triangle handed to dpotrf is NaN: nothing may read it. The rank-1 matrix
  // needs jitter, so fill_lower must be called again for each retry (dpotrf destroyed the
  // triangle), and the result must be Compute's on the full matrix, bit for bit.
  for (int n : {5, 70, 300}) {
    const Eigen::VectorXd v = Eigen::VectorXd::LinSpaced(n, 1.0, 2.0);
    const Eigen::MatrixXd spd = RandomSpd(n, 500 + n), rank_one = v * v.transpose();
    for (const Eigen::MatrixXd* k : {&spd, &rank_one}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << (k == &spd ? " spd" : " rank one"));
      SpdFactorization reference;
      ASSERT_TRUE(reference.Compute(*k).ok());
      int fills = 0;
      SpdFactorization from_lower;
      const absl::Status status = from_lower.ComputeFromLower(n, [&](Eigen::MatrixXd* out) {
        ++fills;
        out->setConstant(n, n, std::nan(""));
        out->triangularView<Eigen::Lower>() = *k;
      });
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(from_lower.jitter(), reference.jitter());
      // Jitter 0, 1e-10, 1e-8, 1e-6 × mean diagonal are attempts 1, 2, 3, 4.
      const double relative = reference.jitter() / k->diagonal().mean();
      const int attempts = relative == 0 ? 1 : relative < 1e-9 ? 2 : relative < 1e-7 ? 3 : 4;
      EXPECT_EQ(fills, attempts);
      if (k == &rank_one) {
        EXPECT_GT(attempts, 1);
      }
      const Eigen::MatrixXd l = from_lower.lower().triangularView<Eigen::Lower>();
      const Eigen::MatrixXd l_ref = reference.lower().triangularView<Eigen::Lower>();
      EXPECT_EQ(l, l_ref);
    }
  }
}

TEST(SpdFactorizationTest, JitterRescuesASingularMatrix) {
  Eigen::MatrixXd k = Eigen::MatrixXd::Ones(5, 5);  // rank 1
  SpdFactorization factor;
  ASSERT_TRUE(factor.Compute(k).ok());
  EXPECT_GT(factor.jitter(), 0.0);
  // The retry factorised K + jitter·I itself (rebuilt from the untouched upper triangle after
  // the failed attempt overwrote the lower one).
  const Eigen::MatrixXd l = factor.lower().triangularView<Eigen::Lower>();
  const Eigen::MatrixXd expected = k + factor.jitter() * Eigen::MatrixXd::Identity(5, 5);
  EXPECT_LT((l * l.transpose() - expected).norm(), 1e-12);
  k(0, 0) = std::nan("");
  EXPECT_FALSE(factor.Compute(k).ok());
  EXPECT_FALSE(factor.Compute(-Eigen::MatrixXd::Identity(3, 3)).ok());
}

TEST(SpdFactorizationTest, ConcurrentCallsGiveTheSerialAnswers) {
  constexpr int kMatrices = 6;
  std::vector<Eigen::MatrixXd> matrices;
  std::vector<Eigen::MatrixXd> expected_inverse;
  std::vector<double> expected_logdet;
  for (int m = 0; m < kMatrices; ++m) {
    matrices.push_back(RandomSpd(120 + 37 * m, m));
    SpdFactorization factor;
    ASSERT_TRUE(factor.Compute(matrices.back()).ok());
    expected_inverse.push_back(factor.Inverse());
    expected_logdet.push_back(factor.LogDeterminant());
  }
  constexpr int kThreads = 4, kRounds = 15;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const int m = (t + round) % kMatrices;
        SpdFactorization factor;
        if (!factor.Compute(matrices[m]).ok() ||
            factor.LogDeterminant() != expected_logdet[m] ||
            RelativeError(factor.Inverse(), expected_inverse[m]) > 1e-12) {
          ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace gpsel
