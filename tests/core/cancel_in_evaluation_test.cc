// Issue 33: a cancelled Predict or Evidence frees its worker within a block of work, not one
// whole O(n³) evaluation later. The prediction's factorisation and its triangular solves poll
// between blocks (core/predict.cc, core/linalg.h); evidence passes the poll into each likelihood
// evaluation, and an abandoned evaluation ends the run as cancelled instead of entering the
// sampler as a -inf likelihood (core/evidence.cc, core/nested_sampling.h StoppableLogLikelihood).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/importance_sampling.h"
#include "gpsel/core/instrumentation.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/nested_sampling.h"
#include "gpsel/core/predict.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

// The first `n` hours of the San Francisco temperatures (x in days).
Dataset SfTemps(int n) {
  absl::StatusOr<Dataset> data = LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/sf_temps.csv");
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return Dataset();
  Dataset head;
  head.x = data->x.topRows(n);
  head.y = data->y.head(n);
  return head;
}

const std::map<std::string, double> kValues = {
    {"C.constant", 1.0}, {"SE.lengthscale", 2.0}, {"noise", 0.01}};

// A callback that says stop at its `stop_at`-th poll (a progress report is not a poll) and
// counts what it saw after that.
struct CountingStop {
  int stop_at = 0;
  int polls = 0;
  int reports = 0;
  int calls_after_stop = 0;
  ProgressCallback Callback() {
    return [this](const Progress& p) -> absl::Status {
      if (polls >= stop_at) {
        ++calls_after_stop;
        return absl::CancelledError("cancelled by the test");
      }
      if (!p.poll_only) {
        ++reports;
        return absl::OkStatus();
      }
      ++polls;
      return polls >= stop_at ? absl::CancelledError("cancelled by the test") : absl::OkStatus();
    };
  }
};

