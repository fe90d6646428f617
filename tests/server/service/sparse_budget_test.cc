// The server's per-request memory budget (--max-request-bytes) reaches the sparse fit (issue
// 28): a sparse score that the default 2 GiB cap on the fit made too large for a small budget
// runs on a real server on loopback with the m that budget holds (core/memory_estimate.h
// ApplyRequestBudget), and each fit's own m comes back on the wire (FitResult.num_inducing).
#include <algorithm>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gpsel/core/memory_estimate.h"
#include "gpsel/core/sparse_cost.h"
#include "gpsel/proto/bridge/convert.h"
#include "gtest/gtest.h"
#include "tests/server/service/server_test_util.h"

namespace gpsel::testing {
namespace {

using ::testing::HasSubstr;

// What a request of n points in one column holds beside its sparse fit (core/memory_estimate.cc):
// its fixed part, 4 MiB, the BLAS buffer, 32 MiB, and five copies of the data.
int64_t BesideTheFit(int64_t n) { return (int64_t{36} << 20) + 5 * 8 * n * 2; }

TEST(SparseBudgetTest, ASparseScoreOverTheDefaultCapRunsWithTheMTheServersBudgetHolds) {
  // The first 1,500 weekly CO₂ points: a second or two per fit at m ≤ 24.
  const Dataset weekly = LoadData("co2_weekly.csv");
  Dataset data;
  data.x = weekly.x.topRows(1500);
  data.y = weekly.y.head(1500);
  const int64_t n = data.num_points();
  const KernelExpr kernel = *ParseKernel("SE");
  // The budget holds the fit's peak at m = 24 on one thread (fewer with more threads, whose
  // blocks it holds too), below the grown fit's first m of 32.
  const int64_t budget = BesideTheFit(n) + EstimateSparseBytes(n, 24, kernel, 1, 1);
  const int64_t most_m = SparseInducingCap(n, 512, kernel, 1, 1, budget - BesideTheFit(n));
  ASSERT_EQ(most_m, 24);

  ScoreOptions score;
  score.approx.mode = ApproxMode::kSparse;
  score.fit.restarts = 1;
  score.metrics = {Metric::kMll, Metric::kMap, Metric::kBic};
  // Before, the fit's own 2 GiB cap let m reach 512 and the estimate said so: refused.
  const MemoryEstimate at_the_default = EstimateScoreMemory(data, {kernel}, score);
  ASSERT_GT(at_the_default.bytes, budget) << at_the_default.Summary();

  const std::filesystem::path dir = MakeTempDir("gpsel-sparse-budget");
  ServerOptions options = TestServerOptions(dir);
  options.jobs.workers = 0;
  options.service.limits.max_request_bytes = budget;
  absl::StatusOr<std::unique_ptr<GpselServer>> server = GpselServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<Client> client = Connect((*server)->port());

  absl::StatusOr<std::vector<KernelScore>> scored = client->Score(data, {kernel}, score);
  ASSERT_TRUE(scored.ok()) << scored.status();
  ASSERT_EQ(scored->size(), 1u);
  const KernelScore& s = scored->front();
  EXPECT_EQ(s.method, "sparse");
  EXPECT_GE(s.num_inducing, 1);
  EXPECT_LE(s.num_inducing, most_m);
  ASSERT_TRUE(s.mll_fit.has_value());
  ASSERT_TRUE(s.map_fit.has_value());
  // Each fit's own m crossed the wire; the score's is the larger.
  EXPECT_GE(s.mll_fit->num_inducing, 1);
  EXPECT_GE(s.map_fit->num_inducing, 1);
  EXPECT_EQ(std::max(s.mll_fit->num_inducing, s.map_fit->num_inducing), s.num_inducing);
  // Whatever stopped the growth short of the gap tolerance was the memory budget (the default
  // cap of 512 and n are far above it).
  for (const std::string& w : s.warnings) {
    if (absl::StrContains(w, "stopped by")) EXPECT_THAT(w, HasSubstr("stopped by memory"));
  }
  EXPECT_TRUE(s.intervals.count("bic"));

  // Less than the request holds beside one inducing point: still refused, naming the budget.
  server->reset();
  options.service.limits.max_request_bytes = BesideTheFit(n);
  server = GpselServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  client = Connect((*server)->port());
  const absl::Status refused = client->Score(data, {kernel}, score).status();
  EXPECT_EQ(bridge::ErrorReason(refused), "REQUEST_TOO_LARGE") << refused;
  EXPECT_THAT(refused.message(), HasSubstr("--max-request-bytes"));
  server->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpsel::testing
