// `gpsel score|search --save-model`, `gpsel predict --model` and `predict --samples`, run as a
// user would: a saved model predicts exactly what its values given by hand predict, other data
// and bad model files are refused with a message naming the problem, and samples come with their
// seed's bits whatever the thread count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/client/cli/run_gpsel.h"

namespace {

using ::gpsel::testing_cli::CliRun;
using ::gpsel::testing_cli::RunGpsel;
using ::testing::HasSubstr;

const std::string kNile = std::string(GPSEL_DATA_DIR) + "/nile.csv";

std::string TempPath(const std::string& name) { return testing::TempDir() + "/" + name; }

std::string WriteTemp(const std::string& name, const std::string& content) {
  const std::string path = TempPath(name);
  std::ofstream(path) << content;
  return path;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The --hyperparameter flags of a fit's values, printed to round trip.
std::string ValuesAsFlags(const nlohmann::json& values) {
  std::string out;
  for (const auto& [name, value] : values.items()) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", value.get<double>());
    out += " --hyperparameter " + name + "=" + buffer;
  }
  return out;
}

TEST(CliSavedModelTest, PredictFromAModelEqualsItsValuesGivenByHand) {
  const std::string model = TempPath("nile_model.json");
  CliRun score = RunGpsel("score --data " + kNile + " --kernel 'C*SE' --kernel SE --restarts 2 "
                          "--save-model " + model);
  ASSERT_EQ(score.exit_code, 0) << score.err;
  EXPECT_THAT(score.err, HasSubstr("the best of 2 kernels by lap0"));
  const nlohmann::json saved = ReadJson(model);
  EXPECT_EQ(saved["format"], "gpsel.v1.SavedModel");
  EXPECT_EQ(saved["num_points"], "100");  // int64 in the protobuf JSON mapping: a string
  EXPECT_EQ(saved["num_dims"], 1);
  EXPECT_THAT(saved["data_hash"].get<std::string>(), testing::StartsWith("fnv1a64:"));
  EXPECT_TRUE(saved["standardized"].get<bool>());
  const std::string kernel = saved["kernel"];
  for (const std::string objective : {"map", "mll"}) {
    const std::string at = " --grid 1860:1990:14 --json --objective " + objective;
    CliRun from_model = RunGpsel("predict --data " + kNile + " --model " + model + at);
    ASSERT_EQ(from_model.exit_code, 0) << from_model.err;
    const nlohmann::json& values = saved[objective + "_fit"]["values"];
    CliRun by_hand = RunGpsel("predict --data " + kNile + " --kernel '" + kernel + "'" +
                              ValuesAsFlags(values) + at);
    ASSERT_EQ(by_hand.exit_code, 0) << by_hand.err;
    const nlohmann::json a = nlohmann::json::parse(from_model.out);
    const nlohmann::json b = nlohmann::json::parse(by_hand.out);
    EXPECT_EQ(a["mean"], b["mean"]) << objective;  // bit for bit
    EXPECT_EQ(a["variance"], b["variance"]) << objective;
    EXPECT_EQ(a["noise_variance"], b["noise_variance"]) << objective;
    EXPECT_EQ(a["hyperparameters"], values) << objective;
  }
  // --kernel may repeat the model's kernel, not name another.
  EXPECT_EQ(RunGpsel("predict --data " + kNile + " --model " + model + " --kernel '" + kernel +
                     "' --grid 1900:1901:2").exit_code,
            0);
  CliRun other = RunGpsel("predict --data " + kNile + " --model " + model +
                          " --kernel 'SE+LIN' --grid 1900:1901:2");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_THAT(other.err, HasSubstr("the model's kernel is"));
}

TEST(CliSavedModelTest, OtherDataIsRefusedNamingTheDifference) {
  const std::string model = TempPath("nile_model_other.json");
  ASSERT_EQ(RunGpsel("score --data " + kNile + " --kernel SE --restarts 1 --metrics map "
                     "--save-model " + model).exit_code,
            0);
  CliRun smaller = RunGpsel("predict --data " + std::string(GPSEL_DATA_DIR) +
                            "/interpretable_linear.csv --model " + model + " --grid 0:1:3");
  EXPECT_EQ(smaller.exit_code, 2);
  EXPECT_THAT(smaller.err, HasSubstr("fitted on 100 points of 1 column(s), the data has"));
  std::ifstream in(kNile);
  std::stringstream text;
  text << in.rdbuf();
  std::string changed = text.str();
  changed.replace(changed.find("1120.0"), 6, "1121.0");  // one flow of 1871
  CliRun edited = RunGpsel("predict --data " + WriteTemp("nile_edited.csv", changed) +
                           " --model " + model + " --grid 1900:1901:2");
  EXPECT_EQ(edited.exit_code, 2);
  EXPECT_THAT(edited.err, HasSubstr("other data of the same size"));
  // A model saved with MAP only has no MLL fit to predict with.
  CliRun mll = RunGpsel("predict --data " + kNile + " --model " + model +
                        " --grid 1900:1901:2 --objective mll");
  EXPECT_EQ(mll.exit_code, 2);
  EXPECT_THAT(mll.err, HasSubstr("model.mll_fit: the model has no MLL fit"));
}

TEST(CliSavedModelTest, BadModelFilesAreNamed) {
  const std::string model = TempPath("nile_model_bad.json");
  ASSERT_EQ(RunGpsel("score --data " + kNile + " --kernel SE --restarts 1 --metrics map "
                     "--save-model " + model).exit_code,
            0);
  nlohmann::json negative = ReadJson(model);
  negative["map_fit"]["values"]["noise"] = -1.0;
  nlohmann::json foreign_format = ReadJson(model);
  foreign_format["format"] = "sklearn.GaussianProcessRegressor";
  struct Case {
    std::string content, message;
  };
  for (const Case& c : std::vector<Case>{
           {"not json at all", "not a gpsel saved model"},
           {R"({"kernel_": "SE", "theta": [1, 2]})", "not a gpsel saved model"},
           {"{}", "model.format: is missing"},
           {foreign_format.dump(), "not \"gpsel.v1.SavedModel\""},
           {negative.dump(), "model.map_fit.values[noise]: must be finite and > 0"},
       }) {
    const std::string path = WriteTemp("bad_model.json", c.content);
    CliRun run = RunGpsel("predict --data " + kNile + " --model " + path + " --grid 1900:1901:2");
    EXPECT_EQ(run.exit_code, 2) << c.content;
    EXPECT_THAT(run.err, HasSubstr(c.message)) << c.content;
    EXPECT_THAT(run.err, HasSubstr(path)) << c.content;
    EXPECT_TRUE(run.out.empty()) << c.content;
  }
  CliRun absent = RunGpsel("predict --data " + kNile + " --model /nonexistent/model.json "
                           "--grid 1900:1901:2");
  EXPECT_EQ(absent.exit_code, 2);
  EXPECT_THAT(absent.err, HasSubstr("--model /nonexistent/model.json: cannot be read"));
  CliRun neither = RunGpsel("predict --data " + kNile + " --grid 1900:1901:2");
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_THAT(neither.err, HasSubstr("give --kernel EXPR or --model FILE"));
  // --detach cannot save what it does not wait for; a directory cannot be written.
  EXPECT_EQ(RunGpsel("score --data " + kNile + " --kernel SE --save-model /nonexistent/m.json")
                .exit_code,
            2);
}

TEST(CliSavedModelTest, SearchSavesTheBestKernelWithBothFits) {
  const std::string model = TempPath("nile_search_model.json");
  CliRun search = RunGpsel("search --data " + kNile + " --base SE,LIN --depth 1 --restarts 1 "
                           "--threads 1 --json --save-model " + model);
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const nlohmann::json result = nlohmann::json::parse(search.out);
  const nlohmann::json saved = ReadJson(model);
  EXPECT_EQ(saved["kernel"], result["best_kernel"]);
  EXPECT_TRUE(saved.contains("mll_fit") && saved.contains("map_fit"));
  EXPECT_EQ(saved["map_fit"]["values"], result["best"]["map_fit"]["values"]);
  EXPECT_EQ(saved["metrics"]["lap0"], result["best"]["metrics"]["lap0"]);
}

TEST(CliSamplesTest, SamplesInCsvAndJsonSameSeedSameBitsWhateverTheThreads) {
  const std::string given = " --kernel SE --hyperparameter SE.lengthscale=5 "
                            "--hyperparameter noise=0.3 --grid 1860:1990:27";
  const std::string args = "predict --data " + kNile + given + " --samples 4 --seed 11";
  CliRun csv = RunGpsel(args + " --format csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::istringstream lines(csv.out);
  std::string header;
  std::getline(lines, header);
  EXPECT_EQ(header, "x,mean,sd,sd_with_noise,sample_1,sample_2,sample_3,sample_4");
  int rows = 0;
  for (std::string row; std::getline(lines, row);) ++rows;
  EXPECT_EQ(rows, 27);
  EXPECT_EQ(RunGpsel(args + " --format csv").out, csv.out);
  for (const char* threads : {"1", "2", "4"}) {  // OpenBLAS's threads
    setenv("OPENBLAS_NUM_THREADS", threads, 1);
    EXPECT_EQ(RunGpsel(args + " --format csv").out, csv.out) << threads;
  }
  unsetenv("OPENBLAS_NUM_THREADS");
  CliRun json = RunGpsel(args + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["samples"]["rows"], 4);
  EXPECT_EQ(j["samples"]["cols"], 27);
  EXPECT_EQ(j["samples"]["values"].size(), 4u * 27u);
  // The CSV's sample column k is row k of the JSON matrix (17 digits: the same double).
  std::istringstream again(csv.out);
  std::getline(again, header);
  std::string first;
  std::getline(again, first);
  double x, mean, sd, sd_noise, s1;
  ASSERT_EQ(std::sscanf(first.c_str(), "%lf,%lf,%lf,%lf,%lf", &x, &mean, &sd, &sd_noise, &s1), 5);
  EXPECT_EQ(s1, j["samples"]["values"][0].get<double>());
  CliRun other_seed = RunGpsel("predict --data " + kNile + given + " --samples 4 --seed 12 "
                               "--format csv");
  EXPECT_NE(other_seed.out, csv.out);
  CliRun too_many = RunGpsel("predict --data " + kNile + given + " --samples 100000");
  EXPECT_EQ(too_many.exit_code, 2);
  EXPECT_THAT(too_many.err,
              HasSubstr("--samples: 100000 samples × 27 inputs = 2700000 values, more than the "
                        "limit of 1000000"));
}

}  // namespace
