// The bridge (proto/bridge/convert.h, server/validation/validation.h): every request and response type survives
// core → proto → core → proto unchanged (MessageDifferencer, so a field FromProto drops shows up),
// values land in the fields they belong to, statuses keep their details across gRPC, and request
// validation names every bad field with core's own messages and defaults.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/server/validation/validation.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

Dataset Example() {
  absl::StatusOr<Dataset> data =
      LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/interpretable_linear.csv");
  EXPECT_TRUE(data.ok()) << data.status();
  return *data;
}

KernelExpr Kernel(const std::string& text) { return *ParseKernel(text); }

// Options with no field at its default, so a field the bridge forgets cannot hide.
ScoreOptions UnusualScoreOptions() {
  ScoreOptions options;
  options.fit.restarts = 7;
  options.fit.seed = 11;
  options.fit.max_iterations = 123;
  options.standardize = false;
  options.metrics = {Metric::kMap, Metric::kLap0, Metric::kBic};
  options.laplace_r = {0.5, -1.25};
  options.hyperparameters.prior_overrides["SE.lengthscale"] = NormalPrior{0.3, 0.7};
  options.hyperparameters.fixed_values["noise"] = 0.05;
  options.scale_x = *ParseXScaling("2.5");
  options.data_informed_starts = false;
  return options;
}

TEST(BridgeRoundTripTest, DatasetAndMatrix) {
  const Dataset data = Example();
  v1::Dataset proto;
  bridge::ToProto(data, &proto);
  absl::StatusOr<Dataset> back = bridge::FromProto(proto);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->x, data.x);
  EXPECT_EQ(back->y, data.y);
  Eigen::MatrixXd m(2, 3);
  m << 1, 2, 3, 4, 5, 6.5;
  v1::Matrix pm;
  bridge::ToProto(m, &pm);
  EXPECT_EQ(pm.values(2), 3.0);  // row-major
  absl::StatusOr<Eigen::MatrixXd> mb = bridge::FromProto(pm, "x_new");
  ASSERT_TRUE(mb.ok());
  EXPECT_EQ(*mb, m);
  pm.add_values(7);
  EXPECT_THAT(std::string(bridge::FromProto(pm, "x_new").status().message()), HasSubstr("x_new"));
}

// Regression (tests/fuzz/request_fuzzer.cc): a matrix of 2^31 − 1 rows and 0 columns has no values
// and is valid, but FromProto looped over its rows for seconds (31 s under the fuzz build's
// sanitizers) before returning it.
TEST(BridgeRoundTripTest, EmptyMatrixWithManyRowsConvertsAtOnce) {
  v1::Matrix pm;
  pm.set_rows(std::numeric_limits<int32_t>::max());
  pm.set_cols(0);
  const absl::Time start = absl::Now();
  absl::StatusOr<Eigen::MatrixXd> m = bridge::FromProto(pm, "x_new");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->rows(), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(m->cols(), 0);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
}

TEST(BridgeRoundTripTest, ScoreRequestKeepsEveryOption) {
  const ScoreOptions options = UnusualScoreOptions();
  const v1::ScoreRequest request =
      bridge::ScoreRequestOf(Example(), {Kernel("SE"), Kernel("SE+LIN")}, options);
  EXPECT_EQ(request.kernels_size(), 2);
  EXPECT_EQ(request.fit().restarts(), 7);
  EXPECT_EQ(request.fit().scale_x(), XScalingText(options.scale_x));
  absl::StatusOr<ScoreOptions> back = bridge::ScoreOptionsFromProto(request);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->fit.restarts, 7);
  EXPECT_EQ(back->fit.seed, 11u);
  EXPECT_EQ(back->fit.max_iterations, 123);
  EXPECT_FALSE(back->standardize);
  EXPECT_EQ(back->metrics, options.metrics);
  EXPECT_EQ(back->laplace_r, options.laplace_r);
  EXPECT_EQ(back->hyperparameters.prior_overrides.at("SE.lengthscale").sd, 0.7);
  EXPECT_EQ(back->hyperparameters.fixed_values.at("noise"), 0.05);
  EXPECT_EQ(back->scale_x.factor, 2.5);
  EXPECT_FALSE(back->data_informed_starts);
  const v1::ScoreRequest again =
      bridge::ScoreRequestOf(Example(), {Kernel("SE"), Kernel("SE+LIN")}, *back);
  EXPECT_TRUE(MessageDifferencer::Equals(request, again)) << request.DebugString() << "\nvs\n"
                                                          << again.DebugString();
}

// Held-out data travels in ScoreRequest.test and comes back, per fit, in KernelScore.held_out;
// the server's validation refuses a bad test set naming the field.
TEST(BridgeRoundTripTest, ScoreRequestCarriesTheTestSetAndScoresKeepHeldOut) {
  ScoreOptions options;
  options.metrics = {Metric::kMll, Metric::kMap};
  Dataset test = Example();
  test.y = test.y.reverse();
  options.test = std::make_shared<const Dataset>(test);
  const v1::ScoreRequest request = bridge::ScoreRequestOf(Example(), {Kernel("SE")}, options);
  ASSERT_TRUE(request.has_test());
  EXPECT_EQ(request.test().y_size(), test.num_points());
  absl::StatusOr<ValidScore> valid = ValidateScoreRequest(request, ServiceLimits{});
  ASSERT_TRUE(valid.ok()) << valid.status();
  ASSERT_NE(valid->options.test, nullptr);
  EXPECT_EQ(valid->options.test->y, test.y);
  EXPECT_EQ(valid->options.test->x, test.x);

  absl::StatusOr<KernelScore> score = ScoreKernel(Example(), Kernel("SE"), valid->options);
  ASSERT_TRUE(score.ok()) << score.status();
  ASSERT_EQ(score->held_out.size(), 2u);
  v1::KernelScore proto;
  bridge::ToProto(*score, &proto);
  ASSERT_EQ(proto.held_out_size(), 2);
  EXPECT_EQ(proto.held_out(0).objective(), v1::FIT_OBJECTIVE_MAXIMUM_LIKELIHOOD);
  const KernelScore back = bridge::FromProto(proto);
  ASSERT_EQ(back.held_out.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.held_out[i].objective, score->held_out[i].objective);
    EXPECT_EQ(back.held_out[i].num_test_points, test.num_points());
    EXPECT_EQ(back.held_out[i].test_log_likelihood, score->held_out[i].test_log_likelihood);
    EXPECT_EQ(back.held_out[i].predictive_log_density, score->held_out[i].predictive_log_density);
  }

  v1::ScoreRequest two_columns = request;
  two_columns.mutable_test()->set_num_dims(2);
  two_columns.mutable_test()->add_x(1.0);  // 10 points need 20 values; 11 are given
  EXPECT_THAT(ValidateScoreRequest(two_columns, ServiceLimits{}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("test.x")));
  v1::ScoreRequest not_finite = request;
  not_finite.mutable_test()->set_y(3, std::numeric_limits<double>::quiet_NaN());
  EXPECT_THAT(ValidateScoreRequest(not_finite, ServiceLimits{}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("test.y")));
}

