// Conversions between gpsel.v1 messages and core types; see convert.h.
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/proto/bridge/unlisted_violations.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace gpsel::bridge {
namespace {

Eigen::VectorXd ToVector(const google::protobuf::RepeatedField<double>& values) {
  Eigen::VectorXd v(values.size());
  for (int i = 0; i < values.size(); ++i) v[i] = values[i];
  return v;
}

// Kernel texts in results and task payloads are canonical (ToString) and were made within a
// server's own limits, so they are parsed back with generous ones: an equal expression results.
absl::StatusOr<KernelExpr> ParseCanonicalKernel(const std::string& text) {
  ParseLimits generous;
  generous.max_length = 1 << 20;
  generous.max_depth = 1 << 10;
  generous.max_base_kernels = 1 << 10;
  return ParseKernel(text, generous);
}

void ToRepeated(const Eigen::VectorXd& v, google::protobuf::RepeatedField<double>* out) {
  out->Clear();
  out->Reserve(static_cast<int>(v.size()));
  for (Eigen::Index i = 0; i < v.size(); ++i) out->Add(v[i]);
}

v1::FitObjective ToProto(FitObjective objective) {
  return objective == FitObjective::kMaximumLikelihood ? v1::FIT_OBJECTIVE_MAXIMUM_LIKELIHOOD
                                                       : v1::FIT_OBJECTIVE_MAXIMUM_A_POSTERIORI;
}

FitObjective FromProto(v1::FitObjective objective) {
  return objective == v1::FIT_OBJECTIVE_MAXIMUM_LIKELIHOOD ? FitObjective::kMaximumLikelihood
                                                           : FitObjective::kMaximumAPosteriori;
}

constexpr std::pair<StartKind, v1::StartKind> kStartKinds[] = {
    {StartKind::kPriorDraw, v1::START_KIND_PRIOR_DRAW},
    {StartKind::kDataInformed, v1::START_KIND_DATA_INFORMED},
    {StartKind::kNestedParent, v1::START_KIND_NESTED_PARENT},
    {StartKind::kCrossSeeded, v1::START_KIND_CROSS_SEEDED},
    {StartKind::kGiven, v1::START_KIND_GIVEN},
};

v1::StartKind ToProto(StartKind kind) {
  for (const auto& [core, proto] : kStartKinds) {
    if (core == kind) return proto;
  }
  return v1::START_KIND_UNSPECIFIED;
}

StartKind FromProto(v1::StartKind kind) {
  for (const auto& [core, proto] : kStartKinds) {
    if (proto == kind) return core;
  }
  return StartKind::kGiven;
}

}  // namespace

// ---- datasets and matrices ------------------------------------------------------------------

absl::StatusOr<Dataset> FromProto(const v1::Dataset& proto) {
  const int n = proto.y_size();
  const int d = proto.num_dims() == 0 ? 1 : proto.num_dims();
  if (d < 0) return InvalidField("dataset.num_dims", "must not be negative");
  if (static_cast<int64_t>(proto.x_size()) != static_cast<int64_t>(n) * d) {
    return InvalidField(
        "dataset.x", absl::StrCat("has ", proto.x_size(), " values but y has ", n, " points of ", d,
                                  " dimension(s): expected ", static_cast<int64_t>(n) * d));
  }
  Dataset data;
  data.x.resize(n, d);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) data.x(i, j) = proto.x(i * d + j);
  }
  data.y = ToVector(proto.y());
  return data;
}

void ToProto(const Dataset& data, v1::Dataset* proto) {
  proto->Clear();
  const int n = data.num_points();
  const int d = data.num_dims();
  proto->set_num_dims(d);
  proto->mutable_x()->Reserve(n * d);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) proto->add_x(data.x(i, j));
  }
  ToRepeated(data.y, proto->mutable_y());
}

absl::StatusOr<Eigen::MatrixXd> FromProto(const v1::Matrix& proto, std::string_view field) {
  if (proto.rows() < 0 || proto.cols() < 0) {
    return InvalidField(field, "rows and cols must not be negative");
  }
  if (static_cast<int64_t>(proto.values_size()) !=
      static_cast<int64_t>(proto.rows()) * proto.cols()) {
    return InvalidField(field,
                        absl::StrCat("has ", proto.values_size(), " values, expected rows*cols = ",
                                     static_cast<int64_t>(proto.rows()) * proto.cols()));
  }
  Eigen::MatrixXd m(proto.rows(), proto.cols());
  // Over the values, not the rows: 2^31 − 1 rows of 0 columns have no values but took seconds
  // of empty loop (found by tests/fuzz/request_fuzzer.cc).
  for (int k = 0; k < proto.values_size(); ++k) {
    m(k / proto.cols(), k % proto.cols()) = proto.values(k);
  }
  return m;
}

void ToProto(const Eigen::MatrixXd& matrix, v1::Matrix* proto) {
  proto->Clear();
  proto->set_rows(static_cast<int>(matrix.rows()));
  proto->set_cols(static_cast<int>(matrix.cols()));
  proto->mutable_values()->Reserve(static_cast<int>(matrix.size()));
  for (Eigen::Index i = 0; i < matrix.rows(); ++i) {
    for (Eigen::Index j = 0; j < matrix.cols(); ++j) proto->add_values(matrix(i, j));
  }
}

// ---- options --------------------------------------------------------------------------------

namespace {

using ViolationList = std::vector<std::pair<std::string, std::string>>;

// Every field of FitOptions, parsed once; a bad scale_x is reported under `field`.scale_x with
// core's message (ParseXScaling) and left at "none".
FitSettings ParseFitSettings(const v1::FitOptions& proto, std::string_view field,
                             ViolationList* violations) {
  FitSettings settings;
  if (proto.restarts() != 0) settings.fit.restarts = proto.restarts();
  settings.fit.seed = proto.seed();
  if (proto.max_iterations() != 0) settings.fit.max_iterations = proto.max_iterations();
  if (proto.max_draws_factor() != 0) settings.fit.max_draws_factor = proto.max_draws_factor();
  settings.standardize = proto.has_standardize() ? proto.standardize() : true;
  for (const auto& [name, prior] : proto.prior_overrides()) {
    settings.hyperparameters.prior_overrides[name] = NormalPrior{prior.mean(), prior.sd()};
  }
  for (const auto& [name, value] : proto.fixed_values()) {
    settings.hyperparameters.fixed_values[name] = value;
  }
  const std::string scale_field = absl::StrCat(std::string(field), ".scale_x");
  if (absl::StatusOr<XScaling> scale_x = ParseXScaling(proto.scale_x(), scale_field);
      scale_x.ok()) {
    settings.scale_x = *scale_x;
  } else if (violations != nullptr) {
    violations->emplace_back(scale_field, std::string(scale_x.status().message()));
  }
  settings.data_informed_starts =
      proto.has_data_informed_starts() ? proto.data_informed_starts() : true;
  switch (proto.approx()) {
    case v1::APPROXIMATION_UNSPECIFIED:
    case v1::APPROXIMATION_EXACT: settings.approx.mode = ApproxMode::kExact; break;
    case v1::APPROXIMATION_SPARSE: settings.approx.mode = ApproxMode::kSparse; break;
    case v1::APPROXIMATION_AUTO: settings.approx.mode = ApproxMode::kAuto; break;
    default:
      if (violations != nullptr) {
        violations->emplace_back(absl::StrCat(std::string(field), ".approx"),
                                 absl::StrCat("unknown value ", static_cast<int>(proto.approx()),
                                              " (exact, sparse or auto)"));
      }
  }
  settings.approx.inducing_points = proto.inducing_points();
  if (absl::Status s = settings.approx.Validate(); !s.ok() && violations != nullptr) {
    violations->emplace_back(
        absl::StrCat(std::string(field), ".inducing_points"),
        std::string(absl::StripPrefix(s.message(), "inducing_points: ")));
  }
  return settings;
}

// Metric names with core's parser and message ("unknown metric ... (known: ...)").
std::vector<Metric> ParseMetrics(const google::protobuf::RepeatedPtrField<std::string>& names,
                                 std::string_view field, ViolationList* violations) {
  std::vector<Metric> metrics;
  for (int i = 0; i < names.size(); ++i) {
    absl::StatusOr<Metric> metric = ParseMetric(names[i]);
    if (metric.ok()) {
      metrics.push_back(*metric);
    } else {
      violations->emplace_back(
          absl::StrCat(std::string(field), "[", i, "]"),
          std::string(absl::StripPrefix(metric.status().message(), "metrics: ")));
    }
  }
  return metrics;
}

absl::Status ViolationsStatus(const ViolationList& violations) {
  return violations.empty() ? absl::OkStatus() : InvalidFields(violations);
}

// A core error "field: description" as that field's violation (core names the field in front of
// its messages); one without a field name becomes `fallback_field`'s. A `core_prefix` at the front
// of the field ("dataset") is renamed to `field_prefix` ("test").
std::pair<std::string, std::string> ViolationOfCoreError(const absl::Status& status,
                                                         std::string_view fallback_field,
                                                         std::string_view core_prefix,
                                                         std::string_view field_prefix) {
  std::string message(status.message());
  if (!core_prefix.empty() && message.compare(0, core_prefix.size(), core_prefix) == 0) {
    message = std::string(field_prefix) + message.substr(core_prefix.size());
  }
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return {std::string(fallback_field), message};
  return {message.substr(0, colon), message.substr(colon + 2)};
}

}  // namespace

