// Tests that need processes: kill -9 of gpsel-server during a job (the job finishes after a
// restart, once), the `gpsel` CLI against a server (remote output equals in-process output; the
// search's progress streamed live to a terminal), and an independent Python client reading the
// error details.
#include <poll.h>
#include <pty.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include "gmock/gmock.h"
#include "gpsel/proto/bridge/convert.h"
#include "gtest/gtest.h"
#include "tests/client/cli/json_keys.h"
#include "tests/server/service/server_test_util.h"
#include "tests/test_timeout.h"

namespace gpsel::testing {
namespace {

using ::testing::HasSubstr;

// A command run with its stderr on a pseudo-terminal, as a person at a terminal sees it (the
// CLI draws its progress line only there), and its stdout in a file.
struct TerminalRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  absl::Time start;
  absl::Time first_err = absl::InfiniteFuture();  // when the first stderr bytes arrived
  absl::Time end;                                 // when the terminal closed (the CLI exited)
};

TerminalRun RunOnTerminal(const std::string& command, const std::filesystem::path& out_file) {
  TerminalRun run;
  int master = -1;
  int slave = -1;
  if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return run;
  run.start = absl::Now();
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    const int out = open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = open("/dev/null", O_RDONLY);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(slave, STDERR_FILENO);
    close(master);
    close(slave);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(slave);
  char buffer[4096];
  while (true) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 120000) <= 0) break;  // bounded: a hung CLI fails the test, not ctest
    const ssize_t got = read(master, buffer, sizeof(buffer));
    if (got <= 0) break;  // EIO once the last writer (the CLI) has exited
    if (run.err.empty()) run.first_err = absl::Now();
    run.err.append(buffer, got);
  }
  run.end = absl::Now();
  close(master);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out_file);
  run.out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return run;
}

TEST(KillTest, JobSurvivesKillDashNineAndCompletesOnce) {
  const std::filesystem::path dir = MakeTempDir("gpsel-kill-test");
  const std::vector<std::string> args = {
      "--listen", "127.0.0.1:0", "--metrics-listen", "", "--store",
      "sqlite:" + (dir / "jobs.db").string(), "--job-lease", "2", "--workers", "1"};
  auto first = std::make_unique<ServerProcess>(args, dir / "server.log");
  ASSERT_GT(first->port(), 0) << "gpsel-server did not start; see " << dir / "server.log";

  // A job long enough to be killed in the middle: about 5 s alone on this 2-core machine (a
  // 60-point version became a 0.4 s job once the numerics got faster, and finished before the kill).
  std::unique_ptr<Client> client = Connect(first->port());
  v1::SubmitEvidenceRequest request;
  bridge::ToProto(MaunaLoa(240), request.mutable_dataset());
  request.set_kernel("C*SE");
  request.set_request_id("kill-test");
  request.mutable_options()->set_live_points(400);
  request.mutable_options()->set_dlogz(0.05);
  request.mutable_options()->set_seed(3);
  absl::StatusOr<v1::SubmitEvidenceResponse> submitted = client->SubmitEvidence(request);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string name = submitted->job().name();
  absl::Time deadline = absl::Now() + Scaled(absl::Seconds(20));
  v1::JobState state = v1::JOB_STATE_QUEUED;
  while (state == v1::JOB_STATE_QUEUED && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    state = client->GetJob(name)->state();
  }
  ASSERT_EQ(state, v1::JOB_STATE_RUNNING);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_EQ(client->GetJob(name)->state(), v1::JOB_STATE_RUNNING) << "job too short to kill";
  first->Kill(SIGKILL);

  ServerProcess second(args, dir / "server.log");
  ASSERT_GT(second.port(), 0);
  std::unique_ptr<Client> again = Connect(second.port());
  absl::StatusOr<v1::Job> done = again->WaitJob(name, nullptr, Scaled(absl::Seconds(150)));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::JOB_STATE_SUCCEEDED) << done->error().message();
  EXPECT_EQ(done->attempts(), 2);  // the killed attempt and the one that finished
  EXPECT_TRUE(std::isfinite(done->evidence_result().log_evidence()));
  // Exactly one job, one visible result; the retried submit maps onto it.
  absl::StatusOr<v1::ListJobsResponse> jobs = again->ListJobs(v1::ListJobsRequest());
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->jobs_size(), 1);
  EXPECT_EQ(jobs->jobs(0).name(), name);
  absl::StatusOr<v1::SubmitEvidenceResponse> resubmitted = again->SubmitEvidence(request);
  ASSERT_TRUE(resubmitted.ok());
  EXPECT_FALSE(resubmitted->created());
  EXPECT_EQ(resubmitted->job().evidence_result().log_evidence(),
            done->evidence_result().log_evidence());
  second.Kill(SIGTERM);
  std::filesystem::remove_all(dir);
}

class CliRemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("gpsel-cli-remote-test");
    ServerOptions options = TestServerOptions(dir_);
    absl::StatusOr<std::unique_ptr<GpselServer>> server = GpselServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  static std::string Cli(const std::string& args) {
    return absl::StrCat(GPSEL_CLI_PATH, " ", args);
  }
  // Removes timing fields, which legitimately differ between two runs.
  static nlohmann::json WithoutTimes(nlohmann::json j) {
    if (j.is_object()) {
      j.erase("seconds");
      for (auto& [key, value] : j.items()) value = WithoutTimes(value);
    } else if (j.is_array()) {
      for (auto& value : j) value = WithoutTimes(value);
    }
    return j;
  }

  std::filesystem::path dir_;
  std::unique_ptr<GpselServer> server_;
  std::string address_;
};

TEST_F(CliRemoteTest, ScoreRemoteEqualsInProcess) {
  const std::string args = absl::StrCat("score --data ", DataPath("interpretable_linear.csv"),
                                        " --kernel SE --kernel 'C*LIN' --no-standardize --seed 2");
  CommandResult local = RunCommand(Cli(args + " --json"));
  CommandResult remote = RunCommand(Cli(args + " --json --server " + address_));
  ASSERT_EQ(local.exit_code, 0);
  ASSERT_EQ(remote.exit_code, 0) << remote.output;
  EXPECT_EQ(WithoutTimes(nlohmann::json::parse(remote.output)),
            WithoutTimes(nlohmann::json::parse(local.output)));
  // The table, which prints no timing, is identical byte for byte.
  CommandResult local_table = RunCommand(Cli(args));
  CommandResult remote_table = RunCommand(Cli(args + " --server " + address_));
  EXPECT_EQ(remote_table.output, local_table.output);
}

// A remote sparse score prints each fit's own m in the mll@/map@ columns, as the local run does
// (FitResult.num_inducing on the wire, issue 28): on the Nile series SE's MLL fit ends at a
// smaller m than its MAP fit; before, the remote table printed the score's m in both columns.
TEST_F(CliRemoteTest, SparseScoreShowsEachFitsOwnMAsTheLocalRunDoes) {
  const std::string args = absl::StrCat("score --data ", DataPath("nile.csv"),
                                        " --kernel SE --approx sparse --restarts 1 "
                                        "--metrics mll,map");
  CommandResult local = RunCommand(Cli(args + " --json"));
  CommandResult remote = RunCommand(Cli(args + " --json --server " + address_));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  ASSERT_EQ(remote.exit_code, 0) << remote.output;
  const nlohmann::json local_json = nlohmann::json::parse(local.output);
  EXPECT_EQ(WithoutTimes(nlohmann::json::parse(remote.output)), WithoutTimes(local_json));
  const nlohmann::json& score = local_json["scores"][0];
  ASSERT_EQ(score["method"], "sparse");
  const int mll_m = score["mll_fit"]["num_inducing"].get<int>();
  const int map_m = score["map_fit"]["num_inducing"].get<int>();
  EXPECT_GE(mll_m, 1);
  EXPECT_NE(mll_m, map_m) << "the case no longer shows two different m";
  EXPECT_EQ(score["inducing_points"].get<int>(), std::max(mll_m, map_m));

  CommandResult local_table = RunCommand(Cli(args));
  CommandResult remote_table = RunCommand(Cli(args + " --server " + address_));
  ASSERT_EQ(remote_table.exit_code, 0) << remote_table.output;
  EXPECT_THAT(remote_table.output,
              HasSubstr(absl::StrFormat("%9s %9s", absl::StrCat("m=", mll_m),
                                        absl::StrCat("m=", map_m))));
  EXPECT_EQ(remote_table.output, local_table.output);
}