// Scores the caller had before (a report's search path) travel in ScoreRequest.nested_parents
// with their optima, and the server's ScoreKernels, given what the bridge makes of the request,
// scores exactly what the in-process call scores: the same nested start, the same numbers.
TEST(BridgeRoundTripTest, ScoreRequestCarriesTheNestedParentsOptima) {
  const Dataset data = Example();
  ScoreOptions options;
  options.fit.restarts = 2;
  absl::StatusOr<KernelScore> se = ScoreKernel(data, Kernel("SE"), options);
  ASSERT_TRUE(se.ok()) << se.status();
  options.nested_parents.push_back({Kernel("SE"), std::make_shared<const KernelScore>(*se)});
  const v1::ScoreRequest request = bridge::ScoreRequestOf(data, {Kernel("SE+LIN")}, options);
  ASSERT_EQ(request.nested_parents_size(), 1);
  EXPECT_EQ(request.nested_parents(0).kernel(), "SE");
  EXPECT_FALSE(request.nested_parents(0).has_laplace()) << "only the optima are sent";
  absl::StatusOr<ValidScore> valid = ValidateScoreRequest(request, ServiceLimits{});
  ASSERT_TRUE(valid.ok()) << valid.status();
  ASSERT_EQ(valid->options.nested_parents.size(), 1u);
  const NestedParent& back = valid->options.nested_parents.front();
  EXPECT_EQ(back.kernel, Kernel("SE"));
  EXPECT_EQ(back.score->parameter_names, se->parameter_names);
  EXPECT_EQ(back.score->mll_fit->raw, se->mll_fit->raw);
  EXPECT_EQ(back.score->map_fit->raw, se->map_fit->raw);
  EXPECT_EQ(back.score->map_fit->values, se->map_fit->values);
  const v1::ScoreRequest again =
      bridge::ScoreRequestOf(valid->data, valid->kernels, valid->options);
  EXPECT_TRUE(MessageDifferencer::Equals(request, again)) << request.DebugString() << "\nvs\n"
                                                          << again.DebugString();

  absl::StatusOr<std::vector<KernelScore>> local = ScoreKernels(data, {Kernel("SE+LIN")}, options);
  absl::StatusOr<std::vector<KernelScore>> served =
      ScoreKernels(valid->data, valid->kernels, valid->options);
  ASSERT_TRUE(local.ok() && served.ok());
  EXPECT_EQ(served->front().metrics, local->front().metrics);
  int nested_starts = 0;
  for (const FitResult::StartEnd& end : served->front().mll_fit->start_ends) {
    if (end.kind == StartKind::kNestedParent) {
      ++nested_starts;
      EXPECT_EQ(end.origin, "SE MLL optimum");
    }
  }
  EXPECT_EQ(nested_starts, 1);
  EXPECT_GE(served->front().metrics.at("mll"), se->metrics.at("mll") - 1e-6);

  // A parent that cannot be a start is refused by name; more parents than kernels allowed too.
  v1::ScoreRequest bad = request;
  bad.mutable_nested_parents(0)->mutable_mll_fit()->set_raw(0, std::nan(""));
  bad.add_nested_parents()->set_kernel("SE +");
  valid = ValidateScoreRequest(bad, ServiceLimits{});
  ASSERT_THAT(valid, StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<std::string> fields;
  for (const auto& [field, description] : bridge::FieldViolations(valid.status())) {
    fields.push_back(field);
  }
  EXPECT_THAT(fields, ::testing::IsSupersetOf({std::string("nested_parents[0]"),
                                               std::string("nested_parents[1].kernel")}));
  ServiceLimits tight;
  tight.max_kernels_per_request = 1;
  v1::ScoreRequest two = request;
  *two.add_nested_parents() = request.nested_parents(0);
  valid = ValidateScoreRequest(two, tight);
  ASSERT_THAT(valid, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(valid.status().message()), HasSubstr("nested_parents"));
}

TEST(BridgeRoundTripTest, SearchRequestKeepsEveryOption) {
  SearchOptions options;
  options.base_kernels = {Kernel("SE"), Kernel("PER"), Kernel("LIN")};
  options.max_depth = 4;
  options.metric = "bic";
  options.beam_width = 3;
  options.threads = 2;
  options.warm_start = false;
  options.score_kept_kernels = true;
  options.operators.change_point = true;
  options.operators.change_window = true;
  options.operators.columns = {2, 0};
  options.score = UnusualScoreOptions();
  const v1::SearchRequest request = bridge::SearchRequestOf(Example(), options);
  EXPECT_THAT(request.operators(), ::testing::ElementsAre("+", "*", "CP", "CW"));
  EXPECT_THAT(request.change_columns(), ::testing::ElementsAre(2, 0));
  absl::StatusOr<SearchOptions> back = bridge::SearchOptionsFromProto(request);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->operators.change_point);
  EXPECT_TRUE(back->operators.change_window);
  EXPECT_THAT(back->operators.columns, ::testing::ElementsAre(2, 0));
  EXPECT_EQ(back->max_depth, 4);
  EXPECT_EQ(back->metric, "bic");
  EXPECT_EQ(back->beam_width, 3);
  EXPECT_FALSE(back->warm_start);
  EXPECT_TRUE(back->score_kept_kernels);
  // An old client's request (field 10 unset) asks for no kept scores.
  v1::SearchRequest old_client = request;
  old_client.clear_score_kept_kernels();
  absl::StatusOr<SearchOptions> old_options = bridge::SearchOptionsFromProto(old_client);
  ASSERT_TRUE(old_options.ok()) << old_options.status();
  EXPECT_FALSE(old_options->score_kept_kernels);
  EXPECT_EQ(back->base_kernels.size(), 3u);
  const v1::SearchRequest again = bridge::SearchRequestOf(Example(), *back);
  EXPECT_TRUE(MessageDifferencer::Equals(request, again)) << request.DebugString() << "\nvs\n"
                                                          << again.DebugString();
}