FitSettings FromProto(const v1::FitOptions& proto) {
  return ParseFitSettings(proto, "fit", nullptr);
}

absl::StatusOr<FitSettings> FitSettingsFromProto(const v1::FitOptions& proto,
                                                 std::string_view field) {
  ViolationList violations;
  FitSettings settings = ParseFitSettings(proto, field, &violations);
  if (!violations.empty()) return InvalidFields(violations);
  return settings;
}

FitSettings FitSettingsOf(const ScoreOptions& options) {
  return FitSettings{options.fit, options.standardize, options.hyperparameters, options.scale_x,
                     options.data_informed_starts, options.approx};
}

void ApplyFitSettings(const FitSettings& settings, ScoreOptions* options) {
  options->fit = settings.fit;
  options->standardize = settings.standardize;
  options->hyperparameters = settings.hyperparameters;
  options->scale_x = settings.scale_x;
  options->data_informed_starts = settings.data_informed_starts;
  options->approx = settings.approx;
}

void ToProto(const FitSettings& settings, v1::FitOptions* proto) {
  proto->Clear();
  proto->set_restarts(settings.fit.restarts);
  proto->set_seed(settings.fit.seed);
  proto->set_max_iterations(settings.fit.max_iterations);
  // Only when not the default, so that requests written before the field read back the same.
  if (settings.fit.max_draws_factor != FitOptions{}.max_draws_factor) {
    proto->set_max_draws_factor(settings.fit.max_draws_factor);
  }
  proto->set_standardize(settings.standardize);
  for (const auto& [name, prior] : settings.hyperparameters.prior_overrides) {
    v1::NormalPrior& p = (*proto->mutable_prior_overrides())[name];
    p.set_mean(prior.mean);
    p.set_sd(prior.sd);
  }
  for (const auto& [name, value] : settings.hyperparameters.fixed_values) {
    (*proto->mutable_fixed_values())[name] = value;
  }
  if (settings.scale_x.mode != XScaling::Mode::kNone) {
    proto->set_scale_x(XScalingText(settings.scale_x));
  }
  proto->set_data_informed_starts(settings.data_informed_starts);
  switch (settings.approx.mode) {
    case ApproxMode::kExact: break;  // unset: exact
    case ApproxMode::kSparse: proto->set_approx(v1::APPROXIMATION_SPARSE); break;
    case ApproxMode::kAuto: proto->set_approx(v1::APPROXIMATION_AUTO); break;
  }
  proto->set_inducing_points(settings.approx.inducing_points);
}

absl::StatusOr<ScoreOptions> ScoreOptionsFromProto(const v1::ScoreRequest& request) {
  ViolationList violations;
  ScoreOptions options;
  ApplyFitSettings(ParseFitSettings(request.fit(), "fit", &violations), &options);
  options.metrics = ParseMetrics(request.metrics(), "metrics", &violations);
  for (int i = 0; i < request.laplace_r_size(); ++i) {
    if (!std::isfinite(request.laplace_r(i))) {
      violations.emplace_back(absl::StrCat("laplace_r[", i, "]"), "must be finite");
    }
  }
  options.laplace_r.assign(request.laplace_r().begin(), request.laplace_r().end());
  options.search_starts = request.search_starts();
  // Scores of kernels the caller had already (core/score.h NestedParent): their optima become
  // extra starts, so a non-finite value would only be a start that fails; it is refused here.
  for (int i = 0; i < request.nested_parents_size(); ++i) {
    const v1::KernelScore& parent = request.nested_parents(i);
    const std::string field = absl::StrCat("nested_parents[", i, "]");
    absl::StatusOr<KernelExpr> kernel = ParseKernel(parent.kernel());
    if (!kernel.ok()) {
      violations.emplace_back(absl::StrCat(field, ".kernel"),
                              std::string(kernel.status().message()));
      continue;
    }
    bool finite = true;
    for (const v1::FitResult* fit : {&parent.mll_fit(), &parent.map_fit()}) {
      for (double raw : fit->raw()) finite = finite && std::isfinite(raw);
      for (const auto& [name, value] : fit->values()) finite = finite && std::isfinite(value);
    }
    if (!finite || !std::isfinite(parent.x_scale())) {
      violations.emplace_back(field, "its fits' values and x_scale must be finite");
      continue;
    }
    options.nested_parents.push_back(
        {*std::move(kernel), std::make_shared<const KernelScore>(FromProto(parent))});
  }
  if (request.has_test()) {
    // Messages name "dataset.x" (FromProto) or "test..." (core); both become test's fields.
    absl::StatusOr<Dataset> test = FromProto(request.test());
    absl::Status checked = test.ok() ? ValidateTestData(*test) : test.status();
    if (!checked.ok()) {
      violations.push_back(ViolationOfCoreError(checked, "test", "dataset", "test"));
    } else {
      options.test = std::make_shared<const Dataset>(*std::move(test));
    }
  }
  GPSEL_RETURN_IF_ERROR(ViolationsStatus(violations));
  return options;
}

void ScoreOptionsToProto(const ScoreOptions& options, v1::ScoreRequest* request) {
  ToProto(FitSettingsOf(options), request->mutable_fit());
  request->clear_metrics();
  for (Metric m : options.metrics) request->add_metrics(std::string(MetricName(m)));
  request->clear_laplace_r();
  for (double r : options.laplace_r) request->add_laplace_r(r);
  NestedParentsToProto(options.nested_parents, request);
  request->set_search_starts(options.search_starts);
  if (options.test != nullptr) {
    ToProto(*options.test, request->mutable_test());
  } else {
    request->clear_test();
  }
}

void NestedParentsToProto(const std::vector<NestedParent>& parents, v1::ScoreRequest* request) {
  request->clear_nested_parents();
  for (const NestedParent& parent : parents) {
    if (parent.score == nullptr) continue;
    v1::KernelScore* proto = request->add_nested_parents();
    ToProto(*parent.score, proto);
    // Only the optima are read (the proto's comment lists what); the Laplace diagnostics carry
    // u×u matrices the server does not need.
    proto->clear_laplace();
    proto->set_kernel(ToString(parent.kernel));
  }
}

// ---- results ----------------------------------------------------------------------------------

void ToProto(const FitResult& fit, v1::FitResult* proto) {
  proto->Clear();
  proto->set_objective(ToProto(fit.objective));
  ToRepeated(fit.raw, proto->mutable_raw());
  for (const auto& [name, value] : fit.values) (*proto->mutable_values())[name] = value;
  proto->set_log_likelihood(fit.log_likelihood);
  proto->set_log_prior(fit.log_prior);
  proto->set_objective_value(fit.objective_value);
  proto->set_best_restart(fit.best_restart);
  proto->set_successful_restarts(fit.successful_restarts);
  proto->set_iterations(fit.iterations);
  proto->set_evaluations(fit.evaluations);
  proto->set_starts(fit.starts);
  proto->set_starts_at_best(fit.starts_at_best);
  proto->set_best_start_kind(ToProto(fit.best_start_kind));
  proto->set_best_start_origin(fit.best_start_origin);
  proto->set_extra_draws(fit.extra_draws);
  proto->set_may_not_be_global(fit.may_not_be_global);
  proto->set_num_inducing(fit.num_inducing);
}

