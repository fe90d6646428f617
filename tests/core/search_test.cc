// Compositional kernel search: candidate generation against hand-written sets, the depth limit,
// option validation, search control with fake scorers (stopping, beam, failures, cancellation,
// warm starts), and real searches on GP samples (recognition, thread-count independence, the
// shared score cache).
#include "gpsel/core/search.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_join.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "gpsel/core/status_macros.h"
#include "tests/status_matchers.h"
#include "tests/test_timeout.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

KernelExpr Kernel(std::string_view text) {
  absl::StatusOr<KernelExpr> kernel = ParseKernel(text);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

std::vector<KernelExpr> Bases(std::string_view list) {
  absl::StatusOr<std::vector<KernelExpr>> bases = ParseBaseKernelList(list);
  EXPECT_TRUE(bases.ok()) << bases.status();
  return *bases;
}

// Canonical texts of the expansions.
std::vector<std::string> ExpansionTexts(std::string_view kernel, std::string_view bases,
                                        int max_base_kernels) {
  std::vector<std::string> texts;
  for (const KernelExpansion& e : ExpandKernel(Kernel(kernel), Bases(bases), max_base_kernels)) {
    texts.push_back(ToString(e.kernel));
  }
  return texts;
}

// Canonical texts of hand-written expressions (so the test does not depend on print order).
std::vector<std::string> Canonical(const std::vector<std::string>& expressions) {
  std::vector<std::string> texts;
  for (const std::string& e : expressions) texts.push_back(ToString(Kernel(e)));
  return texts;
}

// y ~ N(0, K + noise·I) on a regular 1-D grid x in [x_min, x_max], drawn with a fixed seed through an
// Eigen Cholesky. `natural` gives kernel parameter values by name (others: softplus(0)).
Dataset SampleGp(std::string_view kernel_text, int n, double x_min, double x_max,
                 const std::map<std::string, double>& natural, double noise, uint64_t seed) {
  Dataset data;
  data.x.resize(n, 1);
  for (int i = 0; i < n; ++i) data.x(i, 0) = x_min + (x_max - x_min) * i / std::max(1, n - 1);
  data.y = Eigen::VectorXd::Zero(n);
  absl::StatusOr<GpModel> model = GpModel::Create(Kernel(kernel_text), data.x, data.y);
  EXPECT_TRUE(model.ok()) << model.status();
  const std::vector<std::string> names = model->free_names();
  Eigen::VectorXd raw = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(names.size()));
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = natural.find(names[i]);
    if (it != natural.end()) raw[i] = InverseSoftplus(it->second);
  }
  Eigen::MatrixXd k = model->CrossCovariance(raw, data.x, data.x);
  k.diagonal().array() += noise;
  Eigen::LLT<Eigen::MatrixXd> cholesky(k);
  EXPECT_EQ(cholesky.info(), Eigen::Success);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::VectorXd z(n);
  for (int i = 0; i < n; ++i) z[i] = normal(rng);
  data.y = cholesky.matrixL() * z;
  return data;
}

std::vector<std::string> ChosenPerStep(const SearchResult& result) {
  std::vector<std::string> out;
  for (const SearchStep& step : result.steps) out.push_back(absl::StrJoin(step.chosen, ","));
  return out;
}

// A scorer that needs no fitting: value = f(kernel), recorded calls.
CandidateScorer FakeScorer(std::function<double(const KernelExpr&)> value,
                           std::atomic<int>* calls = nullptr) {
  return [value, calls](const Dataset&, const KernelExpr& kernel,
                        const CandidateRequest&) -> absl::StatusOr<CandidateScore> {
    if (calls) ++*calls;
    CandidateScore score;
    score.value = value(kernel);
    score.details.kernel = ToString(kernel);
    return score;
  };
}

Dataset SmallData() { return SampleGp("SE", 12, 0.0, 1.0, {}, 0.1, 7); }

// ---------------------------------------------------------------------------------------------
// Candidate generation

TEST(SearchExpandTest, SingleBaseKernelGivesSumsProductsAndReplacements) {
  EXPECT_THAT(ExpansionTexts("SE", "SE,LIN", 3),
              UnorderedElementsAreArray(Canonical({"SE+SE", "SE*SE", "SE+LIN", "SE*LIN", "LIN"})));
}

TEST(SearchExpandTest, SumOfTwoExpandsEverySubexpression) {
  // Whole kernel (+, *) x {SE, LIN}; inside LIN and inside SE (+, *) x {SE, LIN}; each leaf
  // replaced by the other base kernel. Duplicates collapse canonically.
  EXPECT_THAT(ExpansionTexts("LIN+SE", "SE,LIN", 3),
              UnorderedElementsAreArray(Canonical({
                  "LIN+SE+SE", "LIN+LIN+SE", "(LIN+SE)*SE", "(LIN+SE)*LIN",  // whole
                  "LIN*SE+SE", "LIN*LIN+SE", "SE+SE",                        // inside LIN
                  "SE*SE+LIN", "SE*LIN+LIN", "LIN+LIN",                      // inside SE
              })));
}

