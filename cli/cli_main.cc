// `gpsel`: the command-line tool. Subcommands register themselves (see cli_common.h); this file
// builds the CLI11 app from the registry and dispatches.
#include <iostream>
#include <memory>

#include "cli/cli_common.h"
#include "core/linalg.h"

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  CLI::App app{"gpsel: which Gaussian-process kernel does your data support?\n"
               "Scores kernels with MLL, MAP, AIC, BIC and the Laplace metrics of the paper, "
               "searches kernel structure and computes the evidence by nested sampling."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpsel 0.1.0");
  std::function<int()> runner;
  auto& registry = gpsel::cli::CommandRegistry();
  std::vector<std::pair<CLI::App*, std::function<int()>>> commands;
  for (const auto& command : registry) {
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
