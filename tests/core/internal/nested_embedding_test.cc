// Nested kernels: the containment truth table, and the independent check that matters — the
// larger kernel's log likelihood at the embedded point equals the smaller kernel's at its own
// point (a fresh GpModel evaluation of each), on real Mauna Loa data.
#include "gpsel/core/internal/nested_embedding.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpsel/core/dataset.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/hyperparameters.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

KernelExpr Kernel(std::string_view text) {
  absl::StatusOr<KernelExpr> k = ParseKernel(text);
  EXPECT_TRUE(k.ok()) << k.status();
  return *k;
}

TEST(NestedEmbeddingTest, ContainmentTruthTable) {
  struct Case {
    const char* super;
    const char* sub;
    bool contained;
  };
  const Case cases[] = {
      {"SE", "SE", true},
      {"SE+LIN", "SE", true},           // LIN summand → 0
      {"SE*PER", "SE", true},           // PER factor → 1 as its lengthscale → ∞
      {"C*SE", "SE", true},             // C = 1
      {"C*SE + C*SE*PER", "C*SE", true},
      {"C*SE + C*SE*PER + C*RQ", "C*SE + C*SE*PER", true},
      {"C*SE + C*SE*PER + C*RQ + C*SE", "C*SE + C*SE*PER + C*RQ", true},
      {"C*SE + C*SE*PER + C*RQ + C*SE", "C*SE", true},
      {"LIN", "SE", false},
      {"SE", "SE+LIN", false},
      {"SE[1]", "SE[0]", false},
      {"SE", "MAT32", false},
      {"LIN*SE", "SE", false},          // a LIN factor cannot become 1
      {"SE+SE", "SE", false},           // a bare SE summand cannot become 0
      {"SE+LIN", "LIN*SE", false},      // a product is not a sum
      {"C*(SE+LIN)", "SE", true},       // C = 1, LIN summand → 0
  };
  for (const Case& c : cases) {
    EXPECT_EQ(KernelContains(Kernel(c.super), Kernel(c.sub)), c.contained)
        << c.sub << " in " << c.super;
  }
}

// Raw values for every parameter of `kernel` (a fixed, plausible point) by name.
std::map<std::string, double> SomeRawValues(const KernelExpr& kernel) {
  absl::StatusOr<std::vector<HyperparameterInfo>> infos = DescribeHyperparameters(kernel, {});
  EXPECT_TRUE(infos.ok());
  std::map<std::string, double> raw;
  double shift = 0.0;
  for (const HyperparameterInfo& info : *infos) {
    double value = 0.3 + shift;                                      // lengthscales, constants
    if (info.name.find(".period") != std::string::npos) value = InverseSoftplus(1.0);
    if (info.name == kNoiseName) value = InverseSoftplus(0.01);
    raw[info.name] = value;
    shift += 0.17;  // distinct values, so a wrong mapping shows
  }
  return raw;
}

Eigen::VectorXd FreeVector(const GpModel& model, const std::map<std::string, double>& raw) {
  Eigen::VectorXd v(model.num_free());
  Eigen::Index k = 0;
  for (const HyperparameterInfo& info : model.parameters()) v(k++) = raw.at(info.name);
  return v;
}

class EmbeddedLikelihoodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Dataset> data = LoadCsvFile(GPSEL_DATA_DIR "/mauna_loa_monthly.csv");
    ASSERT_TRUE(data.ok());
    // Every third month (174 points), y standardised.
    const Eigen::Index n = data->num_points() / 3;
    x_.resize(n, 1);
    y_.resize(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      x_(i, 0) = data->x(3 * i, 0);
      y_(i) = data->y(3 * i);
    }
    y_ = (y_.array() - y_.mean()) / std::sqrt((y_.array() - y_.mean()).square().mean());
  }

  // |log p(y | super at the embedding) − log p(y | sub at its point)|, and the quality.
  std::pair<double, EmbeddingQuality> Gap(const char* sub_text, const char* super_text) {
    const KernelExpr sub = Kernel(sub_text), super = Kernel(super_text);
    absl::StatusOr<GpModel> sub_model = GpModel::Create(sub, x_, y_);
    absl::StatusOr<GpModel> super_model = GpModel::Create(super, x_, y_);
    EXPECT_TRUE(sub_model.ok() && super_model.ok());
    const std::map<std::string, double> sub_raw = SomeRawValues(sub);
    absl::StatusOr<NestedEmbedding> embedding =
        EmbedNestedOptimum(sub, sub_raw, super, -30.0, 500.0);
    EXPECT_TRUE(embedding.ok()) << embedding.status();
    absl::StatusOr<double> small = sub_model->LogLikelihood(FreeVector(*sub_model, sub_raw));
    absl::StatusOr<double> large =
        super_model->LogLikelihood(FreeVector(*super_model, embedding->raw));
    EXPECT_TRUE(small.ok() && large.ok());
    return {std::abs(*large - *small), embedding->quality};
  }

  Eigen::MatrixXd x_;
  Eigen::VectorXd y_;
};