TEST(SearchExpandTest, ProductWithThreeBases) {
  EXPECT_THAT(ExpansionTexts("MAT32*SE", "SE,LIN,MAT32", 3),
              UnorderedElementsAreArray(Canonical({
                  "MAT32*SE+SE", "MAT32*SE*SE", "MAT32*SE+LIN", "MAT32*SE*LIN", "MAT32*SE+MAT32",
                  "MAT32*MAT32*SE",
                  "(MAT32+SE)*SE", "(MAT32+LIN)*SE", "(MAT32+MAT32)*SE", "SE*SE", "LIN*SE",
                  "MAT32*(SE+SE)", "MAT32*(SE+LIN)", "MAT32*(SE+MAT32)", "MAT32*LIN",
                  "MAT32*MAT32",
              })));
}

TEST(SearchExpandTest, DepthLimitDropsLargerKernels) {
  EXPECT_THAT(ExpansionTexts("LIN+SE", "SE,LIN", 2),
              UnorderedElementsAreArray(Canonical({"SE+SE", "LIN+LIN"})));
  EXPECT_THAT(ExpansionTexts("SE", "SE,LIN", 1), ElementsAre("LIN"));
  for (const KernelExpansion& e : ExpandKernel(Kernel("LIN*SE+MAT32"), DefaultBaseKernels(), 4)) {
    EXPECT_LE(NumBaseKernels(e.kernel), 4) << ToString(e.kernel);
  }
}

TEST(SearchExpandTest, GroupsOfOperandsAreSubexpressions) {
  // (LIN+MAT32) is a subexpression of LIN+MAT32+SE up to associativity.
  const std::vector<std::string> texts = ExpansionTexts("LIN+MAT32+SE", "SE", 4);
  EXPECT_THAT(texts, ::testing::Contains(ToString(Kernel("(LIN+MAT32)*SE+SE"))));
  EXPECT_THAT(texts, ::testing::Contains(ToString(Kernel("(LIN+SE)*SE+MAT32"))));
}

TEST(SearchExpandTest, CanonicalAndUniqueAndWithoutTheParent) {
  const KernelExpr parent = Kernel("LIN*SE+MAT32");
  std::set<std::string> seen;
  for (const KernelExpansion& e : ExpandKernel(parent, DefaultBaseKernels(), 3)) {
    const std::string text = ToString(e.kernel);
    EXPECT_TRUE(seen.insert(text).second) << "duplicate " << text;
    EXPECT_NE(e.kernel, parent);
    EXPECT_EQ(ToString(Kernel(text)), text) << "not canonical";
    EXPECT_FALSE(e.derivation.empty());
  }
  EXPECT_FALSE(seen.empty());
}