TEST_F(CliRemoteTest, SearchRemoteStreamsProgressAndEqualsInProcess) {
  // 60 Mauna Loa months, depth 2 over three base kernels: 9 candidates, a few seconds, so
  // progress has time to arrive while the search runs. One thread on both sides: the JSON
  // reports it (remote `--threads 0` means 1 on the server, locally one per core).
  const std::filesystem::path data = dir_ / "mauna_loa_60.csv";
  {
    std::ifstream in(DataPath("mauna_loa_monthly.csv"));
    std::ofstream out(data);
    std::string line;
    for (int i = 0; i < 61 && std::getline(in, line); ++i) out << line << "\n";  // header + 60
  }
  const std::string args = absl::StrCat("search --data ", data.string(),
                                        " --base SE,LIN,PER --depth 2 --seed 2 --threads 1 --json");
  CommandResult local = RunCommand(Cli(args));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  TerminalRun remote = RunOnTerminal(Cli(args + " --server " + address_), dir_ / "remote.json");
  ASSERT_EQ(remote.exit_code, 0) << remote.out << remote.err;

  // The remote result is the in-process result, but for timings.
  nlohmann::json local_json = nlohmann::json::parse(local.output);
  nlohmann::json remote_json = nlohmann::json::parse(remote.out);
  EXPECT_EQ(WithoutTimes(remote_json), WithoutTimes(local_json));
  EXPECT_EQ(remote_json.at("candidates_scored"), 9);
  EXPECT_EQ(remote_json.at("threads"), 1);

  // The terminal saw the progress line redrawn ("\r\033[K[####....]  42% 0:03 ~0:04 left search
  // step 1/2, candidate 2/3: ..."), moving forward through both steps, and the re-score of the
  // best kernel as a phase of its own ("... rescore re-scoring SE+PER ...", when the server's
  // coalescing lets one through) moving forward from 0, and cleared at the end.
  std::vector<std::string> frames;
  for (absl::string_view piece : absl::StrSplit(remote.err, "\r\033[K")) {
    if (!piece.empty()) frames.emplace_back(piece);
  }
  ASSERT_GE(frames.size(), 3u) << remote.err;
  EXPECT_TRUE(absl::EndsWith(remote.err, "\r\033[K")) << "progress line not cleared";
  int previous_percent = -1;
  bool saw_step_1 = false;
  bool saw_step_2 = false;
  bool in_rescore = false;
  for (const std::string& frame : frames) {
    ASSERT_EQ(frame.front(), '[') << frame;
    const size_t bracket = frame.find("] ");
    ASSERT_NE(bracket, std::string::npos) << frame;
    int percent = -1;
    ASSERT_TRUE(absl::SimpleAtoi(
        absl::StripAsciiWhitespace(frame.substr(bracket + 2, frame.find('%') - bracket - 2)),
        &percent))
        << frame;
    const bool rescore = absl::StrContains(frame, " rescore re-scoring ");
    if (!rescore) {
      EXPECT_THAT(frame, HasSubstr(" search "));
    }
    EXPECT_THAT(frame, ::testing::ContainsRegex("% [0-9]+:[0-9][0-9] "));  // the elapsed time
    if (rescore != in_rescore) previous_percent = -1;  // the re-score counts from 0 again
    in_rescore = rescore;
    // Every update within a phase moves forward.
    EXPECT_GE(percent, previous_percent) << "progress went backwards: " << frame;
    previous_percent = percent;
    saw_step_1 = saw_step_1 || absl::StrContains(frame, "step 1/2");
    saw_step_2 = saw_step_2 || absl::StrContains(frame, "step 2/2");
  }
  EXPECT_TRUE(saw_step_1 && saw_step_2) << remote.err;
  // Live: the first update reached the terminal in the first half of the run, not in a burst
  // when the result came.
  EXPECT_LT(remote.first_err - remote.start, (remote.end - remote.start) / 2)
      << "first progress after " << (remote.first_err - remote.start) << " of "
      << (remote.end - remote.start);

  // Without a terminal there is no progress line, and the output is the same.
  CommandResult piped = RunCommand(Cli(args + " --server " + address_ + " 2>&1"));
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(WithoutTimes(nlohmann::json::parse(piped.output)), WithoutTimes(local_json));
}

