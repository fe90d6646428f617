// The paper's interpretable example (the paper's Sec. 4.1): all eight metrics, the MAP optimum and the
// Hessian eigenvalues; metric parsing; Laplace clamping rules; option validation.
#include "gpsel/core/score.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpsel/core/dataset.h"
#include "gpsel/core/internal/thread_pool.h"
#include "gpsel/core/kernel_expr.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

Dataset InterpretableExample() {
  absl::StatusOr<Dataset> data = LoadCsvFile(GPSEL_DATA_DIR "/interpretable_linear.csv");
  EXPECT_TRUE(data.ok()) << data.status();
  return *data;
}

KernelExpr Kernel(std::string_view text) {
  absl::StatusOr<KernelExpr> k = ParseKernel(text);
  EXPECT_TRUE(k.ok()) << k.status();
  return *k;
}

TEST(ScoreTest, PaperInterpretableExampleMatchesAllEightMetrics) {
  ScoreOptions options;
  options.standardize = false;
  absl::StatusOr<KernelScore> score = ScoreKernel(InterpretableExample(), Kernel("SE"), options);
  ASSERT_TRUE(score.ok()) << score.status();
  EXPECT_EQ(score->num_hyperparameters, 2);
  EXPECT_FALSE(score->standardized);
  const std::map<std::string, double> expected = {
      {"mll", -5.287},     {"map", -9.174},  {"lap", -8.144},    {"lap0", -9.174},
      {"lap_aic", -11.174}, {"lap_bic", -13.779}, {"aic", -7.287}, {"bic", -7.590}};
  for (const auto& [name, value] : expected) {
    ASSERT_TRUE(score->metrics.count(name)) << name;
    EXPECT_NEAR(score->metrics.at(name), value, 0.005) << name;
  }
  ASSERT_TRUE(score->map_fit.has_value());
  EXPECT_NEAR(score->map_fit->values.at("SE.lengthscale"), 0.975, 0.005);
  EXPECT_NEAR(score->map_fit->values.at("noise"), 0.0841, 0.0005);
  ASSERT_TRUE(score->laplace.has_value());
  ASSERT_EQ(score->laplace->eigenvalues.size(), 2);
  EXPECT_NEAR(score->laplace->eigenvalues(0), 1.346, 0.005);
  EXPECT_NEAR(score->laplace->eigenvalues(1), 3.741, 0.005);
  EXPECT_TRUE(score->laplace->positive_definite);
  // Both eigenvalues lie below 2π, so Lap0 clamps both directions and equals MAP exactly.
  EXPECT_EQ(score->laplace->clamped.at("lap0").size(), 2u);
  EXPECT_DOUBLE_EQ(score->metrics.at("lap0"), score->metrics.at("map"));
}

