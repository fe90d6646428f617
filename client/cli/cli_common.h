// Shared pieces of the `gpsel` command-line tool: exit codes, error reporting, loading data
// (a file or '-' for stdin), the fit flags, JSON output (the protobuf JSON mapping of the RPC
// response messages, so the CLI and gRPC speak one schema), and terminal progress display.
// The commands themselves are in cli/cli_<name>.cc and listed in client/cli/commands.h.
#ifndef GPSEL_CLI_CLI_COMMON_H_
#define GPSEL_CLI_CLI_COMMON_H_

#include <google/protobuf/message.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/memory_estimate.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/progress_clock.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/core/time_estimate.h"
#include "gpsel/v1/job.pb.h"

namespace gpsel::cli {

// Exit codes: 0 success, 1 runtime failure (server unreachable, numerics failed),
// 2 bad usage or bad input (unparsable CSV/expression, invalid option), 3 a partial result:
// printed in full, but a time, call or sample cap (--max-seconds, --max-calls, --max-samples)
// stopped it before its stopping rule was met, so it is not a final answer (evidence, and
// `jobs get/wait` of such an evidence job).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitPartial = 3;

// Prints "gpsel: <message>" to stderr and returns the exit code for the status
// (INVALID_ARGUMENT/NOT_FOUND of an input → 2, anything else → 1).
int ReportError(const absl::Status& status);

// How --data is read (core/dataset.h CsvOptions), as typed.
struct CsvFlags {
  std::vector<std::string> x_columns;  // --x NAME|INDEX…
  std::string y_column;                // --y NAME|INDEX
  std::string delimiter = "auto";      // --delimiter auto|,|;|tab
  std::string missing = "error";       // --missing error|drop
  std::string x_unit = "years";        // --x-unit years|days (ISO dates in x)
};

// Options shared by commands that fit models.
struct FitFlags {
  std::string data_path;
  CsvFlags csv;
  std::vector<std::string> kernels;
  int restarts = 5;
  int max_draws_factor = 4;
  uint64_t seed = 0;
  bool no_standardize = false;
  bool json = false;
  std::vector<std::string> priors;  // NAME=MEAN,SD
  std::vector<std::string> fixed;   // NAME=VALUE
  std::string scale_x = "none";     // none | auto | FACTOR
  int threads = 0;                  // --threads, where the command has it; 0: one per core
  std::string approx = "exact";     // --approx exact | sparse | auto (core/approx.h)
  int inducing = 0;                 // --inducing M (0: chosen by the data)
};
void AddDataFlag(CLI::App& sub, FitFlags& flags);  // --data FILE, or '-' for stdin, + AddCsvFlags
void AddCsvFlags(CLI::App& sub, FitFlags& flags);  // --x --y --delimiter --missing --x-unit
// The CsvOptions of the CSV flags; INVALID_ARGUMENT naming the flag.
absl::StatusOr<CsvOptions> ParseCsvFlags(const FitFlags& flags);
// "gpsel: <what>: <note>" on stderr for each CsvReadReport note (dates, separator, dropped rows).
void PrintCsvNotes(const std::string& what, const CsvReadReport& report);
// The dataset of --data (stdin for '-'), read with the CSV flags; says what it did on stderr.
absl::StatusOr<Dataset> LoadDataFlag(const FitFlags& flags, const DatasetLimits& limits = {});
// The limits to load data with: core's defaults (the server's defaults too) in-process; up to
// the ceiling with --server, whose own --max-points then decides.
// With `fit` and --approx sparse or auto: up to kSparseMaxPoints (core/approx.h).
DatasetLimits CliDatasetLimits(bool remote, const FitFlags* fit = nullptr);
// The text of a file named by a flag, or of stdin for '-'; NOT_FOUND naming the flag.
absl::StatusOr<std::string> ReadFlagFile(const std::string& path, const std::string& flag);
void AddFitFlags(CLI::App& sub,
                 FitFlags& flags);  // --restarts --seed --no-standardize --prior --fix --json --approx --inducing
// Builds HyperparameterSettings from --prior/--fix; INVALID_ARGUMENT naming the bad entry.
absl::StatusOr<HyperparameterSettings> ParseHyperparameterFlags(const FitFlags& flags);
// The one --kernel of a command that takes exactly one; INVALID_ARGUMENT otherwise.
absl::StatusOr<KernelExpr> ParseSingleKernelFlag(const FitFlags& flags);
// Every --kernel of a command that takes several, in order; the first bad one's error.
absl::StatusOr<std::vector<KernelExpr>> ParseKernelFlags(const FitFlags& flags);
// The x scaling of --scale-x; INVALID_ARGUMENT naming the flag.
absl::StatusOr<XScaling> ParseScaleXFlag(const FitFlags& flags);

// --threads N, with the command's own words for what runs in parallel; 0 (the default) is one
// per core. No result depends on it.
void AddThreadsFlag(CLI::App& sub, FitFlags& flags, const std::string& what);
// --threads as a count: N, or one per core (at most 256) for 0.
int ThreadsOrOnePerCore(int threads);

// The one place the fit flags become core's options (a new fit or score option is added here
// and in AddFitFlags): --restarts --seed --threads --no-standardize --prior --fix --scale-x.
// Validated; INVALID_ARGUMENT naming the flag.
absl::StatusOr<ScoreOptions> ScoreOptionsFromFlags(const FitFlags& flags);

// The search flags of `gpsel search` and `gpsel report --search`.
struct SearchFlags {
  std::string base = "SE,LIN,MAT32";
  std::string operators = "+,*";
  int depth = 3;
  std::string metric = "lap0";
  int beam = 1;
  bool warm_start = true;
  bool score_kept = false;
};
// --base --operators --depth --metric --beam --warm-start/--no-warm-start, and --score-kept
// when asked.
void AddSearchFlags(CLI::App& sub, SearchFlags& flags, bool with_score_kept);
// The one place the search flags become core's options: candidates fitted in parallel on
// --threads, each candidate's fit on one thread; the score options from ScoreOptionsFromFlags.
// Validated; INVALID_ARGUMENT naming the flag.
absl::StatusOr<SearchOptions> SearchOptionsFromFlags(const SearchFlags& search,
                                                     const FitFlags& fit);

// Prints `message` in the protobuf JSON mapping with the .proto field names (snake_case), every
// field present, indented: what `--json` prints for every command.
void PrintJson(const google::protobuf::Message& message);

// What --detach prints: the Submit…Response (with --json) or "submitted jobs/{id}".
void PrintSubmitted(const google::protobuf::Message& response, const v1::Job& job, bool json);

// Before long work: "gpsel: estimated 3:05 and 1.2 GB (...)" on stderr when the time estimate
// exceeds kAnnounceSeconds (never on stdout, so --json output stays clean).
inline constexpr double kAnnounceSeconds = 5.0;
void AnnounceEstimate(const TimeEstimate& time, const MemoryEstimate& memory, bool remote);

// A progress line on stderr when stderr is a terminal (no output otherwise): the bar, the
// percentage, the elapsed time and, once core/progress_clock.h can tell, the time left of the
// current phase, then the stage and its message.
class TerminalProgress {
 public:
  explicit TerminalProgress(bool enabled);
  ~TerminalProgress();
  ProgressCallback callback();
  void Finish();

 private:
  bool enabled_;
  bool drawn_ = false;
  ProgressClock clock_;
};
bool StderrIsTerminal();

}  // namespace gpsel::cli

#endif  // GPSEL_CLI_CLI_COMMON_H_
