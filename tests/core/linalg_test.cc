// SpdFactorization (core/linalg.cc): Cholesky, solves, log-determinant and inverse against Eigen's
// own LLT, and the same answers when many threads factorise at once (the search's thread pool and
// the server's workers do; Debian's serial OpenBLAS gets this wrong); the blocked factorisation
// and inverse of large matrices, and their cancellation between blocks.
#include "gpsel/core/linalg.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
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

// From 4 × kPolledBlockPoints rows on the factorisation and the inverse run in blocks (a last
// partial block here): the same answers as Eigen's LLT.
TEST(SpdFactorizationTest, BlockedFactorAndInverseOfALargeMatrixMatchEigen) {
  const int n = 4 * kPolledBlockPoints + 77;
  const Eigen::MatrixXd k = RandomSpd(n, 7);
  SpdFactorization factor;
  int polls = 0;
  ASSERT_TRUE(factor.Compute(k, [&](const Progress&) { ++polls; return absl::OkStatus(); }).ok());
  EXPECT_EQ(polls, 5);  // one per block column
  EXPECT_EQ(factor.jitter(), 0.0);
  const Eigen::LLT<Eigen::MatrixXd> llt(k);
  const Eigen::MatrixXd l_ref = llt.matrixL();
  EXPECT_LT(RelativeError(factor.lower().triangularView<Eigen::Lower>(), l_ref), 1e-12);
  const Eigen::MatrixXd inverse = factor.Inverse();
  const Eigen::MatrixXd inverse_ref = llt.solve(Eigen::MatrixXd::Identity(n, n));
  EXPECT_LT(RelativeError(inverse, inverse_ref), 1e-8);
  absl::StatusOr<SpdFactorization::InverseParts> parts =
      SpdFactorization(factor).TakeInverseFactorAndInverse(ProgressCallback());
  ASSERT_TRUE(parts.ok());
  const Eigen::MatrixXd l_inverse_ref = l_ref.triangularView<Eigen::Lower>().solve(
      Eigen::MatrixXd::Identity(n, n));
  EXPECT_LT(RelativeError(parts->inverse_factor, l_inverse_ref), 1e-10);
  EXPECT_LT(RelativeError(parts->inverse_lower.triangularView<Eigen::Lower>(),
                          inverse_ref.triangularView<Eigen::Lower>()),
            1e-8);
  // Not positive definite in a later block: refused (after the jitter retries), not NaN.
  Eigen::MatrixXd indefinite = Eigen::MatrixXd::Identity(n, n);
  indefinite(3 * kPolledBlockPoints + 5, 3 * kPolledBlockPoints + 5) = -1.0;
  const absl::Status refused = factor.Compute(indefinite);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
}

// A factorisation (and an inverse) of n = 3,000 asked to stop from another thread stops at the
// next block: measured against the whole computation's time in the same process (a ratio, not
// a time).
TEST(SpdFactorizationTest, CancelledFromAnotherThreadStopsBetweenBlocks) {
  using Clock = std::chrono::steady_clock;
  const int n = 3000;
  const Eigen::MatrixXd k = RandomSpd(n, 11);
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  // The whole factorisation and inverse, with a poll that never stops (the best of two).
  double whole_factor = 1e9, whole_inverse = 1e9;
  for (int round = 0; round < 2; ++round) {
    SpdFactorization factor;
    const auto start = Clock::now();
    ASSERT_TRUE(factor.Compute(k, [](const Progress&) { return absl::OkStatus(); }).ok());
    const auto factored = Clock::now();
    ASSERT_TRUE(std::move(factor)
                    .TakeInverseLowerTriangle([](const Progress&) { return absl::OkStatus(); })
                    .ok());
    whole_factor = std::min(whole_factor, seconds(factored - start));
    whole_inverse = std::min(whole_inverse, seconds(Clock::now() - factored));
  }
  // `stage` 0: cancel during the factorisation, 1: during the inverse.
  for (int stage = 0; stage < 2; ++stage) {
    std::atomic<bool> cancel{false};
    std::atomic<int> polls{0};
    const ProgressCallback poll = [&](const Progress& p) -> absl::Status {
      EXPECT_TRUE(p.poll_only);
      ++polls;
      return cancel.load() ? absl::CancelledError("cancelled by the test") : absl::OkStatus();
    };
    SpdFactorization factor;
    if (stage == 1) ASSERT_TRUE(factor.Compute(k).ok());
    absl::Status status;
    Clock::time_point returned;
    std::thread worker([&] {
      if (stage == 0) {
        status = factor.Compute(k, poll);
      } else {
        status = std::move(factor).TakeInverseLowerTriangle(poll).status();
      }
      returned = Clock::now();
    });
    while (polls.load() < 2) std::this_thread::yield();  // well under way
    const auto cancelled_at = Clock::now();
    cancel.store(true);
    worker.join();
    EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << "stage " << stage << ": " << status;
    const double latency = seconds(returned - cancelled_at);
    const double whole = stage == 0 ? whole_factor : whole_inverse;
    EXPECT_LT(latency, 0.35 * whole)
        << "stage " << stage << ": stopped " << latency << " s after the cancel; the whole took "
        << whole << " s";
  }
}

}  // namespace
}  // namespace gpsel
