// `gpsel`: the command-line tool. Builds the CLI11 app from the command list below and runs the
// one subcommand given.
#include <functional>
#include <utility>
#include <vector>

#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"
#include "gpsel/core/linalg.h"

namespace {

struct Command {
  const char* name;
  const char* description;
  gpsel::cli::CommandRunner (*setup)(CLI::App&);
};

constexpr Command kCommands[] = {
    {"score", "fit kernels to a dataset and report MLL, MAP, AIC, BIC and Laplace metrics",
     gpsel::cli::SetupScore},
    {"search", "compositional kernel search: build the best kernel from base kernels with + and *",
     gpsel::cli::SetupSearch},
    {"evidence", "log model evidence of a kernel by (dynamic) nested sampling",
     gpsel::cli::SetupEvidence},
    {"predict", "posterior mean and variance of a kernel's GP at new inputs",
     gpsel::cli::SetupPredict},
    {"priors",
     "print every prior of a kernel in natural units with its 95% interval (in x's units; with "
     "--data, beside the data's own scales)",
     gpsel::cli::SetupPriors},
    {"report",
     "pictures and words for the kernel the data supports: report.html and SVG/PNG figures "
     "(fit, components, search, metrics, Laplace vs samples, residuals)",
     gpsel::cli::SetupReport},
    {"jobs", "list, show, wait for or cancel jobs on a gpsel-server", gpsel::cli::SetupJobs},
    {"health", "check a gpsel-server (exit 0 only when SERVING)", gpsel::cli::SetupHealth},
};

}  // namespace

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  CLI::App app{"gpsel: which Gaussian-process kernel does your data support?\n"
               "Scores kernels with MLL, MAP, AIC, BIC and the Laplace metrics of the paper, "
               "searches kernel structure and computes the evidence by nested sampling."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpsel 0.1.0");
  std::vector<std::pair<CLI::App*, gpsel::cli::CommandRunner>> commands;
  for (const Command& command : kCommands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    commands.emplace_back(sub, command.setup(*sub));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? gpsel::cli::kExitOk : gpsel::cli::kExitBadInput;
  }
  for (auto& [sub, run] : commands) {
    if (sub->parsed()) return run();
  }
  return gpsel::cli::kExitBadInput;
}