FitResult FromProto(const v1::FitResult& proto) {
  FitResult fit;
  fit.objective = FromProto(proto.objective());
  fit.raw = ToVector(proto.raw());
  for (const auto& [name, value] : proto.values()) fit.values[name] = value;
  fit.log_likelihood = proto.log_likelihood();
  fit.log_prior = proto.log_prior();
  fit.objective_value = proto.objective_value();
  fit.best_restart = proto.best_restart();
  fit.successful_restarts = proto.successful_restarts();
  fit.iterations = proto.iterations();
  fit.evaluations = proto.evaluations();
  fit.starts = proto.starts();
  fit.starts_at_best = proto.starts_at_best();
  fit.best_start_kind = FromProto(proto.best_start_kind());
  fit.best_start_origin = proto.best_start_origin();
  fit.extra_draws = proto.extra_draws();
  fit.may_not_be_global = proto.may_not_be_global();
  fit.num_inducing = proto.num_inducing();
  return fit;
}

void ToProto(const Standardization& s, v1::Standardization* proto) {
  proto->set_applied(s.applied);
  proto->set_mean(s.mean);
  proto->set_scale(s.scale);
}

void ToProto(const PriorSummary& prior, v1::PriorSummary* proto) {
  proto->set_name(prior.name);
  proto->set_raw_mean(prior.raw.mean);
  proto->set_raw_sd(prior.raw.sd);
  proto->set_median(prior.median);
  proto->set_lower95(prior.lower95);
  proto->set_upper95(prior.upper95);
  proto->set_fixed(prior.fixed);
  if (prior.fixed) proto->set_fixed_value(prior.fixed_value);
}

void ToProto(const InputColumnScales& scales, v1::InputColumnScales* proto) {
  proto->set_column(scales.column);
  proto->set_range(scales.geometry.range);
  proto->set_median_spacing(scales.geometry.median_spacing);
  proto->set_median_pairwise_distance(scales.geometry.median_pairwise_distance);
  if (scales.strongest_period.has_value()) {
    proto->set_strongest_period(scales.strongest_period->period);
    proto->set_strongest_period_false_alarm_probability(
        scales.strongest_period->false_alarm_probability);
  }
}

Standardization FromProto(const v1::Standardization& proto) {
  Standardization s;
  s.applied = proto.applied();
  s.mean = proto.mean();
  s.scale = proto.scale();
  return s;
}

void ToProto(const KernelScore& score, v1::KernelScore* proto) {
  proto->Clear();
  proto->set_kernel(score.kernel);
  proto->set_num_points(score.num_points);
  proto->set_num_hyperparameters(score.num_hyperparameters);
  proto->set_standardized(score.standardized);
  ToProto(score.standardization, proto->mutable_standardization());
  for (const std::string& name : score.parameter_names) proto->add_parameter_names(name);
  for (const auto& [name, value] : score.metrics) (*proto->mutable_metrics())[name] = value;
  for (const auto& [name, reason] : score.undefined_metrics) {
    (*proto->mutable_undefined_metrics())[name] = reason;
  }
  for (const auto& [r, value] : score.laplace_r) {
    v1::LaplaceVariant* variant = proto->add_laplace_r();
    variant->set_r(r);
    variant->set_value(value);
  }
  if (score.mll_fit) ToProto(*score.mll_fit, proto->mutable_mll_fit());
  if (score.map_fit) ToProto(*score.map_fit, proto->mutable_map_fit());
  if (score.laplace) {
    const LaplaceDiagnostics& l = *score.laplace;
    v1::LaplaceDiagnostics* out = proto->mutable_laplace();
    ToRepeated(l.eigenvalues, out->mutable_eigenvalues());
    ToProto(l.eigenvectors, out->mutable_eigenvectors());
    out->set_positive_definite(l.positive_definite);
    for (const auto& [metric, directions] : l.clamped) {
      v1::ClampedDirections& list = (*out->mutable_clamped())[metric];
      for (const LaplaceDiagnostics::ClampedDirection& d : directions) {
        v1::ClampedDirection* direction = list.add_directions();
        direction->set_eigenvalue(d.eigenvalue);
        for (const auto& [parameter, loading] : d.loadings) {
          v1::ParameterLoading* pl = direction->add_loadings();
          pl->set_parameter(parameter);
          pl->set_loading(loading);
        }
      }
    }
    ToProto(l.covariance, out->mutable_covariance());
    out->set_hessian_jitter(l.hessian_jitter);
  }
  proto->set_seconds(score.seconds);
  proto->set_x_scale(score.x_scale);
  proto->set_x_scale_reason(score.x_scale_reason);
  for (const std::string& warning : score.warnings) proto->add_warnings(warning);
  proto->set_method(score.method);
  proto->set_inducing_points(score.num_inducing);
  for (const auto& [name, interval] : score.intervals) {
    v1::MetricInterval& out = (*proto->mutable_intervals())[name];
    out.set_lower(interval.lower);
    out.set_upper(interval.upper);
  }
  proto->set_approx_note(score.approx_note);

  for (const HeldOutLikelihood& h : score.held_out) {
    v1::HeldOutLikelihood* out = proto->add_held_out();
    out->set_objective(ToProto(h.objective));
    out->set_num_test_points(h.num_test_points);
    out->set_test_log_likelihood(h.test_log_likelihood);
    out->set_predictive_log_density(h.predictive_log_density);
  }

  for (const std::string& name : score.prior_dominated) proto->add_prior_dominated(name);
  for (double scale : score.x_scales) proto->add_x_scales(scale);
}

KernelScore FromProto(const v1::KernelScore& proto) {
  KernelScore score;
  score.kernel = proto.kernel();
  score.num_points = proto.num_points();
  score.num_hyperparameters = proto.num_hyperparameters();
  score.standardized = proto.standardized();
  score.standardization = FromProto(proto.standardization());
  score.parameter_names.assign(proto.parameter_names().begin(), proto.parameter_names().end());
  for (const auto& [name, value] : proto.metrics()) score.metrics[name] = value;
  for (const auto& [name, reason] : proto.undefined_metrics()) {
    score.undefined_metrics[name] = reason;
  }
  for (const v1::LaplaceVariant& v : proto.laplace_r()) score.laplace_r[v.r()] = v.value();
  if (proto.has_mll_fit()) score.mll_fit = FromProto(proto.mll_fit());
  if (proto.has_map_fit()) score.map_fit = FromProto(proto.map_fit());
  if (proto.has_laplace()) {
    const v1::LaplaceDiagnostics& in = proto.laplace();
    LaplaceDiagnostics l;
    l.eigenvalues = ToVector(in.eigenvalues());
    // Shapes were produced by ToProto; a malformed matrix degrades to empty rather than failing.
    l.eigenvectors =
        FromProto(in.eigenvectors(), "laplace.eigenvectors").value_or(Eigen::MatrixXd());
    l.positive_definite = in.positive_definite();
    for (const auto& [metric, list] : in.clamped()) {
      std::vector<LaplaceDiagnostics::ClampedDirection>& directions = l.clamped[metric];
      for (const v1::ClampedDirection& d : list.directions()) {
        LaplaceDiagnostics::ClampedDirection direction;
        direction.eigenvalue = d.eigenvalue();
        for (const v1::ParameterLoading& pl : d.loadings()) {
          direction.loadings.emplace_back(pl.parameter(), pl.loading());
        }
        directions.push_back(std::move(direction));
      }
    }
    l.covariance = FromProto(in.covariance(), "laplace.covariance").value_or(Eigen::MatrixXd());
    l.hessian_jitter = in.hessian_jitter();
    score.laplace = std::move(l);
  }
  score.seconds = proto.seconds();
  score.x_scale = proto.x_scale() > 0 ? proto.x_scale() : 1.0;
  score.x_scale_reason = proto.x_scale_reason();
  score.warnings.assign(proto.warnings().begin(), proto.warnings().end());
  score.method = proto.method().empty() ? "exact" : proto.method();
  score.num_inducing = proto.inducing_points();
  for (const auto& [name, interval] : proto.intervals()) {
    score.intervals[name] = ScoreInterval{interval.lower(), interval.upper()};
  }
  score.approx_note = proto.approx_note();

  for (const v1::HeldOutLikelihood& h : proto.held_out()) {
    HeldOutLikelihood held_out;
    held_out.objective = FromProto(h.objective());
    held_out.num_test_points = h.num_test_points();
    held_out.test_log_likelihood = h.test_log_likelihood();
    held_out.predictive_log_density = h.predictive_log_density();
    score.held_out.push_back(held_out);
  }

  score.prior_dominated.assign(proto.prior_dominated().begin(), proto.prior_dominated().end());
  for (double scale : proto.x_scales()) {
    // A nested parent's raw values are recovered through these (ModelRawValues): only positive
    // finite factors are kept, else none (every column by x_scale).
    if (!(std::isfinite(scale) && scale > 0)) {
      score.x_scales.clear();
      break;
    }
    score.x_scales.push_back(scale);
  }
  return score;
}

