// GP log evidence: the GP likelihood plugged into nested sampling, or into importance sampling
// from the Laplace approximations of the posterior modes that a mode search finds.
#include "gpsel/core/evidence.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <utility>

#include "Eigen/Eigenvalues"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/instrumentation.h"
#include "gpsel/core/internal/data_starts.h"
#include "gpsel/core/internal/first_stop.h"
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Parameter-block swaps that map the model onto itself: for every + or * node, each pair of
// adjacent identical operands (canonical order puts equal operands side by side), as the
// [begin, end) ranges of their parameters in the model's full parameter order (leaves in
// canonical order, BaseKernelParameterNames each; core/hyperparameters.h).
struct BlockSwap {
  int first_begin = 0, second_begin = 0, length = 0;
};
void CollectBlockSwaps(const KernelExpr& expr, int& offset, std::vector<BlockSwap>& swaps) {
  if (expr.is_base()) {
    offset += static_cast<int>(BaseKernelParameterNames(expr.base).size());
    return;
  }
  std::vector<int> begins;
  for (const KernelExpr& operand : expr.operands) {
    begins.push_back(offset);
    CollectBlockSwaps(operand, offset, swaps);
  }
  if (expr.is_change()) {
    // CP(A, A) is no symmetry: the operands are before and after the change. Its own
    // parameters follow its operands'.
    offset += static_cast<int>(ChangeParameterNames(expr.kind).size());
    return;
  }
  begins.push_back(offset);
  for (size_t i = 0; i + 1 < expr.operands.size(); ++i) {
    if (expr.operands[i] == expr.operands[i + 1]) {
      swaps.push_back({begins[i], begins[i + 1], begins[i + 1] - begins[i]});
    }
  }
}

// A candidate start of the mode search with its origin.
struct Candidate {
  Eigen::VectorXd raw;
  double value = -kInf;
  std::string origin;
};

// The Laplace covariance at a maximum of the log posterior: the inverse of H = −∇² with its
// eigenvalues raised to at least the smallest prior precision, so that no direction of the
// proposal is wider than the prior (where the likelihood is flat, or the point is not quite a
// maximum).
Eigen::MatrixXd LaplaceCovariance(const Eigen::MatrixXd& objective_hessian,
                                  const Eigen::VectorXd& prior_sd) {
  const Eigen::MatrixXd h = -0.5 * (objective_hessian + objective_hessian.transpose());
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(h);
  const double floor = 1.0 / prior_sd.array().square().maxCoeff();
  const Eigen::VectorXd inverse = eigen.eigenvalues().cwiseMax(floor).cwiseInverse();
  return eigen.eigenvectors() * inverse.asDiagonal() * eigen.eigenvectors().transpose();
}

}  // namespace

std::string_view EvidenceMethodName(EvidenceMethod method) {
  switch (method) {
    case EvidenceMethod::kNested:
      return "nested";
    case EvidenceMethod::kImportance:
      return "importance";
    case EvidenceMethod::kAuto:
      return "auto";
  }
  return "unknown";
}

absl::StatusOr<EvidenceMethod> ParseEvidenceMethod(std::string_view text, std::string_view field) {
  const std::string lower = absl::AsciiStrToLower(std::string(text));
  if (lower == "nested" || lower == "ns") return EvidenceMethod::kNested;
  if (lower == "importance" || lower == "is") return EvidenceMethod::kImportance;
  if (lower == "auto") return EvidenceMethod::kAuto;
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": unknown evidence method '",
                                                 std::string(text),
                                                 "' (expected nested, importance or auto)"));
}

absl::Status ModeSearchOptions::Validate() const {
  if (restarts < 1 || restarts > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("mode_search.restarts: must be in [1, 1000], got ", restarts));
  }
  if (!(max_log_mass_gap > 0) || !std::isfinite(max_log_mass_gap)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mode_search.max_log_mass_gap: must be a positive number of nats, got ", max_log_mass_gap));
  }
  return absl::OkStatus();
}

absl::Status EvidenceOptions::Validate() const {
  GPSEL_RETURN_IF_ERROR(sampling.Validate());
  if (absl::Status s = importance.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("importance.", s.message()));
  }
  GPSEL_RETURN_IF_ERROR(mode_search.Validate());
  GPSEL_RETURN_IF_ERROR(scale_x.Validate());
  return hyperparameters.Validate();
}