TEST_F(CliRemoteTest, HealthJobsAndPredict) {
  CommandResult health = RunCommand(Cli("health --json --server " + address_));
  EXPECT_EQ(health.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(health.output).at("status"), "SERVING");
  EXPECT_NE(RunCommand(Cli("health --timeout 2 --server 127.0.0.1:1")).exit_code, 0);

  CommandResult submitted = RunCommand(Cli(absl::StrCat(
      "evidence --data ", DataPath("interpretable_linear.csv"),
      " --kernel SE --no-standardize --nlive 150 --dlogz 0.1 --detach --json --server ",
      address_)));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  // The SubmitEvidenceResponse: the job, named "jobs/{id}".
  gpsel::testing_json::ExpectGoldenKeys("evidence_detach", submitted.output);
  const std::string id = nlohmann::json::parse(submitted.output).at("job").at("name");
  ASSERT_TRUE(absl::StartsWith(id, "jobs/")) << id;

  CommandResult waited = RunCommand(Cli("jobs wait " + id + " --json --server " + address_));
  ASSERT_EQ(waited.exit_code, 0) << waited.output;
  gpsel::testing_json::ExpectGoldenKeys("jobs_wait", waited.output);
  nlohmann::json job = nlohmann::json::parse(waited.output);
  EXPECT_EQ(job.at("state"), "JOB_STATE_SUCCEEDED");
  EXPECT_TRUE(job.at("evidence_result").at("log_evidence").is_number());

  CommandResult got = RunCommand(Cli("jobs get " + id + " --json --server " + address_));
  ASSERT_EQ(got.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(got.output).at("state"), "JOB_STATE_SUCCEEDED");
  CommandResult listed = RunCommand(Cli("jobs list --json --server " + address_));
  ASSERT_EQ(listed.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(listed.output).at("jobs").size(), 1u);
  CommandResult cancelled = RunCommand(Cli("jobs cancel " + id + " --server " + address_));
  EXPECT_EQ(cancelled.exit_code, 0);
  EXPECT_EQ(RunCommand(Cli("jobs get NOSUCHJOB --server " + address_)).exit_code, 2);

  // `evidence --server` follows the job and prints what the in-process run prints.
  const std::string evidence_args =
      absl::StrCat("evidence --data ", DataPath("interpretable_linear.csv"),
                   " --kernel SE --no-standardize --nlive 150 --dlogz 0.1 --seed 4 --json");
  CommandResult local_evidence = RunCommand(Cli(evidence_args));
  CommandResult remote_evidence = RunCommand(Cli(evidence_args + " --server " + address_));
  ASSERT_EQ(remote_evidence.exit_code, 0) << remote_evidence.output;
  EXPECT_EQ(WithoutTimes(nlohmann::json::parse(remote_evidence.output)),
            WithoutTimes(nlohmann::json::parse(local_evidence.output)));
  // Importance sampling too: the method, its diagnostics and the modes travel through the job
  // (the server runs it on its own thread count; the result does not depend on it).
  CommandResult local_is = RunCommand(Cli(evidence_args + " --method is --threads 1"));
  CommandResult remote_is = RunCommand(Cli(evidence_args + " --method is --server " + address_));
  ASSERT_EQ(remote_is.exit_code, 0) << remote_is.output;
  const nlohmann::json remote_is_json = nlohmann::json::parse(remote_is.output);
  EXPECT_EQ(remote_is_json.at("method"), "EVIDENCE_METHOD_IMPORTANCE");
  EXPECT_TRUE(remote_is_json.at("importance").at("reliable").get<bool>());
  EXPECT_EQ(WithoutTimes(remote_is_json), WithoutTimes(nlohmann::json::parse(local_is.output)));

  const std::string predict_args =
      absl::StrCat("predict --data ", DataPath("interpretable_linear.csv"),
                   " --kernel SE --grid 0:1:5 --no-standardize --json");
  CommandResult local_predict = RunCommand(Cli(predict_args));
  CommandResult remote_predict = RunCommand(Cli(predict_args + " --server " + address_));
  ASSERT_EQ(local_predict.exit_code, 0);
  ASSERT_EQ(remote_predict.exit_code, 0) << remote_predict.output;
  EXPECT_EQ(WithoutTimes(nlohmann::json::parse(remote_predict.output)),
            WithoutTimes(nlohmann::json::parse(local_predict.output)));
  // CSV: a header and one row per grid point, the same numbers on both sides.
  const std::string csv_args =
      absl::StrCat("predict --data ", DataPath("interpretable_linear.csv"),
                   " --kernel SE --grid 0:1:5 --no-standardize --format csv");
  CommandResult local_csv = RunCommand(Cli(csv_args));
  CommandResult remote_csv = RunCommand(Cli(csv_args + " --server " + address_));
  ASSERT_EQ(local_csv.exit_code, 0) << local_csv.output;
  EXPECT_TRUE(absl::StartsWith(local_csv.output, "x,mean,sd,sd_with_noise\n")) << local_csv.output;
  EXPECT_EQ(std::count(local_csv.output.begin(), local_csv.output.end(), '\n'), 6);
  EXPECT_EQ(remote_csv.output, local_csv.output);
  // score takes --token-file like every command (it used to read only $GPSEL_AUTH_TOKEN): an
  // unreadable token file is the CLI's own error, exit 2, before any call.
  CommandResult bad_token = RunCommand(Cli(absl::StrCat(
      "score --data ", DataPath("interpretable_linear.csv"),
      " --kernel SE --token-file /nonexistent/token --server ", address_, " 2>&1")));
  EXPECT_EQ(bad_token.exit_code, 2) << bad_token.output;
  EXPECT_THAT(bad_token.output, HasSubstr("--token-file"));
}

