// Prompt cancellation in the core: once the progress callback says stop, a fit, the Laplace
// Hessian, nested sampling and Predict return its status after at most one more likelihood
// evaluation (core/progress.h: every evaluation polls). Counted with a CoreObserver, not timed,
// so the tests hold on a loaded machine; the seconds are measured in bench/cancel_latency.sh.
#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/instrumentation.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

// Counts likelihood evaluations; the cancellation switch flips after `cancel_after` of them.
class EvaluationCounter : public CoreObserver {
 public:
  void OnLikelihoodEvaluation(int, int, double) override {
    const int64_t done = ++evaluations;
    if (cancel_after > 0 && done == cancel_after) evaluations_at_cancel = done;
  }
  std::atomic<int64_t> evaluations{0};
  std::atomic<int64_t> cancel_after{0};
  std::atomic<int64_t> evaluations_at_cancel{0};

  ProgressCallback Callback() {
    return [this](const Progress&) -> absl::Status {
      if (evaluations_at_cancel.load() > 0) return absl::CancelledError("test cancel");
      return absl::OkStatus();
    };
  }
};

class CancellationTest : public ::testing::Test {
 protected:
  void SetUp() override { previous_ = SetCoreObserver(&counter_); }
  void TearDown() override { SetCoreObserver(previous_); }

  static Dataset MaunaLoa(int n) {
    absl::StatusOr<Dataset> full =
        LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/mauna_loa_monthly.csv");
    EXPECT_TRUE(full.ok()) << full.status();
    Dataset out;
    out.x = full->x.topRows(n);
    out.y = full->y.head(n);
    return out;
  }

  EvaluationCounter counter_;
  CoreObserver* previous_ = nullptr;
};

// Above 256 points the tiled likelihood and the whole-matrix Hessian both run.
TEST_F(CancellationTest, ScoreStopsWithinOneEvaluationWhereverItIsCancelled) {
  const Dataset data = MaunaLoa(270);
  const KernelExpr kernel = *ParseKernel("C*SE*PER");
  ScoreOptions options;
  options.fit.restarts = 1;
  absl::StatusOr<KernelScore> full = ScoreKernel(data, kernel, options);
  ASSERT_TRUE(full.ok()) << full.status();
  const int64_t total = counter_.evaluations.load();
  ASSERT_GT(total, 20);
  // Early in the first start, in the middle, and near the end (the polish and its Hessians).
  for (int64_t k : {int64_t{1}, total / 2, total - 2}) {
    counter_.evaluations = 0;
    counter_.evaluations_at_cancel = 0;
    counter_.cancel_after = k;
    absl::StatusOr<KernelScore> cancelled = ScoreKernel(data, kernel, options, counter_.Callback());
    EXPECT_THAT(cancelled, StatusIs(absl::StatusCode::kCancelled)) << "cancelled after " << k;
    EXPECT_LE(counter_.evaluations.load() - k, 1) << "cancelled after " << k << " of " << total;
  }
}

TEST_F(CancellationTest, FitStartsOnThreadsStopWithinOneEvaluationEach) {
  const Dataset data = MaunaLoa(300);
  ScoreOptions options;
  options.fit.restarts = 6;
  options.fit.threads = 3;
  options.metrics = {Metric::kMll};
  counter_.cancel_after = 10;
  absl::StatusOr<KernelScore> cancelled =
      ScoreKernel(data, *ParseKernel("C*SE*PER"), options, counter_.Callback());
  EXPECT_THAT(cancelled, StatusIs(absl::StatusCode::kCancelled));
  // Each of the 3 threads may finish the evaluation it was in.
  EXPECT_LE(counter_.evaluations.load() - 10, 3);
}

TEST_F(CancellationTest, HessianPollsBetweenItsProducts) {
  const Dataset data = MaunaLoa(300);
  absl::StatusOr<GpModel> model = GpModel::Create(*ParseKernel("C*SE + C*PER"), data.x, data.y);
  ASSERT_TRUE(model.ok()) << model.status();
  const Eigen::VectorXd raw = model->prior_mean();
  int polls = 0;
  const ProgressCallback poll = [&polls](const Progress& p) -> absl::Status {
    EXPECT_TRUE(p.poll_only);
    return ++polls >= 3 ? absl::DeadlineExceededError("late") : absl::OkStatus();
  };
  absl::StatusOr<LikelihoodHessian> h = model->LogLikelihoodHessian(raw, poll);
  EXPECT_THAT(h, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(polls, 3);
  // Without a poll (or one that never stops) the same call succeeds.
  EXPECT_TRUE(model->LogLikelihoodHessian(raw).ok());
}

TEST_F(CancellationTest, NestedSamplingStopsWithinOneLikelihoodCall) {
  const Dataset data = MaunaLoa(120);
  EvidenceOptions options;
  options.sampling.num_live = 100;
  options.sampling.seed = 4;
  counter_.cancel_after = 700;  // past the initial live points, inside the sampling loop
  absl::StatusOr<EvidenceResult> result =
      ComputeEvidence(data, *ParseKernel("C*SE"), options, counter_.Callback());
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kCancelled)) << result.status();
  EXPECT_LE(counter_.evaluations.load() - 700, 1);
}

TEST_F(CancellationTest, PredictStopsBetweenBlocks) {
  const Dataset data = MaunaLoa(300);
  const KernelExpr kernel = *ParseKernel("C*SE");
  const std::map<std::string, double> values = {
      {"C.constant", 1.0}, {"SE.lengthscale", 2.0}, {"noise", 0.01}};
  Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(5000, 1958.0, 2000.0);
  int blocks = 0;
  const ProgressCallback stop_at_third_block = [&blocks](const Progress& p) -> absl::Status {
    if (p.poll_only || p.stage != "predict") return absl::OkStatus();
    return ++blocks >= 3 ? absl::CancelledError("client went away") : absl::OkStatus();
  };
  absl::StatusOr<Prediction> p =
      Predict(data, kernel, values, true, x_new, stop_at_third_block, /*block_columns=*/100);
  EXPECT_THAT(p, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(blocks, 3);  // 50 blocks in all: it stopped at the first check after the cancel
}

// Automatic Predict blocks bound both memory (n × block doubles) and the work between two
// cancellation checks (n² × block flops).
TEST(PredictBlockTest, AutomaticBlocksBoundMemoryAndWork) {
  for (int64_t n : {10, 100, 2000, 10000, 100000}) {
    const int64_t block = PredictBlockColumns(n);
    EXPECT_GE(block, 1);
    EXPECT_LE(n * block, std::max<int64_t>(kPredictBlockDoubles, n)) << n;
    if (block > 1) {
      EXPECT_LE(n * n * block, kPredictBlockFlops) << n;
    }
  }
  EXPECT_EQ(PredictBlockColumns(2000), kPredictBlockFlops / (2000 * 2000));
  EXPECT_EQ(PredictBlockColumns(10), kPredictBlockDoubles / 10);
}

}  // namespace
}  // namespace gpsel
