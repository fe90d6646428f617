// Runs the `gpsel` binary of this build (GPSEL_CLI_PATH) as a user would, for the CLI tests:
// its exit code, stdout and stderr.
#ifndef GPSEL_TESTS_CLIENT_CLI_RUN_GPSEL_H_
#define GPSEL_TESTS_CLIENT_CLI_RUN_GPSEL_H_

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace gpsel::testing_cli {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `gpsel ARGS` through the shell (ARGS may quote), stderr to a file of this process (ctest runs
// the parameterised cases in parallel processes).
inline CliRun RunGpsel(const std::string& args) {
  const std::string err_path =
      ::testing::TempDir() + "/gpsel_stderr_" + std::to_string(getpid()) + ".txt";
  const std::string command = std::string(GPSEL_CLI_PATH) + " " + args + " 2>" + err_path;
  CliRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof buffer, pipe)) > 0) run.out.append(buffer, got);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  run.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  return run;
}

}  // namespace gpsel::testing_cli

#endif  // GPSEL_TESTS_CLIENT_CLI_RUN_GPSEL_H_
