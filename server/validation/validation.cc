// Request validation; see validation.h. Violations are collected, not stopped at the first, so a
// client learns about every bad field in one round trip.
#include "gpsel/server/validation/validation.h"

#include <cmath>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/missing_values.h"
#include "gpsel/core/score.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/proto/bridge/unlisted_violations.h"

namespace gpsel {
namespace {

class Violations {
 public:
  void Add(std::string field, std::string description) {
    list_.emplace_back(std::move(field), std::move(description));
  }
  // Adds the field violations a bridge parser reported (nothing for OK), with the count of
  // those it left out (bridge::InvalidFields bounds what one status lists).
  void AddAll(const absl::Status& status) {
    std::vector<std::pair<std::string, std::string>> violations = bridge::FieldViolations(status);
    const int64_t unlisted = bridge::UnlistedViolations(status);
    if (unlisted > 0) violations.pop_back();
    unlisted_ += unlisted;
    for (auto& violation : violations) list_.push_back(std::move(violation));
  }
  bool empty() const { return list_.empty(); }
  absl::Status ToStatus() const { return bridge::InvalidFieldsWithUnlisted(list_, unlisted_); }

 private:
  std::vector<std::pair<std::string, std::string>> list_;
  int64_t unlisted_ = 0;
};

const char* NonFiniteName(double v) { return std::isnan(v) ? "NaN" : "infinite"; }

ParseLimits ParseLimitsOf(const ServiceLimits& limits) {
  ParseLimits p;
  p.max_length = static_cast<size_t>(limits.max_expression_length);
  p.max_depth = limits.max_expression_depth;
  p.max_base_kernels = limits.max_base_kernels;
  return p;
}

// Whether a request's fit options may run the sparse GP (approx sparse or auto).
bool SparsePossible(const v1::FitOptions& fit) {
  return fit.approx() == v1::APPROXIMATION_SPARSE || fit.approx() == v1::APPROXIMATION_AUTO;
}

// approx = auto decides against core's exact limit (core/approx_score.h); a server whose
// --max-points is lower must not run the exact GP above its own limit, so auto is sparse there.
void HonourExactLimit(int64_t num_points, const ServiceLimits& limits, ApproxOptions& approx) {
  if (approx.mode == ApproxMode::kAuto && num_points > limits.max_points) {
    approx.mode = ApproxMode::kSparse;
  }
}

// Shape, size limits and finiteness of a dataset; the dataset when all is well.
// `field` names it in the violations ("dataset", or "test" for held-out data).
std::optional<Dataset> CheckDataset(const v1::Dataset& proto, const ServiceLimits& limits,
                                    Violations& v, bool sparse_possible = false,
                                    const std::string& field = "dataset") {
  const size_t before = 0;
  (void)before;
  bool ok = true;
  const int n = proto.y_size();
  const int d = proto.num_dims() == 0 ? 1 : proto.num_dims();
  if (proto.num_dims() < 0) {
    v.Add(absl::StrCat(field, ".num_dims"), "must not be negative");
    return std::nullopt;
  }
  if (n == 0) {
    v.Add(absl::StrCat(field, ".y"), "is empty: a dataset needs at least 2 points");
    ok = false;
  } else if (n < 2) {
    v.Add(absl::StrCat(field, ".y"), "has 1 point: a dataset needs at least 2");
    ok = false;
  }
  const int max_points =
      sparse_possible ? std::max(limits.max_points, limits.max_sparse_points) : limits.max_points;
  if (n > max_points) {
    v.Add(absl::StrCat(field, ".y"),
          absl::StrCat("has ", n, " points, more than the limit of ", max_points,
                       sparse_possible || limits.max_sparse_points <= max_points
                           ? ""
                           : absl::StrCat(" (fit.approx = sparse or auto takes up to ",
                                          limits.max_sparse_points, ")")));
    ok = false;
  }
  if (d > limits.max_dims) {
    v.Add(absl::StrCat(field, ".num_dims"),
          absl::StrCat("d = ", d, " exceeds the limit of ", limits.max_dims));
    ok = false;
  }
  if (static_cast<int64_t>(proto.x_size()) != static_cast<int64_t>(n) * d) {
    v.Add(absl::StrCat(field, ".x"),
          absl::StrCat("has ", proto.x_size(), " values; expected n·d = ", n, "·", d, " = ",
                       static_cast<int64_t>(n) * d, " (row-major, one row per point of y)"));
    ok = false;
  }
  // NaN is a missing value (dataset.missing says what to do); an infinity is always an error.
  if (!v1::MissingValues_IsValid(proto.missing())) {
    v.Add(absl::StrCat(field, ".missing"), absl::StrCat("unknown value ", proto.missing(),
                                          " (1 = MISSING_VALUES_ERROR, 2 = MISSING_VALUES_DROP)"));
    ok = false;
  }
  const bool drop = proto.missing() == v1::MISSING_VALUES_DROP;
  std::vector<int> missing_x, missing_y;
  for (int i = 0; i < proto.x_size(); ++i) {
    if (std::isnan(proto.x(i))) {
      if (missing_x.empty() || missing_x.back() != i / d) missing_x.push_back(i / d);
    } else if (!std::isfinite(proto.x(i))) {
      v.Add(absl::StrCat(field, ".x"),
            absl::StrCat("value ", i, " (point ", i / d, ", column ", i % d, ") is ",
                                      NonFiniteName(proto.x(i))));
      ok = false;
      break;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (std::isnan(proto.y(i))) {
      missing_y.push_back(i);
    } else if (!std::isfinite(proto.y(i))) {
      v.Add(absl::StrCat(field, ".y"), absl::StrCat("value ", i, " is ", NonFiniteName(proto.y(i))));
      ok = false;
      break;
    }
  }
  if (!drop) {
    for (const auto& [column, points] : {std::pair{".x", &missing_x}, std::pair{".y", &missing_y}}) {
      if (points->empty()) continue;
      v.Add(absl::StrCat(field, column),
            absl::StrCat("missing value (NaN) at point(s) ", DescribePoints(*points),
                         " (0-based); set ", field, ".missing = MISSING_VALUES_DROP to leave "
                         "such points out"));
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  absl::StatusOr<Dataset> data = bridge::FromProto(proto);
  if (!data.ok()) {
    v.Add(std::string(field), std::string(data.status().message()));
    return std::nullopt;
  }
  if (drop) {
    std::vector<int> dropped;
    *data = DropPointsWithMissingValues(*data, &dropped);
    if (data->num_points() < 2) {
      v.Add(absl::StrCat(field, ".y"), absl::StrCat(data->num_points(), " point(s) left after dropping the ",
                                      dropped.size(), " with missing values: a dataset needs at "
                                      "least 2"));
      return std::nullopt;
    }
  }
  return *std::move(data);
}

std::optional<KernelExpr> CheckKernel(const std::string& text, const std::string& field,
                                      const ServiceLimits& limits, int num_dims, Violations& v) {
  if (text.empty()) {
    v.Add(field, "is empty: expected a kernel expression such as \"SE\" or \"C*SE + LIN\"");
    return std::nullopt;
  }
  absl::StatusOr<KernelExpr> kernel = ParseKernel(text, ParseLimitsOf(limits));
  if (!kernel.ok()) {
    v.Add(field, std::string(kernel.status().message()));
    return std::nullopt;
  }
  const int max_dim = MaxActiveDim(*kernel);
  if (num_dims > 0 && max_dim >= num_dims) {
    v.Add(field, absl::StrCat("reads input column ", max_dim, " but the dataset has ", num_dims,
                              " column(s)"));
    return std::nullopt;
  }
  // BASE[*] as core models it (one pinned copy per column, core/kernel_expr.h), so that the
  // parameter names, the leaf limit and the estimates below see the kernel that will be fitted.
  if (num_dims > 0 && ContainsPerColumn(*kernel)) {
    absl::StatusOr<KernelExpr> expanded = ExpandPerColumn(*kernel, num_dims);
    if (!expanded.ok()) {
      v.Add(field, std::string(expanded.status().message()));
      return std::nullopt;
    }
    if (NumBaseKernels(*expanded) > limits.max_base_kernels) {
      v.Add(field, absl::StrCat("has ", NumBaseKernels(*expanded), " base kernels once [*] is ",
                                "one per column of the dataset's ", num_dims, ", more than the ",
                                "limit of ", limits.max_base_kernels));
      return std::nullopt;
    }
    return *std::move(expanded);
  }
  return *std::move(kernel);
}

// Fit options except the hyperparameter names (those need the kernels).
void CheckFitOptions(const v1::FitOptions& fit, const std::string& field,
                     const ServiceLimits& limits, bool check_fitting, Violations& v) {
  if (check_fitting) {
    if (fit.restarts() < 0 || fit.restarts() > limits.max_restarts) {
      v.Add(field + ".restarts", absl::StrCat("must be in [0, ", limits.max_restarts,
                                              "] (0 = default ", FitOptions{}.restarts, ")"));
    }
    if (fit.max_draws_factor() < 0 || fit.max_draws_factor() > 100) {
      v.Add(field + ".max_draws_factor",
            absl::StrCat("must be in [0, 100] (0 = default ", FitOptions{}.max_draws_factor, ")"));
    } else {
      // The draws a fit may make in all: restarts × max_draws_factor, bounded like the restarts
      // at their default factor, so that the factor cannot multiply the server's restart limit.
      const int64_t restarts = fit.restarts() > 0 ? fit.restarts() : FitOptions{}.restarts;
      const int64_t factor =
          fit.max_draws_factor() > 0 ? fit.max_draws_factor() : FitOptions{}.max_draws_factor;
      const int64_t cap = int64_t{limits.max_restarts} * FitOptions{}.max_draws_factor;
      if (restarts * factor > cap) {
        v.Add(field + ".max_draws_factor",
              absl::StrCat("restarts × max_draws_factor = ", restarts * factor,
                           " draws, more than the limit of ", cap));
      }
    }
    if (fit.max_iterations() < 0 || fit.max_iterations() > limits.max_iterations) {
      v.Add(field + ".max_iterations",
            absl::StrCat("must be in [0, ", limits.max_iterations, "] (0 = default ",
                         FitOptions{}.max_iterations, ")"));
    }
  }
  for (const auto& [name, prior] : fit.prior_overrides()) {
    const std::string f = absl::StrCat(field, ".prior_overrides[", name, "]");
    if (!std::isfinite(prior.mean())) v.Add(f + ".mean", "must be finite");
    if (!std::isfinite(prior.sd()) || prior.sd() <= 0) v.Add(f + ".sd", "must be finite and > 0");
  }
  for (const auto& [name, value] : fit.fixed_values()) {
    const std::string f = absl::StrCat(field, ".fixed_values[", name, "]");
    if (!std::isfinite(value) || value <= 0) {
      v.Add(f, "must be finite and > 0");
    } else if (name == kNoiseName && value <= kNoiseFloor) {
      v.Add(f, absl::StrCat("noise variance must exceed the floor ", kNoiseFloor));
    }
  }
}

// Every override/fixed name must exist in every kernel it is applied to.
void CheckParameterNames(const v1::FitOptions& fit, const std::string& field,
                         const std::vector<std::pair<std::string, KernelExpr>>& kernels,
                         Violations& v) {
  for (const auto& entry : kernels) {
    // Named references, not a structured binding: the lambda below uses them, and C++17 does
    // not let a lambda capture a structured binding (clang rejects it; tests/fuzz builds with it).
    const std::string& kernel_field = entry.first;
    const KernelExpr& kernel = entry.second;
    absl::StatusOr<std::vector<HyperparameterInfo>> info = DescribeHyperparameters(kernel, {});
    if (!info.ok()) continue;
    std::set<std::string> names;
    for (const HyperparameterInfo& p : *info) names.insert(p.name);
    const std::string valid = absl::StrJoin(names, ", ");
    auto check = [&](const std::string& name, const std::string& f) {
      if (names.count(name) == 0) {
        v.Add(f, absl::StrCat("unknown parameter '", name, "' for ", kernel_field, " (",
                              ToString(kernel), "); valid: ", valid));
      }
    };
    for (const auto& entry : fit.prior_overrides()) {
      check(entry.first, absl::StrCat(field, ".prior_overrides[", entry.first, "]"));
    }
    for (const auto& entry : fit.fixed_values()) {
      check(entry.first, absl::StrCat(field, ".fixed_values[", entry.first, "]"));
    }
  }
}

void CheckStandardizable(const Dataset& data, bool standardize, const std::string& option_field,
                         Violations& v) {
  if (!standardize) return;
  if (!ComputeStandardization(data.y, true).ok()) {
    v.Add("dataset.y", absl::StrCat("is constant, so it cannot be standardised; set ", option_field,
                                    ".standardize = false"));
  }
}

// Threads one request may use (SearchRequest.threads, ImportanceSamplingOptions.threads):
// --max-search-threads, or one per core when it is 0.
int MaxRequestThreads(const ServiceLimits& limits) {
  return limits.max_search_threads > 0
             ? limits.max_search_threads
             : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// The early refusal of oversize repeated fields (validation.h kMaxMetricsPerRequest, ...):
// sizes only, so it costs microseconds whatever the request holds.
class SizeChecks {
 public:
  // `field` holds `count` entries, at most `limit`.
  void Count(const std::string& field, int64_t count, int64_t limit) {
    if (count > limit) {
      v_.Add(field, absl::StrCat("has ", count, " entries, more than the limit of ", limit));
    }
  }
  // Each entry of a repeated string field at most `limit` bytes.
  void EntryBytes(const std::string& field,
                  const google::protobuf::RepeatedPtrField<std::string>& entries, size_t limit) {
    for (int i = 0; i < entries.size(); ++i) {
      if (entries[i].size() > limit) {
        v_.Add(absl::StrCat(field, "[", i, "]"),
               absl::StrCat("is ", entries[i].size(), " bytes long, more than the limit of ",
                            limit));
        return;  // one is enough to refuse
      }
    }
  }
  // A map with string keys: entries and key lengths.
  template <typename Map>
  void ParameterMap(const std::string& field, const Map& map) {
    Count(field, map.size(), kMaxParameterEntries);
    if (static_cast<int64_t>(map.size()) > kMaxParameterEntries) return;
    for (const auto& entry : map) {
      if (entry.first.size() > kMaxParameterNameBytes) {
        v_.Add(field, absl::StrCat("has a parameter name of ", entry.first.size(),
                                   " bytes, more than the limit of ", kMaxParameterNameBytes));
        return;
      }
    }
  }
  void Fit(const std::string& field, const v1::FitOptions& fit) {
    ParameterMap(field + ".prior_overrides", fit.prior_overrides());
    ParameterMap(field + ".fixed_values", fit.fixed_values());
  }
  absl::Status ToStatus() const { return v_.empty() ? absl::OkStatus() : v_.ToStatus(); }

 private:
  Violations v_;
};

}  // namespace

ServiceLimits ServiceLimitCeilings() {
  ServiceLimits c;
  c.max_points = kMaxPointsCeiling;  // n² doubles = 80 GB: the memory budget binds long before
  c.max_dims = 10000;
  c.max_expression_length = 100000;
  c.max_expression_depth = 64;  // the parsers and evaluators recurse once per level
  c.max_base_kernels = 128;     // the Hessian grows with u² and the node count
  c.max_kernels_per_request = 1000;
  c.max_restarts = 1000;  // FitOptions::Validate's own bound
  c.max_iterations = 1000000;
  c.max_search_depth = 20;
  c.max_beam_width = 256;
  c.max_search_threads = 256;  // FitOptions::Validate's bound on threads
  c.max_live_points = 100000;
  c.max_likelihood_calls = 1'000'000'000;
  c.max_predict_points = 100'000'000;
  c.max_message_bytes = 1 << 30;
  c.max_request_bytes = int64_t{1} << 50;
  return c;
}

absl::Status ServiceLimits::Validate() const {
  const ServiceLimits ceiling = ServiceLimitCeilings();
  struct Limit {
    const char* flag;
    int64_t value, minimum, maximum;
  };
  const Limit limits[] = {
      {"--max-points", max_points, 2, ceiling.max_points},
      {"--max-dims", max_dims, 1, ceiling.max_dims},
      {"--max-expression-length", max_expression_length, 1, ceiling.max_expression_length},
      {"--max-expression-depth", max_expression_depth, 1, ceiling.max_expression_depth},
      {"--max-base-kernels", max_base_kernels, 1, ceiling.max_base_kernels},
      {"--max-kernels", max_kernels_per_request, 1, ceiling.max_kernels_per_request},
      {"--max-restarts", max_restarts, 1, ceiling.max_restarts},
      {"--max-iterations", max_iterations, 1, ceiling.max_iterations},
      {"--max-search-depth", max_search_depth, 1, ceiling.max_search_depth},
      {"--max-beam-width", max_beam_width, 1, ceiling.max_beam_width},
      {"--max-search-threads", max_search_threads, 0, ceiling.max_search_threads},
      {"--max-live-points", max_live_points, 1, ceiling.max_live_points},
      {"--max-likelihood-calls", max_likelihood_calls, 1, ceiling.max_likelihood_calls},
      {"--max-predict-points", max_predict_points, 1, ceiling.max_predict_points},
      {"--max-message-bytes", max_message_bytes, 1024, ceiling.max_message_bytes},
      {"--max-request-bytes", max_request_bytes, kAutomaticRequestBudget,
       ceiling.max_request_bytes},
  };
  std::vector<std::string> bad;
  for (const Limit& limit : limits) {
    if (limit.value < limit.minimum || limit.value > limit.maximum) {
      bad.push_back(absl::StrCat(limit.flag, " is ", limit.value, "; it must be in [",
                                 limit.minimum, ", ", limit.maximum, "]"));
    }
  }
  if (!bad.empty()) return absl::InvalidArgumentError(absl::StrJoin(bad, "; "));
  return absl::OkStatus();
}

absl::Status CheckMemoryBudget(const MemoryEstimate& estimate, const ServiceLimits& limits) {
  if (limits.max_request_bytes <= 0 || estimate.bytes <= limits.max_request_bytes) {
    return absl::OkStatus();
  }
  return bridge::WithErrorInfo(
      absl::ResourceExhaustedError(absl::StrCat(
          "the request needs an estimated ", estimate.Summary(),
          " of memory, more than this "
          "server's per-request budget of ",
          FormatBytes(limits.max_request_bytes),
          " (--max-request-bytes); use fewer points, threads, a smaller kernel or search depth, "
          "or ask the operator for a larger budget")),
      "REQUEST_TOO_LARGE");
}

absl::StatusOr<ValidScore> ValidateScoreRequest(const v1::ScoreRequest& request,
                                                const ServiceLimits& limits) {
  {
    SizeChecks sizes;
    sizes.Count("kernels", request.kernels_size(), limits.max_kernels_per_request);
    sizes.Count("nested_parents", request.nested_parents_size(), limits.max_kernels_per_request);
    sizes.Count("metrics", request.metrics_size(), kMaxMetricsPerRequest);
    sizes.EntryBytes("metrics", request.metrics(), kMaxListEntryBytes);
    sizes.Count("laplace_r", request.laplace_r_size(), kMaxLaplaceRValues);
    sizes.Fit("fit", request.fit());
    GPSEL_RETURN_IF_ERROR(sizes.ToStatus());
  }
  Violations v;
  std::optional<Dataset> data = CheckDataset(request.dataset(), limits, v,
                                              SparsePossible(request.fit()));
  const int d = data ? data->num_dims() : 0;
  if (request.kernels_size() == 0) {
    v.Add("kernels", "is empty: give at least one kernel expression");
  } else if (request.kernels_size() > limits.max_kernels_per_request) {
    v.Add("kernels",
          absl::StrCat("has ", request.kernels_size(), " entries, more than the limit of ",
                       limits.max_kernels_per_request));
  }
  std::vector<std::pair<std::string, KernelExpr>> kernels;
  for (int i = 0; i < request.kernels_size() && i < limits.max_kernels_per_request; ++i) {
    const std::string field = absl::StrCat("kernels[", i, "]");
    if (auto k = CheckKernel(request.kernels(i), field, limits, d, v))
      kernels.emplace_back(field, *k);
  }
  // Scores the caller already has, whose optima start the fits of the kernels containing them
  // (core/score.h NestedParent): as many as kernels at most, since each costs a containment test
  // per kernel and up to two extra starts.
  if (request.nested_parents_size() > limits.max_kernels_per_request) {
    v.Add("nested_parents",
          absl::StrCat("has ", request.nested_parents_size(), " entries, more than the limit of ",
                       limits.max_kernels_per_request));
  }
  // Metrics, laplace_r, the nested parents and the fit options, each parsed once
  // (proto/bridge/convert.h).
  // Held-out data: the dataset's limits, and its columns.
  std::optional<Dataset> test;
  if (request.has_test()) {
    test = CheckDataset(request.test(), limits, v, /*sparse_possible=*/false, "test");
    if (test && data && test->num_dims() != data->num_dims()) {
      v.Add("test.num_dims", absl::StrCat("is ", test->num_dims(), "; the dataset has ",
                                          data->num_dims(), " input column(s)"));
    }
  }
  // The options without the held-out data, which CheckDataset has just checked (and from which it
  // dropped the points with missing values when test.missing says so): the bridge would check
  // it again, without that policy.
  absl::StatusOr<ScoreOptions> options;
  if (request.has_test()) {
    v1::ScoreRequest without_test;
    *without_test.mutable_fit() = request.fit();
    *without_test.mutable_metrics() = request.metrics();
    *without_test.mutable_laplace_r() = request.laplace_r();
    *without_test.mutable_nested_parents() = request.nested_parents();
    without_test.set_search_starts(request.search_starts());
    options = bridge::ScoreOptionsFromProto(without_test);
    if (options.ok() && test) options->test = std::make_shared<const Dataset>(*std::move(test));
  } else {
    options = bridge::ScoreOptionsFromProto(request);
  }
  v.AddAll(options.status());
  CheckFitOptions(request.fit(), "fit", limits, /*check_fitting=*/true, v);
  CheckParameterNames(request.fit(), "fit", kernels, v);
  if (data)
    CheckStandardizable(*data, !request.fit().has_standardize() || request.fit().standardize(),
                        "fit", v);
  if (!v.empty()) return v.ToStatus();

  ValidScore out;
  out.data = *std::move(data);
  for (auto& [field, kernel] : kernels) out.kernels.push_back(std::move(kernel));
  out.options = *std::move(options);
  HonourExactLimit(out.data.num_points(), limits, out.options.approx);
  // The sparse fits' cap on m follows this server's budget (core/memory_estimate.h).
  ApplyRequestBudget(limits.max_request_bytes, out.data, out.options);
  if (absl::Status s = out.options.Validate(); !s.ok()) {
    return bridge::InvalidField("fit", std::string(s.message()));
  }
  if (absl::Status s =
          CheckMemoryBudget(EstimateScoreMemory(out.data, out.kernels, out.options), limits);
      !s.ok()) {
    return s;
  }
  return out;
}

absl::StatusOr<ValidSearch> ValidateSearchRequest(const v1::SearchRequest& request,
                                                  const ServiceLimits& limits) {
  {
    SizeChecks sizes;
    sizes.Count("base_kernels", request.base_kernels_size(), kMaxSearchBaseKernels);
    sizes.EntryBytes("base_kernels", request.base_kernels(), kMaxListEntryBytes);
    sizes.Count("operators", request.operators_size(), kMaxSearchOperators);
    sizes.EntryBytes("operators", request.operators(), kMaxListEntryBytes);
    sizes.Count("metrics", request.metrics_size(), kMaxMetricsPerRequest);
    sizes.EntryBytes("metrics", request.metrics(), kMaxListEntryBytes);
    sizes.Fit("fit", request.fit());
    GPSEL_RETURN_IF_ERROR(sizes.ToStatus());
  }
  Violations v;
  std::optional<Dataset> data = CheckDataset(request.dataset(), limits, v,
                                              SparsePossible(request.fit()));
  const int d = data ? data->num_dims() : 0;
  // Base kernels, metric(s) and fit options, each parsed once (proto/bridge/convert.h); here only the
  // server's limits and the columns the base kernels read.
  absl::StatusOr<SearchOptions> options = bridge::SearchOptionsFromProto(request);
  v.AddAll(options.status());
  if (options.ok()) {
    for (size_t i = 0; i < options->base_kernels.size(); ++i) {
      const KernelExpr& base = options->base_kernels[i];
      if (d > 0 && base.active_dim >= d) {
        v.Add(absl::StrCat("base_kernels[", i, "]"),
              absl::StrCat("reads input column ", base.active_dim, " but the dataset has ", d,
                           " column(s)"));
      }
    }
  }
  for (int i = 0; i < request.change_columns_size(); ++i) {
    if (d > 0 && request.change_columns(i) >= d) {
      v.Add(absl::StrCat("change_columns[", i, "]"),
            absl::StrCat("reads input column ", request.change_columns(i), " but the dataset has ",
                         d, " column(s)"));
    }
  }
  if (request.max_depth() < 0 || request.max_depth() > limits.max_search_depth) {
    v.Add("max_depth", absl::StrCat("must be in [0, ", limits.max_search_depth, "] (0 = default ",
                                    SearchOptions{}.max_depth, ")"));
  }
  if (request.beam_width() < 0 || request.beam_width() > limits.max_beam_width) {
    v.Add("beam_width", absl::StrCat("must be in [0, ", limits.max_beam_width, "] (0 = default ",
                                     SearchOptions{}.beam_width, ")"));
  }
  if (request.threads() < 0) v.Add("threads", "must not be negative");
  CheckFitOptions(request.fit(), "fit", limits, /*check_fitting=*/true, v);
  if (data)
    CheckStandardizable(*data, !request.fit().has_standardize() || request.fit().standardize(),
                        "fit", v);
  if (!v.empty()) return v.ToStatus();

  options->threads = std::min(options->threads, MaxRequestThreads(limits));
  if (absl::Status s = options->Validate(); !s.ok()) {
    return bridge::InvalidField("search", std::string(s.message()));
  }
  ValidSearch out;
  out.data = *std::move(data);
  out.options = *std::move(options);
  HonourExactLimit(out.data.num_points(), limits, out.options.score.approx);
  ApplyRequestBudget(limits.max_request_bytes, out.data, out.options);
  GPSEL_RETURN_IF_ERROR(CheckMemoryBudget(EstimateSearchMemory(out.data, out.options), limits));
  return out;
}

absl::StatusOr<ValidPredict> ValidatePredictRequest(const v1::PredictRequest& request,
                                                    const ServiceLimits& limits) {
  {
    SizeChecks sizes;
    sizes.ParameterMap("hyperparameters", request.hyperparameters());
    sizes.Fit("fit", request.fit());
    GPSEL_RETURN_IF_ERROR(sizes.ToStatus());
  }
  Violations v;
  std::optional<Dataset> data = CheckDataset(request.dataset(), limits, v,
                                              SparsePossible(request.fit()));
  const int d = data ? data->num_dims() : 0;
  // A saved model gives the kernel (PredictRequest.kernel may repeat it) and the values.
  std::optional<SavedModel> model;
  if (request.has_model()) {
    absl::StatusOr<SavedModel> parsed = bridge::FromProto(request.model(), "model");
    if (parsed.ok()) {
      model = *std::move(parsed);
    } else {
      v.AddAll(parsed.status());
    }
    if (request.hyperparameters_size() > 0) {
      v.Add("hyperparameters", "give either a model or hyperparameter values, not both");
    }
  }
  std::optional<KernelExpr> kernel;
  if (model) {
    kernel = CheckKernel(model->kernel, "model.kernel", limits, d, v);
    if (kernel && !request.kernel().empty()) {
      absl::StatusOr<KernelExpr> given = ParseKernel(request.kernel(), ParseLimitsOf(limits));
      if (given.ok() && d > 0) given = ExpandPerColumn(*given, d);  // a model holds it expanded
      if (given.ok() && ToString(*given) != ToString(*kernel)) {
        v.Add("kernel", absl::StrCat("is ", ToString(*given), " but the model's kernel is ",
                                     ToString(*kernel), " (leave it empty with a model)"));
      }
    }
  } else if (!request.has_model()) {
    kernel = CheckKernel(request.kernel(), "kernel", limits, d, v);
  }
  if (request.samples() < 0) {
    v.Add("samples", "must be >= 0");
  } else if (std::string problem = SampleSizeProblem(request.samples(), request.x_new().rows());
             !problem.empty()) {
    v.Add("samples", problem);
  }
  const v1::Matrix& x_new = request.x_new();
  if (x_new.rows() <= 0) {
    v.Add("x_new.rows", "must be at least 1");
  } else if (x_new.rows() > limits.max_predict_points) {
    v.Add("x_new.rows", absl::StrCat("is ", x_new.rows(), ", more than the limit of ",
                                     limits.max_predict_points));
  }
  if (data && x_new.cols() != d) {
    v.Add("x_new.cols",
          absl::StrCat("is ", x_new.cols(), " but the dataset has ", d, " column(s)"));
  }
  if (static_cast<int64_t>(x_new.values_size()) !=
      static_cast<int64_t>(x_new.rows()) * x_new.cols()) {
    v.Add("x_new.values", absl::StrCat("has ", x_new.values_size(), " values; expected rows·cols"));
  }
  for (int i = 0; i < x_new.values_size(); ++i) {
    if (!std::isfinite(x_new.values(i))) {
      v.Add("x_new.values", absl::StrCat("value ", i, " is ", NonFiniteName(x_new.values(i))));
      break;
    }
  }
  absl::StatusOr<bridge::FitSettings> fit = bridge::FitSettingsFromProto(request.fit(), "fit");
  v.AddAll(fit.status());
  if (request.has_model()) {
    // Nothing is fitted: the model's standardisation applies, fit options are not read.
  } else if (request.hyperparameters_size() == 0) {
    CheckFitOptions(request.fit(), "fit", limits, /*check_fitting=*/true, v);
    if (kernel) CheckParameterNames(request.fit(), "fit", {{"kernel", *kernel}}, v);
  } else if (kernel) {
    absl::StatusOr<std::vector<HyperparameterInfo>> info = DescribeHyperparameters(*kernel, {});
    if (info.ok()) {
      std::set<std::string> names;
      for (const HyperparameterInfo& p : *info) names.insert(p.name);
      for (const auto& [name, value] : request.hyperparameters()) {
        const std::string f = absl::StrCat("hyperparameters[", name, "]");
        if (names.count(name) == 0) {
          v.Add(f, absl::StrCat("unknown parameter; valid: ", absl::StrJoin(names, ", ")));
        } else if (!std::isfinite(value) || value <= 0) {
          v.Add(f, "must be finite and > 0 (natural scale)");
        }
      }
      for (const std::string& name : names) {
        if (request.hyperparameters().count(name) == 0) {
          v.Add("hyperparameters",
                absl::StrCat("missing '", name, "' (give every parameter, or none to fit them)"));
        }
      }
    }
  }
  if (data && !request.has_model()) {
    CheckStandardizable(*data, !request.fit().has_standardize() || request.fit().standardize(),
                        "fit", v);
  }
  if (data && model) {
    if (absl::Status s = CheckModelMatchesData(*model, *data); !s.ok()) {
      v.Add("model", std::string(absl::StripPrefix(s.message(), "model: ")));
    }
  }
  if (!v1::FitObjective_IsValid(request.objective())) {
    v.Add("objective", absl::StrCat("unknown objective ", request.objective(),
                                    " (1 = maximum likelihood, 2 = maximum a posteriori)"));
  }
  if (!v.empty()) return v.ToStatus();

  ValidPredict out;
  out.data = *std::move(data);
  out.kernel = *std::move(kernel);
  absl::StatusOr<Eigen::MatrixXd> x = bridge::FromProto(x_new, "x_new");
  if (!x.ok()) return x.status();
  out.x_new = *std::move(x);
  for (const auto& [name, value] : request.hyperparameters()) {
    out.options.hyperparameters[name] = value;
  }
  out.options.objective = request.objective() == v1::FIT_OBJECTIVE_MAXIMUM_LIKELIHOOD
                              ? FitObjective::kMaximumLikelihood
                              : FitObjective::kMaximumAPosteriori;
  bridge::ApplyFitSettings(*fit, &out.options.fit);
  HonourExactLimit(out.data.num_points(), limits, out.options.fit.approx);
  ApplyRequestBudget(limits.max_request_bytes, out.data, out.x_new.rows(), out.options);
  out.options.components = request.components();
  out.options.model = std::move(model);
  out.options.samples = request.samples();
  out.options.seed = request.seed();
  if (absl::Status s = out.options.Validate(); !s.ok()) {
    return bridge::InvalidField("fit", std::string(s.message()));
  }
  GPSEL_RETURN_IF_ERROR(CheckMemoryBudget(
      EstimatePredictMemory(out.data, out.kernel, out.x_new.rows(), out.options), limits));
  return out;
}

absl::StatusOr<ValidEvidence> ValidateEvidenceRequest(const v1::SubmitEvidenceRequest& request,
                                                      const ServiceLimits& limits) {
  {
    SizeChecks sizes;
    sizes.Fit("options.fit", request.options().fit());
    GPSEL_RETURN_IF_ERROR(sizes.ToStatus());
  }
  Violations v;
  std::optional<Dataset> data = CheckDataset(request.dataset(), limits, v);
  const int d = data ? data->num_dims() : 0;
  std::optional<KernelExpr> kernel = CheckKernel(request.kernel(), "kernel", limits, d, v);
  const v1::EvidenceOptions& o = request.options();
  if (o.live_points() < 0 || o.live_points() > limits.max_live_points) {
    v.Add("options.live_points",
          absl::StrCat("must be in [0, ", limits.max_live_points, "] (0 = automatic)"));
  }
  if (!std::isfinite(o.dlogz()) || o.dlogz() < 0) v.Add("options.dlogz", "must be finite and >= 0");
  if (!std::isfinite(o.dynamic_target_error()) || o.dynamic_target_error() < 0) {
    v.Add("options.dynamic_target_error", "must be finite and >= 0");
  }
  if (o.has_num_bootstrap() && (o.num_bootstrap() < 0 || o.num_bootstrap() > 1000)) {
    v.Add("options.num_bootstrap", "must be in [0, 1000]");
  }
  if (o.has_dynamic_posterior_weight() &&
      !(o.dynamic_posterior_weight() == -1 ||
        (o.dynamic_posterior_weight() >= 0 && o.dynamic_posterior_weight() <= 1))) {
    v.Add("options.dynamic_posterior_weight", "must be in [0, 1], or -1 for automatic");
  }
  if (o.max_likelihood_calls() < 0 || o.max_likelihood_calls() > limits.max_likelihood_calls) {
    v.Add("options.max_likelihood_calls",
          absl::StrCat("must be in [0, ", limits.max_likelihood_calls, "]"));
  }
  if (!std::isfinite(o.max_seconds()) || o.max_seconds() < 0) {
    v.Add("options.max_seconds", "must be finite and >= 0");
  }
  if (!v1::EvidenceMethod_IsValid(o.method())) {
    v.Add("options.method",
          absl::StrCat("unknown value ", o.method(), " (expected NESTED, IMPORTANCE or AUTO)"));
  }
  const v1::ImportanceSamplingOptions& is = o.importance();
  if (!std::isfinite(is.target_error()) || is.target_error() < 0) {
    v.Add("options.importance.target_error", "must be finite and >= 0 (0 = default)");
  }
  if (is.max_samples() < 0 || is.max_samples() > limits.max_likelihood_calls) {
    v.Add("options.importance.max_samples",
          absl::StrCat("must be in [0, ", limits.max_likelihood_calls, "] (0 = default)"));
  }
  if (is.initial_samples() < 0 || is.initial_samples() > limits.max_likelihood_calls) {
    v.Add("options.importance.initial_samples",
          absl::StrCat("must be in [0, ", limits.max_likelihood_calls, "] (0 = default)"));
  }
  if (!(is.prior_share() >= 0 && is.prior_share() < 1)) {
    v.Add("options.importance.prior_share", "must be in [0, 1) (0 = default)");
  }
  if (is.student_t_dof() < 0 || is.student_t_dof() > 1000) {
    v.Add("options.importance.student_t_dof", "must be in [0, 1000] (0 = default)");
  }
  if (!std::isfinite(is.covariance_inflation()) || is.covariance_inflation() < 0) {
    v.Add("options.importance.covariance_inflation", "must be finite and >= 0 (0 = default)");
  }
  if (is.mode_search_restarts() < 0 || is.mode_search_restarts() > limits.max_restarts) {
    v.Add("options.importance.mode_search_restarts",
          absl::StrCat("must be in [0, ", limits.max_restarts, "] (0 = default)"));
  }
  if (o.threads() < 0) v.Add("options.threads", "must not be negative");
  if (o.runs() < 0 || o.runs() > 256) v.Add("options.runs", "must be in [0, 256] (0 = 1)");
  if (o.batch_size() < 0 || o.batch_size() > 1024) {
    v.Add("options.batch_size", "must be in [0, 1024] (0 = 1)");
  }
  if (request.request_id().size() > 256) v.Add("request_id", "is longer than 256 characters");
  v.AddAll(bridge::FitSettingsFromProto(o.fit(), "options.fit").status());
  if (SparsePossible(o.fit())) {
    v.Add("options.fit.approx",
          absl::StrCat("log evidence is computed on the exact GP only (nested and importance "
                       "sampling need the exact likelihood at every sample), up to ",
                       limits.max_points, " points; use approx = exact, or Score with approx = "
                       "sparse for the Laplace approximations with certified intervals"));
  }
  CheckFitOptions(o.fit(), "options.fit", limits, /*check_fitting=*/false, v);
  if (kernel) CheckParameterNames(o.fit(), "options.fit", {{"kernel", *kernel}}, v);
  if (data)
    CheckStandardizable(*data, !o.fit().has_standardize() || o.fit().standardize(), "options.fit",
                        v);
  if (!v.empty()) return v.ToStatus();

  ValidEvidence out;
  out.data = *std::move(data);
  out.kernel = *std::move(kernel);
  out.options = bridge::FromProto(o);
  out.options.importance.threads =
      std::min(out.options.importance.threads, MaxRequestThreads(limits));
  out.options.sampling.threads = std::min(out.options.sampling.threads, MaxRequestThreads(limits));
  if (absl::Status s = out.options.Validate(); !s.ok()) {
    return bridge::InvalidField("options", std::string(s.message()));
  }
  if (absl::Status s =
          CheckMemoryBudget(EstimateEvidenceMemory(out.data, out.kernel, out.options), limits);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace gpsel