std::string EvidenceResult::Summary() const {
  std::string text = absl::StrFormat(
      "kernel %s: n = %d, u = %d, y %s\nlog Z = %.4f ± %.4f by %s (%s); %d likelihood calls, "
      "%.2f s",
      kernel, num_points, num_hyperparameters,
      standardized ? "standardised" : "as given (not standardised)", log_evidence,
      log_evidence_error, EvidenceMethodName(method), method_reason, likelihood_calls, seconds);
  if (partial) {
    absl::StrAppend(&text, "\nPARTIAL, not a final answer: ", partial_reason);
    if (method == EvidenceMethod::kNested) {
      absl::StrAppend(&text, absl::StrFormat(" (the error includes the remaining-mass term %.4f "
                                             "nats)",
                                             log_evidence_truncation));
    }
  }
  if (importance.has_value()) absl::StrAppend(&text, "\n", importance->Summary());
  if (sampling.has_value()) absl::StrAppend(&text, "\n", sampling->Summary());
  return text;
}

absl::StatusOr<std::vector<ProposalMode>> FindPosteriorModes(
    const GpModel& model, const KernelExpr& kernel, const ModeSearchOptions& options, uint64_t seed,
    int threads, const ProgressCallback& progress, int64_t* evaluations) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  const int u = model.num_free();
  const std::vector<std::string> names = model.free_names();
  FitOptions fit;
  fit.restarts = options.restarts;
  fit.seed = seed;
  fit.threads = threads;
  if (options.data_informed_starts) fit.extra_starts = DataInformedStarts(model);
  absl::StatusOr<FitResult> first =
      FitHyperparameters(model, FitObjective::kMaximumAPosteriori, fit, progress);
  if (!first.ok()) return first.status();
  *evaluations += first->evaluations;

  std::vector<Candidate> candidates;
  auto add_ends = [&](const FitResult& result, const std::string& round) {
    candidates.push_back({result.raw, result.objective_value, absl::StrCat(round, " winner")});
    for (size_t k = 0; k < result.start_ends.size(); ++k) {
      const FitResult::StartEnd& end = result.start_ends[k];
      if (!end.ok || end.value < result.objective_value - options.max_log_mass_gap) continue;
      candidates.push_back(
          {end.raw, end.value,
           absl::StrCat(round, " start ", k, " (", std::string(StartKindName(end.kind)),
                        end.origin.empty() ? "" : ": ", end.origin, ")")});
    }
  };
  add_ends(*first, "MAP fit");

  // Second round: period aliases and mirror images of the first round's optima, climbed by
  // L-BFGS as extra starts of one more fit (with one prior draw of a new seed).
  std::vector<StartPoint> second_starts;
  std::vector<int> period_index;
  const std::vector<HyperparameterInfo> free_parameters = model.free_parameters();
  for (int i = 0; i < u; ++i) {
    if (free_parameters[i].IsPeriod()) period_index.push_back(i);
  }
  std::vector<BlockSwap> swaps;
  if (options.mirror_modes) {
    int offset = 0;
    CollectBlockSwaps(kernel, offset, swaps);
  }
  // Full parameter index → free index (−1 when fixed), by name.
  absl::StatusOr<std::vector<HyperparameterInfo>> all =
      DescribeHyperparameters(kernel, HyperparameterSettings{});
  std::vector<int> free_of_full;
  if (all.ok()) {
    for (const HyperparameterInfo& info : *all) {
      const auto it = std::find(names.begin(), names.end(), info.name);
      free_of_full.push_back(it == names.end() ? -1 : static_cast<int>(it - names.begin()));
    }
  }
  for (const Candidate& c : candidates) {
    if (options.period_aliases) {
      for (int i : period_index) {
        const double period = Softplus(c.raw[i]);
        for (double factor : {2.0, 0.5}) {
          StartPoint start;
          start.raw = c.raw;
          start.raw[i] = InverseSoftplus(period * factor);
          start.kind = StartKind::kGiven;
          start.origin = absl::StrFormat("period alias %s×%g of %s", names[i], factor, c.origin);
          second_starts.push_back(std::move(start));
        }
      }
    }
    for (const BlockSwap& swap : swaps) {
      StartPoint start;
      start.raw = c.raw;
      bool swappable = true;
      for (int k = 0; k < swap.length; ++k) {
        const int a = free_of_full[swap.first_begin + k];
        const int b = free_of_full[swap.second_begin + k];
        if (a < 0 || b < 0) {
          swappable = false;  // a fixed parameter in one block: no exact mirror
          break;
        }
        std::swap(start.raw[a], start.raw[b]);
      }
      if (!swappable) continue;
      start.kind = StartKind::kGiven;
      start.origin = absl::StrCat("mirror of ", c.origin);
      second_starts.push_back(std::move(start));
    }
  }
  if (!second_starts.empty()) {
    FitOptions again = fit;
    again.restarts = 1;
    again.seed = seed + 1;
    again.extra_starts = std::move(second_starts);
    absl::StatusOr<FitResult> second =
        FitHyperparameters(model, FitObjective::kMaximumAPosteriori, again, progress);
    if (!second.ok()) return second.status();
    *evaluations += second->evaluations;
    add_ends(*second, "alias/mirror fit");
  }

  // Polish the candidates, best first, into distinct stationary maxima. Two points are the same
  // mode when one lies within 0.1 sd of the other under that mode's Laplace covariance.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.value > b.value; });
  std::vector<ProposalMode> modes;
  std::vector<Eigen::MatrixXd> precisions;
  auto same_as_known = [&](const Eigen::VectorXd& raw) {
    for (size_t m = 0; m < modes.size(); ++m) {
      const Eigen::VectorXd d = raw - modes[m].mean;
      if (d.dot(precisions[m] * d) < 0.01) return true;
    }
    return false;
  };
  const Eigen::VectorXd prior_sd = model.prior_sd();
  for (const Candidate& c : candidates) {
    if (same_as_known(c.raw)) continue;
    absl::StatusOr<LocalMaximum> top =
        PolishToLocalMaximum(model, FitObjective::kMaximumAPosteriori, c.raw, fit, progress);
    if (!top.ok()) {
      if (absl::IsFailedPrecondition(top.status())) continue;  // no Hessian there: skip
      return top.status();
    }
    *evaluations += top->evaluations;
    if (same_as_known(top->raw)) continue;
    ProposalMode mode;
    mode.mean = top->raw;
    mode.covariance = LaplaceCovariance(top->derivatives.hessian, prior_sd);
    mode.log_posterior = top->value;
    mode.log_laplace_mass = LogLaplaceMass(top->value, mode.covariance);
    mode.origin = c.origin;
    if (!std::isfinite(mode.log_laplace_mass)) continue;
    precisions.push_back(mode.covariance.inverse());
    modes.push_back(std::move(mode));
  }
  if (modes.empty()) {
    return absl::FailedPreconditionError(
        "mode search: no start reached a maximum of the posterior with a finite Hessian");
  }
  std::stable_sort(modes.begin(), modes.end(), [](const ProposalMode& a, const ProposalMode& b) {
    return a.log_laplace_mass > b.log_laplace_mass;
  });
  const double best = modes.front().log_laplace_mass;
  modes.erase(std::remove_if(modes.begin(), modes.end(),
                             [&](const ProposalMode& m) {
                               return m.log_laplace_mass < best - options.max_log_mass_gap;
                             }),
              modes.end());
  return modes;
}

