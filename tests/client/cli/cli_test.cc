// End-to-end tests of the `gpsel` binary in-process mode: exit codes, messages, JSON shape and
// the paper's numbers through the CLI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/client/cli/json_keys.h"
#include "tests/client/cli/run_gpsel.h"

namespace {

using ::gpsel::testing_cli::CliRun;
using ::gpsel::testing_cli::RunGpsel;

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
  ASSERT_EQ(j["scores"].size(), 1u);
  const auto& r = j["scores"][0];
  EXPECT_EQ(r["num_points"], 10);
  EXPECT_EQ(r["standardized"], false);
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
  ASSERT_EQ(r["laplace"]["eigenvalues"].size(), 2u);
  EXPECT_NEAR(r["laplace"]["eigenvalues"][0].get<double>(), 1.346, 0.005);
  EXPECT_NEAR(r["laplace"]["eigenvalues"][1].get<double>(), 3.741, 0.005);
}

// --test: each fit's held-out numbers in the table and in JSON; a bad test file is refused naming
// --test, before any fit.
TEST(CliTest, ScoreTestReportsHeldOutLikelihoodsAtEachFit) {
  const std::string test = WriteTemp("held_out.csv", "x,y\n0.05,0.2\n0.35,0.9\n0.65,1.6\n0.95,2.3\n");
  CliRun run = RunGpsel("score --data " + kExample + " --kernel SE --kernel LIN --no-standardize "
                        "--metrics mll,lap0 --test " + test + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["scores"].size(), 2u);
  for (const auto& s : j["scores"]) {
    ASSERT_EQ(s["held_out"].size(), 2u) << s.dump();
    EXPECT_EQ(s["held_out"][0]["objective"], "FIT_OBJECTIVE_MAXIMUM_LIKELIHOOD");
    EXPECT_EQ(s["held_out"][1]["objective"], "FIT_OBJECTIVE_MAXIMUM_A_POSTERIORI");
    EXPECT_EQ(s["held_out"][0]["num_test_points"], 4);
    EXPECT_TRUE(std::isfinite(s["held_out"][1]["test_log_likelihood"].get<double>()));
    EXPECT_TRUE(std::isfinite(s["held_out"][1]["predictive_log_density"].get<double>()));
  }
  CliRun table = RunGpsel("score --data " + kExample + " --kernel SE --no-standardize "
                          "--metrics mll,lap0 --test " + test);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, testing::HasSubstr("held-out data (--test, 4 points)"));
  EXPECT_THAT(table.out, testing::HasSubstr("pred_log_density"));

  const std::string wide = WriteTemp("held_out_wide.csv", "a,b,y\n0.1,1,0.2\n0.3,2,0.9\n");
  CliRun bad = RunGpsel("score --data " + kExample + " --kernel SE --test " + wide);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_THAT(bad.err, testing::HasSubstr("--test"));
  EXPECT_THAT(bad.err, testing::HasSubstr("input column"));
  CliRun missing = RunGpsel("score --data " + kExample + " --kernel SE --test /nonexistent.csv");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.err, testing::HasSubstr("--test /nonexistent.csv"));
}

const std::string kSunspots = std::string(GPSEL_DATA_DIR) + "/sunspots_yearly.csv";