// `search --job` and `score --job` run on the shared queue and print what the in-process runs
// print; `--detach` prints the Submit…Response, and `jobs wait` then shows the result.
TEST_F(CliRemoteTest, SearchAndScoreAsJobsEqualInProcess) {
  const std::string search_args =
      absl::StrCat("search --data ", DataPath("interpretable_linear.csv"),
                   " --base SE,LIN --depth 2 --seed 3 --threads 1 --no-standardize --json");
  CommandResult local_search = RunCommand(Cli(search_args));
  ASSERT_EQ(local_search.exit_code, 0) << local_search.output;
  CommandResult job_search = RunCommand(Cli(search_args + " --job --server " + address_));
  ASSERT_EQ(job_search.exit_code, 0) << job_search.output;
  EXPECT_EQ(WithoutTimes(nlohmann::json::parse(job_search.output)),
            WithoutTimes(nlohmann::json::parse(local_search.output)));

  const std::string score_args =
      absl::StrCat("score --data ", DataPath("interpretable_linear.csv"),
                   " --kernel SE --kernel 'SE + LIN' --kernel LIN --seed 3 --no-standardize --json");
  CommandResult local_score = RunCommand(Cli(score_args));
  ASSERT_EQ(local_score.exit_code, 0) << local_score.output;
  CommandResult submitted = RunCommand(Cli(score_args + " --detach --server " + address_));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const nlohmann::json response = nlohmann::json::parse(submitted.output);
  EXPECT_EQ(response.at("created"), true);
  EXPECT_EQ(response.at("job").at("kind"), "score");
  const std::string id = response.at("job").at("name");
  CommandResult waited = RunCommand(Cli("jobs wait " + id + " --json --server " + address_));
  ASSERT_EQ(waited.exit_code, 0) << waited.output;
  const nlohmann::json job = nlohmann::json::parse(waited.output);
  EXPECT_EQ(job.at("state"), "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(WithoutTimes(job.at("score_result").at("scores")),
            WithoutTimes(nlohmann::json::parse(local_score.output).at("scores")));
  CommandResult line = RunCommand(Cli("jobs get " + id + " --server " + address_));
  ASSERT_EQ(line.exit_code, 0) << line.output;
  EXPECT_THAT(line.output, HasSubstr("score"));
  EXPECT_THAT(line.output, HasSubstr("3 kernel(s) scored"));
}

