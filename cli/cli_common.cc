// Shared CLI pieces: command registry, error reporting, fit flags, JSON of scores, progress line.
#include "cli/cli_common.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gpsel::cli {

std::vector<CommandRegistration>& CommandRegistry() {
  static std::vector<CommandRegistration> registry;
  return registry;
}

CommandRegistrar::CommandRegistrar(std::string name, std::string description, CommandSetup setup) {
  CommandRegistry().push_back({std::move(name), std::move(description), std::move(setup)});
}

RemoteScoreFn& RemoteScoreHook() {
  static RemoteScoreFn hook;
  return hook;
}

RemoteEvidenceFn& RemoteEvidenceHook() {
  static RemoteEvidenceFn hook;
  return hook;
}

RemoteSearchFn& RemoteSearchHook() {
  static RemoteSearchFn hook;
  return hook;
}

RemoteSubmitEvidenceFn& RemoteSubmitEvidenceHook() {
  static RemoteSubmitEvidenceFn hook;
  return hook;
}

nlohmann::json EvidenceResultToJson(const EvidenceResult& result) {
  const NestedSamplingResult& s = result.sampling;
  nlohmann::json j;
  j["kernel"] = result.kernel;
  j["n"] = result.num_points;
  j["num_hyperparameters"] = result.num_hyperparameters;
  j["standardized"] = result.standardized;
  j["log_evidence"] = JsonNumber(s.log_evidence);
  j["log_evidence_error"] = JsonNumber(s.log_evidence_error);
  j["log_evidence_error_bootstrap"] = JsonNumber(s.log_evidence_error_bootstrap);
  j["information"] = JsonNumber(s.information);
  j["likelihood_calls"] = s.likelihood_calls;
  j["iterations"] = s.iterations;
  j["effective_sample_size"] = JsonNumber(s.effective_sample_size);
  j["num_live"] = s.num_live;
  j["num_batches"] = s.num_batches;
  j["partial"] = s.partial;
  if (s.partial) j["partial_reason"] = s.partial_reason;
  j["seconds"] = s.seconds;
  if (s.samples.rows() > 0) {
    nlohmann::json samples = nlohmann::json::array();
    for (Eigen::Index i = 0; i < s.samples.rows(); ++i) {
      nlohmann::json row = nlohmann::json::array();
      for (Eigen::Index c = 0; c < s.samples.cols(); ++c) row.push_back(s.samples(i, c));
      samples.push_back({{"raw", row},
                         {"log_weight", JsonNumber(s.log_weights(i))},
                         {"log_likelihood", JsonNumber(s.log_likelihoods(i))}});
    }
    j["samples"] = {{"parameters", result.parameter_names}, {"points", samples}};
  }
  return j;
}

int ReportError(const absl::Status& status) {
  std::cerr << "gpsel: " << status.message() << "\n";
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

void AddDataFlag(CLI::App& sub, FitFlags& flags) {
  sub.add_option("--data", flags.data_path, "CSV file: optional header, inputs x..., target y last")
      ->required();
}

void AddFitFlags(CLI::App& sub, FitFlags& flags) {
  sub.add_option("--restarts", flags.restarts, "random restarts drawn from the prior")
      ->capture_default_str();
  sub.add_option("--seed", flags.seed, "random seed (same seed, same numbers)")
      ->capture_default_str();
  sub.add_flag("--no-standardize", flags.no_standardize,
               "fit y as given (default: standardise y to mean 0, sd 1)");
  sub.add_option("--prior", flags.priors,
                 "override a prior on a raw parameter: NAME=MEAN,SD (e.g. SE.lengthscale=0,1)");
  sub.add_option("--fix", flags.fixed,
                 "fix a parameter at a natural value: NAME=VALUE (e.g. PER.period=1)");
  sub.add_option("--scale-x", flags.scale_x,
                 "divide x by a factor before modelling: none (default: the paper's priors on x "
                 "as given), auto (the dominant period of y, or range/10), or a number; fitted "
                 "values are reported in x's own units")
      ->capture_default_str();
  sub.add_flag("--json", flags.json, "print JSON instead of a table");
}

absl::StatusOr<KernelExpr> ParseSingleKernelFlag(const FitFlags& flags) {
  if (flags.kernels.size() != 1) {
    return absl::InvalidArgumentError("--kernel: give exactly one kernel");
  }
  return ParseKernel(flags.kernels[0]);
}

absl::StatusOr<XScaling> ParseScaleXFlag(const FitFlags& flags) {
  return ParseXScaling(flags.scale_x, "--scale-x");
}

absl::StatusOr<HyperparameterSettings> ParseHyperparameterFlags(const FitFlags& flags) {
  HyperparameterSettings settings;
  for (const std::string& entry : flags.priors) {
    std::vector<std::string> name_value = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    std::vector<std::string> numbers;
    if (name_value.size() == 2) numbers = absl::StrSplit(name_value[1], ',');
    NormalPrior prior;
    if (numbers.size() != 2 || !absl::SimpleAtod(numbers[0], &prior.mean) ||
        !absl::SimpleAtod(numbers[1], &prior.sd)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prior '", entry, "': expected NAME=MEAN,SD"));
    }
    settings.prior_overrides[name_value[0]] = prior;
  }
  for (const std::string& entry : flags.fixed) {
    std::vector<std::string> name_value = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    double value = 0;
    if (name_value.size() != 2 || !absl::SimpleAtod(name_value[1], &value)) {
      return absl::InvalidArgumentError(absl::StrCat("--fix '", entry, "': expected NAME=VALUE"));
    }
    settings.fixed_values[name_value[0]] = value;
  }
  if (absl::Status s = settings.Validate(); !s.ok()) return s;
  return settings;
}

nlohmann::json JsonNumber(double value) {
  if (!std::isfinite(value)) return nullptr;
  return value;
}

namespace {
nlohmann::json FitToJson(const FitResult& fit) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [name, value] : fit.values) values[name] = JsonNumber(value);
  nlohmann::json j;
  j["values"] = values;
  j["log_likelihood"] = JsonNumber(fit.log_likelihood);
  j["log_prior"] = JsonNumber(fit.log_prior);
  j["objective_value"] = JsonNumber(fit.objective_value);
  j["starts"] = fit.starts;
  j["starts_at_best"] = fit.starts_at_best;
  j["best_start_kind"] = std::string(StartKindName(fit.best_start_kind));
  j["best_start_origin"] = fit.best_start_origin;
  return j;
}
}  // namespace