TEST(SearchExpandTest, ParseBaseKernelList) {
  EXPECT_THAT(Bases("SE, lin,MAT32,PER"),
              ElementsAre(Kernel("SE"), Kernel("LIN"), Kernel("MAT32"), Kernel("PER")));
  EXPECT_THAT(ParseBaseKernelList("SE+LIN"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseBaseKernelList("SE,SE"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseBaseKernelList("SE,FOO"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseBaseKernelList("SE,,LIN"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SearchExpandTest, CandidateSeedDependsOnSeedAndTextOnly) {
  EXPECT_EQ(CandidateSeed(1, "LIN*SE"), CandidateSeed(1, "LIN*SE"));
  EXPECT_NE(CandidateSeed(1, "LIN*SE"), CandidateSeed(2, "LIN*SE"));
  EXPECT_NE(CandidateSeed(1, "LIN*SE"), CandidateSeed(1, "LIN+SE"));
}

TEST(SearchExpandTest, WarmStartMapsParentValuesByName) {
  // A LIN factor cannot be switched to 1: it keeps its prior mean, the SE its parent's value.
  absl::StatusOr<Eigen::VectorXd> warm =
      WarmStartFromParent(Kernel("SE"), Kernel("LIN*SE"), {}, {"SE.lengthscale", "noise"},
                          Eigen::Vector2d(0.25, -2.0));
  ASSERT_TRUE(warm.ok()) << warm.status();
  ASSERT_EQ(warm->size(), 3);  // LIN.variance, SE.lengthscale, noise
  EXPECT_DOUBLE_EQ((*warm)[0], DefaultPrior(BaseKernel::kLIN, 0).mean);
  EXPECT_DOUBLE_EQ((*warm)[1], 0.25);
  EXPECT_DOUBLE_EQ((*warm)[2], -2.0);
}

TEST(SearchExpandTest, WarmStartSwitchesTheAddedPartOff) {
  // S → S + B: B's scale on the lower bound; S → S * B: B's lengthscale on the upper bound.
  absl::StatusOr<Eigen::VectorXd> sum =
      WarmStartFromParent(Kernel("C*SE"), Kernel("C*SE+LIN"), {},
                          {"C.constant", "SE.lengthscale", "noise"}, Eigen::Vector3d(1.5, 0.25, -2.0),
                          -30.0, 500.0);
  ASSERT_TRUE(sum.ok()) << sum.status();
  ASSERT_EQ(sum->size(), 4);  // C.constant, SE.lengthscale, LIN.variance, noise
  EXPECT_EQ(*sum, Eigen::Vector4d(1.5, 0.25, -30.0, -2.0));
  absl::StatusOr<Eigen::VectorXd> product = WarmStartFromParent(
      Kernel("SE"), Kernel("PER*SE"), {}, {"SE.lengthscale", "noise"},
      Eigen::Vector2d(0.25, -2.0), -30.0, 500.0);
  ASSERT_TRUE(product.ok()) << product.status();
  ASSERT_EQ(product->size(), 4);  // PER.lengthscale, PER.period, SE.lengthscale, noise
  EXPECT_EQ(*product, Eigen::Vector4d(500.0, DefaultPrior(BaseKernel::kPER, 1).mean, 0.25, -2.0));
}

// ---------------------------------------------------------------------------------------------
// Options

TEST(SearchOptionsTest, BadOptionsAreInvalidArgument) {
  const Dataset data = SmallData();
  auto code = [&](const SearchOptions& options) {
    return RunKernelSearch(data, options).status().code();
  };
  SearchOptions options;
  options.metric = "likelihoodish";
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.metric = "evidence";  // needs a scorer
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.max_depth = 0;
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.beam_width = 0;
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.threads = -1;
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.base_kernels = {Kernel("SE+LIN")};
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.base_kernels = {Kernel("SE"), Kernel("SE")};
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.base_kernels = {Kernel("SE[3]")};  // the data have one column
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.score.fit.restarts = 0;
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.score.hyperparameters.prior_overrides["PER.period"] = {0.0, 1.0};  // no PER in bases
  EXPECT_EQ(code(options), absl::StatusCode::kInvalidArgument);

  Dataset constant = data;
  constant.y.setConstant(1.0);
  EXPECT_THAT(RunKernelSearch(constant, SearchOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Dataset with_nan = data;
  with_nan.y[3] = std::nan("");
  EXPECT_THAT(RunKernelSearch(with_nan, SearchOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---------------------------------------------------------------------------------------------
// Search control with fake scorers (fast: only the final re-scoring fits a GP).

TEST(SearchControlTest, StopsWhenNothingBeatsTheBest) {
  SearchOptions options;
  options.metric = "fake";
  options.score.fit.restarts = 1;
  // Smaller is better except that LIN*SE is best of all: the search finds SE, then LIN*SE, then
  // stops at step 3 because nothing beats LIN*SE.
  options.scorer = FakeScorer([](const KernelExpr& k) {
    if (ToString(k) == "LIN*SE") return 10.0;
    return (ToString(k) == "SE" ? 5.0 : 0.0) - NumBaseKernels(k);
  });
  absl::StatusOr<SearchResult> result = RunKernelSearch(SmallData(), options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ToString(result->best_kernel), "LIN*SE");
  EXPECT_EQ(result->best_score, 10.0);
  ASSERT_EQ(result->steps.size(), 3u);
  EXPECT_THAT(ChosenPerStep(*result), ElementsAre("SE", "LIN*SE", ""));
  EXPECT_TRUE(result->steps[1].improved);
  EXPECT_FALSE(result->steps[2].improved);
  EXPECT_THAT(result->stop_reason, HasSubstr("no candidate"));
  EXPECT_EQ(result->best.metrics.at("fake"), 10.0);
  EXPECT_TRUE(result->best.metrics.count("lap0"));  // re-scored with every metric
  EXPECT_THAT(result->Summary(), HasSubstr("LIN*SE"));
}

TEST(SearchControlTest, GrowsToTheDepthLimitWhenBiggerIsAlwaysBetter) {
  for (int depth : {1, 2, 4}) {
    SearchOptions options;
    options.metric = "size";
    options.max_depth = depth;
    options.score.fit.restarts = 1;
    options.scorer = FakeScorer([](const KernelExpr& k) { return NumBaseKernels(k); });
    absl::StatusOr<SearchResult> result = RunKernelSearch(SmallData(), options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(NumBaseKernels(result->best_kernel), depth);
    EXPECT_EQ(static_cast<int>(result->steps.size()), depth);
    for (const SearchStep& step : result->steps) {
      for (const CandidateRecord& c : step.candidates) {
        EXPECT_LE(c.num_base_kernels, depth) << c.kernel;
      }
    }
    EXPECT_THAT(result->stop_reason, HasSubstr("depth limit"));
  }
}

TEST(SearchControlTest, BeamKeepsTheBestK) {
  SearchOptions options;
  options.metric = "fake";
  options.beam_width = 2;
  options.score.fit.restarts = 1;
  options.scorer = FakeScorer([](const KernelExpr& k) {
    const std::string text = ToString(k);
    if (text == "SE") return 3.0;
    if (text == "LIN") return 2.0;
    return 1.0 * NumBaseKernels(k) + (text == "LIN*LIN" ? 2.0 : 0.0);
  });
  absl::StatusOr<SearchResult> result = RunKernelSearch(SmallData(), options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_GE(result->steps.size(), 2u);
  EXPECT_THAT(result->steps[0].chosen, ElementsAre("SE", "LIN"));
  EXPECT_THAT(result->steps[1].expanded, ElementsAre("SE", "LIN"));
  // LIN*LIN is only reachable from LIN (the second beam member).
  ASSERT_EQ(result->steps[1].chosen.size(), 2u);
  EXPECT_EQ(result->steps[1].chosen.front(), "LIN*LIN");
}

TEST(SearchControlTest, FailuresAreRecordedAndNeverChosen) {
  SearchOptions options;
  options.metric = "fake";
  options.score.fit.restarts = 1;
  options.scorer = [](const Dataset&, const KernelExpr& k,
                      const CandidateRequest&) -> absl::StatusOr<CandidateScore> {
    const std::string text = ToString(k);
    if (text.find("LIN") != std::string::npos) {
      return absl::FailedPreconditionError("no linear kernels today");
    }
    CandidateScore score;
    score.value = NumBaseKernels(k);
    return score;
  };
  absl::StatusOr<SearchResult> result = RunKernelSearch(SmallData(), options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GT(result->failures, 0);
  for (const SearchStep& step : result->steps) {
    for (const CandidateRecord& c : step.candidates) {
      if (c.kernel.find("LIN") != std::string::npos) {
        EXPECT_FALSE(c.ok);
        EXPECT_FALSE(c.chosen);
        EXPECT_THAT(c.error, HasSubstr("no linear kernels"));
      }
    }
  }
  EXPECT_EQ(ToString(result->best_kernel).find("LIN"), std::string::npos);

  options.scorer = [](const Dataset&, const KernelExpr&,
                      const CandidateRequest&) -> absl::StatusOr<CandidateScore> {
    return absl::FailedPreconditionError("nothing works");
  };
  EXPECT_THAT(RunKernelSearch(SmallData(), options),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(SearchControlTest, CancellationStopsPromptlyAndStartsNothingMore) {
  for (int threads : {1, 3}) {
    std::atomic<int> calls{0};
    SearchOptions options;
    options.metric = "fake";
    options.threads = threads;
    options.score.fit.restarts = 1;
    options.scorer = FakeScorer([](const KernelExpr& k) { return NumBaseKernels(k); }, &calls);
    int reports = 0;
    absl::StatusOr<SearchResult> result =
        RunKernelSearch(SmallData(), options, [&](const Progress& p) {
          if (p.poll_only) return absl::OkStatus();
          EXPECT_EQ(p.stage, "search");
          ++reports;
          return reports == 4 ? absl::CancelledError("user pressed ^C") : absl::OkStatus();
        });
    EXPECT_THAT(result, StatusIs(absl::StatusCode::kCancelled));
    EXPECT_THAT(result.status().message(), HasSubstr("^C"));
    EXPECT_EQ(reports, 4) << "no progress after cancellation";
    // Step 1 has 3 candidates, step 2 many more: at most the ones already running finish.
    EXPECT_LE(calls.load(), 4 + threads);
  }
}

TEST(SearchControlTest, CancellationStopsRunningFits) {
  // A real fit in progress is interrupted through CandidateRequest::cancellation.
  SearchOptions options;
  options.score.fit.restarts = 50;
  const Dataset data = SampleGp("SE", 60, 0.0, 5.0, {}, 0.05, 3);
  std::atomic<bool> stop{false};
  options.scorer = [&](const Dataset& d, const KernelExpr& k,
                       const CandidateRequest& request) -> absl::StatusOr<CandidateScore> {
    stop = true;  // cancel as soon as the first fit started
    ScoreOptions score;
    score.fit.restarts = 50;
    score.metrics = {Metric::kLap0};
    absl::StatusOr<KernelScore> s = ScoreKernel(d, k, score, request.cancellation);
    if (!s.ok()) return s.status();
    return CandidateScoreFromKernelScore(*s, Metric::kLap0);
  };
  options.metric = "lap0-with-50-restarts";
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<SearchResult> result = RunKernelSearch(data, options, [&](const Progress&) {
    return stop ? absl::CancelledError("stop") : absl::OkStatus();
  });
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            testing::ScaledSeconds(5.0));
}

TEST(SearchControlTest, WarmStartsComeFromTheParent) {
  SearchOptions options;
  options.metric = "fake";
  options.warm_start = true;
  options.score.fit.restarts = 1;
  std::mutex mutex;
  std::map<std::string, Eigen::VectorXd> warm_starts;
  options.scorer = [&](const Dataset&, const KernelExpr& k,
                       const CandidateRequest& request) -> absl::StatusOr<CandidateScore> {
    CandidateScore score;
    score.value = ToString(k) == "SE" ? 100.0 : NumBaseKernels(k);
    // Every kernel's "optimum" is 0.5 for each parameter.
    absl::StatusOr<std::vector<HyperparameterInfo>> infos = DescribeHyperparameters(k, {});
    for (const HyperparameterInfo& info : *infos) score.parameter_names.push_back(info.name);
    score.raw_optimum = Eigen::VectorXd::Constant(infos->size(), 0.5);
    if (request.warm_start) {
      std::lock_guard<std::mutex> lock(mutex);
      warm_starts[ToString(k)] = *request.warm_start;
    }
    return score;
  };
  absl::StatusOr<SearchResult> result = RunKernelSearch(SmallData(), options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(warm_starts.count("SE") == 0) << "step 1 has no parent";
  ASSERT_TRUE(warm_starts.count("LIN*SE"));
  // LIN.variance gets its prior mean; SE.lengthscale and noise come from the parent SE.
  const Eigen::VectorXd& w = warm_starts.at("LIN*SE");
  ASSERT_EQ(w.size(), 3);
  EXPECT_DOUBLE_EQ(w[0], DefaultPrior(BaseKernel::kLIN, 0).mean);
  EXPECT_DOUBLE_EQ(w[1], 0.5);
  EXPECT_DOUBLE_EQ(w[2], 0.5);
  // Cached kernels (LIN, MAT32 again by replacement) keep the fit they got in step 1.
  for (const CandidateRecord& c : result->steps[1].candidates) {
    EXPECT_EQ(c.warm_started, !c.from_cache) << c.kernel;
  }
}

// ---------------------------------------------------------------------------------------------
// Real searches

// A smooth SE sample on x in [0, 5] (lengthscale 0.5, noise variance 0.01). Nested kernels such
// as SE*MAT32 or SE+LIN can only add likelihood, so MLL keeps growing, while the Laplace metrics
// and BIC charge for the extra hyperparameters.
Dataset SmoothSeSample() {
  return SampleGp("SE", 100, 0.0, 5.0, {{"SE.lengthscale", 0.5}}, 0.01, 1);
}

SearchResult Search(const Dataset& data, std::string_view metric, int threads,
                    ScoreCache* cache = nullptr, int restarts = 3) {
  SearchOptions options;
  options.metric = std::string(metric);
  options.threads = threads;
  options.score.fit.restarts = restarts;
  options.score.fit.seed = 11;
  if (cache) options.score.metrics = PaperMetrics();
  absl::StatusOr<SearchResult> result = RunKernelSearch(data, options, nullptr, cache);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SearchResult{};
}

TEST(SearchRecognitionTest, LaplaceAndBicFindTheGeneratingKernelMllOverfits) {
  const Dataset data = SmoothSeSample();
  for (std::string_view metric : {"lap0", "lap_aic", "bic"}) {
    const SearchResult result = Search(data, metric, 2);
    EXPECT_EQ(ToString(result.best_kernel), "SE") << metric << "\n" << result.Summary();
    ASSERT_EQ(result.steps.size(), 2u) << "step 2 must find nothing better";
    // Same seed and warm start, so the same optimum; a clean-clone CI run once differed in the
    // last bits (93.9651 both), so this checks the fit to 1e-9 relative, not bitwise.
    EXPECT_NEAR(result.best.metrics.at(std::string(metric)), result.best_score,
                1e-9 * std::abs(result.best_score))
        << "final re-scoring must reproduce the search's fit";
  }
  const SearchResult mll = Search(data, "mll", 2);
  EXPECT_EQ(NumBaseKernels(mll.best_kernel), 3) << mll.Summary();
  EXPECT_THAT(mll.stop_reason, HasSubstr("depth limit"));
}

TEST(SearchRecognitionTest, OneAndFourThreadsGiveIdenticalTraces) {
  const Dataset data = SampleGp("MAT32", 40, 0.0, 3.0, {}, 0.05, 5);
  const SearchResult one = Search(data, "lap0", 1);
  const SearchResult four = Search(data, "lap0", 4);
  ASSERT_EQ(one.steps.size(), four.steps.size());
  for (size_t s = 0; s < one.steps.size(); ++s) {
    ASSERT_EQ(one.steps[s].candidates.size(), four.steps[s].candidates.size());
    for (size_t c = 0; c < one.steps[s].candidates.size(); ++c) {
      const CandidateRecord& a = one.steps[s].candidates[c];
      const CandidateRecord& b = four.steps[s].candidates[c];
      EXPECT_EQ(a.kernel, b.kernel);
      EXPECT_EQ(a.ok, b.ok);
      EXPECT_EQ(a.seed, b.seed);
      EXPECT_EQ(a.chosen, b.chosen);
      // Bitwise identical, not merely close.
      EXPECT_EQ(std::memcmp(&a.score, &b.score, sizeof(double)), 0)
          << a.kernel << ": " << a.score << " vs " << b.score;
    }
  }
  EXPECT_EQ(ToString(one.best_kernel), ToString(four.best_kernel));
  EXPECT_EQ(one.best.metrics, four.best.metrics);
}

TEST(SearchRecognitionTest, SharedCacheServesOtherMetricsWithIdenticalResults) {
  const Dataset data = SampleGp("MAT32", 30, 0.0, 3.0, {}, 0.05, 9);
  ScoreCache cache;
  const SearchResult lap0 = Search(data, "lap0", 2, &cache);
  const SearchResult lap0_alone = Search(data, "lap0", 2);
  EXPECT_EQ(lap0.cache_hits, lap0_alone.cache_hits) << "only this search's own repeats";
  const SearchResult lap_aic = Search(data, "lap_aic", 2, &cache);
  EXPECT_GT(lap_aic.cache_hits, 0);
  // Same answer as without the cache.
  const SearchResult fresh = Search(data, "lap_aic", 2);
  EXPECT_EQ(ToString(lap_aic.best_kernel), ToString(fresh.best_kernel));
  EXPECT_EQ(lap_aic.best_score, fresh.best_score);

  // A cache filled for other data is refused.
  SearchOptions options;
  options.score.fit.restarts = 3;
  options.score.fit.seed = 11;
  EXPECT_THAT(RunKernelSearch(SmallData(), options, nullptr, &cache),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// score_kept_kernels: every kept kernel's score is what ScoreKernel gives for it with its
// candidate's seed (the independent reference: no warm start here, so the candidate's fit had
// no other start), and asking for them changes nothing else in the search. MLL grows with every
// step (SearchRecognitionTest.LaplaceAndBicFindTheGeneratingKernelMllOverfits), so all three
// steps keep a kernel and two of them are not the best.
TEST(SearchRecognitionTest, KeptKernelsScoresEqualScoreKernelWithTheirSeed) {
  // A trend with two wiggles: MLL keeps growing through all three steps even without warm starts.
  Dataset data;
  data.x = Eigen::VectorXd::LinSpaced(60, 0.0, 4.0);
  data.y.resize(60);
  std::mt19937_64 rng(1);
  std::normal_distribution<double> noise(0.0, 0.1);
  for (int i = 0; i < 60; ++i) {
    const double x = data.x(i, 0);
    data.y[i] = 2.0 * x + 0.5 * std::sin(3.0 * x) + 0.3 * std::sin(7.3 * x) + noise(rng);
  }
  SearchOptions options;
  options.base_kernels = Bases("SE,LIN");
  options.metric = "mll";
  options.max_depth = 3;
  options.threads = 2;
  options.warm_start = false;
  options.score.fit.restarts = 3;
  options.score.fit.seed = 11;
  absl::StatusOr<SearchResult> plain = RunKernelSearch(data, options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  options.score_kept_kernels = true;
  absl::StatusOr<SearchResult> kept = RunKernelSearch(data, options);
  ASSERT_TRUE(kept.ok()) << kept.status();

  // The same search.
  EXPECT_EQ(ChosenPerStep(*kept), ChosenPerStep(*plain));
  EXPECT_EQ(kept->best.metrics, plain->best.metrics);
  int kept_steps = 0;
  for (size_t s = 0; s < plain->steps.size(); ++s) {
    EXPECT_FALSE(plain->steps[s].kept_score.has_value()) << "not asked for";
    EXPECT_EQ(kept->steps[s].kept_score.has_value(), !kept->steps[s].chosen.empty());
    kept_steps += kept->steps[s].kept_score.has_value();
  }
  ASSERT_EQ(kept_steps, 3) << kept->Summary();

  for (const SearchStep& step : kept->steps) {
    if (!step.kept_score) continue;
    const std::string& text = step.chosen.front();
    SCOPED_TRACE(text);
    const KernelScore& from_search = *step.kept_score;
    EXPECT_EQ(from_search.kernel, text);
    if (text == ToString(kept->best_kernel)) {
      EXPECT_EQ(from_search.metrics, kept->best.metrics) << "the best kernel's step has `best`";
    }
    ScoreOptions reference_options;
    reference_options.fit.restarts = 3;
    reference_options.fit.seed = CandidateSeed(11, text);
    absl::StatusOr<KernelScore> reference = ScoreKernel(data, Kernel(text), reference_options);
    ASSERT_TRUE(reference.ok()) << reference.status();
    ASSERT_TRUE(from_search.mll_fit.has_value());
    ASSERT_TRUE(from_search.map_fit.has_value());
    ASSERT_TRUE(from_search.laplace.has_value());
    for (Metric metric : PaperMetrics()) {
      const std::string name(MetricName(metric));
      ASSERT_TRUE(reference->metrics.count(name)) << name;
      ASSERT_TRUE(from_search.metrics.count(name)) << name;
      EXPECT_NEAR(from_search.metrics.at(name), reference->metrics.at(name),
                  1e-7 * std::max(1.0, std::abs(reference->metrics.at(name))))
          << name;
    }
    // The search metric's value is at least the candidate's (the re-score also starts there).
    for (const CandidateRecord& c : step.candidates) {
      if (c.kernel == text) {
        EXPECT_GE(from_search.metrics.at("mll"), c.score - 1e-9);
      }
    }
  }
}

}  // namespace
}  // namespace gpsel

namespace gpsel {
namespace {

// SearchOptions::score_candidates: a step's candidates scored elsewhere (here: by the default
// scorer, one after another and in reverse order, as tasks on other replicas could be) give
// the search that scores them on its own threads, bit for bit; each step hands over exactly its
// candidates that are not in the cache, once.
TEST(SearchElsewhereTest, CandidatesScoredElsewhereGiveTheSameSearch) {
  const Dataset data = SampleGp("MAT32", 40, 0.0, 3.0, {}, 0.05, 5);
  const SearchResult local = Search(data, "lap0", 2);

  SearchOptions options;
  options.metric = "lap0";
  options.threads = 2;
  options.score.fit.restarts = 3;
  options.score.fit.seed = 11;
  const CandidateScorer scorer = MakeMetricScorer(Metric::kLap0, options.score);
  std::vector<int> batch_sizes;
  options.score_candidates = [&](int step, const std::vector<CandidateToScore>& candidates,
                                 int threads, const ProgressCallback& progress)
      -> absl::StatusOr<std::vector<absl::StatusOr<CandidateScore>>> {
    EXPECT_EQ(step, static_cast<int>(batch_sizes.size()) + 1);
    EXPECT_EQ(threads, 2);  // the search's own
    batch_sizes.push_back(static_cast<int>(candidates.size()));
    std::vector<absl::StatusOr<CandidateScore>> outcomes(candidates.size(),
                                                         absl::UnknownError("unset"));
    for (size_t k = candidates.size(); k-- > 0;) {
      CandidateRequest request;
      request.seed = candidates[k].seed;
      request.warm_start = candidates[k].warm_start;
      // Every candidate carries the seed the search gives it, from its text alone.
      EXPECT_EQ(candidates[k].seed, CandidateSeed(11, ToString(candidates[k].kernel)));
      outcomes[k] = scorer(data, candidates[k].kernel, request);
      GPSEL_RETURN_IF_ERROR(progress({"tasks", 1.0 - k / double(candidates.size()), ""}));
    }
    return outcomes;
  };
  absl::StatusOr<SearchResult> elsewhere = RunKernelSearch(data, options);
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();

  ASSERT_EQ(elsewhere->steps.size(), local.steps.size());
  int handed_over = 0;
  for (size_t s = 0; s < local.steps.size(); ++s) {
    ASSERT_EQ(elsewhere->steps[s].candidates.size(), local.steps[s].candidates.size());
    for (size_t c = 0; c < local.steps[s].candidates.size(); ++c) {
      const CandidateRecord& a = local.steps[s].candidates[c];
      const CandidateRecord& b = elsewhere->steps[s].candidates[c];
      EXPECT_EQ(a.kernel, b.kernel);
      EXPECT_EQ(a.ok, b.ok);
      EXPECT_EQ(a.from_cache, b.from_cache);
      EXPECT_EQ(a.warm_started, b.warm_started);
      EXPECT_EQ(a.chosen, b.chosen);
      EXPECT_EQ(std::memcmp(&a.score, &b.score, sizeof(double)), 0)
          << a.kernel << ": " << a.score << " vs " << b.score;
      handed_over += !b.from_cache;
    }
    EXPECT_EQ(elsewhere->steps[s].chosen, local.steps[s].chosen);
  }
  EXPECT_EQ(ToString(elsewhere->best_kernel), ToString(local.best_kernel));
  EXPECT_EQ(elsewhere->best.metrics, local.best.metrics);
  EXPECT_EQ(elsewhere->stop_reason, local.stop_reason);
  // One batch per step, of exactly the candidates that were fitted.
  ASSERT_EQ(batch_sizes.size(), local.steps.size());
  int batched = 0;
  for (int size : batch_sizes) batched += size;
  EXPECT_EQ(batched, handed_over);
  EXPECT_EQ(batched, elsewhere->candidates_scored);
}

// A failed outcome is a failed candidate (recorded, never chosen); an error of the batch itself
// (a lost lease, a broken store) stops the search with it.
TEST(SearchElsewhereTest, FailedOutcomesAreFailedCandidatesAndBatchErrorsStopTheSearch) {
  SearchOptions options;
  options.metric = "bic";
  options.max_depth = 2;
  options.score.fit.restarts = 2;
  const Dataset data = SmallData();
  const CandidateScorer scorer = MakeMetricScorer(Metric::kBic, options.score);
  options.score_candidates = [&](int, const std::vector<CandidateToScore>& candidates, int,
                                 const ProgressCallback&)
      -> absl::StatusOr<std::vector<absl::StatusOr<CandidateScore>>> {
    std::vector<absl::StatusOr<CandidateScore>> outcomes;
    for (const CandidateToScore& candidate : candidates) {
      if (ToString(candidate.kernel) == "LIN") {
        outcomes.push_back(absl::FailedPreconditionError("LIN refused by the test"));
        continue;
      }
      CandidateRequest request;
      request.seed = candidate.seed;
      request.warm_start = candidate.warm_start;
      outcomes.push_back(scorer(data, candidate.kernel, request));
    }
    return outcomes;
  };
  absl::StatusOr<SearchResult> result = RunKernelSearch(data, options);
  ASSERT_TRUE(result.ok()) << result.status();
  bool saw_lin = false;
  for (const CandidateRecord& record : result->steps[0].candidates) {
    if (record.kernel != "LIN") continue;
    saw_lin = true;
    EXPECT_FALSE(record.ok);
    EXPECT_FALSE(record.chosen);
    EXPECT_THAT(record.error, HasSubstr("refused by the test"));
  }
  EXPECT_TRUE(saw_lin);
  EXPECT_GE(result->failures, 1);

  options.score_candidates = [](int step, const std::vector<CandidateToScore>&, int,
                                const ProgressCallback&)
      -> absl::StatusOr<std::vector<absl::StatusOr<CandidateScore>>> {
    if (step == 2) return absl::AbortedError("job lease lost");
    return std::vector<absl::StatusOr<CandidateScore>>(
        3, absl::StatusOr<CandidateScore>(CandidateScore{1.0, 0.0, {}, {}, {}}));
  };
  EXPECT_THAT(RunKernelSearch(data, options), StatusIs(absl::StatusCode::kAborted));
  // The wrong number of outcomes is a bug of the batch scorer, not a result.
  options.score_candidates = [](int, const std::vector<CandidateToScore>&, int,
                                const ProgressCallback&)
      -> absl::StatusOr<std::vector<absl::StatusOr<CandidateScore>>> {
    return std::vector<absl::StatusOr<CandidateScore>>();
  };
  EXPECT_THAT(RunKernelSearch(data, options), StatusIs(absl::StatusCode::kInternal));
}

}  // namespace
}  // namespace gpsel

namespace gpsel {
namespace {

// A search whose base kernels include BASE[*] (one lengthscale per column): the children of a
// parent start from its optimum as for any other kernel. Before, the warm start was built on the
// unexpanded text (LIN + SE[*]: 3 values) while the model was the expanded one (LIN +
// SE[0]*SE[1]*SE[2]: 6), and every such child failed with "extra_starts[0]: has 3 entries".
// Real data: three columns of the diabetes regression (age, bmi, s5; every 4th patient).
TEST(SearchPerColumnTest, ChildrenOfAPerColumnKernelStartFromTheirParentsOptimum) {
  absl::StatusOr<Dataset> all = LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/diabetes.csv");
  ASSERT_TRUE(all.ok()) << all.status();
  Dataset data;
  const int n = static_cast<int>(all->y.size()) / 4;
  data.x.resize(n, 3);
  data.y.resize(n);
  for (int i = 0; i < n; ++i) {
    data.x.row(i) << all->x(4 * i, 0), all->x(4 * i, 2), all->x(4 * i, 8);
    data.y(i) = all->y(4 * i);
  }
  SearchOptions options;
  options.base_kernels = {*ParseKernel("SE[*]"), *ParseKernel("LIN")};
  options.max_depth = 2;
  options.score.fit.restarts = 1;
  options.score.fit.max_draws_factor = 1;
  options.score.scale_x.mode = XScaling::Mode::kAuto;
  absl::StatusOr<SearchResult> result = RunKernelSearch(data, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_GE(result->steps.size(), 2u);
  int warm_started = 0;
  for (const SearchStep& step : result->steps) {
    for (const CandidateRecord& candidate : step.candidates) {
      EXPECT_TRUE(candidate.ok) << candidate.kernel << ": " << candidate.error;
      if (candidate.warm_started) ++warm_started;
    }
  }
  EXPECT_GT(warm_started, 0);
}

}  // namespace
}  // namespace gpsel