// The fit's sureness in JSON, and warnings on stderr only (stdout stays parseable JSON).
TEST(CliTest, ScoreJsonCarriesFitDetailsAndWarningsGoToStderr) {
  CliRun run = RunGpsel("score --data " + kSunspots + " --kernel 'C*PER*SE' --no-search-starts --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  const auto& r = j["scores"][0];
  for (const char* fit : {"mll_fit", "map_fit"}) {
    EXPECT_TRUE(r[fit].contains("log_likelihood")) << fit;
    EXPECT_TRUE(r[fit].contains("log_prior")) << fit;
    EXPECT_GE(r[fit]["starts_at_best"].get<int>(), 1) << fit;
    // 5 prior draws, and the 2 data-informed starts in the MLL fit.
    EXPECT_GE(r[fit]["starts"].get<int>(), std::string(fit) == "mll_fit" ? 7 : 5) << fit;
    EXPECT_THAT(r[fit]["best_start_kind"].get<std::string>(),
                testing::AnyOf("START_KIND_PRIOR_DRAW", "START_KIND_DATA_INFORMED",
                               "START_KIND_NESTED_PARENT", "START_KIND_CROSS_SEEDED",
                               "START_KIND_GIVEN"));
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
                        " --kernel 'C*PER*SE' --metrics mll,map --scale-x auto --no-search-starts --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  const auto& r = j["scores"][0];
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
  // With the data, the JSON (a PriorsReport message) carries the column's scales and the note.
  CliRun with_data = RunGpsel("priors --kernel PER --json --data " + kSunspots);
  ASSERT_EQ(with_data.exit_code, 0) << with_data.err;
  nlohmann::json report = nlohmann::json::parse(with_data.out);
  ASSERT_EQ(report["data"].size(), 1u);
  EXPECT_EQ(report["data"][0]["range"].get<double>(), 308.0);  // 1700..2008
  EXPECT_NEAR(report["data"][0]["strongest_period"].get<double>(), 11.0, 0.5);
  ASSERT_EQ(report["notes"].size(), 1u);
  EXPECT_THAT(report["notes"][0].get<std::string>(), testing::HasSubstr("PER.period"));
  EXPECT_TRUE(j["notes"].empty());  // no data, no note
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
  ja["scores"][0].erase("seconds");
  jb["scores"][0].erase("seconds");
  EXPECT_EQ(ja, jb);
}

struct BadInputCase {
  std::string name;
  std::string csv;         // empty: use the example file
  std::string extra_args;  // appended
  std::string message;     // expected substring of stderr
};

class CliBadInputTest : public testing::TestWithParam<BadInputCase> {};

// A CSV of n points on a line: one more than the point limit that the CLI (in-process) and
// gpsel-server share (core/dataset.h kDefaultMaxPoints = 10,000) is refused.
std::string LinePoints(int n) {
  std::string csv = "x,y\n";
  for (int i = 0; i < n; ++i) csv += std::to_string(i) + "," + std::to_string(i % 7) + "\n";
  return csv;
}

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
        // NaN is a missing value (core/dataset.h MissingValues): an error naming the line by default.
        BadInputCase{"nan", "x,y\n1,2\n2,nan\n3,4\n", "--kernel SE", "missing value on line 3"},
        BadInputCase{"inf", "x,y\n1,2\n2,inf\n3,4\n", "--kernel SE", "not a finite number"},
        BadInputCase{"ragged", "x,y\n1,2\n2,3,4\n", "--kernel SE", "line 3: has 3 columns"},
        BadInputCase{"one_point", "x,y\n1,2\n", "--kernel SE", "at least 2 points"},
        BadInputCase{"empty", "# no rows\n", "--kernel SE", "empty dataset"},
        BadInputCase{"bad_kernel", "", "--kernel 'SE+*LIN'", "kernel expression"},
        BadInputCase{"unknown_kernel", "", "--kernel 'SQ'", "unknown base kernel 'SQ'"},
        BadInputCase{"dim_too_large", "", "--kernel 'SE[3]'", "input dimension 3"},
        BadInputCase{"unknown_metric", "", "--kernel SE --metrics mll,foo", "unknown metric 'foo'"},
        BadInputCase{"bad_restarts", "", "--kernel SE --restarts 0", "restarts"},
        BadInputCase{"bad_prior", "", "--kernel SE --prior SE.lengthscale=0", "NAME=MEAN,SD"},
        BadInputCase{"unknown_prior", "", "--kernel SE --prior PER.period=0,1",
                     "unknown hyperparameter 'PER.period'"},
        BadInputCase{"constant_y", "x,y\n1,2\n2,2\n3,2\n", "--kernel SE", "constant targets"},
        BadInputCase{"too_many_points", LinePoints(10001), "--kernel SE",
                     "10001 points exceed the limit of 10000"},
        BadInputCase{"too_many_points_names_the_switch", LinePoints(10001), "--kernel SE",
                     "--approx sparse (or auto) takes up to 1000000 points"},
        BadInputCase{"bad_approx", "", "--kernel SE --approx fitc",
                     "--approx: 'fitc' is not 'auto', 'exact' or 'sparse'"},
        BadInputCase{"bad_inducing", "", "--kernel SE --approx sparse --inducing -2",
                     "--inducing: -2 is outside"},
        BadInputCase{"job_in_process", "", "--kernel SE --job", "--job: needs --server"},
        BadInputCase{"detach_in_process", "", "--kernel SE --detach",
                     "--detach: needs --server"}),
    [](const testing::TestParamInfo<BadInputCase>& info) { return info.param.name; });

