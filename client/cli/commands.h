// The commands of `gpsel`, listed once in cli_main.cc in the order `gpsel --help` shows them.
// Each Setup* adds its options to the subcommand and returns the function that runs it; that
// function returns the exit code (cli_common.h).
#ifndef GPSEL_CLI_COMMANDS_H_
#define GPSEL_CLI_COMMANDS_H_

#include <functional>

#include <CLI/CLI.hpp>

namespace gpsel::cli {

using CommandRunner = std::function<int()>;

CommandRunner SetupScore(CLI::App& sub);     // cli_score.cc
CommandRunner SetupSearch(CLI::App& sub);    // cli_search.cc
CommandRunner SetupEvidence(CLI::App& sub);  // cli_evidence.cc
CommandRunner SetupPredict(CLI::App& sub);   // cli_predict.cc
CommandRunner SetupPriors(CLI::App& sub);    // cli_priors.cc
CommandRunner SetupReport(CLI::App& sub);    // cli_report.cc
CommandRunner SetupJobs(CLI::App& sub);      // cli_jobs.cc
CommandRunner SetupHealth(CLI::App& sub);    // cli_health.cc

}  // namespace gpsel::cli

#endif  // GPSEL_CLI_COMMANDS_H_