// With threads (or a shared pool) the MLL and MAP fits run as one batch of starts; every number
// is the one the sequential path gives, and progress is one monotone stream over both fits.
TEST(ScoreTest, ConcurrentFitsGiveTheSequentialNumbers) {
  const Dataset data = InterpretableExample();
  ScoreOptions options;
  options.fit.seed = 5;
  absl::StatusOr<KernelScore> sequential = ScoreKernel(data, Kernel("SE+LIN"), options);
  ASSERT_TRUE(sequential.ok()) << sequential.status();
  ThreadPool pool(2);
  for (int variant = 0; variant < 2; ++variant) {
    ScoreOptions concurrent_options = options;
    if (variant == 0) concurrent_options.fit.threads = 3;
    if (variant == 1) concurrent_options.fit.pool = &pool;
    double last_fraction = 0.0;
    bool backwards = false;
    int fits_reports = 0;
    ProgressCallback watch = [&](const Progress& p) {
      if (p.stage == "mll_fit" || p.stage == "map_fit") {
        backwards = backwards || p.fraction < last_fraction;
        last_fraction = p.fraction;
        ++fits_reports;
      }
      return absl::OkStatus();
    };
    absl::StatusOr<KernelScore> concurrent =
        ScoreKernel(data, Kernel("SE+LIN"), concurrent_options, watch);
    ASSERT_TRUE(concurrent.ok()) << concurrent.status();
    EXPECT_EQ(concurrent->metrics, sequential->metrics) << "variant " << variant;
    EXPECT_EQ(concurrent->mll_fit->values, sequential->mll_fit->values);
    EXPECT_EQ(concurrent->map_fit->values, sequential->map_fit->values);
    EXPECT_EQ(concurrent->mll_fit->evaluations, sequential->mll_fit->evaluations);
    EXPECT_EQ(concurrent->map_fit->evaluations, sequential->map_fit->evaluations);
    EXPECT_FALSE(backwards);
    EXPECT_GT(fits_reports, 2 * options.fit.restarts);
  }
  // A cancellation from the callback stops both fits.
  ScoreOptions cancelled_options = options;
  cancelled_options.fit.threads = 2;
  int calls = 0;
  ProgressCallback cancel = [&](const Progress&) {
    return ++calls >= 2 ? absl::CancelledError("stop") : absl::OkStatus();
  };
  EXPECT_THAT(ScoreKernel(data, Kernel("SE+LIN"), cancelled_options, cancel),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(calls, 2);
}

// Reusing the fits of an earlier score (as kernel search does for its best kernel) gives the
// numbers a fresh ScoreKernel gives, fitting only what the earlier score lacked.
TEST(ScoreTest, ReusingFitsGivesTheFreshNumbers) {
  const Dataset data = InterpretableExample();
  ScoreOptions map_only;
  map_only.metrics = {Metric::kLap0};
  absl::StatusOr<KernelScore> earlier = ScoreKernel(data, Kernel("SE+LIN"), map_only);
  ASSERT_TRUE(earlier.ok()) << earlier.status();
  ASSERT_FALSE(earlier->mll_fit.has_value());
  ScoreOptions all;  // every paper metric: needs the MLL fit too
  absl::StatusOr<KernelScore> fresh = ScoreKernel(data, Kernel("SE+LIN"), all);
  absl::StatusOr<KernelScore> reused =
      ScoreKernelReusingFits(data, Kernel("LIN+SE"), all, *earlier);  // same canonical kernel
  ASSERT_TRUE(fresh.ok() && reused.ok()) << reused.status();
  // The MLL fit is added, so both are made together (cross-seeded) and the MAP fit also starts
  // from the earlier optimum: never worse than it, and here (one optimum) the fresh numbers.
  EXPECT_GE(reused->map_fit->objective_value, earlier->map_fit->objective_value);
  EXPECT_EQ(reused->map_fit->starts, fresh->map_fit->starts + 1);
  for (const auto& [name, value] : fresh->metrics) {
    EXPECT_NEAR(reused->metrics.at(name), value, 1e-7) << name;
  }
  // A score that has every fit the metrics need is reused as it is: nothing is refitted.
  absl::StatusOr<KernelScore> subset = ScoreKernelReusingFits(data, Kernel("SE+LIN"), map_only,
                                                              *fresh);
  ASSERT_TRUE(subset.ok()) << subset.status();
  EXPECT_EQ(subset->map_fit->evaluations, fresh->map_fit->evaluations);
  EXPECT_EQ(subset->metrics.at("lap0"), fresh->metrics.at("lap0"));
  EXPECT_FALSE(subset->mll_fit.has_value());
  // A MAP fit without the Hessian of its final Newton check (as one from a client would be):
  // the Laplace step computes it at the same point, to the same numbers.
  KernelScore without_hessian = *fresh;
  without_hessian.map_fit->objective_hessian.resize(0, 0);
  absl::StatusOr<KernelScore> recomputed =
      ScoreKernelReusingFits(data, Kernel("SE+LIN"), all, without_hessian);
  ASSERT_TRUE(recomputed.ok()) << recomputed.status();
  EXPECT_EQ(recomputed->metrics, fresh->metrics);
  EXPECT_EQ(recomputed->laplace->eigenvalues, fresh->laplace->eigenvalues);
  // An earlier score of another kernel is refused.
  EXPECT_THAT(ScoreKernelReusingFits(data, Kernel("SE"), all, *earlier),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// The parents of a given kernel among kernels scored before (a report's search path): only the
// largest contained ones (SE and PER+SE are inside C*PER*SE+C*SE, so only that one starts
// C*SE + C*PER*SE + LIN), each once, in the given order; the kernel itself and kernels it does
// not contain are no parents. ScoreKernels applies the same rule to the kernels it scores.
TEST(ScoreTest, LargestContainedParentsAreTheContainedKernelsNoOtherContains) {
  auto parent = [](std::string_view text) {
    auto score = std::make_shared<KernelScore>();
    score->kernel = std::string(text);
    return NestedParent{Kernel(text), std::move(score)};
  };
  const std::vector<NestedParent> scored = {parent("SE"), parent("PER+SE"), parent("PER*PER+SE"),
                                            parent("PER+SE"), parent("C*SE + C*PER*SE"),
                                            parent("LIN")};
  auto texts = [](const std::vector<NestedParent>& parents) {
    std::vector<std::string> out;
    for (const NestedParent& p : parents) out.push_back(ToString(p.kernel));
    return out;
  };
  // PER+SE does not contain SE (a bare PER summand cannot be switched off), so both start it.
  EXPECT_THAT(texts(LargestContainedParents(Kernel("C*SE + C*PER*SE"), scored)),
              ::testing::ElementsAre("SE", "PER+SE"));
  EXPECT_THAT(texts(LargestContainedParents(Kernel("C*SE + C*PER*SE + LIN"), scored)),
              ::testing::ElementsAre("C*PER*SE+C*SE", "LIN"));
  EXPECT_THAT(texts(LargestContainedParents(Kernel("C*SE"), scored)),
              ::testing::ElementsAre("SE"));
  EXPECT_TRUE(LargestContainedParents(Kernel("SE"), scored).empty());
  // A parent without a score is no start.
  std::vector<NestedParent> unscored = scored;
  unscored[1].score = nullptr;
  unscored[3].score = nullptr;
  EXPECT_THAT(texts(LargestContainedParents(Kernel("C*SE + C*PER*SE"), unscored)),
              ::testing::ElementsAre("SE"));
}

}  // namespace
}  // namespace gpsel
