// Honest answers through the `gpsel` binary (issue 27): a capped evidence run is partial in its
// headline, its JSON and its exit code (3, client/cli/cli_common.h kExitPartial).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/client/cli/run_gpsel.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using ::gpsel::testing_cli::CliRun;
using ::gpsel::testing_cli::RunGpsel;

const std::string kNile = std::string(GPSEL_DATA_DIR) + "/nile.csv";

// The shape: a nested-sampling run stopped by a cap printed a log Z nats off with exit
// code 0 and "partial" only in a detail line.
TEST(CliHonestTest, CappedEvidenceIsPartialInHeadlineJsonAndExitCode) {
  const std::string args = "evidence --data " + kNile + " --kernel 'C*SE' --max-calls 400";
  CliRun text = RunGpsel(args);
  EXPECT_EQ(text.exit_code, 3) << text.out << text.err;
  const std::string headline = text.out.substr(0, text.out.find("likelihood calls"));
  EXPECT_THAT(headline, HasSubstr("PARTIAL, NOT FINAL"));
  EXPECT_THAT(headline, HasSubstr("max_likelihood_calls (400) reached"));
  EXPECT_THAT(headline, HasSubstr("remaining-mass term"));

  CliRun json = RunGpsel(args + " --json");
  EXPECT_EQ(json.exit_code, 3) << json.err;
  EXPECT_THAT(json.err, HasSubstr("partial result"));
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["partial"], true);
  EXPECT_THAT(j["partial_reason"].get<std::string>(), HasSubstr("nested sampling: "));
  const double truncation = j["log_evidence_truncation"].get<double>();
  EXPECT_GT(truncation, 0.0);
  EXPECT_GE(j["log_evidence_error"].get<double>(), truncation);

  CliRun importance = RunGpsel("evidence --data " + kNile +
                               " --kernel 'C*SE' --method importance --max-samples 2000 "
                               "--target-error 0.0001");
  EXPECT_EQ(importance.exit_code, 3) << importance.out << importance.err;
  EXPECT_THAT(importance.out, HasSubstr("PARTIAL: importance sampling: max_samples (2000)"));
}

TEST(CliHonestTest, FinishedEvidenceExitsZeroWithoutPartial) {
  CliRun run = RunGpsel("evidence --data " + kNile + " --kernel 'C*SE' --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["partial"], false);
  EXPECT_EQ(j["log_evidence_truncation"].get<double>(), 0.0);
  EXPECT_THAT(run.err, Not(HasSubstr("partial")));
}

// The report's footer command can be copied into a shell and run: a kernel with '*' is quoted;
// a finished evidence run is not called partial.
TEST(CliHonestTest, ReportFooterIsShellQuoted) {
  const std::string out = testing::TempDir() + "/report_honest_" + std::to_string(getpid());
  CliRun run = RunGpsel("report --data " + kNile + " --kernel 'C*SE' --restarts 2 --evidence "
                        "--nlive 60 --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::ifstream html(out + "/report.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  const size_t made_by = page.find("Made by <code>");
  ASSERT_NE(made_by, std::string::npos);
  const std::string footer = page.substr(made_by, page.find("</code>", made_by) - made_by);
  EXPECT_THAT(footer, HasSubstr("--kernel 'C*SE'"));
  EXPECT_THAT(footer, HasSubstr("--restarts 2"));  // plain words stay unquoted
  EXPECT_EQ(page.find("PARTIAL"), std::string::npos);
}

}  // namespace