void ToProto(const PredictResult& result, v1::PredictResponse* proto) {
  ToRepeated(result.prediction.mean, proto->mutable_mean());
  ToRepeated(result.prediction.variance, proto->mutable_variance());
  ToRepeated(result.prediction.noise_variance, proto->mutable_noise_variance());
  for (const auto& [name, value] : result.hyperparameters) {
    (*proto->mutable_hyperparameters())[name] = value;
  }
  ToProto(result.standardization, proto->mutable_standardization());
  proto->set_kernel(result.kernel);
  if (result.fit) ToProto(*result.fit, proto->mutable_fit());
  for (const PredictionComponent& c : result.prediction.components) {
    v1::PredictionComponent* out = proto->add_components();
    out->set_kernel(c.kernel);
    out->set_regime(c.regime);
    ToRepeated(c.mean, out->mutable_mean());
    ToRepeated(c.variance, out->mutable_variance());
  }
  proto->set_method(result.method);
  proto->set_inducing_points(result.num_inducing);
  proto->set_approx_note(result.approx_note);

  if (result.prediction.samples.size() > 0) {
    ToProto(result.prediction.samples, proto->mutable_samples());
    proto->set_sample_jitter(result.prediction.sample_jitter);
  }
}

void ToProto(const SavedModel& model, v1::SavedModel* proto) {
  proto->Clear();
  proto->set_format(kSavedModelFormat);
  proto->set_gpsel_version(model.gpsel_version);
  proto->set_kernel(model.kernel);
  if (model.mll_fit) ToProto(*model.mll_fit, proto->mutable_mll_fit());
  if (model.map_fit) ToProto(*model.map_fit, proto->mutable_map_fit());
  proto->set_standardized(model.standardized);
  ToProto(model.standardization, proto->mutable_standardization());
  proto->set_x_scale(model.x_scale);
  proto->set_x_scale_reason(model.x_scale_reason);
  for (const auto& [name, value] : model.metrics) (*proto->mutable_metrics())[name] = value;
  proto->set_num_points(model.num_points);
  proto->set_num_dims(model.num_dims);
  proto->set_data_hash(model.data_hash);
}

absl::StatusOr<SavedModel> FromProto(const v1::SavedModel& proto, std::string_view field_name) {
  const std::string field(field_name);
  if (proto.format() != kSavedModelFormat) {
    return InvalidField(absl::StrCat(field, ".format"),
                        proto.format().empty()
                            ? absl::StrCat("is missing: not a gpsel saved model (expected \"",
                                           kSavedModelFormat, "\")")
                            : absl::StrCat("is \"", proto.format(), "\", not \"",
                                           kSavedModelFormat, "\": not a gpsel saved model"));
  }
  SavedModel model;
  model.gpsel_version = proto.gpsel_version();
  model.kernel = proto.kernel();
  if (proto.has_mll_fit()) model.mll_fit = FromProto(proto.mll_fit());
  if (proto.has_map_fit()) model.map_fit = FromProto(proto.map_fit());
  model.standardized = proto.standardized();
  model.standardization = FromProto(proto.standardization());
  model.x_scale = proto.x_scale();
  model.x_scale_reason = proto.x_scale_reason();
  for (const auto& [name, value] : proto.metrics()) model.metrics[name] = value;
  model.num_points = proto.num_points();
  model.num_dims = proto.num_dims();
  model.data_hash = proto.data_hash();
  // core/saved_model.h names its fields "model..."; here they are `field_name`'s.
  if (absl::Status valid = ValidateSavedModel(model); !valid.ok()) {
    const auto [violation_field, description] =
        ViolationOfCoreError(valid, field, "model", field);
    return InvalidField(violation_field, description);
  }
  return model;
}

PredictResult FromProto(const v1::PredictResponse& proto) {
  PredictResult result;
  result.prediction.mean = ToVector(proto.mean());
  result.prediction.variance = ToVector(proto.variance());
  result.prediction.noise_variance = ToVector(proto.noise_variance());
  for (const auto& [name, value] : proto.hyperparameters()) result.hyperparameters[name] = value;
  result.standardization = FromProto(proto.standardization());
  result.kernel = proto.kernel();
  if (proto.has_fit()) result.fit = FromProto(proto.fit());
  for (const v1::PredictionComponent& c : proto.components()) {
    result.prediction.components.push_back(
        PredictionComponent{c.kernel(), c.regime(), ToVector(c.mean()), ToVector(c.variance())});
  }
  result.method = proto.method().empty() ? "exact" : proto.method();
  result.num_inducing = proto.inducing_points();
  result.approx_note = proto.approx_note();

  if (proto.has_samples()) {
    result.prediction.samples =
        FromProto(proto.samples(), "samples").value_or(Eigen::MatrixXd());
    result.prediction.sample_jitter = proto.sample_jitter();
  }
  return result;
}

v1::PredictRequest PredictRequestOf(const Dataset& data, const KernelExpr& kernel,
                                    const Eigen::MatrixXd& x_new, const PredictOptions& options) {
  v1::PredictRequest request;
  ToProto(data, request.mutable_dataset());
  request.set_kernel(ToString(kernel));
  ToProto(x_new, request.mutable_x_new());
  for (const auto& [name, value] : options.hyperparameters) {
    (*request.mutable_hyperparameters())[name] = value;
  }
  request.set_objective(options.objective == FitObjective::kMaximumLikelihood
                            ? v1::FIT_OBJECTIVE_MAXIMUM_LIKELIHOOD
                            : v1::FIT_OBJECTIVE_MAXIMUM_A_POSTERIORI);
  ToProto(FitSettingsOf(options.fit), request.mutable_fit());
  request.set_components(options.components);
  if (options.model) ToProto(*options.model, request.mutable_model());
  request.set_samples(options.samples);
  request.set_seed(options.seed);
  return request;
}

// ---- evidence -----------------------------------------------------------------------------