TEST_F(EmbeddedLikelihoodTest, ExactEmbeddingsReproduceTheSmallerKernelsLikelihood) {
  const std::pair<const char*, const char*> exact[] = {
      {"SE", "C*SE"},
      {"C*SE", "C*SE + C*SE*PER"},  // into the C*SE summand; the other C → 0
      {"C*SE + C*SE*PER + C*RQ", "C*SE + C*SE*PER + C*RQ + C*SE"},
      {"SE+LIN", "C*PER + LIN + SE"},
  };
  for (const auto& [sub, super] : exact) {
    const auto [gap, quality] = Gap(sub, super);
    EXPECT_EQ(quality, EmbeddingQuality::kExact) << sub << " in " << super;
    EXPECT_LT(gap, 1e-6) << sub << " in " << super;
  }
}

// A stationary factor switched to 1 by a lengthscale of 500 years: exp(−d²/(2·500²)) ≥ 0.996
// over 43 years, a small but non-zero change of the likelihood.
TEST_F(EmbeddedLikelihoodTest, LimitEmbeddingsComeCloseToTheSmallerKernelsLikelihood) {
  const std::pair<const char*, const char*> limit[] = {
      {"C*SE + C*SE*PER", "C*SE + C*SE*PER + C*RQ"},  // exact (C → 0)...
      {"C*SE", "C*SE*PER"},                           // ... and PER → 1
      {"C*SE + C*SE*PER", "C*RQ*SE + C*SE*PER"},
  };
  const auto [chain_gap, chain_quality] = Gap(limit[0].first, limit[0].second);
  EXPECT_EQ(chain_quality, EmbeddingQuality::kExact);
  EXPECT_LT(chain_gap, 1e-6);
  for (int i = 1; i < 3; ++i) {
    const auto [gap, quality] = Gap(limit[i].first, limit[i].second);
    EXPECT_EQ(quality, EmbeddingQuality::kLimit) << limit[i].second;
    EXPECT_LT(gap, 1.0) << limit[i].second;
  }
}

TEST(NestedEmbeddingTest, NotContainedOrIncompleteInputsAreErrors) {
  std::map<std::string, double> raw = {{"SE.lengthscale", 0.1}, {"noise", -3.0}};
  EXPECT_THAT(EmbedNestedOptimum(Kernel("SE"), raw, Kernel("LIN"), -30, 500),
              StatusIs(absl::StatusCode::kNotFound));
  raw.erase("noise");
  EXPECT_THAT(EmbedNestedOptimum(Kernel("SE"), raw, Kernel("SE+LIN"), -30, 500),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Repeated labels map to the right leaves: canonically C*PER*SE comes first, so C*SE's values
  // land on C#2 and SE#2 and C#1 (of C*PER*SE) goes to the lower bound.
  const std::map<std::string, double> sub = {
      {"C.constant", 0.7}, {"SE.lengthscale", 1.1}, {"noise", -2.0}};
  absl::StatusOr<NestedEmbedding> e =
      EmbedNestedOptimum(Kernel("C*SE"), sub, Kernel("C*SE + C*SE*PER"), -30, 500);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->raw.at("C#2.constant"), 0.7);
  EXPECT_EQ(e->raw.at("SE#2.lengthscale"), 1.1);
  EXPECT_EQ(e->raw.at("C#1.constant"), -30.0);
  EXPECT_EQ(e->raw.at("noise"), -2.0);
}

}  // namespace
}  // namespace gpsel