// `score --search-starts` gives the same numbers in-process, with --server (ScoreRequest
// .search_starts) and as a score job (--job: the sub-kernels PER and RQ are tasks of its first
// round); it refused --server before (issue 27). Sunspots thinned to every other year, where the
// plain score of PER+RQ ends elsewhere (tests/core/optima_test.cc).
TEST_F(CliRemoteTest, ScoreWithSearchStartsEqualsInProcessOverGrpcAndAsAJob) {
  const std::filesystem::path data = dir_ / "sunspots_every_other_year.csv";
  {
    std::ifstream in(DataPath("sunspots_yearly.csv"));
    std::ofstream out(data);
    std::string line;
    for (int i = 0; std::getline(in, line); ++i) {
      if (i == 0 || i % 2 == 1) out << line << "\n";  // the header, then rows 0, 2, 4, ...
    }
  }
  const std::string args = absl::StrCat("score --data ", data.string(),
                                        " --kernel 'PER+RQ' --metrics mll --restarts 1"
                                        " --max-draws-factor 1 --search-starts --json");
  CommandResult local = RunCommand(Cli(args));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const nlohmann::json expected = WithoutTimes(nlohmann::json::parse(local.output));
  for (const char* how : {" --server ", " --job --server "}) {
    CommandResult remote = RunCommand(Cli(args + how + address_));
    ASSERT_EQ(remote.exit_code, 0) << how << remote.output;
    EXPECT_EQ(WithoutTimes(nlohmann::json::parse(remote.output)), expected) << how;
  }
  CommandResult plain = RunCommand(Cli(absl::StrCat("score --data ", data.string(),
                                                    " --kernel 'PER+RQ' --metrics mll --restarts 1"
                                                    " --max-draws-factor 1 --json")));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const double plain_mll =
      nlohmann::json::parse(plain.output).at("scores").at(0).at("metrics").at("mll");
  EXPECT_GT(std::abs(plain_mll - expected.at("scores").at(0).at("metrics").at("mll").get<double>()),
            1e-3);
}

// `gpsel report` on a server draws exactly what it draws in-process: the same Score, Predict
// (with the summands' posteriors over gRPC) and evidence results give byte-identical SVGs.
// `search --operators +,*,CP[1] --server`: the pinned change move travels in the request
// (SearchRequest.change_columns) and the remote search equals the in-process one. Data: the
// Nile's years as column 1 beside a column of uniform noise (column 0).
TEST_F(CliRemoteTest, SearchWithAChangeMovePinnedToAColumnEqualsInProcess) {
  const std::filesystem::path data = dir_ / "nile_beside_noise.csv";
  {
    std::ifstream in(DataPath("nile.csv"));
    std::ofstream out(data);
    std::string line;
    std::getline(in, line);  // header x,y
    out << "noise,year,flow\n";
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> uniform(0.0, 10.0);
    while (std::getline(in, line)) {
      if (!line.empty()) out << uniform(rng) << "," << line << "\n";
    }
  }
  const std::string args =
      absl::StrCat("search --data ", data.string(),
                   " --base C --depth 2 --operators '+,*,CP[1]' --restarts 1 --seed 3"
                   " --threads 1 --json");
  CommandResult local = RunCommand(Cli(args));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  CommandResult remote = RunCommand(Cli(args + " --server " + address_));
  ASSERT_EQ(remote.exit_code, 0) << remote.output;
  const nlohmann::json local_json = nlohmann::json::parse(local.output);
  EXPECT_EQ(local_json["best_kernel"], "CP[1](C,C)");
  EXPECT_EQ(local_json["change_columns"], nlohmann::json::array({1}));
  EXPECT_EQ(WithoutTimes(nlohmann::json::parse(remote.output)), WithoutTimes(local_json));
  // A column the data do not have: refused remotely as in-process, naming it.
  const std::string bad =
      absl::StrCat("search --data ", data.string(), " --base C --operators '+,*,CP[2]'");
  CommandResult local_bad = RunCommand(Cli(bad + " 2>&1"));
  CommandResult remote_bad = RunCommand(Cli(bad + " --server " + address_ + " 2>&1"));
  EXPECT_NE(local_bad.exit_code, 0);
  EXPECT_NE(remote_bad.exit_code, 0);
  EXPECT_THAT(local_bad.output, HasSubstr("column 2"));
  EXPECT_THAT(remote_bad.output, HasSubstr("column 2"));
}