EvidenceOptions FromProto(const v1::EvidenceOptions& proto) {
  EvidenceOptions options;
  NestedSamplingOptions& s = options.sampling;
  s.num_live = proto.live_points();
  if (proto.dlogz() != 0) s.dlogz = proto.dlogz();
  s.dynamic = proto.dynamic();
  if (proto.dynamic_target_error() != 0) s.dynamic_target_error = proto.dynamic_target_error();
  s.seed = proto.seed();
  if (proto.max_likelihood_calls() != 0) s.max_likelihood_calls = proto.max_likelihood_calls();
  s.max_seconds = proto.max_seconds();
  s.return_samples = proto.return_samples();
  if (proto.has_num_bootstrap()) s.num_bootstrap = proto.num_bootstrap();
  if (proto.has_dynamic_posterior_weight()) {
    s.dynamic_posterior_weight = proto.dynamic_posterior_weight();
  }
  switch (proto.method()) {
    case v1::EVIDENCE_METHOD_IMPORTANCE:
      options.method = EvidenceMethod::kImportance;
      break;
    case v1::EVIDENCE_METHOD_AUTO:
      options.method = EvidenceMethod::kAuto;
      break;
    default:
      options.method = EvidenceMethod::kNested;
      break;
  }
  // One seed and one time cap for every method.
  ImportanceSamplingOptions& is = options.importance;
  const v1::ImportanceSamplingOptions& ip = proto.importance();
  is.seed = proto.seed();
  is.max_seconds = proto.max_seconds();
  is.return_samples = proto.return_samples();
  if (ip.target_error() != 0) is.target_error = ip.target_error();
  if (ip.max_samples() != 0) is.max_samples = ip.max_samples();
  if (ip.initial_samples() != 0) is.initial_samples = ip.initial_samples();
  if (ip.prior_share() != 0) is.prior_share = ip.prior_share();
  if (ip.student_t_dof() != 0) is.student_t_dof = ip.student_t_dof();
  if (ip.covariance_inflation() != 0) is.covariance_inflation = ip.covariance_inflation();
  if (proto.threads() != 0) {
    is.threads = proto.threads();
    s.threads = proto.threads();
  }
  if (proto.runs() != 0) s.num_runs = proto.runs();
  if (proto.batch_size() != 0) s.batch_size = proto.batch_size();
  if (ip.mode_search_restarts() != 0) options.mode_search.restarts = ip.mode_search_restarts();
  const FitSettings fit = FromProto(proto.fit());
  options.standardize = fit.standardize;
  options.hyperparameters = fit.hyperparameters;
  options.scale_x = fit.scale_x;
  return options;
}

namespace {
v1::EvidenceMethod ToProto(EvidenceMethod method) {
  switch (method) {
    case EvidenceMethod::kNested:
      return v1::EVIDENCE_METHOD_NESTED;
    case EvidenceMethod::kImportance:
      return v1::EVIDENCE_METHOD_IMPORTANCE;
    case EvidenceMethod::kAuto:
      return v1::EVIDENCE_METHOD_AUTO;
  }
  return v1::EVIDENCE_METHOD_UNSPECIFIED;
}
}  // namespace

void ToProto(const EvidenceOptions& options, v1::EvidenceOptions* proto) {
  proto->Clear();
  const NestedSamplingOptions& s = options.sampling;
  proto->set_live_points(s.num_live);
  proto->set_dlogz(s.dlogz);
  proto->set_dynamic(s.dynamic);
  proto->set_dynamic_target_error(s.dynamic_target_error);
  proto->set_seed(s.seed);
  proto->set_max_likelihood_calls(s.max_likelihood_calls);
  proto->set_max_seconds(s.max_seconds);
  proto->set_return_samples(s.return_samples);
  proto->set_num_bootstrap(s.num_bootstrap);
  proto->set_dynamic_posterior_weight(s.dynamic_posterior_weight);
  proto->set_method(ToProto(options.method));
  const ImportanceSamplingOptions& is = options.importance;
  v1::ImportanceSamplingOptions* ip = proto->mutable_importance();
  ip->set_target_error(is.target_error);
  ip->set_max_samples(is.max_samples);
  ip->set_initial_samples(is.initial_samples);
  ip->set_prior_share(is.prior_share);
  ip->set_student_t_dof(is.student_t_dof);
  ip->set_covariance_inflation(is.covariance_inflation);
  proto->set_threads(std::max(is.threads, s.threads));
  proto->set_runs(s.num_runs);
  proto->set_batch_size(s.batch_size);
  ip->set_mode_search_restarts(options.mode_search.restarts);
  v1::FitOptions* fit = proto->mutable_fit();
  fit->set_standardize(options.standardize);
  for (const auto& [name, prior] : options.hyperparameters.prior_overrides) {
    v1::NormalPrior& p = (*fit->mutable_prior_overrides())[name];
    p.set_mean(prior.mean);
    p.set_sd(prior.sd);
  }
  for (const auto& [name, value] : options.hyperparameters.fixed_values) {
    (*fit->mutable_fixed_values())[name] = value;
  }
  if (options.scale_x.mode != XScaling::Mode::kNone) {
    fit->set_scale_x(XScalingText(options.scale_x));
  }
}

void ToProto(const EvidenceResult& result, v1::EvidenceResult* proto) {
  proto->Clear();
  proto->set_kernel(result.kernel);
  proto->set_num_points(result.num_points);
  proto->set_num_hyperparameters(result.num_hyperparameters);
  ToProto(result.standardization, proto->mutable_standardization());
  for (const std::string& name : result.parameter_names) proto->add_parameter_names(name);
  proto->set_standardized(result.standardized);
  proto->set_method(ToProto(result.method));
  proto->set_method_reason(result.method_reason);
  proto->set_log_evidence(result.log_evidence);
  proto->set_log_evidence_error(result.log_evidence_error);
  proto->set_likelihood_calls(result.likelihood_calls);
  proto->set_seconds(result.seconds);
  proto->set_partial(result.partial);
  proto->set_partial_reason(result.partial_reason);
  proto->set_log_evidence_truncation(result.log_evidence_truncation);
  if (result.importance.has_value()) {
    const ImportanceSamplingResult& r = *result.importance;
    v1::ImportanceSamplingResult* ip = proto->mutable_importance();
    ip->set_log_evidence(r.log_evidence);
    ip->set_log_evidence_error(r.log_evidence_error);
    ip->set_effective_sample_size(r.effective_sample_size);
    ip->set_num_samples(r.num_samples);
    ip->set_pareto_k(r.pareto_k);
    ip->set_reliable(r.reliable);
    ip->set_reliability(r.reliability);
    for (size_t m = 0; m < r.modes.size(); ++m) {
      v1::ProposalMode* mode = ip->add_modes();
      ToRepeated(r.modes[m].mean, mode->mutable_raw());
      mode->set_log_posterior(r.modes[m].log_posterior);
      mode->set_log_laplace_mass(r.modes[m].log_laplace_mass);
      mode->set_mixture_weight(r.mode_weights[m]);
      mode->set_weight_share(r.mode_weight_shares[m]);
      mode->set_origin(r.modes[m].origin);
      mode->set_adapted(r.modes[m].adapted);
    }
    ip->set_prior_share(r.prior_share);
    ip->set_prior_weight_share(r.prior_weight_share);
    ip->set_partial(r.partial);
    ip->set_partial_reason(r.partial_reason);
    ip->set_seconds(r.seconds);
    ip->set_mode_search_evaluations(result.mode_search_evaluations);
  }
  // The reported method's partial flag, effective sample size and samples at the top level.
  if (result.method == EvidenceMethod::kImportance && result.importance.has_value()) {
    const ImportanceSamplingResult& r = *result.importance;
    proto->set_log_evidence_estimator("importance_sampling");
    proto->set_effective_sample_size(r.effective_sample_size);
    if (r.samples.size() > 0) {
      ToProto(r.samples, proto->mutable_samples());
      ToRepeated(r.log_weights, proto->mutable_log_weights());
      ToRepeated(r.log_likelihoods, proto->mutable_log_likelihoods());
    }
  } else if (result.sampling.has_value()) {
    const NestedSamplingResult& s = *result.sampling;
    proto->set_log_evidence_error_bootstrap(s.log_evidence_error_bootstrap);
    proto->set_log_evidence_estimator(s.log_evidence_estimator);
    proto->set_information(s.information);
    proto->set_iterations(s.iterations);
    proto->set_effective_sample_size(s.effective_sample_size);
    proto->set_live_points(s.num_live);
    proto->set_batches(s.num_batches);
    proto->set_log_evidence_nested(s.log_evidence_nested);
    proto->set_log_evidence_nested_error(s.log_evidence_nested_error);
    proto->set_log_evidence_error_spread(s.log_evidence_error_spread);
    for (const NestedSamplingResult::Run& run : s.runs) {
      v1::NestedSamplingRun* r = proto->add_runs();
      r->set_seed(run.seed);
      r->set_log_evidence(run.log_evidence);
      r->set_log_evidence_error(run.log_evidence_error);
      r->set_likelihood_calls(run.likelihood_calls);
      r->set_iterations(run.iterations);
      r->set_partial(run.partial);
      r->set_seconds(run.seconds);
    }
    if (s.samples.size() > 0) {
      ToProto(s.samples, proto->mutable_samples());
      ToRepeated(s.log_weights, proto->mutable_log_weights());
      ToRepeated(s.log_likelihoods, proto->mutable_log_likelihoods());
    }
  }
}