nlohmann::json KernelScoreToJson(const KernelScore& score) {
  nlohmann::json j;
  j["kernel"] = score.kernel;
  j["num_hyperparameters"] = score.num_hyperparameters;
  nlohmann::json metrics = nlohmann::json::object();
  for (Metric m : AllMetrics()) {
    const std::string name(MetricName(m));
    if (auto it = score.metrics.find(name); it != score.metrics.end()) {
      metrics[name] = JsonNumber(it->second);
    } else if (score.undefined_metrics.count(name)) {
      metrics[name] = nullptr;  // undefined (reason in "undefined_metrics")
    }
  }
  j["metrics"] = metrics;
  if (!score.undefined_metrics.empty()) j["undefined_metrics"] = score.undefined_metrics;
  if (!score.laplace_r.empty()) {
    nlohmann::json extra = nlohmann::json::array();
    for (const auto& [r, value] : score.laplace_r) extra.push_back({{"r", r}, {"value", value}});
    j["laplace_r"] = extra;
  }
  if (score.mll_fit) j["mll_fit"] = FitToJson(*score.mll_fit);
  if (score.map_fit) j["map_fit"] = FitToJson(*score.map_fit);
  if (score.laplace) {
    const LaplaceDiagnostics& lap = *score.laplace;
    nlohmann::json eigenvalues = nlohmann::json::array();
    for (Eigen::Index i = 0; i < lap.eigenvalues.size(); ++i) {
      eigenvalues.push_back(JsonNumber(lap.eigenvalues(i)));
    }
    j["hessian_eigenvalues"] = eigenvalues;
    nlohmann::json clamped = nlohmann::json::object();
    for (const auto& [metric, directions] : lap.clamped) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& d : directions) {
        nlohmann::json loadings = nlohmann::json::object();
        for (const auto& [name, loading] : d.loadings) loadings[name] = loading;
        list.push_back({{"eigenvalue", JsonNumber(d.eigenvalue)}, {"loadings", loadings}});
      }
      clamped[metric] = list;
    }
    j["clamped_directions"] = clamped;
    if (lap.covariance.size() > 0) {
      nlohmann::json rows = nlohmann::json::array();
      for (Eigen::Index r = 0; r < lap.covariance.rows(); ++r) {
        nlohmann::json row = nlohmann::json::array();
        for (Eigen::Index c = 0; c < lap.covariance.cols(); ++c) {
          row.push_back(JsonNumber(lap.covariance(r, c)));
        }
        rows.push_back(row);
      }
      j["laplace_covariance"] = {{"parameters", score.parameter_names}, {"matrix", rows}};
    }
  }
  j["x_scale"] = score.x_scale;
  j["x_scale_reason"] = score.x_scale_reason;
  j["warnings"] = score.warnings;
  j["seconds"] = score.seconds;
  return j;
}

bool StderrIsTerminal() { return isatty(fileno(stderr)) != 0; }

TerminalProgress::TerminalProgress(bool enabled) : enabled_(enabled) {}
TerminalProgress::~TerminalProgress() { Finish(); }

ProgressCallback TerminalProgress::callback() {
  if (!enabled_) return nullptr;
  return [this](const Progress& p) {
    constexpr int kWidth = 30;
    const double fraction = std::clamp(p.fraction, 0.0, 1.0);
    const int filled = static_cast<int>(fraction * kWidth + 0.5);
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::string message = p.message.substr(0, 60);
    std::fprintf(stderr, "\r\033[K[%s] %3.0f%% %s %s", bar.c_str(), fraction * 100.0,
                 p.stage.c_str(), message.c_str());
    std::fflush(stderr);
    drawn_ = true;
    return absl::OkStatus();
  };
}

void TerminalProgress::Finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace gpsel::cli