TEST_F(CliRemoteTest, ReportRemoteDrawsTheSameFigures) {
  const std::string args =
      absl::StrCat("report --data ", DataPath("nile.csv"),
                   " --kernel SE --kernel 'SE+LIN' --restarts 2 --seed 3 --threads 1 --evidence"
                   " --nlive 50 --dlogz 0.5 --out ");
  CommandResult local = RunCommand(Cli(args + (dir_ / "local").string()));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  CommandResult remote =
      RunCommand(Cli(args + (dir_ / "remote").string() + " --server " + address_));
  ASSERT_EQ(remote.exit_code, 0) << remote.output;
  auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  int figures = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "local")) {
    if (entry.path().extension() != ".svg") continue;
    ++figures;
    EXPECT_EQ(read(entry.path()), read(dir_ / "remote" / entry.path().filename()))
        << entry.path().filename();
  }
  EXPECT_GE(figures, 4);  // fit, metrics, laplace, residuals (+ components when SE+LIN wins)
}

// `gpsel report --search` on a server takes the compared kernels' scores from the search as it
// does in-process (no Score call for them), and draws the same metrics figure.
TEST_F(CliRemoteTest, ReportSearchRemoteUsesTheSearchsScores) {
  const std::string args = absl::StrCat(
      "report --data ", DataPath("interpretable_linear.csv"),
      " --search --base SE,LIN --depth 2 --metric mll --restarts 2 --seed 3 --threads 1 --out ");
  CommandResult local = RunCommand(Cli(args + (dir_ / "search_local").string()));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  CommandResult remote =
      RunCommand(Cli(args + (dir_ / "search_remote").string() + " --server " + address_));
  ASSERT_EQ(remote.exit_code, 0) << remote.output;
  for (const CommandResult* run : {&local, &remote}) {
    EXPECT_THAT(run->output, HasSubstr("kernels compared: 2 scored by the search"));
    EXPECT_THAT(run->output, HasSubstr(", 0 scored for the report"));
  }
  auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string metrics = read(dir_ / "search_local" / "metrics.svg");
  EXPECT_FALSE(metrics.empty());
  EXPECT_EQ(metrics, read(dir_ / "search_remote" / "metrics.svg"));
}

TEST(TlsTest, TlsServerAcceptsTrustingClientsOnly) {
  if (!OnPath("openssl")) GTEST_SKIP() << "openssl not installed: cannot make a test certificate";
  const std::filesystem::path dir = MakeTempDir("gpsel-tls-test");
  const std::string cert = (dir / "cert.pem").string();
  const std::string key = (dir / "key.pem").string();
  ASSERT_EQ(RunCommand("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " +
                       cert + " -days 2 -subj /CN=localhost -addext "
                       "subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null")
                .exit_code,
            0);
  ServerOptions options = TestServerOptions(dir);
  options.jobs.workers = 0;
  options.tls_cert_file = cert;
  options.tls_key_file = key;
  absl::StatusOr<std::unique_ptr<GpselServer>> server = GpselServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions secure;
  secure.target = absl::StrCat("localhost:", (*server)->port());
  secure.tls_ca_file = cert;
  secure.timeout = Scaled(absl::Seconds(10));
  auto client = Client::Create(secure);
  ASSERT_TRUE(client.ok());
  auto status = (*client)->Health();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(*status, grpc::health::v1::HealthCheckResponse::SERVING);
  ClientOptions plaintext = secure;
  plaintext.tls_ca_file.clear();
  plaintext.max_attempts = 1;
  plaintext.timeout = absl::Seconds(3);
  EXPECT_FALSE((*Client::Create(plaintext))->Health().ok());
  server->reset();
  std::filesystem::remove_all(dir);
}

TEST(PythonInteropTest, PythonClientReadsScoreAndErrorDetails) {
  const std::filesystem::path dir = MakeTempDir("gpsel-python-test");
  ServerOptions options = TestServerOptions(dir);
  options.jobs.workers = 0;
  absl::StatusOr<std::unique_ptr<GpselServer>> server = GpselServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  // Debian's python3-grpcio lives in the system interpreter, not in a virtualenv's.
  const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3"
                                                                          : "python3";
  CommandResult result = RunCommand(absl::StrCat(
      python, " ", GPSEL_SOURCE_DIR, "/tests/server/service/python_interop.py --target 127.0.0.1:",
      (*server)->port(), " --descriptor-set ", GPSEL_DESCRIPTOR_SET, " 2>&1"));
  server->reset();
  std::filesystem::remove_all(dir);
  if (result.exit_code == 77) GTEST_SKIP() << result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("error details ok"));
}

}  // namespace
}  // namespace gpsel::testing