// The sparse switch (issue 28): --approx sparse scores with method, m and intervals; auto picks
// exact at a small n and sparse above the exact limit, and says so; evidence refuses sparse.
TEST(CliTest, ApproxSparseAndAuto) {
  CliRun sparse = RunGpsel("score --data " + kExample +
                           " --kernel SE --metrics mll,bic,lap0 --restarts 1 --approx sparse "
                           "--inducing 10 --json");
  ASSERT_EQ(sparse.exit_code, 0) << sparse.err;
  nlohmann::json j = nlohmann::json::parse(sparse.out);
  const auto& s = j["scores"][0];
  EXPECT_EQ(s["method"], "sparse");
  EXPECT_EQ(s["inducing_points"], 10);
  for (const char* name : {"mll", "bic", "lap0"}) {
    ASSERT_TRUE(s["intervals"].contains(name)) << name;
    EXPECT_DOUBLE_EQ(s["intervals"][name]["lower"].get<double>(),
                     s["metrics"][name].get<double>());
    EXPECT_LE(s["intervals"][name]["lower"].get<double>(),
              s["intervals"][name]["upper"].get<double>());
  }
  CliRun table = RunGpsel("score --data " + kExample +
                          " --kernel SE --metrics bic --restarts 1 --approx sparse --inducing 10");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, testing::HasSubstr("sparse GP, m = 10 inducing points"));
  EXPECT_THAT(table.out, testing::HasSubstr("ELBO"));

  CliRun small = RunGpsel("score --data " + kExample + " --kernel SE --approx auto --json");
  ASSERT_EQ(small.exit_code, 0) << small.err;
  nlohmann::json k = nlohmann::json::parse(small.out);
  EXPECT_EQ(k["scores"][0]["method"], "exact");
  EXPECT_THAT(k["scores"][0]["approx_note"].get<std::string>(),
              testing::HasSubstr("auto: exact"));

  // 12,000 points: above the exact limit, so auto is sparse (m fixed small to stay fast).
  std::string csv = "x,y\n";
  for (int i = 0; i < 12000; ++i) {
    const double x = i / 1000.0;
    csv += std::to_string(x) + "," + std::to_string(std::sin(x) + 0.1 * std::sin(37.0 * i)) +
           "\n";
  }
  const std::string big = WriteTemp("approx_big.csv", csv);
  CliRun large = RunGpsel("score --data " + big +
                          " --kernel SE --metrics mll --restarts 1 --approx auto --inducing 12 "
                          "--json");
  ASSERT_EQ(large.exit_code, 0) << large.err;
  nlohmann::json l = nlohmann::json::parse(large.out);
  EXPECT_EQ(l["scores"][0]["method"], "sparse");
  EXPECT_THAT(l["scores"][0]["approx_note"].get<std::string>(),
              testing::HasSubstr("above the exact limit"));

  CliRun evidence = RunGpsel("evidence --data " + kExample + " --kernel SE --approx sparse");
  EXPECT_EQ(evidence.exit_code, 2);
  EXPECT_THAT(evidence.err, testing::HasSubstr("--approx: log evidence is computed on the exact"));
}

// What the sparse path cannot give is refused, not dropped: held-out likelihoods (joint Gaussians
// of the exact GP) and a saved model (its posterior needs the inducing inputs).
TEST(CliTest, SparseScoresRefuseHeldOutDataAndSavedModels) {
  CliRun test = RunGpsel("score --data " + kExample + " --test " + kExample +
                         " --kernel SE --metrics mll --restarts 1 --approx sparse --inducing 10");
  EXPECT_EQ(test.exit_code, 2) << test.err;
  EXPECT_THAT(test.err, testing::HasSubstr("test: held-out likelihoods need the exact GP"));
  const std::string model = testing::TempDir() + "/sparse_model_" + std::to_string(getpid());
  CliRun save = RunGpsel("score --data " + kExample +
                         " --kernel SE --restarts 1 --approx sparse --inducing 10 --save-model " +
                         model);
  EXPECT_NE(save.exit_code, 0) << save.err;
  EXPECT_THAT(save.err, testing::HasSubstr("only exact scores are saved as models"));
  EXPECT_FALSE(std::ifstream(model).good()) << "no model file is left behind";
  CliRun exact = RunGpsel("score --data " + kExample +
                          " --kernel SE --restarts 1 --approx exact --save-model " + model);
  EXPECT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_TRUE(std::ifstream(model).good());
  std::remove(model.c_str());
}

// Before long work the CLI says how long and how much memory it expects (core/time_estimate.h,
// core/memory_estimate.h), on stderr only: the weekly CO₂ series (n = 2,225) with C*SE takes
// minutes here. The run is killed once the line is out; a small run prints no estimate.
TEST(CliTest, LongWorkIsAnnouncedWithTimeAndMemoryOnStderr) {
  const std::string dir = testing::TempDir() + "/announce_" + std::to_string(getpid());
  const std::string err = dir + ".err", out = dir + ".out";
  const std::string command =
      "sh -c '" + std::string(GPSEL_CLI_PATH) + " score --data " + GPSEL_DATA_DIR +
      "/co2_weekly.csv --kernel C*SE --json >" + out + " 2>" + err +
      " & pid=$!; for i in $(seq 300); do grep -q estimated " + err +
      " && break; sleep 0.1; done; kill -9 $pid; wait $pid 2>/dev/null; true'";
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream err_in(err), out_in(out);
  const std::string err_text((std::istreambuf_iterator<char>(err_in)),
                             std::istreambuf_iterator<char>());
  const std::string out_text((std::istreambuf_iterator<char>(out_in)),
                             std::istreambuf_iterator<char>());
  EXPECT_THAT(err_text, testing::ContainsRegex("gpsel: estimated [0-9]+:[0-9][0-9]"));
  EXPECT_THAT(err_text, testing::HasSubstr(" MB"));
  EXPECT_THAT(err_text, testing::HasSubstr("n = 2225"));
  EXPECT_EQ(out_text.find("estimated"), std::string::npos) << out_text;

  CliRun small = RunGpsel("score --data " + kExample + " --kernel SE --restarts 1 --json");
  ASSERT_EQ(small.exit_code, 0) << small.err;
  EXPECT_EQ(small.err.find("estimated"), std::string::npos) << small.err;
}

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
  EXPECT_EQ(j["scores"][0]["num_hyperparameters"], 3);  // SE.lengthscale, PER.lengthscale, noise
  EXPECT_NEAR(j["scores"][0]["map_fit"]["values"]["PER.period"].get<double>(), 1.0, 1e-12);
}