EvidenceResult FromProto(const v1::EvidenceResult& proto) {
  EvidenceResult result;
  result.kernel = proto.kernel();
  result.num_points = proto.num_points();
  result.num_hyperparameters = proto.num_hyperparameters();
  result.standardization = FromProto(proto.standardization());
  result.parameter_names.assign(proto.parameter_names().begin(), proto.parameter_names().end());
  result.standardized = proto.standardized();
  result.method = proto.method() == v1::EVIDENCE_METHOD_IMPORTANCE ? EvidenceMethod::kImportance
                                                                   : EvidenceMethod::kNested;
  result.method_reason = proto.method_reason();
  result.log_evidence = proto.log_evidence();
  result.log_evidence_error = proto.log_evidence_error();
  result.likelihood_calls = proto.likelihood_calls();
  result.seconds = proto.seconds();
  result.partial = proto.partial();
  result.partial_reason = proto.partial_reason();
  result.log_evidence_truncation = proto.log_evidence_truncation();
  Eigen::MatrixXd samples;
  Eigen::VectorXd log_weights, log_likelihoods;
  if (proto.has_samples()) {
    samples = FromProto(proto.samples(), "samples").value_or(Eigen::MatrixXd());
    log_weights = ToVector(proto.log_weights());
    log_likelihoods = ToVector(proto.log_likelihoods());
  }
  if (proto.has_importance()) {
    const v1::ImportanceSamplingResult& ip = proto.importance();
    ImportanceSamplingResult& r = result.importance.emplace();
    r.log_evidence = ip.log_evidence();
    r.log_evidence_error = ip.log_evidence_error();
    r.effective_sample_size = ip.effective_sample_size();
    r.num_samples = ip.num_samples();
    r.pareto_k = ip.pareto_k();
    r.reliable = ip.reliable();
    r.reliability = ip.reliability();
    for (const v1::ProposalMode& mode : ip.modes()) {
      ProposalMode& m = r.modes.emplace_back();
      m.mean = ToVector(mode.raw());
      m.log_posterior = mode.log_posterior();
      m.log_laplace_mass = mode.log_laplace_mass();
      m.origin = mode.origin();
      m.adapted = mode.adapted();
      r.mode_weights.push_back(mode.mixture_weight());
      r.mode_weight_shares.push_back(mode.weight_share());
    }
    r.prior_share = ip.prior_share();
    r.prior_weight_share = ip.prior_weight_share();
    r.partial = ip.partial();
    r.partial_reason = ip.partial_reason();
    r.seconds = ip.seconds();
    result.mode_search_evaluations = ip.mode_search_evaluations();
    if (result.method == EvidenceMethod::kImportance) {
      r.samples = std::move(samples);
      r.log_weights = std::move(log_weights);
      r.log_likelihoods = std::move(log_likelihoods);
    }
  }
  if (result.method == EvidenceMethod::kNested) {
    NestedSamplingResult& s = result.sampling.emplace();
    s.log_evidence = proto.log_evidence();
    s.log_evidence_error = proto.log_evidence_error();
    s.log_evidence_error_bootstrap = proto.log_evidence_error_bootstrap();
    s.log_evidence_estimator = proto.log_evidence_estimator();
    s.information = proto.information();
    // The nested run's own calls and time: the job's, less the importance stage's when auto
    // ran both.
    s.likelihood_calls =
        proto.likelihood_calls() -
        (result.importance ? result.mode_search_evaluations + result.importance->num_samples : 0);
    s.iterations = proto.iterations();
    s.effective_sample_size = proto.effective_sample_size();
    s.num_live = proto.live_points();
    s.num_batches = proto.batches();
    s.partial = proto.partial();
    // The job's reason names the method in front of the run's own ("nested sampling: ...").
    s.partial_reason = std::string(absl::StripPrefix(proto.partial_reason(), "nested sampling: "));
    s.log_evidence_truncation = proto.log_evidence_truncation();
    s.seconds = proto.seconds() - (result.importance ? result.importance->seconds : 0.0);
    s.log_evidence_nested = proto.log_evidence_nested();
    s.log_evidence_nested_error = proto.log_evidence_nested_error();
    s.log_evidence_error_spread = proto.log_evidence_error_spread();
    for (const v1::NestedSamplingRun& r : proto.runs()) {
      s.runs.push_back({r.seed(), r.log_evidence(), r.log_evidence_error(), r.likelihood_calls(),
                        r.iterations(), r.partial(), r.seconds()});
    }
    s.samples = std::move(samples);
    s.log_weights = std::move(log_weights);
    s.log_likelihoods = std::move(log_likelihoods);
  }
  return result;
}

// ---- search -------------------------------------------------------------------------------

namespace {
// SearchRequest.operators: each entry checked on its own so that a violation names
// "operators[i]"; the list as a whole must hold + and * (ParseSearchOperators' rule).
SearchOperators ParseOperators(const google::protobuf::RepeatedPtrField<std::string>& entries,
                               ViolationList* violations) {
  SearchOperators operators;
  if (entries.empty()) return operators;
  bool plus = false, times = false, entries_ok = true;
  for (int i = 0; i < entries.size(); ++i) {
    const std::string field = absl::StrCat("operators[", i, "]");
    const std::string name = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(entries[i]));
    bool* flag = name == "+"    ? &plus
                 : name == "*"  ? &times
                 : name == "CP" ? &operators.change_point
                 : name == "CW" ? &operators.change_window
                                : nullptr;
    if (flag == nullptr) {
      violations->emplace_back(
          field, absl::StrCat("unknown search move '", entries[i], "' (known: +, *, CP, CW)"));
      entries_ok = false;
    } else if (*flag) {
      violations->emplace_back(field, absl::StrCat("'", name, "' is listed twice"));
      entries_ok = false;
    } else {
      *flag = true;
    }
  }
  if (entries_ok && (!plus || !times)) {
    violations->emplace_back("operators", "must include + and * (CKS's own moves)");
  }
  return operators;
}
}  // namespace

absl::StatusOr<SearchOptions> SearchOptionsFromProto(const v1::SearchRequest& request) {
  ViolationList violations;
  SearchOptions options;
  for (int i = 0; i < request.base_kernels_size(); ++i) {
    const std::string field = absl::StrCat("base_kernels[", i, "]");
    absl::StatusOr<std::vector<KernelExpr>> parsed = ParseBaseKernelList(request.base_kernels(i));
    if (!parsed.ok() || parsed->size() != 1) {
      violations.emplace_back(field, parsed.ok()
                                         ? "must be a single base kernel such as SE or LIN[1]"
                                         : std::string(parsed.status().message()));
      continue;
    }
    if (std::find(options.base_kernels.begin(), options.base_kernels.end(), parsed->front()) !=
        options.base_kernels.end()) {
      violations.emplace_back(
          field, absl::StrCat("duplicate base kernel '", request.base_kernels(i), "'"));
      continue;
    }
    options.base_kernels.push_back(parsed->front());
  }
  if (!request.metric().empty()) {
    if (absl::StatusOr<Metric> metric = ParseMetric(request.metric()); !metric.ok()) {
      violations.emplace_back(
          "metric", std::string(absl::StripPrefix(metric.status().message(), "metrics: ")));
    }
    options.metric = request.metric();
  }
  if (request.max_depth() != 0) options.max_depth = request.max_depth();
  if (request.beam_width() != 0) options.beam_width = request.beam_width();
  if (request.has_warm_start()) options.warm_start = request.warm_start();
  // 0: one per core, as the CLI's --threads 0 means in-process (validation caps it at the
  // server's --max-search-threads).
  options.threads = request.threads() == 0
                        ? std::max(1, static_cast<int>(std::thread::hardware_concurrency()))
                        : request.threads();
  options.score_kept_kernels = request.score_kept_kernels();
  options.operators = ParseOperators(request.operators(), &violations);
  for (int i = 0; i < request.change_columns_size(); ++i) {
    const std::string field = absl::StrCat("change_columns[", i, "]");
    const int column = request.change_columns(i);
    if (column < 0) {
      violations.emplace_back(field, absl::StrCat("must be >= 0, got ", column));
    } else if (std::find(options.operators.columns.begin(), options.operators.columns.end(),
                         column) != options.operators.columns.end()) {
      violations.emplace_back(field, absl::StrCat("column ", column, " is listed twice"));
    } else {
      options.operators.columns.push_back(column);
    }
  }
  if (request.change_columns_size() > 0 && !options.operators.change_point &&
      !options.operators.change_window) {
    violations.emplace_back("change_columns", "pins the change moves: needs CP or CW in operators");
  }
  ApplyFitSettings(ParseFitSettings(request.fit(), "fit", &violations), &options.score);
  options.score.metrics = ParseMetrics(request.metrics(), "metrics", &violations);
  GPSEL_RETURN_IF_ERROR(ViolationsStatus(violations));
  return options;
}