TEST(BridgeRoundTripTest, EvidenceRequestKeepsEveryOption) {
  EvidenceOptions options;
  options.sampling.num_live = 77;
  options.sampling.dlogz = 0.3;
  options.sampling.dynamic = true;
  options.sampling.seed = 9;
  options.sampling.max_likelihood_calls = 12345;
  options.sampling.max_seconds = 4.5;
  options.sampling.return_samples = true;
  options.standardize = false;
  options.hyperparameters.fixed_values["noise"] = 0.2;
  options.scale_x = *ParseXScaling("auto");
  options.method = EvidenceMethod::kAuto;
  options.importance.target_error = 0.05;
  options.importance.max_samples = 9999;
  options.importance.initial_samples = 500;
  options.importance.prior_share = 0.2;
  options.importance.student_t_dof = 3;
  options.importance.covariance_inflation = 1.7;
  options.importance.threads = 2;
  options.sampling.threads = 2;
  options.sampling.num_runs = 3;
  options.sampling.batch_size = 8;
  options.mode_search.restarts = 12;
  const v1::SubmitEvidenceRequest request =
      bridge::SubmitEvidenceRequestOf(Example(), Kernel("SE"), options);
  EXPECT_EQ(request.kernel(), "SE");
  const EvidenceOptions back = bridge::FromProto(request.options());
  EXPECT_EQ(back.method, EvidenceMethod::kAuto);
  EXPECT_EQ(back.importance.target_error, 0.05);
  EXPECT_EQ(back.importance.max_samples, 9999);
  EXPECT_EQ(back.importance.initial_samples, 500);
  EXPECT_EQ(back.importance.prior_share, 0.2);
  EXPECT_EQ(back.importance.student_t_dof, 3);
  EXPECT_EQ(back.importance.covariance_inflation, 1.7);
  EXPECT_EQ(back.importance.threads, 2);
  EXPECT_EQ(back.sampling.threads, 2);
  EXPECT_EQ(back.sampling.num_runs, 3);
  EXPECT_EQ(back.sampling.batch_size, 8);
  EXPECT_EQ(back.mode_search.restarts, 12);
  // One seed, one time cap and one samples flag for both methods.
  EXPECT_EQ(back.importance.seed, 9u);
  EXPECT_EQ(back.importance.max_seconds, 4.5);
  EXPECT_TRUE(back.importance.return_samples);
  EXPECT_EQ(back.sampling.num_live, 77);
  EXPECT_EQ(back.sampling.max_likelihood_calls, 12345);
  EXPECT_TRUE(back.sampling.dynamic);
  EXPECT_EQ(back.scale_x.mode, XScaling::Mode::kAuto);
  const v1::SubmitEvidenceRequest again =
      bridge::SubmitEvidenceRequestOf(Example(), Kernel("SE"), back);
  EXPECT_TRUE(MessageDifferencer::Equals(request, again)) << request.DebugString() << "\nvs\n"
                                                          << again.DebugString();
}

TEST(BridgeRoundTripTest, PredictRequestThroughValidation) {
  PredictOptions options;
  options.objective = FitObjective::kMaximumLikelihood;
  options.fit = UnusualScoreOptions();
  options.fit.hyperparameters.fixed_values.clear();
  options.fit.metrics.clear();
  options.fit.laplace_r.clear();
  options.components = true;
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(4, 0.0, 1.0);
  const v1::PredictRequest request =
      bridge::PredictRequestOf(Example(), Kernel("SE"), x_new, options);
  absl::StatusOr<ValidPredict> valid = ValidatePredictRequest(request, ServiceLimits{});
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(valid->x_new, x_new);
  EXPECT_EQ(valid->options.objective, FitObjective::kMaximumLikelihood);
  EXPECT_EQ(valid->options.fit.fit.restarts, 7);
  EXPECT_EQ(valid->options.fit.scale_x.factor, 2.5);
  EXPECT_TRUE(valid->options.components);
  const v1::PredictRequest again =
      bridge::PredictRequestOf(valid->data, valid->kernel, valid->x_new, valid->options);
  EXPECT_TRUE(MessageDifferencer::Equals(request, again)) << request.DebugString() << "\nvs\n"
                                                          << again.DebugString();
}

// Results of real runs: ToProto(FromProto(ToProto(r))) == ToProto(r).
template <typename Core, typename Proto>
void ExpectStableRoundTrip(const Core& result) {
  Proto first;
  bridge::ToProto(result, &first);
  Proto second;
  if constexpr (std::is_same_v<Core, SearchResult>) {
    absl::StatusOr<SearchResult> back = bridge::FromProto(first);
    ASSERT_TRUE(back.ok()) << back.status();
    bridge::ToProto(*back, &second);
  } else {
    bridge::ToProto(bridge::FromProto(first), &second);
  }
  EXPECT_TRUE(MessageDifferencer::Equals(first, second)) << first.DebugString() << "\nvs\n"
                                                         << second.DebugString();
}