// n = 2,048: K(X, X) is made in 8 blocks of columns and factorised in 8 more. A stop at the 3rd
// poll ends the Predict there, before any block of the prediction was reported. (Before, neither
// polled and the prediction ran to its end.)
TEST(PredictCancellationTest, StopsInsideTheFactorisation) {
  const Dataset data = SfTemps(2048);
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(50, 1.0, 80.0);
  CountingStop stop{3};
  absl::StatusOr<Prediction> p =
      Predict(data, *ParseKernel("C*SE"), kValues, true, x_new, stop.Callback());
  EXPECT_THAT(p, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(stop.polls, 3);
  EXPECT_EQ(stop.reports, 0) << "the prediction's blocks ran after the stop";
  EXPECT_EQ(stop.calls_after_stop, 0);
}

// A likelihood evaluation polls while it fills K(X, X) too (core/gp_model.cc Factorize, after
// each column of 64-point tiles), not only in the factorisation after it: at n = 2,048 that is 32
// polls of the fill plus the factorisation's 8 blocks, and a stop at the 3rd poll ends the
// evaluation inside the fill. (Before, the fill did not poll: at n = 10⁴ it alone took seconds
// of a cancelled evidence run's worker.)
TEST(LikelihoodCancellationTest, TheFillOfTheKernelMatrixPolls) {
  const Dataset data = SfTemps(2048);
  absl::StatusOr<GpModel> model = GpModel::Create(*ParseKernel("C*SE"), data.x, data.y);
  ASSERT_TRUE(model.ok()) << model.status();
  const Eigen::VectorXd raw = Eigen::VectorXd::Zero(model->num_free());
  int polls = 0;
  const ProgressCallback count = [&](const Progress& p) {
    if (p.poll_only) ++polls;
    return absl::OkStatus();
  };
  absl::StatusOr<double> quiet = model->LogLikelihood(raw);
  absl::StatusOr<double> counted = model->LogLikelihood(raw, nullptr, count);
  ASSERT_TRUE(quiet.ok() && counted.ok());
  EXPECT_EQ(*quiet, *counted) << "polling changes no bit";
  EXPECT_GE(polls, 2048 / 64 + 2048 / kPolledBlockPoints);
  CountingStop stop{3};
  EXPECT_THAT(model->LogLikelihood(raw, nullptr, stop.Callback()),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(stop.polls, 3);
  EXPECT_EQ(stop.calls_after_stop, 0);
}

// Polling changes no number: a callback that never stops gives the bits of no callback.
TEST(PredictCancellationTest, PollingChangesNothing) {
  const Dataset data = SfTemps(1500);
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(40, 1.0, 60.0);
  int polls = 0;
  const ProgressCallback never = [&](const Progress& p) {
    if (p.poll_only) ++polls;
    return absl::OkStatus();
  };
  absl::StatusOr<Prediction> quiet =
      Predict(data, *ParseKernel("C*SE"), kValues, true, x_new, nullptr, 0, false, 3, 7);
  absl::StatusOr<Prediction> polled =
      Predict(data, *ParseKernel("C*SE"), kValues, true, x_new, never, 0, false, 3, 7);
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  ASSERT_TRUE(polled.ok()) << polled.status();
  EXPECT_GT(polls, 0);
  EXPECT_EQ(quiet->mean, polled->mean);
  EXPECT_EQ(quiet->variance, polled->variance);
  EXPECT_EQ(quiet->samples, polled->samples);
}

// SolveLower equals Eigen's triangular solve, and stops between its blocks of columns.
TEST(SolveLowerTest, MatchesTheTriangularSolveAndStopsBetweenBlocks) {
  const int n = 1100;
  const Dataset data = SfTemps(n);
  Eigen::MatrixXd k(n, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double d = (data.x(i, 0) - data.x(j, 0)) / 2.0;
      k(i, j) = std::exp(-0.5 * d * d);
    }
  }
  k.diagonal().array() += 0.01;
  SpdFactorization factor;
  ASSERT_TRUE(factor.Compute(k).ok());
  const int columns = 3 * PolledSolveColumns(n) + 5;  // four blocks
  Eigen::MatrixXd b(n, columns);
  for (int j = 0; j < columns; ++j) {
    for (int i = 0; i < n; ++i) b(i, j) = std::sin(0.7 * i + 1.3 * j);
  }
  absl::StatusOr<Eigen::MatrixXd> solved = factor.SolveLower(b);
  ASSERT_TRUE(solved.ok()) << solved.status();
  const Eigen::MatrixXd reference = factor.lower().triangularView<Eigen::Lower>().solve(b);
  EXPECT_LE((*solved - reference).cwiseAbs().maxCoeff(), 1e-9 * reference.cwiseAbs().maxCoeff());
  // L (L⁻¹ B) = B: an independent check of the solve.
  const Eigen::MatrixXd back = factor.lower().triangularView<Eigen::Lower>() * *solved;
  EXPECT_LE((back - b).cwiseAbs().maxCoeff(), 1e-9);
  CountingStop stop{2};
  EXPECT_THAT(factor.SolveLower(b, stop.Callback()), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(stop.polls, 2);
  EXPECT_EQ(stop.calls_after_stop, 0);
}

// Records the evidence sampler's likelihood calls and how long each evaluation took; cancels as
// evaluation `cancel_at` starts.
class EvaluationRecorder : public CoreObserver {
 public:
  explicit EvaluationRecorder(int cancel_at) : cancel_at_(cancel_at) {}
  void OnEvidenceLikelihoodCall(int) override {
    if (++calls == cancel_at_) cancel.store(true);
  }
  void OnLikelihoodEvaluation(int, int, double seconds) override {
    std::lock_guard<std::mutex> lock(mutex);
    evaluation_seconds.push_back(seconds);
  }
  std::atomic<int> calls{0};
  std::atomic<bool> cancel{false};
  std::mutex mutex;
  std::vector<double> evaluation_seconds;

 private:
  const int cancel_at_;
};

// Nested sampling at n = 3,000: the cancel arrives as the 4th evaluation starts. Counts, not
// times (the run's 2 cores are shared): a whole evaluation polls at least once per column of
// 64-point tiles of its kernel matrix's fill (47 here) and again between the factorisation's
// blocks; the cancelled one stops at its first poll or the next, and the run ends CANCELLED
// with no further evaluation. (Before issue 33's change an evaluation did not poll at all: the
// cancelled one ran to its end and the sampler stopped after it.)
TEST(EvidenceCancellationTest, AnEvaluationIsAbandonedMidFactorisation) {
  const Dataset data = SfTemps(3000);
  EvidenceOptions options;
  options.method = EvidenceMethod::kNested;
  options.sampling.num_live = 8;
  options.sampling.seed = 5;
  constexpr int kCancelAt = 4;
  EvaluationRecorder recorder(kCancelAt);
  CoreObserver* previous = SetCoreObserver(&recorder);
  std::mutex polls_mutex;
  std::map<int, int> polls_in_evaluation;  // by the evaluation running (1-based), 0: before any
  const ProgressCallback progress = [&](const Progress& p) {
    if (p.poll_only) {
      std::lock_guard<std::mutex> lock(polls_mutex);
      ++polls_in_evaluation[recorder.calls.load()];
    }
    return recorder.cancel.load() ? absl::CancelledError("cancelled by the test")
                                  : absl::OkStatus();
  };
  absl::StatusOr<EvidenceResult> result =
      ComputeEvidence(data, *ParseKernel("C*SE"), options, progress);
  SetCoreObserver(previous);
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(recorder.calls.load(), kCancelAt) << "evaluations went on after the cancel";
  for (int evaluation = 1; evaluation < kCancelAt; ++evaluation) {
    EXPECT_GE(polls_in_evaluation[evaluation], 3000 / 64) << "evaluation " << evaluation;
  }
  EXPECT_GE(polls_in_evaluation[kCancelAt], 1);
  EXPECT_LE(polls_in_evaluation[kCancelAt], 2) << "the cancelled evaluation went on polling";
  std::lock_guard<std::mutex> lock(recorder.mutex);
  std::cout << "[ figures  ] evaluation seconds:";
  for (double seconds : recorder.evaluation_seconds) std::cout << " " << seconds;
  std::cout << "\n";
}

// The samplers themselves: an abandoned evaluation ends the run with its status even when the
// progress callback never says stop (so nothing but the abandonment could stop it), and no
// later evaluation is made. Cheap Gaussian likelihood, so every configuration runs.
Eigen::VectorXd Zero2() { return Eigen::VectorXd::Zero(2); }
Eigen::VectorXd One2() { return Eigen::VectorXd::Ones(2); }

TEST(StoppableLikelihoodTest, NestedSamplingEndsWithTheAbandonedStatus) {
  for (int batch : {1, 4}) {
    std::atomic<int> calls{0};
    std::atomic<int> after{0};
    const StoppableLogLikelihood likelihood{
        [&](const Eigen::VectorXd& raw) -> absl::StatusOr<double> {
          const int call = ++calls;
          if (call > 50) ++after;
          if (call >= 50) return absl::DeadlineExceededError("abandoned by the test");
          return -0.5 * raw.squaredNorm();
        }};
    NestedSamplingOptions options;
    options.num_live = 20;
    options.batch_size = batch;
    options.threads = batch;
    const ProgressCallback never = [](const Progress&) { return absl::OkStatus(); };
    EXPECT_THAT(RunNestedSampling(likelihood, Zero2(), One2(), options, never),
                StatusIs(absl::StatusCode::kDeadlineExceeded))
        << "batch " << batch;
    // Batches: the round's other chains may have been mid-call; none starts a new one.
    EXPECT_LE(after.load(), batch - 1) << "batch " << batch;
  }
}

TEST(StoppableLikelihoodTest, ImportanceSamplingEndsWithTheAbandonedStatus) {
  for (int threads : {1, 2}) {
    std::atomic<int> calls{0};
    const StoppableLogLikelihood likelihood{
        [&](const Eigen::VectorXd& raw) -> absl::StatusOr<double> {
          if (++calls >= 30) return absl::CancelledError("abandoned by the test");
          return -0.5 * raw.squaredNorm();
        }};
    ProposalMode mode;
    mode.mean = Zero2();
    mode.covariance = Eigen::MatrixXd::Identity(2, 2) * 0.5;
    mode.log_posterior = 0.0;
    mode.log_laplace_mass = LogLaplaceMass(0.0, mode.covariance);
    ImportanceSamplingOptions options;
    options.threads = threads;
    EXPECT_THAT(RunImportanceSampling(likelihood, Zero2(), One2(), {mode}, options),
                StatusIs(absl::StatusCode::kCancelled))
        << "threads " << threads;
  }
}

}  // namespace
}  // namespace gpsel