// One JSON: every command's --json is the protobuf JSON mapping of its response message with the
// .proto field names; the key paths of each are pinned by a golden file (tests/client/cli/golden/).
TEST(CliJsonTest, EveryCommandPrintsItsResponseMessageWithProtoFieldNames) {
  const struct {
    const char* name;
    std::string args;
  } cases[] = {
      {"score", "score --data " + kExample + " --kernel SE --no-standardize --json"},
      {"search", "search --data " + kExample + " --base SE,LIN --depth 1 --threads 1 --json"},
      {"search_kept", "search --data " + kExample +
                          " --base SE,LIN --depth 1 --threads 1 --score-kept --json"},
      {"evidence", "evidence --data " + kExample +
                       " --kernel SE --no-standardize --nlive 50 --dlogz 0.5 --json"},
      {"evidence_is", "evidence --data " + kExample +
                          " --kernel SE --no-standardize --method is --samples --json"},
      {"predict", "predict --data " + kExample + " --kernel SE --grid 0:1:3 --json"},
      {"predict_given", "predict --data " + kExample +
                            " --kernel SE --grid 0:1:3 --hyperparameter SE.lengthscale=1"
                            " --hyperparameter noise=0.1 --json"},
      {"priors", "priors --kernel SE --json"},
      {"predict_components", "predict --data " + std::string(GPSEL_DATA_DIR) +
                                 "/nile.csv --kernel 'CP(C,C)' --grid 1880:1960:3 --restarts 1"
                                 " --components --json"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    CliRun run = RunGpsel(c.args);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    gpsel::testing_json::ExpectGoldenKeys(c.name, run.out);
    // snake_case field names throughout, never the lowerCamelCase of the default mapping.
    EXPECT_EQ(run.out.find("numHyperparameters"), std::string::npos);
    EXPECT_EQ(run.out.find("logLikelihood"), std::string::npos);
  }
}

// `search --operators`: the change moves in-process, the refusal of a bad list naming the
// flag's entry; `predict --components` prints a change's two regimes by name.
TEST(CliTest, ChangeMovesAndRegimes) {
  const std::string nile = std::string(GPSEL_DATA_DIR) + "/nile.csv";
  CliRun search = RunGpsel("search --data " + nile +
                           " --base C --depth 2 --operators +,*,CP --restarts 1 --json");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  nlohmann::json j = nlohmann::json::parse(search.out);
  EXPECT_EQ(j["best_kernel"], "CP(C,C)");
  EXPECT_EQ(j["operators"], nlohmann::json({"+", "*", "CP"}));
  CliRun bad = RunGpsel("search --data " + nile + " --base C --operators +,*,XY");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, testing::HasSubstr("XY"));
  CliRun regimes = RunGpsel("predict --data " + nile +
                            " --kernel 'CP(C,C)' --grid 1880:1960:2 --restarts 1 --components");
  ASSERT_EQ(regimes.exit_code, 0) << regimes.err;
  EXPECT_THAT(regimes.out, testing::HasSubstr("component CP before: C"));
  EXPECT_THAT(regimes.out, testing::HasSubstr("component CP after: C"));
}

// `search --score-kept`: each kept kernel's steps[].kept_score is what `score` prints for that
// kernel with its candidate's seed (no warm start, so the search's fit of it had no other start).
TEST(CliTest, SearchKeptScoresEqualScoreWithTheCandidateSeed) {
  CliRun search = RunGpsel("search --data " + kExample +
                           " --base SE,LIN --depth 2 --metric mll --no-warm-start --threads 2"
                           " --seed 5 --score-kept --json");
  ASSERT_EQ(search.exit_code, 0) << search.err;
  nlohmann::json j = nlohmann::json::parse(search.out);
  int kept = 0;
  for (const auto& step : j["steps"]) {
    if (!step.contains("kept_score")) {
      EXPECT_FALSE(step.contains("chosen")) << "a step that kept a kernel has its score";
      continue;
    }
    const std::string kernel = step["chosen"][0].get<std::string>();
    SCOPED_TRACE(kernel);
    EXPECT_EQ(step["kept_score"]["kernel"], kernel);
    std::string seed;
    for (const auto& candidate : step["candidates"]) {
      if (candidate["kernel"] == kernel) seed = candidate["seed"].get<std::string>();  // uint64
    }
    ASSERT_FALSE(seed.empty());
    // The plain score (--no-search-starts): the search's candidate seed given as is, and no
    // sub-kernel starts, which this search (--no-warm-start) does not make either.
    CliRun score = RunGpsel("score --data " + kExample + " --kernel '" + kernel + "' --seed " +
                            seed + " --no-search-starts --json");
    ASSERT_EQ(score.exit_code, 0) << score.err;
    const nlohmann::json reference = nlohmann::json::parse(score.out)["scores"][0];
    for (const char* metric : {"mll", "map", "aic", "bic", "lap", "lap0", "lap_aic", "lap_bic"}) {
      if (!reference["metrics"].contains(metric)) continue;  // undefined Lap: absent in both
      const double expected = reference["metrics"][metric].get<double>();
      EXPECT_NEAR(step["kept_score"]["metrics"][metric].get<double>(), expected,
                  1e-7 * std::max(1.0, std::abs(expected)))
          << metric;
    }
    ++kept;
  }
  EXPECT_EQ(kept, 2) << "mll grows: both steps keep a kernel\n" << search.out;
  // The text output lists the kept kernel besides the best one with its metrics.
  CliRun text = RunGpsel("search --data " + kExample +
                         " --base SE,LIN --depth 2 --metric mll --no-warm-start --threads 2"
                         " --seed 5 --score-kept");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, testing::ContainsRegex("kept after step 1: [A-Z]+ +mll -?[0-9.]+ map"));
  // Not asked for: no kept scores.
  CliRun plain = RunGpsel("search --data " + kExample + " --base SE,LIN --depth 2 --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("kept_score"), std::string::npos);
}