// A saved model and sampling options travel in PredictRequest (model 8, samples 9, seed 10) and
// come out of validation as they went in; samples come back in PredictResponse (9, 10).
TEST(BridgeRoundTripTest, SavedModelAndSamplesThroughValidation) {
  const Dataset data = Example();
  ScoreOptions score_options;
  score_options.fit.restarts = 1;
  score_options.metrics = {Metric::kMll, Metric::kMap, Metric::kLap0};
  absl::StatusOr<KernelScore> score = ScoreKernel(data, Kernel("SE"), score_options);
  ASSERT_TRUE(score.ok()) << score.status();
  PredictOptions options;
  options.model = SaveModel(*score, data);
  options.samples = 3;
  options.seed = 99;
  const Eigen::MatrixXd x_new = Eigen::VectorXd::LinSpaced(4, 0.0, 1.0);
  const v1::PredictRequest request = bridge::PredictRequestOf(data, Kernel("SE"), x_new, options);
  EXPECT_EQ(request.model().format(), "gpsel.v1.SavedModel");
  EXPECT_EQ(request.model().data_hash(), DatasetHash(data));
  absl::StatusOr<ValidPredict> valid = ValidatePredictRequest(request, ServiceLimits{});
  ASSERT_TRUE(valid.ok()) << valid.status();
  ASSERT_TRUE(valid->options.model.has_value());
  EXPECT_EQ(valid->options.samples, 3);
  EXPECT_EQ(valid->options.seed, 99u);
  EXPECT_EQ(valid->options.model->map_fit->values, score->map_fit->values);
  const v1::PredictRequest again =
      bridge::PredictRequestOf(valid->data, valid->kernel, valid->x_new, valid->options);
  EXPECT_TRUE(MessageDifferencer::Equals(request, again)) << request.DebugString() << "\nvs\n"
                                                          << again.DebugString();
  // The response: the samples matrix and its jitter, bit for bit.
  absl::StatusOr<PredictResult> result =
      FitAndPredict(valid->data, valid->kernel, valid->x_new, valid->options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->prediction.samples.rows(), 3);
  ExpectStableRoundTrip<PredictResult, v1::PredictResponse>(*result);
  v1::PredictResponse response;
  bridge::ToProto(*result, &response);
  EXPECT_EQ(bridge::FromProto(response).prediction.samples, result->prediction.samples);

  // Bad models and sample counts are named by field.
  v1::PredictRequest foreign = request;
  foreign.mutable_model()->set_format("sklearn");
  EXPECT_THAT(ValidatePredictRequest(foreign, ServiceLimits{}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.format")));
  v1::PredictRequest other_data = request;
  other_data.mutable_dataset()->set_y(0, other_data.dataset().y(0) + 1.0);
  absl::Status other = ValidatePredictRequest(other_data, ServiceLimits{}).status();
  EXPECT_THAT(other, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("other data")));
  EXPECT_EQ(bridge::FieldViolations(other).at(0).first, "model");
  v1::PredictRequest too_many = request;
  too_many.set_samples(300000);
  EXPECT_EQ(bridge::FieldViolations(ValidatePredictRequest(too_many, ServiceLimits{}).status())
                .at(0)
                .first,
            "samples");
}

// Dataset.missing (4): NaN points named by default, left out with MISSING_VALUES_DROP.
TEST(BridgeValidationTest, MissingValuesAreNamedOrDropped) {
  v1::PredictRequest request;
  request.set_kernel("SE");
  request.mutable_x_new()->set_rows(1);
  request.mutable_x_new()->set_cols(1);
  request.mutable_x_new()->add_values(0.5);
  (*request.mutable_hyperparameters())["SE.lengthscale"] = 1.0;
  (*request.mutable_hyperparameters())["noise"] = 0.1;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double x : {0.0, 1.0, nan, 3.0, 4.0}) request.mutable_dataset()->add_x(x);
  for (double y : {1.0, nan, 0.5, 2.0, 1.5}) request.mutable_dataset()->add_y(y);
  absl::Status refused = ValidatePredictRequest(request, ServiceLimits{}).status();
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument));
  const auto violations = bridge::FieldViolations(refused);
  ASSERT_EQ(violations.size(), 2u);
  EXPECT_EQ(violations[0].first, "dataset.x");
  EXPECT_THAT(violations[0].second, HasSubstr("point(s) 2 (0-based)"));
  EXPECT_EQ(violations[1].first, "dataset.y");
  EXPECT_THAT(violations[1].second, HasSubstr("point(s) 1 (0-based)"));
  request.mutable_dataset()->set_missing(v1::MISSING_VALUES_DROP);
  absl::StatusOr<ValidPredict> dropped = ValidatePredictRequest(request, ServiceLimits{});
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->data.num_points(), 3);
  EXPECT_EQ(dropped->data.x(1, 0), 3.0);
  EXPECT_EQ(dropped->data.y(2), 1.5);
  // An infinity is never a missing value.
  request.mutable_dataset()->set_y(0, std::numeric_limits<double>::infinity());
  EXPECT_THAT(ValidatePredictRequest(request, ServiceLimits{}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("infinite")));
}