void SearchOptionsToProto(const SearchOptions& options, v1::SearchRequest* request) {
  request->clear_base_kernels();
  for (const KernelExpr& k : options.base_kernels) request->add_base_kernels(ToString(k));
  request->set_metric(options.metric);
  request->set_max_depth(options.max_depth);
  request->set_beam_width(options.beam_width);
  request->set_warm_start(options.warm_start);
  request->set_threads(options.threads);
  request->set_score_kept_kernels(options.score_kept_kernels);
  request->clear_operators();
  if (options.operators.change_point || options.operators.change_window) {
    for (const std::string& name : SearchOperatorNames(options.operators)) {
      request->add_operators(name);
    }
  }
  request->clear_change_columns();
  for (const int column : options.operators.columns) request->add_change_columns(column);
  ToProto(FitSettingsOf(options.score), request->mutable_fit());
  request->clear_metrics();
  for (Metric m : options.score.metrics) request->add_metrics(std::string(MetricName(m)));
}

void ToProto(const SearchResult& result, v1::SearchResult* proto) {
  proto->Clear();
  proto->set_metric(result.metric);
  proto->set_best_kernel(ToString(result.best_kernel));
  proto->set_best_score(result.best_score);
  proto->set_best_uncertainty(result.best_uncertainty);
  ToProto(result.best, proto->mutable_best());
  for (const SearchStep& step : result.steps) {
    v1::SearchStep* s = proto->add_steps();
    s->set_depth(step.depth);
    for (const std::string& k : step.expanded) s->add_expanded(k);
    for (const CandidateRecord& c : step.candidates) {
      v1::SearchCandidate* out = s->add_candidates();
      out->set_kernel(c.kernel);
      out->set_parent(c.parent);
      out->set_derivation(c.derivation);
      out->set_num_base_kernels(c.num_base_kernels);
      out->set_seed(c.seed);
      out->set_warm_started(c.warm_started);
      out->set_from_cache(c.from_cache);
      out->set_ok(c.ok);
      out->set_score(c.score);
      out->set_uncertainty(c.uncertainty);
      out->set_error(c.error);
      out->set_chosen(c.chosen);
      out->set_seconds(c.seconds);
    }
    for (const std::string& k : step.chosen) s->add_chosen(k);
    s->set_improved(step.improved);
    s->set_best_score(step.best_score);
    s->set_seconds(step.seconds);
    if (step.kept_score.has_value()) ToProto(*step.kept_score, s->mutable_kept_score());
    for (const std::string& p : step.pruned) s->add_pruned(p);
    s->set_undecided(step.undecided);
  }
  proto->set_stop_reason(result.stop_reason);
  proto->set_candidates_scored(result.candidates_scored);
  proto->set_cache_hits(result.cache_hits);
  proto->set_failures(result.failures);
  proto->set_max_depth(result.max_depth);
  proto->set_beam_width(result.beam_width);
  proto->set_threads(result.threads);
  proto->set_seconds(result.seconds);
  proto->set_approx_note(result.approx_note);
  for (const std::string& k : result.exact_rescored) proto->add_exact_rescored(k);
  proto->set_exact_rescore_note(result.exact_rescore_note);
  if (result.best_sparse.has_value()) ToProto(*result.best_sparse, proto->mutable_best_sparse());

  for (const std::string& name : SearchOperatorNames(result.operators)) {
    proto->add_operators(name);
  }
  for (const int column : result.operators.columns) proto->add_change_columns(column);
}

absl::StatusOr<SearchResult> FromProto(const v1::SearchResult& proto) {
  SearchResult result;
  result.metric = proto.metric();
  absl::StatusOr<KernelExpr> best = ParseCanonicalKernel(proto.best_kernel());
  if (!best.ok()) return best.status();
  result.best_kernel = *std::move(best);
  result.best_score = proto.best_score();
  result.best_uncertainty = proto.best_uncertainty();
  result.best = FromProto(proto.best());
  for (const v1::SearchStep& s : proto.steps()) {
    SearchStep step;
    step.depth = s.depth();
    step.expanded.assign(s.expanded().begin(), s.expanded().end());
    for (const v1::SearchCandidate& c : s.candidates()) {
      CandidateRecord record;
      record.kernel = c.kernel();
      record.parent = c.parent();
      record.derivation = c.derivation();
      record.num_base_kernels = c.num_base_kernels();
      record.seed = c.seed();
      record.warm_started = c.warm_started();
      record.from_cache = c.from_cache();
      record.ok = c.ok();
      record.score = c.score();
      record.uncertainty = c.uncertainty();
      record.error = c.error();
      record.chosen = c.chosen();
      record.seconds = c.seconds();
      step.candidates.push_back(std::move(record));
    }
    step.chosen.assign(s.chosen().begin(), s.chosen().end());
    step.improved = s.improved();
    step.best_score = s.best_score();
    step.seconds = s.seconds();
    if (s.has_kept_score()) step.kept_score = FromProto(s.kept_score());
    step.pruned.assign(s.pruned().begin(), s.pruned().end());
    step.undecided = s.undecided();
    result.steps.push_back(std::move(step));
  }
  result.stop_reason = proto.stop_reason();
  result.candidates_scored = proto.candidates_scored();
  result.cache_hits = proto.cache_hits();
  result.failures = proto.failures();
  result.max_depth = proto.max_depth();
  result.beam_width = proto.beam_width();
  result.threads = proto.threads();
  result.seconds = proto.seconds();
  result.approx_note = proto.approx_note();
  result.exact_rescored.assign(proto.exact_rescored().begin(), proto.exact_rescored().end());
  result.exact_rescore_note = proto.exact_rescore_note();
  if (proto.has_best_sparse()) result.best_sparse = FromProto(proto.best_sparse());

  for (const std::string& name : proto.operators()) {
    if (name == "CP") result.operators.change_point = true;
    if (name == "CW") result.operators.change_window = true;
  }
  result.operators.columns.assign(proto.change_columns().begin(), proto.change_columns().end());
  return result;
}

// ---- task payloads of search and score jobs ---------------------------------------------------

v1::SearchCandidateTask SearchCandidateTaskOf(const v1::SearchRequest& search,
                                              const CandidateToScore& candidate) {
  v1::SearchCandidateTask task;
  *task.mutable_search() = search;
  task.set_kernel(ToString(candidate.kernel));
  task.set_seed(candidate.seed);
  task.set_has_warm_start(candidate.warm_start.has_value());
  if (candidate.warm_start) ToRepeated(*candidate.warm_start, task.mutable_warm_start());
  return task;
}

absl::StatusOr<CandidateToScore> FromProto(const v1::SearchCandidateTask& task) {
  absl::StatusOr<KernelExpr> kernel = ParseCanonicalKernel(task.kernel());
  if (!kernel.ok()) return InvalidField("kernel", std::string(kernel.status().message()));
  CandidateToScore candidate;
  candidate.kernel = *std::move(kernel);
  candidate.seed = task.seed();
  if (task.has_warm_start()) candidate.warm_start = ToVector(task.warm_start());
  return candidate;
}