// `evidence --method`: importance sampling and auto print the method, its diagnostics and the
// modes; an unknown method is a usage error naming the flag.
TEST(CliTest, EvidenceMethods) {
  const std::string args = "evidence --data " + kExample + " --kernel SE --no-standardize --seed 3";
  CliRun is = RunGpsel(args + " --method is");
  ASSERT_EQ(is.exit_code, 0) << is.err;
  EXPECT_THAT(is.out, testing::HasSubstr("by importance (asked for)"));
  EXPECT_THAT(is.out, testing::HasSubstr("Pareto k"));
  EXPECT_THAT(is.out, testing::HasSubstr("MAP fit"));
  CliRun automatic = RunGpsel(args + " --method auto --json");
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  nlohmann::json j = nlohmann::json::parse(automatic.out);
  EXPECT_EQ(j["method"], "EVIDENCE_METHOD_IMPORTANCE");
  EXPECT_THAT(j["method_reason"].get<std::string>(), testing::HasSubstr("passed"));
  EXPECT_NEAR(j["log_evidence"].get<double>(), -8.032, 0.06);
  CliRun bad = RunGpsel(args + " --method mcmc");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, testing::HasSubstr("--method"));
  EXPECT_EQ(RunGpsel(args + " --method is --target-error -1").exit_code, 2);
}

TEST(CliTest, DataFromStdinAndPredictCsv) {
  CliRun piped = RunGpsel("score --data - --kernel SE --no-standardize --json < " + kExample);
  CliRun file = RunGpsel("score --data " + kExample + " --kernel SE --no-standardize --json");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  nlohmann::json a = nlohmann::json::parse(piped.out), b = nlohmann::json::parse(file.out);
  a["scores"][0].erase("seconds");
  b["scores"][0].erase("seconds");
  EXPECT_EQ(a, b);
  CliRun bad = RunGpsel("score --data - --kernel SE < /dev/null");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, testing::HasSubstr("stdin"));

  // --format csv: x, mean, sd, sd_with_noise; at a given point the numbers of --json.
  const std::string args = "predict --data " + kExample +
                           " --kernel SE --grid 0.5:0.5:1 --hyperparameter SE.lengthscale=1"
                           " --hyperparameter noise=0.1 --no-standardize";
  CliRun csv = RunGpsel(args + " --format csv");
  CliRun json = RunGpsel(args + " --json");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  ASSERT_EQ(json.exit_code, 0) << json.err;
  std::istringstream lines(csv.out);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  EXPECT_EQ(header, "x,mean,sd,sd_with_noise");
  double x = 0, mean = 0, sd = 0, sd_noise = 0;
  ASSERT_EQ(std::sscanf(row.c_str(), "%lf,%lf,%lf,%lf", &x, &mean, &sd, &sd_noise), 4) << row;
  nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(x, 0.5);
  EXPECT_NEAR(mean, j["mean"][0].get<double>(), 1e-9 * std::abs(mean));
  EXPECT_NEAR(sd * sd, j["variance"][0].get<double>(), 1e-8);
  EXPECT_NEAR(sd_noise * sd_noise - sd * sd, 0.1, 1e-8);  // the given noise variance
  EXPECT_EQ(RunGpsel(args + " --format xml").exit_code, 2);
  // Connection flags without --server are a usage error, not silently ignored.
  EXPECT_EQ(RunGpsel(args + " --tls").exit_code, 2);
}

// ---- CSV as people have it (--x --y --delimiter --missing --x-unit) --------------------------