TEST(BridgeRoundTripTest, ResultsOfRealRuns) {
  const Dataset data = Example();
  ScoreOptions score_options;
  score_options.standardize = false;
  score_options.laplace_r = {0.5};
  absl::StatusOr<KernelScore> score = ScoreKernel(data, Kernel("SE"), score_options);
  ASSERT_TRUE(score.ok()) << score.status();
  ExpectStableRoundTrip<KernelScore, v1::KernelScore>(*score);
  ExpectStableRoundTrip<FitResult, v1::FitResult>(*score->map_fit);
  v1::KernelScore proto;
  bridge::ToProto(*score, &proto);
  EXPECT_EQ(proto.metrics().at("mll"), score->metrics.at("mll"));  // bit for bit
  EXPECT_EQ(proto.map_fit().values().at("SE.lengthscale"), score->map_fit->values.at("SE.lengthscale"));
  EXPECT_EQ(proto.laplace().eigenvalues_size(), 2);

  PredictOptions predict_options;
  predict_options.fit = score_options;
  absl::StatusOr<PredictResult> predicted = FitAndPredict(
      data, Kernel("SE"), Eigen::VectorXd::LinSpaced(3, 0.0, 1.0), predict_options);
  ASSERT_TRUE(predicted.ok());
  ExpectStableRoundTrip<PredictResult, v1::PredictResponse>(*predicted);
  v1::PredictResponse response;
  bridge::ToProto(*predicted, &response);
  EXPECT_EQ(response.mean(1), predicted->prediction.mean(1));
  EXPECT_TRUE(response.has_fit());
  EXPECT_EQ(response.kernel(), "SE");
  EXPECT_EQ(response.components_size(), 0);

  // The summands' posteriors (PredictOptions::components) cross bit for bit, in order.
  predict_options.components = true;
  predicted = FitAndPredict(data, Kernel("SE + LIN"), Eigen::VectorXd::LinSpaced(3, 0.0, 1.0),
                            predict_options);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  ASSERT_EQ(predicted->prediction.components.size(), 2u);
  ExpectStableRoundTrip<PredictResult, v1::PredictResponse>(*predicted);
  v1::PredictResponse with_components;
  bridge::ToProto(*predicted, &with_components);
  EXPECT_EQ(with_components.components(1).kernel(), "SE");
  const PredictResult predicted_back = bridge::FromProto(with_components);
  ASSERT_EQ(predicted_back.prediction.components.size(), 2u);
  for (size_t c = 0; c < 2; ++c) {
    const PredictionComponent& sent = predicted->prediction.components[c];
    const PredictionComponent& got = predicted_back.prediction.components[c];
    EXPECT_EQ(got.kernel, sent.kernel);
    EXPECT_EQ(got.mean, sent.mean);
    EXPECT_EQ(got.variance, sent.variance);
  }

  EvidenceOptions evidence_options;
  evidence_options.standardize = false;
  evidence_options.sampling.num_live = 50;
  evidence_options.sampling.dlogz = 0.5;
  evidence_options.sampling.return_samples = true;
  absl::StatusOr<EvidenceResult> evidence = ComputeEvidence(data, Kernel("SE"), evidence_options);
  ASSERT_TRUE(evidence.ok());
  ExpectStableRoundTrip<EvidenceResult, v1::EvidenceResult>(*evidence);
  evidence_options.sampling.num_runs = 3;
  absl::StatusOr<EvidenceResult> three_runs =
      ComputeEvidence(data, Kernel("SE"), evidence_options);
  ASSERT_TRUE(three_runs.ok()) << three_runs.status();
  ExpectStableRoundTrip<EvidenceResult, v1::EvidenceResult>(*three_runs);
  v1::EvidenceResult three_message;
  bridge::ToProto(*three_runs, &three_message);
  EXPECT_EQ(three_message.runs_size(), 3);
  EXPECT_GT(three_message.log_evidence_error_spread(), 0.0);
  evidence_options.sampling.num_runs = 1;
  // Importance sampling, and auto falling back to nested sampling (both results present).
  evidence_options.method = EvidenceMethod::kImportance;
  evidence_options.importance.return_samples = true;
  absl::StatusOr<EvidenceResult> importance =
      ComputeEvidence(data, Kernel("SE"), evidence_options);
  ASSERT_TRUE(importance.ok()) << importance.status();
  ExpectStableRoundTrip<EvidenceResult, v1::EvidenceResult>(*importance);
  v1::EvidenceResult importance_message;
  bridge::ToProto(*importance, &importance_message);
  EXPECT_EQ(importance_message.method(), v1::EVIDENCE_METHOD_IMPORTANCE);
  EXPECT_EQ(importance_message.log_evidence(), importance->importance->log_evidence);
  EXPECT_GT(importance_message.importance().modes_size(), 0);
  EXPECT_GT(importance_message.samples().rows(), 0);
  evidence_options.method = EvidenceMethod::kAuto;
  evidence_options.importance.covariance_inflation = 0.01;  // fails its diagnostics
  evidence_options.importance.initial_samples = 200;
  evidence_options.importance.max_samples = 400;
  absl::StatusOr<EvidenceResult> fallback = ComputeEvidence(data, Kernel("SE"), evidence_options);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  ASSERT_TRUE(fallback->importance.has_value() && fallback->sampling.has_value());
  ExpectStableRoundTrip<EvidenceResult, v1::EvidenceResult>(*fallback);
  const EvidenceResult fallback_back = [&] {
    v1::EvidenceResult m;
    bridge::ToProto(*fallback, &m);
    return bridge::FromProto(m);
  }();
  EXPECT_EQ(fallback_back.sampling->likelihood_calls, fallback->sampling->likelihood_calls);

  SearchOptions search_options;
  search_options.base_kernels = {Kernel("SE"), Kernel("LIN")};
  search_options.max_depth = 2;
  search_options.metric = "bic";
  search_options.score.standardize = false;
  search_options.score.fit.restarts = 2;
  absl::StatusOr<SearchResult> search = RunKernelSearch(data, search_options);
  ASSERT_TRUE(search.ok()) << search.status();
  ExpectStableRoundTrip<SearchResult, v1::SearchResult>(*search);
  // With the kept kernels' scores: each crosses the wire whole, and only where there is one.
  search_options.score_kept_kernels = true;
  absl::StatusOr<SearchResult> kept = RunKernelSearch(data, search_options);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ExpectStableRoundTrip<SearchResult, v1::SearchResult>(*kept);
  v1::SearchResult kept_message;
  bridge::ToProto(*kept, &kept_message);
  absl::StatusOr<SearchResult> kept_back = bridge::FromProto(kept_message);
  ASSERT_TRUE(kept_back.ok()) << kept_back.status();
  ASSERT_EQ(kept_back->steps.size(), kept->steps.size());
  for (size_t s = 0; s < kept->steps.size(); ++s) {
    ASSERT_EQ(kept_back->steps[s].kept_score.has_value(), kept->steps[s].kept_score.has_value());
    EXPECT_EQ(kept_message.steps(s).has_kept_score(), !kept->steps[s].chosen.empty());
    if (!kept->steps[s].kept_score) continue;
    EXPECT_EQ(kept_back->steps[s].kept_score->kernel, kept->steps[s].chosen.front());
    EXPECT_EQ(kept_back->steps[s].kept_score->metrics, kept->steps[s].kept_score->metrics);
  }
  v1::SearchResult plain_message;
  bridge::ToProto(*search, &plain_message);
  for (const v1::SearchStep& step : plain_message.steps()) {
    EXPECT_FALSE(step.has_kept_score()) << "not asked for";
  }
  EXPECT_FALSE(plain_message.has_best_sparse()) << "an exact search has no sparse score";

  // A sparse search whose best kernel was re-scored exactly: the sparse score it was ranked by
  // crosses the wire beside the exact one (issue 28).
  SearchOptions sparse_options;
  sparse_options.base_kernels = {Kernel("SE")};
  sparse_options.max_depth = 1;
  sparse_options.metric = "bic";
  sparse_options.score.fit.restarts = 1;
  sparse_options.score.approx.mode = ApproxMode::kSparse;
  sparse_options.score.approx.inducing_points = 8;
  absl::StatusOr<SearchResult> sparse = RunKernelSearch(data, sparse_options);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  ASSERT_TRUE(sparse->best_sparse.has_value()) << sparse->exact_rescore_note;
  ExpectStableRoundTrip<SearchResult, v1::SearchResult>(*sparse);
  v1::SearchResult sparse_message;
  bridge::ToProto(*sparse, &sparse_message);
  absl::StatusOr<SearchResult> sparse_back = bridge::FromProto(sparse_message);
  ASSERT_TRUE(sparse_back.ok()) << sparse_back.status();
  EXPECT_EQ(sparse_back->best.method, "exact");
  ASSERT_TRUE(sparse_back->best_sparse.has_value());
  EXPECT_EQ(sparse_back->best_sparse->method, "sparse");
  EXPECT_EQ(sparse_back->best_sparse->num_inducing, 8);
  EXPECT_EQ(sparse_back->best_sparse->metrics, sparse->best_sparse->metrics);
  EXPECT_EQ(sparse_back->best_sparse->intervals.at("bic").upper,
            sparse->best_sparse->intervals.at("bic").upper);

  const Progress progress{"search", 0.25, "step 1/2"};
  v1::Progress p;
  bridge::ToProto(progress, &p);
  const Progress back = bridge::FromProto(p);
  EXPECT_EQ(back.stage, "search");
  EXPECT_EQ(back.fraction, 0.25);
  EXPECT_EQ(back.message, "step 1/2");
}

