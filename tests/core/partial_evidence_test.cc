// Partial is never final (issue 27 item 1): a nested-sampling or importance-sampling run stopped
// by a call, time or sample cap says so in its result (partial, partial_reason), and a capped
// nested run's error bar includes the remaining-mass term log(Ẑ + L_max X) − log Ẑ, so that it
// covers the exact log Z of closed-form problems and the finished run's estimate on a real series.
#include <cmath>
#include <string>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/nested_sampling.h"
#include "gtest/gtest.h"
#include "tests/core/bundled_data.h"
#include "tests/core/evidence_oracles.h"

namespace gpsel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A narrow Gaussian likelihood (posterior sd 0.02 of a unit prior, 3 dimensions: H ≈ 11 nats)
// stopped by a call cap once the run has reached the posterior bulk (2500-5000 calls of the
// ~5500 a finished run takes): the statistical error alone misses the truth, the error with the
// remaining-mass term covers it every time. Stopped earlier (600 calls) no run can know how much
// mass lies beyond its best live point: the term is still several nats, and the partial flag
// (exit code 3 in the CLI) is what says the number is not an answer.
TEST(PartialEvidenceTest, CappedRunsErrorCoversTheTruncation) {
  const EvidenceProblem p = IsotropicProblem(3, 0.02, 0.3);
  int covered = 0, covered_by_statistical = 0, total = 0;
  for (int64_t cap : {600, 2500, 3500, 5000}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      SCOPED_TRACE(::testing::Message() << "cap " << cap << " seed " << seed);
      NestedSamplingOptions options;
      options.seed = seed;
      options.max_likelihood_calls = cap;
      absl::StatusOr<NestedSamplingResult> r =
          RunNestedSampling(p.loglik, p.prior_mean, p.prior_sd, options);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(r->partial);
      EXPECT_THAT(r->partial_reason, HasSubstr("max_likelihood_calls"));
      EXPECT_GT(r->log_evidence_truncation, 0.1);
      EXPECT_GE(r->log_evidence_error, r->log_evidence_truncation);
      EXPECT_THAT(r->Summary(), HasSubstr("remaining-mass term"));
      if (cap == 600) {
        EXPECT_GT(r->log_evidence_truncation, 2.0);
        continue;
      }
      const double miss = std::abs(r->log_evidence - p.log_z);
      const double statistical = std::sqrt(std::max(
          0.0, r->log_evidence_error * r->log_evidence_error -
                   r->log_evidence_truncation * r->log_evidence_truncation));
      covered += miss <= r->log_evidence_error;
      covered_by_statistical += miss <= statistical;
      ++total;
    }
  }
  EXPECT_EQ(covered, total);
  EXPECT_LE(covered_by_statistical, total - 3);
}

TEST(PartialEvidenceTest, MergedCappedRunsKeepTheTruncation) {
  const EvidenceProblem p = IsotropicProblem(3, 0.02, 0.3);
  NestedSamplingOptions options;
  options.max_likelihood_calls = 3500;
  options.num_runs = 3;
  absl::StatusOr<NestedSamplingResult> merged =
      RunNestedSampling(p.loglik, p.prior_mean, p.prior_sd, options);
  ASSERT_TRUE(merged.ok()) << merged.status();
  SCOPED_TRACE(merged->Summary());
  EXPECT_TRUE(merged->partial);
  ASSERT_EQ(merged->runs.size(), 3u);
  // A bias of one sign: merging does not shrink it below the smallest run's.
  EXPECT_GT(merged->log_evidence_truncation, 1.0);
  EXPECT_GE(merged->log_evidence_error, merged->log_evidence_truncation);
  EXPECT_LE(std::abs(merged->log_evidence - p.log_z), merged->log_evidence_error);
}

TEST(PartialEvidenceTest, FinishedRunIsNotPartialAndHasNoTruncation) {
  const EvidenceProblem p = IsotropicProblem(2, 0.2, 0.3);
  absl::StatusOr<NestedSamplingResult> r =
      RunNestedSampling(p.loglik, p.prior_mean, p.prior_sd, NestedSamplingOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->partial);
  EXPECT_EQ(r->log_evidence_truncation, 0.0);
  EXPECT_THAT(r->Summary(), Not(HasSubstr("PARTIAL")));
}

// The evidence of a kernel on a real series (Nile flow, 100 years) carries the reported method's
// cap at the top of its result, whichever method ran.
TEST(PartialEvidenceTest, EvidenceResultCarriesTheCapOfTheReportedMethod) {
  const Dataset data = testing::LoadBundled("nile.csv");
  absl::StatusOr<KernelExpr> kernel = ParseKernel("C*SE");
  ASSERT_TRUE(kernel.ok());

  EvidenceOptions finished;
  absl::StatusOr<EvidenceResult> full = ComputeEvidence(data, *kernel, finished);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE(full->partial);
  EXPECT_EQ(full->log_evidence_truncation, 0.0);

  EvidenceOptions capped = finished;
  capped.sampling.max_likelihood_calls = 400;
  absl::StatusOr<EvidenceResult> nested = ComputeEvidence(data, *kernel, capped);
  ASSERT_TRUE(nested.ok()) << nested.status();
  SCOPED_TRACE(nested->Summary());
  EXPECT_TRUE(nested->partial);
  EXPECT_THAT(nested->partial_reason, StartsWith("nested sampling: max_likelihood_calls"));
  EXPECT_GT(nested->log_evidence_truncation, 0.0);
  EXPECT_EQ(nested->log_evidence_truncation, nested->sampling->log_evidence_truncation);
  EXPECT_GE(nested->log_evidence_error, nested->log_evidence_truncation);
  EXPECT_LE(std::abs(nested->log_evidence - full->log_evidence),
            nested->log_evidence_error + full->log_evidence_error);
  EXPECT_THAT(nested->Summary(), HasSubstr("PARTIAL, not a final answer"));

  EvidenceOptions importance = finished;
  importance.method = EvidenceMethod::kImportance;
  importance.importance.initial_samples = 300;
  importance.importance.max_samples = 300;
  importance.importance.target_error = 1e-4;
  absl::StatusOr<EvidenceResult> is = ComputeEvidence(data, *kernel, importance);
  ASSERT_TRUE(is.ok()) << is.status();
  EXPECT_TRUE(is->partial);
  EXPECT_THAT(is->partial_reason, StartsWith("importance sampling: max_samples (300)"));
  EXPECT_THAT(is->partial_reason, HasSubstr("target of 0.000"));
  EXPECT_EQ(is->log_evidence_truncation, 0.0);

  // auto: a capped importance stage that fails its diagnostics hands over to a nested run that
  // finishes; the reported (nested) result is then final.
  EvidenceOptions handed_over = importance;
  handed_over.method = EvidenceMethod::kAuto;
  absl::StatusOr<EvidenceResult> autod = ComputeEvidence(data, *kernel, handed_over);
  ASSERT_TRUE(autod.ok()) << autod.status();
  ASSERT_EQ(autod->method, EvidenceMethod::kNested);
  EXPECT_TRUE(autod->importance->partial);
  EXPECT_FALSE(autod->partial);
}

}  // namespace
}  // namespace gpsel
