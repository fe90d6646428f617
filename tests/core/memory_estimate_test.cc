// Tests of the peak-memory estimates (core/memory_estimate.h): their closed forms in n, the
// kernel's size and the concurrency, and that the search bound covers every kernel the search
// can build. Their agreement with measured peak RSS is checked by bench/memory_estimate.sh.
#include "gpsel/core/memory_estimate.h"

#include <string>

#include "gmock/gmock.h"
#include "gpsel/core/score.h"
#include "gpsel/core/sparse_cost.h"
#include "gpsel/core/time_estimate.h"
#include "gtest/gtest.h"

namespace gpsel {
namespace {

using ::testing::HasSubstr;

Dataset Points(int n, int d = 1) {
  Dataset data;
  data.x = Eigen::MatrixXd::Random(n, d);
  data.y = Eigen::VectorXd::Random(n);
  return data;
}

TEST(MemoryEstimateTest, ScoreGrowsAsNSquaredAndWithTheKernel) {
  const std::vector<KernelExpr> small = {*ParseKernel("SE")};
  const std::vector<KernelExpr> large = {*ParseKernel("C*SE + C*SE*PER + C*RQ")};
  const ScoreOptions options;
  const int64_t a = EstimateScoreMemory(Points(2000), small, options).bytes;
  const int64_t b = EstimateScoreMemory(Points(4000), small, options).bytes;
  // Beyond a fixed part (buffers, the request), n² dominates; the rest is O(n·u).
  const int64_t fixed = EstimateScoreMemory(Points(10), small, options).bytes;
  EXPECT_NEAR(static_cast<double>(b - fixed) / (a - fixed), 4.0, 0.4);
  EXPECT_GT(EstimateScoreMemory(Points(2000), large, options).bytes, a);
  // Several kernels in one request are scored one after another: the largest one counts.
  EXPECT_EQ(EstimateScoreMemory(Points(2000), {small[0], large[0]}, options).bytes,
            EstimateScoreMemory(Points(2000), large, options).bytes);
}

// The exact Hessian is made in pieces (core/gp_model.cc): L⁻¹ and K⁻¹ (2 n²), panels of C_i of
// u·panel·n doubles (panel ≤ 2n/u and ≤ n/4, in whole 64-row tiles), row blocks of K_i of
// (u − 1)·block·n (block ≤ 256 and ≤ n/(2(u − 1))) and 8 vectors per parameter. Before, it held
// every ∂K/∂θ whole: about 32 n² doubles for C*SE + C*SE*PER, 4.1 GB at n = 4,000 (issue #17).
TEST(MemoryEstimateTest, HessianIsAtMostFourAndAHalfNSquaredDoublesPlusLinear) {
  // C*SE + C*SE*PER at n = 4,000: u = 7, panels of 960 rows, blocks of 256:
  // 2·16e6 + 960·4000·7 + 256·4000·6 + 8·4000·7 = 65.248e6 doubles (4.08 n²).
  EXPECT_EQ(LikelihoodHessianBytes(4000, *ParseKernel("C*SE + C*SE*PER")), 8 * 65'248'000LL);
  // At n = 1,000 the same kernel takes panels of 192 rows and blocks of 64 (≤ n²/2):
  // 2e6 + 192·1000·7 + 64·1000·6 + 8·1000·7 = 3.784e6 doubles.
  EXPECT_EQ(LikelihoodHessianBytes(1000, *ParseKernel("C*SE + C*SE*PER")), 8 * 3'784'000LL);
  for (const char* kernel :
       {"SE", "C*SE + C*SE*PER + C*RQ", "C*SE*PER + C*RQ + C*SE*LIN + MAT52"}) {
    for (int64_t n : {300, 1000, 4000, 10000}) {
      const double doubles = LikelihoodHessianBytes(n, *ParseKernel(kernel)) / 8.0;
      EXPECT_LE(doubles, 4.5 * n * n + 8.0 * n * 13) << kernel << " n = " << n;
      EXPECT_GE(doubles, 2.0 * n * n) << kernel << " n = " << n;
    }
  }
  // 0.52 GB at n = 4,000 for the Mauna Loa kernel's Hessian, against 4.1 GB measured before.
  EXPECT_LT(LikelihoodHessianBytes(4000, *ParseKernel("C*SE + C*SE*PER")), 550'000'000);
}

TEST(MemoryEstimateTest, SearchBoundCoversEveryCandidateItCanBuild) {
  const Dataset data = Points(1500, 2);
  SearchOptions options;
  options.max_depth = 3;
  options.threads = 1;
  const int64_t search = EstimateSearchMemory(data, options).bytes;
  ScoreOptions score;
  for (const char* kernel : {"SE", "PER*RQ", "C*PER*RQ", "(PER + RQ)*PER", "PER[0]*RQ[1]*SE[0]"}) {
    EXPECT_LE(EstimateScoreMemory(data, {*ParseKernel(kernel)}, score).bytes, search) << kernel;
  }
  options.threads = 2;
  // Two candidates at once, each with its own matrices (the request's fixed overhead once).
  EXPECT_NEAR(static_cast<double>(EstimateSearchMemory(data, options).bytes) / search, 2.0, 0.1);
}

// The request of issue #14 (n = 2,000, m = 100,000) needed 3.35 GB of RSS before Predict worked
// in blocks; now K and two blocks bound it whatever m is.
TEST(MemoryEstimateTest, PredictIsBoundedWhateverM) {
  const Dataset data = Points(2000);
  PredictOptions options;
  options.hyperparameters = {{"SE.lengthscale", 1.0}, {"noise", 0.1}};
  const KernelExpr kernel = *ParseKernel("SE");
  const MemoryEstimate m = EstimatePredictMemory(data, kernel, 100000, options);
  EXPECT_LT(m.bytes, 200'000'000);  // 3.35 GB of RSS before the blocks
  EXPECT_THAT(m.Summary(), HasSubstr("m = 100000"));
  const int64_t more = EstimatePredictMemory(data, kernel, 1'000'000, options).bytes;
  EXPECT_LT(more - m.bytes, 900'000 * 8 * 6);  // only the O(m) results grow
  // Fitting first costs the fit's memory when that is more.
  options.hyperparameters.clear();
  EXPECT_GE(EstimatePredictMemory(data, kernel, 10, options).bytes,
            EstimateScoreMemory(data, {kernel}, options.fit).bytes);
}

TEST(MemoryEstimateTest, PredictComponentsCountAnotherBlockAndTheirResults) {
  const Dataset data = Points(2000);
  PredictOptions options;
  options.hyperparameters = {{"SE.lengthscale", 1.0}, {"LIN.variance", 1.0}, {"noise", 0.1}};
  const KernelExpr kernel = *ParseKernel("SE+LIN");
  const int64_t plain = EstimatePredictMemory(data, kernel, 5000, options).bytes;
  options.components = true;
  const MemoryEstimate with = EstimatePredictMemory(data, kernel, 5000, options);
  // At least one more n × block cross-covariance and its solve, and 2 × 2 × m results.
  const int64_t block = std::min<int64_t>(PredictBlockColumns(2000), 5000);
  EXPECT_GE(with.bytes - plain, 8 * (2 * 2000 * block + 4 * 5000));
  EXPECT_THAT(with.Summary(), HasSubstr("2 component(s)"));
}

TEST(MemoryEstimateTest, EvidenceCountsItsStoredSamples) {
  const Dataset data = Points(500);
  EvidenceOptions options;
  options.sampling.max_likelihood_calls = 1'000'000;
  const int64_t a = EstimateEvidenceMemory(data, *ParseKernel("C*SE"), options).bytes;
  options.sampling.max_likelihood_calls = 10'000'000;
  const int64_t b = EstimateEvidenceMemory(data, *ParseKernel("C*SE"), options).bytes;
  EXPECT_GT(b, a + 9'000'000LL * 8 * 3);
  // Four runs keep four runs' samples, and two at once hold two likelihood evaluations.
  options.sampling.num_runs = 4;
  options.sampling.threads = 2;
  const int64_t four = EstimateEvidenceMemory(data, *ParseKernel("C*SE"), options).bytes;
  // (b holds one evaluation, one run's samples and the fixed request overhead once.)
  EXPECT_GT(four,
            3 * (b - LikelihoodEvaluationBytes(500, 3)) + 2 * LikelihoodEvaluationBytes(500, 3));
  EXPECT_LT(four, 4 * b);
  // Importance sampling: threads likelihoods, a Hessian, and every sample's stored values.
  options.method = EvidenceMethod::kImportance;
  options.importance.threads = 2;
  options.importance.max_samples = 1'000'000;
  const int64_t is = EstimateEvidenceMemory(data, *ParseKernel("C*SE"), options).bytes;
  EXPECT_GE(is, 2 * LikelihoodEvaluationBytes(500, 3) +
                    LikelihoodHessianBytes(500, *ParseKernel("C*SE")) + 1'000'000LL * 8 * 3);
  EXPECT_LT(is, four);
  options.method = EvidenceMethod::kAuto;  // may run both: the larger
  EXPECT_EQ(EstimateEvidenceMemory(data, *ParseKernel("C*SE"), options).bytes, four);
}

// A sparse request's peak is the fit's at the largest m it may reach: the default cap of 512
// within the fit's memory budget (core/sparse_cost.h), which at n = 10⁶ holds about 263 points
// (the selection's n×m factor). It was 3·n·512 doubles (12.4 GB), which a server with a smaller
// per-request budget would have refused although the fit never holds that much.
TEST(MemoryEstimateTest, SparseScoreIsTheFitsPeakAtTheMItsBudgetAllows) {
  const KernelExpr kernel = *ParseKernel("C*SE");
  constexpr int64_t kMillion = 1'000'000;
  const int64_t cap = SparseInducingCap(kMillion, 512, kernel);
  EXPECT_GT(cap, 200);
  EXPECT_LT(cap, 512);
  EXPECT_LE(EstimateSparseBytes(kMillion, cap, kernel), kSparseMemoryBudgetBytes);
  EXPECT_GT(EstimateSparseBytes(kMillion, cap + 1, kernel), kSparseMemoryBudgetBytes);
  EXPECT_EQ(SparseInducingCap(1000, 512, kernel), 512);  // small n: the cap asked for
  EXPECT_EQ(SparseInducingCap(300, 512, kernel), 300);   // never above n
  ScoreOptions options;
  options.approx.mode = ApproxMode::kSparse;
  options.fit.threads = 1;
  const MemoryEstimate estimate = EstimateScoreMemory(Points(kMillion), {kernel}, options);
  EXPECT_GE(estimate.bytes, EstimateSparseBytes(kMillion, cap, kernel));
  // Beside the fit: the BLAS buffer and the request's fixed part (36 MiB) and its five copies of
  // the 10⁶ points (80 MB).
  EXPECT_LT(estimate.bytes, kSparseMemoryBudgetBytes + (int64_t{120} << 20));
}

// A per-request budget (gpsel-server's --max-request-bytes) reaches the sparse fit
// (ApplyRequestBudget): the memory estimate, the time estimate, the fit and a prediction all
// cap m at the same SparseInducingCap of the budget's share, so a request that the default
// 2 GiB cap would make too large runs with a smaller m, and its estimate is within the budget.
// The first 1,500 weekly CO₂ points, SE, one thread; the budget holds m = 16, below the first
// m of a grown fit (32), so the fit's m is the cap whatever the gap.
TEST(MemoryEstimateTest, ARequestBudgetCapsTheSparseFitWhereItsEstimateDoes) {
  absl::StatusOr<Dataset> full = LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/co2_weekly.csv");
  ASSERT_TRUE(full.ok()) << full.status();
  Dataset data;
  data.x = full->x.topRows(1500);
  data.y = full->y.head(1500);
  const int64_t n = data.num_points();
  const KernelExpr kernel = *ParseKernel("SE");
  ScoreOptions options;
  options.approx.mode = ApproxMode::kSparse;
  options.fit.threads = 1;
  options.fit.restarts = 1;
  options.metrics = {Metric::kMll, Metric::kMap};
  // What the request holds beside the fit (core/memory_estimate.cc): its fixed part (4 MiB), the
  // BLAS buffer (32 MiB) and five copies of the data (n·(d + 1) doubles each); the rest holds
  // the fit's peak at m = 16 and not at 17.
  const int64_t beside_the_fit = (int64_t{36} << 20) + 5 * 8 * n * 2;
  const int64_t budget = beside_the_fit + EstimateSparseBytes(n, 16, kernel, 1, 1);
  // The default (a local run's): m up to 512, an estimate beyond this budget: main refused it.
  EXPECT_GT(EstimateScoreMemory(data, {kernel}, options).bytes, budget);

  ApplyRequestBudget(budget, data, options);
  ASSERT_TRUE(options.Validate().ok());
  const int64_t share = options.approx.memory_budget_bytes;
  EXPECT_EQ(share, budget - beside_the_fit);
  const int64_t cap = SparseInducingCap(n, 512, kernel, 1, 1, share);
  ASSERT_EQ(cap, 16);
  // The estimates cost the fit at that cap: within the budget, to the byte what it holds there.
  const MemoryEstimate memory = EstimateScoreMemory(data, {kernel}, options);
  EXPECT_EQ(memory.bytes, budget) << memory.Summary();
  EXPECT_THAT(EstimateScoreTime(data, {kernel}, options).breakdown, HasSubstr("m ≤ 16"));
  // The fit stops there (both fits at most there; the score's m is the larger).
  absl::StatusOr<KernelScore> score = ScoreKernel(data, kernel, options);
  ASSERT_TRUE(score.ok()) << score.status();
  EXPECT_EQ(score->method, "sparse");
  EXPECT_EQ(score->num_inducing, cap);
  ASSERT_TRUE(score->mll_fit.has_value());
  ASSERT_TRUE(score->map_fit.has_value());
  EXPECT_LE(score->mll_fit->num_inducing, cap);
  EXPECT_LE(score->map_fit->num_inducing, cap);
  // A prediction at given values selects its Z under the same cap (it took 512 before).
  PredictOptions predict;
  predict.fit = options;
  predict.fit.approx.memory_budget_bytes = kSparseMemoryBudgetBytes;
  predict.hyperparameters = {{"SE.lengthscale", 0.05}, {"noise", 0.01}};
  const Eigen::MatrixXd x_new = data.x.topRows(5);
  ApplyRequestBudget(budget, data, x_new.rows(), predict);
  EXPECT_LE(EstimatePredictMemory(data, kernel, x_new.rows(), predict).bytes, budget);
  absl::StatusOr<PredictResult> predicted = FitAndPredict(data, kernel, x_new, predict);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ(predicted->method, "sparse");
  EXPECT_EQ(predicted->num_inducing,
            SparseInducingCap(n, 512, kernel, 1, 1, predict.fit.approx.memory_budget_bytes));
  EXPECT_LE(predicted->num_inducing, 16);
  // A search's candidates at once share it, each with its own BLAS buffer: two of 16 MiB.
  SearchOptions search;
  search.score = options;
  search.threads = 2;
  const int64_t search_budget = (int64_t{4} << 20) + 5 * 8 * n * 2 + 2 * (int64_t{48} << 20);
  ApplyRequestBudget(search_budget, data, search);
  EXPECT_EQ(search.score.approx.memory_budget_bytes, int64_t{16} << 20);
  EXPECT_LE(EstimateSearchMemory(data, search).bytes, search_budget);
  ApplyRequestBudget(budget, data, search);  // not enough for two
  EXPECT_GT(EstimateSearchMemory(data, search).bytes, budget);
  // Too small a budget for even one inducing point: the estimate exceeds it, and it is refused.
  ScoreOptions tiny = options;
  ApplyRequestBudget(int64_t{20} << 20, data, tiny);
  EXPECT_TRUE(tiny.Validate().ok());
  EXPECT_GT(EstimateScoreMemory(data, {kernel}, tiny).bytes, int64_t{20} << 20);
  // No budget (0): the default stays.
  ScoreOptions unbudgeted;
  ApplyRequestBudget(0, data, unbudgeted);
  EXPECT_EQ(unbudgeted.approx.memory_budget_bytes, kSparseMemoryBudgetBytes);
  // A budget above the default raises the cap: at 10⁶ points 16 GiB holds the default m = 512,
  // where 2 GiB stopped at about 263.
  ScoreOptions large = unbudgeted;
  large.approx.mode = ApproxMode::kSparse;
  large.fit.threads = 1;
  ApplyRequestBudget(int64_t{16} << 30, Points(1'000'000), large);
  EXPECT_GT(large.approx.memory_budget_bytes, kSparseMemoryBudgetBytes);
  EXPECT_THAT(EstimateScoreTime(Points(1'000'000), {kernel}, large).breakdown,
              HasSubstr("m ≤ 512"));
  EXPECT_LE(EstimateScoreMemory(Points(1'000'000), {kernel}, large).bytes, int64_t{16} << 30);
}

TEST(MemoryEstimateTest, FormatsBytesInDecimalUnits) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(3'100'000), "3.1 MB");
  EXPECT_EQ(FormatBytes(2'345'000'000), "2.35 GB");
}

}  // namespace
}  // namespace gpsel