TEST(BridgeStatusTest, DetailsSurviveTheTripThroughGrpc) {
  absl::Status bad = bridge::InvalidFields({{"dataset.y", "is empty"}, {"kernels[1]", "bad"}});
  absl::Status back = bridge::FromGrpcStatus(bridge::ToGrpcStatus(bad));
  EXPECT_EQ(back.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bridge::FieldViolations(back),
              UnorderedElementsAre(Pair("dataset.y", "is empty"), Pair("kernels[1]", "bad")));
  absl::Status full = bridge::WithErrorInfo(absl::ResourceExhaustedError("queue"), "QUEUE_FULL");
  EXPECT_EQ(bridge::ErrorReason(bridge::FromGrpcStatus(bridge::ToGrpcStatus(full))), "QUEUE_FULL");
}

TEST(BridgeValidationTest, EveryBadFieldIsNamedWithCoreMessagesAndDefaults) {
  v1::ScoreRequest request = bridge::ScoreRequestOf(Example(), {Kernel("SE")}, ScoreOptions{});
  request.add_kernels("SE +");
  request.add_metrics("lapx");
  request.mutable_fit()->set_restarts(-1);
  request.mutable_dataset()->set_y(3, std::nan(""));
  absl::StatusOr<ValidScore> valid = ValidateScoreRequest(request, ServiceLimits{});
  ASSERT_THAT(valid, StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<std::string> fields;
  std::string restarts_message, metric_message;
  for (const auto& [field, description] : bridge::FieldViolations(valid.status())) {
    fields.push_back(field);
    if (field == "fit.restarts") restarts_message = description;
    if (field == absl::StrCat("metrics[", request.metrics_size() - 1, "]")) {
      metric_message = description;
    }
  }
  EXPECT_THAT(fields, ::testing::IsSupersetOf({std::string("dataset.y"), std::string("kernels[1]"),
                                               std::string("fit.restarts")}));
  // The default comes from core's FitOptions, the metric message from core's ParseMetric.
  EXPECT_THAT(restarts_message, HasSubstr(absl::StrCat("default ", FitOptions{}.restarts)));
  EXPECT_EQ(metric_message,
            std::string(absl::StripPrefix(ParseMetric("lapx").status().message(), "metrics: ")));

  // The server's own limits, and only those, come from ServiceLimits.
  ServiceLimits tight;
  tight.max_points = 5;
  request = bridge::ScoreRequestOf(Example(), {Kernel("SE")}, ScoreOptions{});
  valid = ValidateScoreRequest(request, tight);
  EXPECT_THAT(std::string(valid.status().message()), HasSubstr("limit of 5"));
  ASSERT_TRUE(ValidateScoreRequest(request, ServiceLimits{}).ok());
}

// The server's default point limit is the CLI's (core/dataset.h kDefaultMaxPoints): the same
// dataset is accepted, and one point more refused, in-process and over gRPC alike.
TEST(BridgeValidationTest, ServerAndCliAgreeOnThePointLimit) {
  EXPECT_EQ(ServiceLimits{}.max_points, kDefaultMaxPoints);
  EXPECT_EQ(DatasetLimits{}.max_points, kDefaultMaxPoints);
  EXPECT_EQ(ServiceLimitCeilings().max_points, kMaxPointsCeiling);
  for (int n : {kDefaultMaxPoints, kDefaultMaxPoints + 1}) {
    Dataset data;
    data.x = Eigen::VectorXd::LinSpaced(n, 0.0, 1.0);
    data.y = data.x.col(0).array().sin();
    const absl::Status in_process = ValidateDataset(data);
    const absl::Status server =
        ValidateScoreRequest(bridge::ScoreRequestOf(data, {Kernel("SE")}, ScoreOptions{}),
                             ServiceLimits{})
            .status();
    EXPECT_EQ(in_process.ok(), n <= kDefaultMaxPoints) << in_process;
    EXPECT_EQ(server.ok(), in_process.ok()) << server;
    if (!server.ok()) {
      EXPECT_THAT(std::string(server.message()),
                  HasSubstr(absl::StrCat("limit of ", kDefaultMaxPoints)));
    }
  }
}

TEST(BridgeValidationTest, SearchOptionsReportEveryBadFieldAtOnce) {
  SearchOptions options;
  options.base_kernels = {Kernel("SE")};
  v1::SearchRequest request = bridge::SearchRequestOf(Example(), options);
  request.add_base_kernels("SE+LIN");   // not a base kernel
  request.add_base_kernels("SE");       // a duplicate
  request.set_metric("waic");
  request.mutable_fit()->set_scale_x("-3");
  absl::StatusOr<SearchOptions> parsed = bridge::SearchOptionsFromProto(request);
  ASSERT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument));
  std::vector<std::string> fields;
  for (const auto& [field, description] : bridge::FieldViolations(parsed.status())) {
    fields.push_back(field);
  }
  EXPECT_THAT(fields, UnorderedElementsAre("base_kernels[1]", "base_kernels[2]", "metric",
                                           "fit.scale_x"));
  // The server adds its limits and the data's columns to the same list.
  request.set_max_depth(99);
  request.set_base_kernels(0, "SE[3]");
  absl::StatusOr<ValidSearch> valid = ValidateSearchRequest(request, ServiceLimits{});
  fields.clear();
  for (const auto& [field, description] : bridge::FieldViolations(valid.status())) {
    fields.push_back(field);
  }
  EXPECT_THAT(fields, ::testing::IsSupersetOf({std::string("max_depth"), std::string("metric"),
                                               std::string("fit.scale_x")}));
}