const std::string kNile = std::string(GPSEL_DATA_DIR) + "/nile.csv";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// data/nile.csv as a spreadsheet in a comma-decimal locale exports it: ';' separated, ISO dates
// (1 January of each year, so decimal years equal the bundled x exactly), decimal commas, a text
// column, the flow in the middle, and two rows whose flow is missing.
std::string NileAsExported() {
  std::istringstream lines(ReadText(kNile));
  std::string line;
  std::getline(lines, line);  // header x,y
  std::string out = "Station;Datum;Durchfluss;Bemerkung\n";
  int row = 0;
  while (std::getline(lines, line)) {
    const size_t comma = line.find(',');
    const int year = static_cast<int>(std::stod(line.substr(0, comma)));
    std::string flow = line.substr(comma + 1);
    std::replace(flow.begin(), flow.end(), '.', ',');
    out += "\"Assuan; Nil\";" + std::to_string(year) + "-01-01;" + flow + ";geprüft\n";
    if (++row == 10) out += "\"Assuan; Nil\";1881-06-30;NA;Ausfall\n";
    if (row == 50) out += "\"Assuan; Nil\";1920-06-30;;\n";
  }
  return out;
}

nlohmann::json WithoutSeconds(const std::string& out) {
  nlohmann::json j = nlohmann::json::parse(out);
  for (auto& s : j["scores"]) s.erase("seconds");
  return j;
}

TEST(CliCsvTest, ExportedNileWithDatesMissingRowsAndSemicolonsScoresAsTheBundledSeries) {
  const std::string exported = WriteTemp("nile_exported.csv", NileAsExported());
  const std::string fit = " --kernel SE --restarts 2 --json";
  CliRun bundled = RunGpsel("score --data " + kNile + fit);
  ASSERT_EQ(bundled.exit_code, 0) << bundled.err;
  // By default the missing rows are an error naming their lines and the way through.
  CliRun refused = RunGpsel("score --data " + exported + " --x Datum --y 3" + fit);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, testing::HasSubstr("missing values on lines 12, 53"));
  EXPECT_THAT(refused.err, testing::HasSubstr("--missing drop"));
  EXPECT_TRUE(refused.out.empty());
  // Dropped, and the dates read as decimal years: the bundled series' numbers exactly.
  CliRun dropped =
      RunGpsel("score --data " + exported + " --x Datum --y 3 --missing drop" + fit);
  ASSERT_EQ(dropped.exit_code, 0) << dropped.err;
  EXPECT_EQ(WithoutSeconds(dropped.out), WithoutSeconds(bundled.out));
  EXPECT_THAT(dropped.err, testing::HasSubstr("fields separated by ';'"));
  EXPECT_THAT(dropped.err,
              testing::HasSubstr("x column 'Datum' holds ISO dates, read as decimal years"));
  EXPECT_THAT(dropped.err, testing::HasSubstr("dropped 2 rows with missing values (lines 12, 53)"));
  // The same file from stdin with the separator given.
  CliRun piped = RunGpsel("score --data - --delimiter ';' --x 2 --y Durchfluss --missing drop" +
                          fit + " < " + exported);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(WithoutSeconds(piped.out), WithoutSeconds(bundled.out));
  // Days since 1970 instead: x is in days (about -36,500 in 1871), and the message says so.
  CliRun days = RunGpsel("priors --kernel SE --data " + exported +
                         " --x Datum --y 3 --missing drop --x-unit days --json");
  ASSERT_EQ(days.exit_code, 0) << days.err;
  EXPECT_THAT(days.err, testing::HasSubstr("days since 1970-01-01"));
}

TEST(CliCsvTest, PublishedWeeklyCo2WithNaWeeks) {
  const std::string dated = std::string(GPSEL_DATA_DIR) + "/co2_weekly_dated.csv";
  CliRun refused = RunGpsel("priors --kernel SE --data " + dated);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, testing::HasSubstr("missing values on lines 8, 11, 12"));
  EXPECT_THAT(refused.err, testing::HasSubstr("and 49 more"));
  CliRun dropped = RunGpsel("priors --kernel SE --data " + dated + " --missing drop");
  ASSERT_EQ(dropped.exit_code, 0) << dropped.err;
  EXPECT_THAT(dropped.err, testing::HasSubstr("dropped 59 rows"));
  // The data's scales are those of the bundled (undated) series.
  CliRun bundled =
      RunGpsel("priors --kernel SE --data " + std::string(GPSEL_DATA_DIR) + "/co2_weekly.csv");
  ASSERT_EQ(bundled.exit_code, 0) << bundled.err;
  EXPECT_EQ(dropped.out, bundled.out);
}

