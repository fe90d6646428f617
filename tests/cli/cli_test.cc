// End-to-end tests of the `gpsel` binary in-process mode: exit codes, messages, JSON shape and
// the paper's numbers through the CLI.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CliRun RunGpsel(const std::string& args) {
  // One file per process: ctest runs the parameterised cases in parallel processes.
  const std::string err_path =
      testing::TempDir() + "/gpsel_stderr_" + std::to_string(getpid()) + ".txt";
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

std::string WriteTemp(const std::string& name, const std::string& content) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  return path;
}

const std::string kExample = std::string(GPSEL_DATA_DIR) + "/interpretable_linear.csv";

TEST(CliTest, ScoreJsonReproducesThePaperExample) {
  CliRun run = RunGpsel("score --data " + kExample + " --kernel SE --no-standardize --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["n"], 10);
  EXPECT_EQ(j["standardized"], false);
  ASSERT_EQ(j["results"].size(), 1u);
  const auto& r = j["results"][0];
  EXPECT_EQ(r["kernel"], "SE");
  EXPECT_EQ(r["num_hyperparameters"], 2);
  EXPECT_NEAR(r["metrics"]["mll"].get<double>(), -5.287, 0.005);
  EXPECT_NEAR(r["metrics"]["map"].get<double>(), -9.174, 0.005);
  EXPECT_NEAR(r["metrics"]["aic"].get<double>(), -7.287, 0.005);
  EXPECT_NEAR(r["metrics"]["bic"].get<double>(), -7.590, 0.005);
  EXPECT_NEAR(r["metrics"]["lap"].get<double>(), -8.144, 0.005);
  EXPECT_NEAR(r["metrics"]["lap0"].get<double>(), -9.174, 0.005);
  EXPECT_NEAR(r["metrics"]["lap_aic"].get<double>(), -11.174, 0.005);
  EXPECT_NEAR(r["metrics"]["lap_bic"].get<double>(), -13.779, 0.005);
  EXPECT_NEAR(r["map_fit"]["values"]["SE.lengthscale"].get<double>(), 0.975, 0.005);
  EXPECT_GT(r["mll_fit"]["values"]["noise"].get<double>(), 1e-4);
  ASSERT_EQ(r["hessian_eigenvalues"].size(), 2u);
  EXPECT_NEAR(r["hessian_eigenvalues"][0].get<double>(), 1.346, 0.005);
  EXPECT_NEAR(r["hessian_eigenvalues"][1].get<double>(), 3.741, 0.005);
}

const std::string kSunspots = std::string(GPSEL_DATA_DIR) + "/sunspots_yearly.csv";

// The fit's sureness in JSON, and warnings on stderr only (stdout stays parseable JSON).
TEST(CliTest, ScoreJsonCarriesFitDetailsAndWarningsGoToStderr) {
  CliRun run = RunGpsel("score --data " + kSunspots + " --kernel 'C*PER*SE' --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  const auto& r = j["results"][0];
  for (const char* fit : {"mll_fit", "map_fit"}) {
    EXPECT_TRUE(r[fit].contains("log_likelihood")) << fit;
    EXPECT_TRUE(r[fit].contains("log_prior")) << fit;
    EXPECT_GE(r[fit]["starts_at_best"].get<int>(), 1) << fit;
    // 5 prior draws, and the 2 data-informed starts in the MLL fit.
    EXPECT_GE(r[fit]["starts"].get<int>(), std::string(fit) == "mll_fit" ? 7 : 5) << fit;
    EXPECT_THAT(r[fit]["best_start_kind"].get<std::string>(),
                testing::AnyOf("prior", "data", "nested", "cross", "given"));
  }
  EXPECT_EQ(r["x_scale"].get<double>(), 1.0);
  // x in years: the MLL period (about 10.5) is far outside the period prior.
  bool warned = false;
  for (const auto& w : r["warnings"]) {
    warned = warned || w.get<std::string>().find("PER.period") != std::string::npos;
  }
  EXPECT_TRUE(warned) << r["warnings"].dump();
  EXPECT_THAT(run.err, testing::HasSubstr("gpsel: warning: C*PER*SE: MLL fit: PER.period"));
  EXPECT_THAT(run.err, testing::HasSubstr("--scale-x"));
}

TEST(CliTest, ScaleXAutoReportsValuesInTheFilesUnits) {
  CliRun run = RunGpsel("score --data " + kSunspots +
                        " --kernel 'C*PER*SE' --metrics mll,map --scale-x auto --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  const auto& r = j["results"][0];
  EXPECT_GT(r["x_scale"].get<double>(), 9.0);
  EXPECT_THAT(r["x_scale_reason"].get<std::string>(), testing::HasSubstr("auto"));
  EXPECT_NEAR(r["map_fit"]["values"]["PER.period"].get<double>(), 10.5, 1.0);

  CliRun bad = RunGpsel("score --data " + kSunspots + " --kernel SE --scale-x -3");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, testing::HasSubstr("--scale-x"));
}

TEST(CliTest, PriorsPrintsNaturalUnitsAndFlagsAPeriodOutOfReach) {
  CliRun run = RunGpsel("priors --kernel 'C*PER*SE' --data " + kSunspots);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, testing::HasSubstr("PER.period"));
  EXPECT_THAT(run.out, testing::HasSubstr("95% interval"));
  EXPECT_THAT(run.out, testing::HasSubstr("note: y's strongest period"));
  CliRun json = RunGpsel("priors --kernel PER --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json j = nlohmann::json::parse(json.out);
  // softplus(0.65 ± 1.96) for the period: an independent closed form.
  auto softplus = [](double r) { return std::log1p(std::exp(r)); };
  bool seen = false;
  for (const auto& p : j["priors"]) {
    if (p["name"] != "PER.period") continue;
    seen = true;
    EXPECT_NEAR(p["median"].get<double>(), softplus(0.65), 1e-12);
    EXPECT_NEAR(p["lower95"].get<double>(), softplus(0.65 - 1.96), 1e-12);
    EXPECT_NEAR(p["upper95"].get<double>(), softplus(0.65 + 1.96), 1e-12);
  }
  EXPECT_TRUE(seen);
  // Auto scaling puts the cycle inside the prior: no note.
  CliRun scaled = RunGpsel("priors --kernel PER --scale-x auto --data " + kSunspots);
  ASSERT_EQ(scaled.exit_code, 0) << scaled.err;
  EXPECT_THAT(scaled.out, testing::Not(testing::HasSubstr("note:")));
  EXPECT_EQ(RunGpsel("priors --kernel PER --scale-x auto").exit_code, 2);
}

TEST(CliTest, HumanTableMarksTheBestPerColumnAndSaysStandardised) {
  CliRun run = RunGpsel("score --data " + kExample + " --kernel SE --kernel LIN --metrics mll,lap0");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, testing::HasSubstr("kernel"));
  EXPECT_THAT(run.out, testing::HasSubstr("lap0"));
  EXPECT_THAT(run.out, testing::HasSubstr("*"));
  EXPECT_THAT(run.out, testing::HasSubstr("y standardised"));
}

TEST(CliTest, SameSeedSameJson) {
  const std::string args = "score --data " + kExample + " --kernel SE+LIN --seed 7 --json";
  CliRun a = RunGpsel(args), b = RunGpsel(args);
  ASSERT_EQ(a.exit_code, 0);
  nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  ja["results"][0].erase("seconds");
  jb["results"][0].erase("seconds");
  EXPECT_EQ(ja, jb);
}

struct BadInputCase {
  std::string name;
  std::string csv;         // empty: use the example file
  std::string extra_args;  // appended
  std::string message;     // expected substring of stderr
};

class CliBadInputTest : public testing::TestWithParam<BadInputCase> {};

TEST_P(CliBadInputTest, ExitsWithCodeTwoAndAClearMessage) {
  const BadInputCase& c = GetParam();
  const std::string data = c.csv.empty() ? kExample : WriteTemp(c.name + ".csv", c.csv);
  CliRun run = RunGpsel("score --data " + data + " " + c.extra_args);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, testing::HasSubstr(c.message));
  EXPECT_TRUE(run.out.empty()) << run.out;
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, CliBadInputTest,
    testing::Values(
        BadInputCase{"non_numeric", "x,y\n1,2\n2,abc\n3,4\n", "--kernel SE",
                     "line 3, column 2: 'abc' is not a number"},
        BadInputCase{"nan", "x,y\n1,2\n2,nan\n3,4\n", "--kernel SE", "not a finite number"},
        BadInputCase{"inf", "x,y\n1,2\n2,inf\n3,4\n", "--kernel SE", "not a finite number"},
        BadInputCase{"ragged", "x,y\n1,2\n2,3,4\n", "--kernel SE", "line 3: has 3 columns"},
        BadInputCase{"one_point", "x,y\n1,2\n", "--kernel SE", "at least 2 points"},
        BadInputCase{"empty", "# no rows\n", "--kernel SE", "empty dataset"},
        BadInputCase{"bad_kernel", "", "--kernel 'SE+*LIN'", "kernel expression"},
        BadInputCase{"unknown_kernel", "", "--kernel 'SQ'", "unknown base kernel 'SQ'"},
        BadInputCase{"dim_too_large", "", "--kernel 'SE[3]'", "input dimension 3"},
        BadInputCase{"unknown_metric", "", "--kernel SE --metrics mll,foo",
                     "unknown metric 'foo'"},
        BadInputCase{"bad_restarts", "", "--kernel SE --restarts 0", "restarts"},
        BadInputCase{"bad_prior", "", "--kernel SE --prior SE.lengthscale=0", "NAME=MEAN,SD"},
        BadInputCase{"unknown_prior", "", "--kernel SE --prior PER.period=0,1",
                     "unknown hyperparameter 'PER.period'"},
        BadInputCase{"constant_y", "x,y\n1,2\n2,2\n3,2\n", "--kernel SE",
                     "constant targets"}),
    [](const testing::TestParamInfo<BadInputCase>& info) { return info.param.name; });

TEST(CliTest, MissingFileIsReported) {
  CliRun run = RunGpsel("score --data /nonexistent/file.csv --kernel SE");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, testing::HasSubstr("cannot open data file"));
}

TEST(CliTest, FixedPeriodIsNotFitted) {
  CliRun run = RunGpsel("score --data " + kExample +
                     " --kernel 'SE*PER' --fix PER.period=1 --metrics map --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["results"][0]["num_hyperparameters"], 3);  // SE.lengthscale, PER.lengthscale, noise
  EXPECT_NEAR(j["results"][0]["map_fit"]["values"]["PER.period"].get<double>(), 1.0, 1e-12);
}

}  // namespace