// Operators may raise limits, not past the hard ceilings: every offending flag is named.
TEST(ServiceLimitsTest, LimitsAboveTheirCeilingsAreRefusedByName) {
  EXPECT_TRUE(ServiceLimits{}.Validate().ok());
  EXPECT_TRUE(ServiceLimitCeilings().Validate().ok());
  ServiceLimits limits;
  limits.max_base_kernels = ServiceLimitCeilings().max_base_kernels + 1;
  limits.max_expression_depth = 1000;
  limits.max_request_bytes = -2;
  const absl::Status status = limits.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              ::testing::AllOf(HasSubstr("--max-base-kernels is 129; it must be in [1, 128]"),
                               HasSubstr("--max-expression-depth is 1000"),
                               HasSubstr("--max-request-bytes is -2")));
  limits = ServiceLimits{};
  limits.max_request_bytes = ServiceLimits::kAutomaticRequestBudget;  // resolved by the server
  EXPECT_TRUE(limits.Validate().ok());
}

// The budget is checked after the request is valid, with core's estimate in the message.
TEST(ServiceLimitsTest, RequestsOverTheMemoryBudgetAreResourceExhausted) {
  v1::ScoreRequest request;
  Dataset data;
  data.x = Eigen::VectorXd::LinSpaced(3000, 0.0, 1.0);
  data.y = data.x.col(0).array().sin();
  bridge::ToProto(data, request.mutable_dataset());
  request.add_kernels("SE");
  ServiceLimits limits;
  ASSERT_TRUE(ValidateScoreRequest(request, limits).ok());
  limits.max_request_bytes = 50'000'000;
  const absl::Status refused = ValidateScoreRequest(request, limits).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(bridge::ErrorReason(refused), "REQUEST_TOO_LARGE");
  const MemoryEstimate estimate =
      EstimateScoreMemory(data, {*ParseKernel("SE")}, *bridge::ScoreOptionsFromProto(request));
  EXPECT_THAT(std::string(refused.message()), HasSubstr(FormatBytes(estimate.bytes)));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("50.0 MB"));
  // An invalid request is INVALID_ARGUMENT whatever its size.
  request.add_kernels("NOPE");
  EXPECT_THAT(ValidateScoreRequest(request, limits), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Issue 33 item 1: error details are bounded whatever the number and size of the violations.
TEST(InvalidFieldsTest, ViolationsAreCappedCutAtCharacterBoundariesAndCounted) {
  std::vector<std::pair<std::string, std::string>> many;
  for (int i = 0; i < 200000; ++i) {
    many.emplace_back(absl::StrCat("metrics[", i, "]"), "unknown metric 'zz'");
  }
  const absl::Status status = bridge::InvalidFields(many);
  ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  const auto violations = bridge::FieldViolations(status);
  ASSERT_EQ(violations.size(), bridge::kMaxReportedViolations + 1);
  EXPECT_EQ(violations[0].first, "metrics[0]");
  EXPECT_EQ(violations.back(), std::make_pair(std::string("request"),
                                              std::string("199980 more violations not listed")));
  EXPECT_THAT(std::string(status.message()), HasSubstr("and 199980 more violations not listed"));
  EXPECT_LT(status.message().size(), 1500u);

  // Long values are cut at a UTF-8 boundary ("€" is 3 bytes) and marked; the byte budget stops
  // the list before 20 such violations.
  const std::string euros = [] {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "\u20ac";
    return s;
  }();
  const absl::Status cut = bridge::InvalidFields(
      std::vector<std::pair<std::string, std::string>>(30, {"fit.prior_overrides[" + euros + "]",
                                                            "unknown parameter '" + euros + "'"}));
  const auto cut_violations = bridge::FieldViolations(cut);
  ASSERT_GE(cut_violations.size(), 2u);
  size_t bytes = 0;
  for (size_t i = 0; i + 1 < cut_violations.size(); ++i) {
    const auto& [field, description] = cut_violations[i];
    EXPECT_LE(field.size(), bridge::kMaxViolationFieldBytes);
    EXPECT_LE(description.size(), bridge::kMaxViolationDescriptionBytes);
    EXPECT_TRUE(absl::EndsWith(field, "\u2026")) << field;
    EXPECT_TRUE(absl::EndsWith(description, "\u2026")) << description;
    // Whole characters only: what precedes the mark is a run of complete euro signs.
    EXPECT_EQ((field.size() - std::string("fit.prior_overrides[").size() - 3) % 3, 0u) << field;
    bytes += field.size() + description.size();
  }
  EXPECT_LE(bytes, bridge::kMaxReportedViolationBytes);
  EXPECT_LT(cut_violations.size() - 1, 30u);
  EXPECT_EQ(cut_violations.back().first, "request");
  // Few, short violations are kept whole, with no count.
  const absl::Status few = bridge::InvalidFields({{"dataset.y", "is empty"}, {"kernels", "x"}});
  EXPECT_EQ(bridge::FieldViolations(few).size(), 2u);
  EXPECT_EQ(few.message(), "dataset.y: is empty; kernels: x");
}

// The approximation switch and the sparse results (issue 28) survive the conversions, and bad
// values are refused naming the field.
TEST(BridgeTest, ApproximationAndSparseScoreRoundTrip) {
  ScoreOptions options;
  options.approx.mode = ApproxMode::kAuto;
  options.approx.inducing_points = 128;
  v1::FitOptions fit;
  bridge::ToProto(bridge::FitSettingsOf(options), &fit);
  EXPECT_EQ(fit.approx(), v1::APPROXIMATION_AUTO);
  EXPECT_EQ(fit.inducing_points(), 128);
  absl::StatusOr<bridge::FitSettings> back = bridge::FitSettingsFromProto(fit, "fit");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->approx.mode, ApproxMode::kAuto);
  EXPECT_EQ(back->approx.inducing_points, 128);
  // Unset is exact (old clients).
  EXPECT_EQ(bridge::FromProto(v1::FitOptions()).approx.mode, ApproxMode::kExact);

  fit.set_approx(static_cast<v1::Approximation>(7));
  EXPECT_THAT(bridge::FitSettingsFromProto(fit, "fit").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fit.approx")));
  fit.set_approx(v1::APPROXIMATION_SPARSE);
  fit.set_inducing_points(-4);
  EXPECT_THAT(bridge::FitSettingsFromProto(fit, "fit").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fit.inducing_points")));

  KernelScore score;
  score.kernel = "SE";
  score.method = "sparse";
  score.num_inducing = 64;
  score.metrics["bic"] = -10.5;
  score.intervals["bic"] = ScoreInterval{-10.5, -9.25};
  score.approx_note = "auto: sparse (exact estimated 2:00 > 60 s)";
  v1::KernelScore proto;
  bridge::ToProto(score, &proto);
  EXPECT_EQ(proto.method(), "sparse");
  EXPECT_EQ(proto.intervals().at("bic").upper(), -9.25);
  const KernelScore read = bridge::FromProto(proto);
  EXPECT_EQ(read.method, "sparse");
  EXPECT_EQ(read.num_inducing, 64);
  EXPECT_EQ(read.intervals.at("bic").lower, -10.5);
  EXPECT_EQ(read.intervals.at("bic").upper, -9.25);
  EXPECT_EQ(read.approx_note, score.approx_note);
  // An exact score from an old server (no method) reads as exact.
  EXPECT_EQ(bridge::FromProto(v1::KernelScore()).method, "exact");

  // Each fit's own m crosses the wire (FitResult.num_inducing): the MLL and MAP fits of one
  // sparse score may end at different m, and the score's m is the larger.
  score.mll_fit = FitResult();
  score.mll_fit->objective = FitObjective::kMaximumLikelihood;
  score.mll_fit->num_inducing = 64;
  score.map_fit = FitResult();
  score.map_fit->objective = FitObjective::kMaximumAPosteriori;
  score.map_fit->num_inducing = 32;
  bridge::ToProto(score, &proto);
  EXPECT_EQ(proto.mll_fit().num_inducing(), 64);
  EXPECT_EQ(proto.map_fit().num_inducing(), 32);
  const KernelScore fits_read = bridge::FromProto(proto);
  ASSERT_TRUE(fits_read.mll_fit.has_value());
  ASSERT_TRUE(fits_read.map_fit.has_value());
  EXPECT_EQ(fits_read.mll_fit->num_inducing, 64);
  EXPECT_EQ(fits_read.map_fit->num_inducing, 32);
  // An exact fit, or one from an older server, has none.
  EXPECT_EQ(bridge::FromProto(v1::FitResult()).num_inducing, 0);
}

}  // namespace
}  // namespace gpsel

