// Shared pieces of the `gpsel` command-line tool: command registration, exit codes, loading the
// dataset, JSON forms of core results, and terminal progress display.
//
// Each subcommand lives in its own client/cli_<name>.cc and registers itself:
//   GPSEL_REGISTER_COMMAND(score, [](CLI::App& app) { ... return subcommand_runner; });
#ifndef GPSEL_CLI_CLI_COMMON_H_
#define GPSEL_CLI_CLI_COMMON_H_

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/dataset.h"
#include "core/evidence.h"
#include "core/kernel_expr.h"
#include "core/progress.h"
#include "core/score.h"
#include "core/search.h"

namespace gpsel::cli {

// Exit codes: 0 success, 1 runtime failure (server unreachable, numerics failed),
// 2 bad usage or bad input (unparsable CSV/expression, invalid option).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

// A command adds its options to `sub` and returns the function that runs it (returns the exit code).
using CommandSetup = std::function<std::function<int()>(CLI::App& sub)>;
struct CommandRegistration {
  std::string name;
  std::string description;
  CommandSetup setup;
};
std::vector<CommandRegistration>& CommandRegistry();
struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description, CommandSetup setup);
};
#define GPSEL_REGISTER_COMMAND(ident, name, description, setup) \
  static ::gpsel::cli::CommandRegistrar gpsel_command_registrar_##ident(name, description, setup)

// Prints "gpsel: <message>" to stderr and returns the exit code for the status
// (INVALID_ARGUMENT/NOT_FOUND of an input → 2, anything else → 1).
int ReportError(const absl::Status& status);

// Options shared by commands that fit models.
struct FitFlags {
  std::string data_path;
  std::vector<std::string> kernels;
  int restarts = 5;
  uint64_t seed = 0;
  bool no_standardize = false;
  bool json = false;
  std::vector<std::string> priors;  // NAME=MEAN,SD
  std::vector<std::string> fixed;   // NAME=VALUE
  std::string scale_x = "none";     // none | auto | FACTOR
  std::string server;               // HOST:PORT: run on a gpsel-server instead of in-process
};
void AddDataFlag(CLI::App& sub, FitFlags& flags);
void AddFitFlags(CLI::App& sub, FitFlags& flags);  // --restarts --seed --no-standardize --prior --fix --json
// Builds HyperparameterSettings from --prior/--fix; INVALID_ARGUMENT naming the bad entry.
absl::StatusOr<HyperparameterSettings> ParseHyperparameterFlags(const FitFlags& flags);
// The one --kernel of a command that takes exactly one; INVALID_ARGUMENT otherwise.
absl::StatusOr<KernelExpr> ParseSingleKernelFlag(const FitFlags& flags);
// The x scaling of --scale-x; INVALID_ARGUMENT naming the flag.
absl::StatusOr<XScaling> ParseScaleXFlag(const FitFlags& flags);

// Remote execution of `score` on a gpsel-server, installed by the service part of the CLI
// (cli_remote.cc) when gpsel is built with gRPC; empty otherwise. Kernels are canonical.
using RemoteScoreFn = std::function<absl::StatusOr<std::vector<KernelScore>>(
    const std::string& server, const Dataset& data, const std::vector<KernelExpr>& kernels,
    const ScoreOptions& options)>;
RemoteScoreFn& RemoteScoreHook();

// Remote `evidence`: submit a job and follow it to the end (progress through the callback) ...
using RemoteEvidenceFn = std::function<absl::StatusOr<EvidenceResult>(
    const std::string& server, const Dataset& data, const KernelExpr& kernel,
    const EvidenceOptions& options, const ProgressCallback& progress)>;
RemoteEvidenceFn& RemoteEvidenceHook();
// ... or only submit it (--detach) and return the job id.
using RemoteSubmitEvidenceFn = std::function<absl::StatusOr<std::string>(
    const std::string& server, const Dataset& data, const KernelExpr& kernel,
    const EvidenceOptions& options)>;
RemoteSubmitEvidenceFn& RemoteSubmitEvidenceHook();

// Remote `search`: runs the search on a gpsel-server, progress streamed through the callback.
#define GPSEL_REMOTE_SEARCH_HOOK 1
using RemoteSearchFn = std::function<absl::StatusOr<SearchResult>(
    const std::string& server, const Dataset& data, const SearchOptions& options,
    const ProgressCallback& progress)>;
RemoteSearchFn& RemoteSearchHook();

// JSON of an evidence result as documented for `gpsel evidence --json` (and `jobs get --json`'s
// "result"): log_evidence, log_evidence_error, likelihood_calls, iterations, ...
nlohmann::json EvidenceResultToJson(const EvidenceResult& result);

// JSON of a score as documented for `gpsel score --json`.
nlohmann::json KernelScoreToJson(const KernelScore& score);
// A JSON number, or null for a non-finite value (JSON has no NaN/Inf).
nlohmann::json JsonNumber(double value);

// A progress line on stderr when stderr is a terminal (no output otherwise).
class TerminalProgress {
 public:
  explicit TerminalProgress(bool enabled);
  ~TerminalProgress();
  ProgressCallback callback();
  void Finish();
 private:
  bool enabled_;
  bool drawn_ = false;
};
bool StderrIsTerminal();

}  // namespace gpsel::cli

#endif  // GPSEL_CLI_CLI_COMMON_H_