void ToProto(const absl::StatusOr<CandidateScore>& outcome, v1::SearchCandidateOutcome* proto) {
  proto->Clear();
  if (!outcome.ok()) {
    proto->mutable_error()->set_code(static_cast<int>(outcome.status().code()));
    proto->mutable_error()->set_message(std::string(outcome.status().message()));
    return;
  }
  proto->set_value(outcome->value);
  proto->set_uncertainty(outcome->uncertainty);
  ToProto(outcome->details, proto->mutable_details());
  for (const std::string& name : outcome->parameter_names) proto->add_parameter_names(name);
  ToRepeated(outcome->raw_optimum, proto->mutable_raw_optimum());
}

absl::StatusOr<CandidateScore> FromProto(const v1::SearchCandidateOutcome& proto) {
  if (proto.has_error()) {
    const int code = proto.error().code();
    // An OK or unknown code in a failed outcome would read as success; keep it a failure.
    const absl::StatusCode status_code =
        code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)
            ? static_cast<absl::StatusCode>(code)
            : absl::StatusCode::kUnknown;
    return absl::Status(status_code, proto.error().message());
  }
  CandidateScore score;
  score.value = proto.value();
  score.uncertainty = proto.uncertainty();
  score.details = FromProto(proto.details());
  score.parameter_names.assign(proto.parameter_names().begin(), proto.parameter_names().end());
  score.raw_optimum = ToVector(proto.raw_optimum());
  return score;
}

// ---- requests ------------------------------------------------------------------------------

v1::ScoreRequest ScoreRequestOf(const Dataset& data, const std::vector<KernelExpr>& kernels,
                                const ScoreOptions& options) {
  v1::ScoreRequest request;
  ToProto(data, request.mutable_dataset());
  for (const KernelExpr& kernel : kernels) request.add_kernels(ToString(kernel));
  ScoreOptionsToProto(options, &request);
  return request;
}

v1::SearchRequest SearchRequestOf(const Dataset& data, const SearchOptions& options) {
  v1::SearchRequest request;
  ToProto(data, request.mutable_dataset());
  SearchOptionsToProto(options, &request);
  return request;
}

v1::SubmitEvidenceRequest SubmitEvidenceRequestOf(const Dataset& data, const KernelExpr& kernel,
                                                  const EvidenceOptions& options) {
  v1::SubmitEvidenceRequest request;
  ToProto(data, request.mutable_dataset());
  request.set_kernel(ToString(kernel));
  ToProto(options, request.mutable_options());
  return request;
}

void ToProto(const Progress& progress, v1::Progress* proto) {
  proto->set_stage(progress.stage);
  proto->set_fraction(progress.fraction);
  proto->set_message(progress.message);
}

Progress FromProto(const v1::Progress& proto) {
  return Progress{proto.stage(), proto.fraction(), proto.message()};
}

// ---- status ------------------------------------------------------------------------------------

absl::Status InvalidField(std::string_view field, std::string_view description) {
  return InvalidFields({{std::string(field), std::string(description)}});
}

namespace {

constexpr char kUnlistedViolationsSuffix[] = " more violations not listed";

// `text` cut to at most `max_bytes` bytes at a UTF-8 character boundary, marked "…" when cut.
std::string Truncated(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  const std::string ellipsis = "\u2026";
  size_t end = max_bytes - ellipsis.size();
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end)) + ellipsis;
}

}  // namespace

absl::Status InvalidFields(const std::vector<std::pair<std::string, std::string>>& violations) {
  return InvalidFieldsWithUnlisted(violations, 0);
}

absl::Status InvalidFieldsWithUnlisted(
    const std::vector<std::pair<std::string, std::string>>& violations, int64_t unlisted) {
  // Bounded whatever the request (issue 33): gRPC sends the message and the details in the
  // trailers, which peers cap (8 KiB by default), and 200,000 bad elements must not become
  // 200,000 violations held, serialised and refused as "metadata size exceeds limit".
  google::rpc::BadRequest bad_request;
  std::vector<std::string> parts;
  size_t bytes = 0;
  size_t reported = 0;
  for (const auto& [field, description] : violations) {
    std::string f = Truncated(field, kMaxViolationFieldBytes);
    std::string d = Truncated(description, kMaxViolationDescriptionBytes);
    if (reported == kMaxReportedViolations ||
        (reported > 0 && bytes + f.size() + d.size() > kMaxReportedViolationBytes)) {
      break;
    }
    bytes += f.size() + d.size();
    ++reported;
    parts.push_back(absl::StrCat(f, ": ", d));
    google::rpc::BadRequest::FieldViolation* v = bad_request.add_field_violations();
    v->set_field(std::move(f));
    v->set_description(std::move(d));
  }
  unlisted += static_cast<int64_t>(violations.size() - reported);
  if (unlisted > 0) {
    const std::string rest = absl::StrCat(unlisted, kUnlistedViolationsSuffix);
    google::rpc::BadRequest::FieldViolation* v = bad_request.add_field_violations();
    v->set_field("request");
    v->set_description(rest);
    parts.push_back(absl::StrCat("and ", rest));
  }
  absl::Status status = absl::InvalidArgumentError(absl::StrJoin(parts, "; "));
  status.SetPayload(kBadRequestTypeUrl, absl::Cord(bad_request.SerializeAsString()));
  return status;
}

absl::Status WithErrorInfo(absl::Status status, std::string_view reason) {
  google::rpc::ErrorInfo info;
  info.set_reason(std::string(reason));
  info.set_domain("gpsel");
  status.SetPayload(kErrorInfoTypeUrl, absl::Cord(info.SerializeAsString()));
  return status;
}

std::vector<std::pair<std::string, std::string>> FieldViolations(const absl::Status& status) {
  std::vector<std::pair<std::string, std::string>> out;
  auto payload = status.GetPayload(kBadRequestTypeUrl);
  google::rpc::BadRequest bad_request;
  if (payload && bad_request.ParseFromString(std::string(*payload))) {
    for (const auto& v : bad_request.field_violations()) {
      out.emplace_back(v.field(), v.description());
    }
  }
  return out;
}

int64_t UnlistedViolations(const absl::Status& status) {
  const std::vector<std::pair<std::string, std::string>> violations = FieldViolations(status);
  if (violations.empty() || violations.back().first != "request") return 0;
  absl::string_view description = violations.back().second;
  int64_t count = 0;
  if (!absl::ConsumeSuffix(&description, kUnlistedViolationsSuffix) ||
      !absl::SimpleAtoi(description, &count)) {
    return 0;
  }
  return count;
}

std::string ErrorReason(const absl::Status& status) {
  auto payload = status.GetPayload(kErrorInfoTypeUrl);
  google::rpc::ErrorInfo info;
  if (payload && info.ParseFromString(std::string(*payload))) return info.reason();
  return "";
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbers.
  const auto code = static_cast<grpc::StatusCode>(static_cast<int>(status.code()));
  google::rpc::Status details;
  details.set_code(static_cast<int>(status.code()));
  details.set_message(std::string(status.message()));
  status.ForEachPayload([&](absl::string_view type_url, const absl::Cord& payload) {
    if (type_url != kBadRequestTypeUrl && type_url != kErrorInfoTypeUrl) return;
    google::protobuf::Any* any = details.add_details();
    any->set_type_url(std::string(type_url));
    any->set_value(std::string(payload));
  });
  if (details.details_size() == 0) return grpc::Status(code, std::string(status.message()));
  return grpc::Status(code, std::string(status.message()), details.SerializeAsString());
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(static_cast<int>(status.error_code())),
                   status.error_message());
  google::rpc::Status details;
  if (!status.error_details().empty() && details.ParseFromString(status.error_details())) {
    for (const google::protobuf::Any& any : details.details()) {
      if (any.type_url() == kBadRequestTypeUrl || any.type_url() == kErrorInfoTypeUrl) {
        out.SetPayload(any.type_url(), absl::Cord(any.value()));
      }
    }
  }
  return out;
}

}  // namespace gpsel::bridge