namespace gpsel {
namespace {

// BASE[*] over the server: the validation sees the kernel core fits (one copy per column), so a
// parameter of one column (SE[1].lengthscale) is accepted and scored, the unexpanded name is
// refused naming the field, and the leaf limit counts the copies. (Before, the server checked
// names against the unexpanded kernel: SE[1].lengthscale was "unknown" and SE[*].lengthscale
// passed, to fail inside core.)
TEST(BridgeRoundTripTest, PerColumnKernelsAreValidatedAsCoreExpandsThem) {
  Dataset data;
  data.x.resize(12, 2);
  data.y.resize(12);
  for (int i = 0; i < 12; ++i) {
    data.x(i, 0) = 0.1 * i;
    data.x(i, 1) = (i % 3) * 2.0;
    data.y(i) = std::sin(3.0 * data.x(i, 0)) + 0.2 * data.x(i, 1);
  }
  ScoreOptions options;
  options.metrics = {Metric::kMll};
  options.fit.restarts = 1;
  options.hyperparameters.fixed_values["SE[1].lengthscale"] = 4.0;
  const v1::ScoreRequest request = bridge::ScoreRequestOf(data, {Kernel("C*SE[*]")}, options);
  absl::StatusOr<ValidScore> valid = ValidateScoreRequest(request, ServiceLimits{});
  ASSERT_TRUE(valid.ok()) << valid.status();
  absl::StatusOr<KernelScore> score = ScoreKernel(data, Kernel("C*SE[*]"), valid->options);
  ASSERT_TRUE(score.ok()) << score.status();
  EXPECT_EQ(score->mll_fit->values.at("SE[1].lengthscale"), 4.0);

  v1::ScoreRequest unexpanded = request;
  unexpanded.mutable_fit()->mutable_fixed_values()->clear();
  (*unexpanded.mutable_fit()->mutable_fixed_values())["SE[*].lengthscale"] = 4.0;
  EXPECT_THAT(bridge::FieldViolations(ValidateScoreRequest(unexpanded, ServiceLimits{}).status()),
              ::testing::Contains(::testing::Key(HasSubstr("SE[*].lengthscale"))));

  ServiceLimits two_leaves;
  two_leaves.max_base_kernels = 2;  // C*SE[*] is C*SE[0]*SE[1]: three
  EXPECT_THAT(bridge::FieldViolations(ValidateScoreRequest(request, two_leaves).status()),
              ::testing::Contains(::testing::Pair("kernels[0]", HasSubstr("once [*] is"))));
}

}  // namespace
}  // namespace gpsel