absl::StatusOr<EvidenceResult> ComputeEvidence(const Dataset& data,
                                               const KernelExpr& given_kernel,
                                               const EvidenceOptions& options,
                                               const ProgressCallback& progress) {
  const auto start_time = std::chrono::steady_clock::now();
  GPSEL_RETURN_IF_ERROR(options.Validate());
  // BASE[*] as its per-column copies (core/kernel_expr.h), as ScoreKernel models it.
  GPSEL_ASSIGN_OR_RETURN(const KernelExpr kernel,
                         ExpandPerColumn(given_kernel, static_cast<int>(data.x.cols())));
  absl::StatusOr<PreparedModel> prepared =
      PrepareModel(data, kernel, options.standardize, options.scale_x, options.hyperparameters);
  if (!prepared.ok()) return prepared.status();
  const GpModel& gp = prepared->model;
  // Every call of the caller's callback goes through one mutex: the likelihood below polls it
  // from the samplers' worker threads, beside the samplers' own polls and reports.
  std::mutex progress_mutex;
  const ProgressCallback serialized =
      progress ? ProgressCallback([&](const Progress& p) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        return progress(p);
      })
               : ProgressCallback();
  // Each evaluation polls the cancellation between its Cholesky blocks (issue 33: at n = 8,759
  // one evaluation takes ~20 s, and a cancelled evidence job held its worker 46–53 s). A stop
  // seen there abandons the evaluation: its status, never a -inf value, goes to the sampler,
  // which ends the run with it. A covariance that is not positive definite is a real -inf.
  const StoppableLogLikelihood log_likelihood{
      [&gp, &serialized](const Eigen::VectorXd& raw) -> absl::StatusOr<double> {
        if (CoreObserver* observer = GetCoreObserver()) {
          observer->OnEvidenceLikelihoodCall(gp.num_free());
        }
        absl::Status stopped;
        absl::StatusOr<double> value =
            gp.LogLikelihood(raw, nullptr, internal::RecordingFirstStop(serialized, &stopped));
        if (!stopped.ok()) return stopped;
        return value.ok() ? *value : -kInf;
      }};

  EvidenceResult result;
  result.kernel = ToString(kernel);
  result.num_points = data.num_points();
  result.num_hyperparameters = gp.num_free();
  result.standardized = prepared->standardization.applied;
  result.standardization = prepared->standardization;
  result.parameter_names = gp.free_names();

  bool run_nested = options.method == EvidenceMethod::kNested;
  if (options.method != EvidenceMethod::kNested) {
    absl::StatusOr<std::vector<ProposalMode>> modes =
        FindPosteriorModes(gp, kernel, options.mode_search, options.importance.seed,
                           options.importance.threads, serialized,
                           &result.mode_search_evaluations);
    if (!modes.ok()) return modes.status();
    absl::StatusOr<ImportanceSamplingResult> importance = RunImportanceSampling(
        log_likelihood, gp.prior_mean(), gp.prior_sd(), *modes, options.importance, serialized);
    if (!importance.ok()) return importance.status();
    result.importance = *std::move(importance);
    result.likelihood_calls += result.mode_search_evaluations + result.importance->num_samples;
    result.method = EvidenceMethod::kImportance;
    result.log_evidence = result.importance->log_evidence;
    result.log_evidence_error = result.importance->log_evidence_error;
    if (options.method == EvidenceMethod::kImportance) {
      result.method_reason = "asked for";
    } else if (result.importance->reliable) {
      result.method_reason = absl::StrCat("auto: importance sampling passed its diagnostics (",
                                          result.importance->reliability, ")");
    } else {
      run_nested = true;
      result.method_reason = absl::StrCat("auto: importance sampling failed its diagnostics (",
                                          result.importance->reliability, ")");
    }
  } else {
    result.method_reason = "asked for";
  }
  if (run_nested) {
    absl::StatusOr<NestedSamplingResult> sampling;
    if (options.run_nested_runs && options.sampling.num_runs > 1) {
      const auto runs_start = std::chrono::steady_clock::now();
      absl::StatusOr<std::vector<NestedSamplingResult>> runs =
          options.run_nested_runs(options.sampling.num_runs, progress);
      if (!runs.ok()) return runs.status();
      if (static_cast<int>(runs->size()) != options.sampling.num_runs) {
        return absl::InternalError(absl::StrCat("nested sampling: ", runs->size(),
                                                " runs came back for ",
                                                options.sampling.num_runs));
      }
      sampling = MergeNestedSamplingRuns(*std::move(runs));
      if (sampling.ok()) {
        sampling->seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - runs_start).count();
      }
    } else {
      sampling = RunNestedSampling(log_likelihood, gp.prior_mean(), gp.prior_sd(),
                                   options.sampling, serialized);
    }
    if (!sampling.ok()) return sampling.status();
    result.sampling = *std::move(sampling);
    result.likelihood_calls += result.sampling->likelihood_calls;
    result.method = EvidenceMethod::kNested;
    result.log_evidence = result.sampling->log_evidence;
    result.log_evidence_error = result.sampling->log_evidence_error;
  }
  // The reported method's cap decides: auto's importance stage may have been capped and then
  // replaced by a nested run that finished.
  if (result.method == EvidenceMethod::kNested && result.sampling.has_value()) {
    result.partial = result.sampling->partial;
    result.partial_reason = result.sampling->partial_reason;
    result.log_evidence_truncation = result.sampling->log_evidence_truncation;
  } else if (result.importance.has_value()) {
    result.partial = result.importance->partial;
    result.partial_reason = result.importance->partial_reason;
  }
  if (result.partial) {
    result.partial_reason = absl::StrCat(std::string(EvidenceMethodName(result.method)),
                                         " sampling: ", result.partial_reason);
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  return result;
}

}  // namespace gpsel