// New inputs as dates: the same x as the data's dates, so predicting at 1900-01-01 from the dated
// file is predicting at 1900 from the bundled one (hyperparameters given: no fit).
TEST(CliCsvTest, PredictAtDatesMatchesPredictAtDecimalYears) {
  const std::string exported = WriteTemp("nile_exported_predict.csv", NileAsExported());
  const std::string given =
      " --kernel SE --hyperparameter SE.lengthscale=20 --hyperparameter noise=0.5 --json";
  const std::string at_dates = WriteTemp("nile_at_dates.csv", "when\n1900-01-01\n1975-07-02\n");
  const std::string at_years = WriteTemp("nile_at_years.csv", "x\n1900\n1975.5\n");
  CliRun from_dates = RunGpsel("predict --data " + exported +
                               " --x Datum --y 3 --missing drop --at " + at_dates + given);
  CliRun from_years = RunGpsel("predict --data " + kNile + " --at " + at_years + given);
  ASSERT_EQ(from_dates.exit_code, 0) << from_dates.err;
  ASSERT_EQ(from_years.exit_code, 0) << from_years.err;
  nlohmann::json a = nlohmann::json::parse(from_dates.out);
  nlohmann::json b = nlohmann::json::parse(from_years.out);
  ASSERT_EQ(a["mean"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    // 1975-07-02 is 1975 + 182/365, not exactly 1975.5: close, not equal.
    const double tolerance = i == 0 ? 0.0 : 1e-2 * std::abs(b["mean"][i].get<double>());
    EXPECT_NEAR(a["mean"][i].get<double>(), b["mean"][i].get<double>(), tolerance) << i;
  }
  EXPECT_THAT(from_dates.err, testing::HasSubstr("--at: x column 'when' holds ISO dates"));
}

TEST(CliCsvTest, BadCsvFlagsExitTwoNamingTheFlag) {
  const std::string exported = WriteTemp("nile_exported_bad.csv", NileAsExported());
  struct Case {
    std::string args;
    std::string message;
  } cases[] = {
      {" --missing skip", "--missing 'skip'"},
      {" --x-unit hours", "--x-unit 'hours'"},
      {" --delimiter '|'", "--delimiter '|'"},
      {" --y Abfluss", "y column 'Abfluss': no such column (the header has: Station, Datum"},
      {" --y 9", "y column 9: out of range (columns are numbered 1 to 4)"},
      {" --y 3", "line 2, column 1: 'Assuan; Nil' is not a number"},
      {" --x Datum --y Datum", "'Datum' is the y column too"},
  };
  for (const Case& c : cases) {
    CliRun run = RunGpsel("score --kernel SE --data " + exported + c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args;
    EXPECT_THAT(run.err, testing::HasSubstr(c.message)) << c.args;
    EXPECT_TRUE(run.out.empty()) << c.args;
  }
}

// ---- gpsel report ----------------------------------------------------------------------------

TEST(CliReportTest, WritesThePageAndFiguresOfTheChosenKernel) {
  const std::string out = testing::TempDir() + "/report_" + std::to_string(getpid());
  CliRun run =
      RunGpsel("report --data " + kExample +
               " --kernel SE --kernel 'SE+LIN' --no-standardize --restarts 2 --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The choice by lap0 is the one `score` makes with the same flags.
  CliRun score = RunGpsel("score --data " + kExample +
                          " --kernel SE --kernel 'SE+LIN' --no-standardize --restarts 2 --json");
  ASSERT_EQ(score.exit_code, 0);
  nlohmann::json j = nlohmann::json::parse(score.out);
  const auto& a = j["scores"][0];
  const auto& b = j["scores"][1];
  const std::string best = a["metrics"]["lap0"].get<double>() >= b["metrics"]["lap0"].get<double>()
                               ? a["kernel"].get<std::string>()
                               : b["kernel"].get<std::string>();
  EXPECT_THAT(run.out, testing::HasSubstr("chosen kernel " + best + ":"));
  std::ifstream html(out + "/report.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_THAT(page, testing::HasSubstr("<code id=\"chosen-kernel\">" + best + "</code>"));
  for (const char* id : {"fit", "metrics", "residuals"}) {
    EXPECT_TRUE(std::ifstream(out + "/" + id + ".svg").good()) << id;
    EXPECT_TRUE(std::ifstream(out + "/" + id + ".png").good()) << id;
  }
  // Given kernels, no search and no evidence: those figures are left out, and the page says so.
  EXPECT_THAT(page, testing::HasSubstr("search: the kernels were given"));
}

// With --search, the kernels of the search's path come scored with the search: the report fits
// only a --kernel the search did not score, and has no "scores" stage without one.
TEST(CliReportTest, SearchedKernelsAreNotScoredAgain) {
  const std::string out = testing::TempDir() + "/report_search_" + std::to_string(getpid());
  const std::string args = "report --data " + kExample +
                           " --search --base SE,LIN --depth 2 --metric mll --restarts 2 --out " + out;
  CliRun alone = RunGpsel(args);
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_THAT(alone.out,
              testing::ContainsRegex("kernels compared: 2 scored by the search \\(its kept kernels' "
                                     "scores took [0-9.]+ s\\), 0 scored for the report"));
  EXPECT_THAT(alone.out, testing::ContainsRegex("seconds: search [0-9.]+ predict"));

  CliRun extra = RunGpsel(args + " --kernel 'SE*LIN + LIN'");
  ASSERT_EQ(extra.exit_code, 0) << extra.err;
  EXPECT_THAT(extra.out,
              testing::ContainsRegex("kernels compared: 2 scored by the search \\(.*\\), 1 scored for "
                                     "the report"));
  EXPECT_THAT(extra.out, testing::ContainsRegex("seconds: search [0-9.]+ scores [0-9.]+ predict"));
  // A --kernel the search kept is not scored again either.
  CliRun repeated = RunGpsel(args + " --kernel SE --kernel LIN");
  ASSERT_EQ(repeated.exit_code, 0) << repeated.err;
  EXPECT_THAT(repeated.out, testing::ContainsRegex("scored by the search \\(.*\\), 1 scored for the report"));
}

// A --kernel that contains kernels the search scored (here SE, kept after step 1, inside LIN+SE,
// the best) also starts from the optima of the largest of them, and the report says so; one
// that contains none of them (LIN's factor in SE*LIN cannot be switched to 1) starts from none.
TEST(CliReportTest, GivenKernelStartsFromTheSearchedKernelsItContains) {
  const std::string out = testing::TempDir() + "/report_nested_" + std::to_string(getpid());
  const std::string args = "report --data " + kExample +
                           " --search --base SE,LIN --depth 2 --metric mll --restarts 2 --out " + out;
  CliRun containing = RunGpsel(args + " --kernel 'C*SE + LIN*SE'");
  ASSERT_EQ(containing.exit_code, 0) << containing.err;
  EXPECT_THAT(containing.out, testing::HasSubstr("chosen kernel LIN+SE:")) << containing.out;
  EXPECT_THAT(containing.out,
              testing::ContainsRegex("  C\\*SE\\+LIN\\*SE: also started from the optima of "
                                     "LIN\\+SE; winning starts: MLL [a-z]+"));
  CliRun other = RunGpsel(args + " --kernel 'SE*LIN + LIN'");
  ASSERT_EQ(other.exit_code, 0) << other.err;
  // No filler ("started from the optima of none"): the line goes straight to the winning starts.
  EXPECT_THAT(other.out, testing::HasSubstr("LIN*SE+LIN: winning starts: MLL "));
  EXPECT_THAT(other.out, testing::Not(testing::HasSubstr("optima of none")));
}

TEST(CliReportTest, BadFlagsExitWithCodeTwoAndAMessage) {
  const std::string out = " --out " + testing::TempDir() + "/report_bad";
  const struct {
    std::string args, message;
  } cases[] = {
      {"report --data " + kExample + out, "give --kernel EXPR (repeatable) or --search"},
      {"report --data " + kExample + " --kernel SE", "--out"},
      {"report --data " + kExample + " --kernel SE --metric foo" + out, "--metric"},
      {"report --data " + kExample + " --kernel SE --pair a" + out, "--pair"},
      {"report --data " + kExample + " --kernel SE --json" + out, "--json"},  // not an option
      {"report --data " + kExample + " --kernel 'SE+' " + out, "kernel expression"},
      {"report --data " + kExample + " --kernel SE --width 10" + out, "--width"},
      {"report --data " + kExample + " --search --depth 0" + out, "max_depth"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    CliRun run = RunGpsel(c.args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_THAT(run.err, testing::HasSubstr(c.message));
  }
}

// Several input columns in raw units (issue 27): `C*SE[*]` under --scale-x auto is scored as one
// SE per column, each column divided by its own range/10 (JSON x_scales), and the report on it
// draws observed against predicted (on main `SE[*]` was a parse error, and the report then found
// no kernel under its given name).
TEST(CliReportTest, SeveralColumnsInRawUnitsScoreAndReportWithTheShorthand) {
  std::ifstream in(std::string(GPSEL_DATA_DIR) + "/diabetes.csv");
  std::string line, csv;
  for (int row = 0; row <= 60 && std::getline(in, line); ++row) {
    // age, bmi, bp and y of the first 60 patients.
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    ASSERT_EQ(cells.size(), 11u) << line;
    csv += cells[0] + "," + cells[2] + "," + cells[3] + "," + cells[10] + "\n";
  }
  const std::string data = WriteTemp("diabetes60_" + std::to_string(getpid()) + ".csv", csv);
  CliRun score = RunGpsel("score --data " + data +
                          " --kernel 'C*SE[*]' --scale-x auto --metrics lap0 --restarts 2"
                          " --threads 1 --json");
  ASSERT_EQ(score.exit_code, 0) << score.err;
  nlohmann::json j = nlohmann::json::parse(score.out);
  const auto& s = j["scores"][0];
  EXPECT_EQ(s["kernel"], "C*SE[0]*SE[1]*SE[2]");
  ASSERT_EQ(s["x_scales"].size(), 3u);
  EXPECT_DOUBLE_EQ(s["x_scales"][1].get<double>(), (38.0 - 18.6) / 10.0);  // BMI's range/10
  EXPECT_TRUE(s["map_fit"]["values"].contains("SE[2].lengthscale"));

  const std::string out = testing::TempDir() + "/report_columns_" + std::to_string(getpid());
  CliRun report = RunGpsel("report --data " + data +
                           " --kernel 'C*SE[*]' --scale-x auto --restarts 2 --threads 1 --out " + out);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(report.out, testing::HasSubstr("chosen kernel C*SE[0]*SE[1]*SE[2]"));
  EXPECT_TRUE(std::ifstream(out + "/observed_vs_predicted.svg").good());
  std::ifstream html(out + "/report.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_THAT(page, testing::HasSubstr("Observed against predicted"));
}

}  // namespace
