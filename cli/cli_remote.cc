// The service side of the `gpsel` CLI (built only with gRPC, GPSEL_WITH_SERVICE):
//   * installs the remote hooks of cli_common.h, so `score --server` and `evidence --server`
//     run on a gpsel-server and print with the same printers as in-process runs;
//   * `gpsel jobs list|get|wait|cancel`, `gpsel health`, `gpsel predict`.
// Token and TLS settings come from flags here and from the environment for the hooks:
// GPSEL_AUTH_TOKEN, GPSEL_TLS=1, GPSEL_TLS_CA, GPSEL_TLS_CERT, GPSEL_TLS_KEY.
//
//   gpsel jobs wait jobs/01J... --server 127.0.0.1:50051 --json
//   gpsel health --server 127.0.0.1:50051 && echo up

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/cli_common.h"
#include "client/client.h"
#include "bridge/convert.h"

namespace gpsel::cli {
namespace {

// ---- connection flags ------------------------------------------------------------------------

struct RemoteFlags {
  std::string server;
  double timeout_seconds = 600;
  std::string token_file;
  bool tls = false;
  std::string tls_ca;
  bool json = false;
};

void AddRemoteFlags(CLI::App& sub, RemoteFlags& flags, bool server_required = true) {
  auto* option = sub.add_option("--server", flags.server, "HOST:PORT of a gpsel-server");
  if (server_required) option->required();
  sub.add_option("--timeout", flags.timeout_seconds, "deadline of each call, seconds")
      ->capture_default_str();
  sub.add_option("--token-file", flags.token_file,
                 "file with the bearer token (default: $GPSEL_AUTH_TOKEN)");
  sub.add_flag("--tls", flags.tls, "connect with TLS (system roots unless --tls-ca)");
  sub.add_option("--tls-ca", flags.tls_ca, "PEM file of the CA to trust (implies --tls)");
  sub.add_flag("--json", flags.json, "print JSON");
}

absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& server,
                                                const RemoteFlags* flags = nullptr) {
  ClientOptions options;
  options.target = server;
  if (flags != nullptr) {
    options.timeout = absl::Seconds(flags->timeout_seconds);
    options.tls = flags->tls;
    options.tls_ca_file = flags->tls_ca;
    if (!flags->token_file.empty()) {
      std::ifstream in(flags->token_file);
      std::getline(in, options.auth_token);
      absl::StripTrailingAsciiWhitespace(&options.auth_token);
      if (options.auth_token.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--token-file: '", flags->token_file, "' is missing or empty"));
      }
    }
  }
  options.ApplyEnvironment();
  return Client::Create(options);
}

// ---- JSON and text of jobs ---------------------------------------------------------------------

std::string StateName(v1::JobState state) {
  const std::string& name = v1::JobState_Name(state);
  return name.rfind("JOB_STATE_", 0) == 0 ? name.substr(10) : name;
}

std::string FormatTime(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixSeconds(t.seconds()) +
                                                       absl::Nanoseconds(t.nanos()),
                          absl::UTCTimeZone());
}

nlohmann::json JobToJson(const v1::Job& job) {
  nlohmann::json j;
  j["name"] = job.name();
  j["id"] = std::string(absl::StripPrefix(job.name(), "jobs/"));
  j["kind"] = job.kind();
  j["kernel"] = job.kernel();
  j["state"] = StateName(job.state());
  j["progress"] = {{"fraction", job.progress().fraction()}, {"message", job.progress().message()}};
  j["attempts"] = job.attempts();
  j["cancel_requested"] = job.cancel_requested();
  if (!job.request_id().empty()) j["request_id"] = job.request_id();
  j["create_time"] = FormatTime(job.create_time());
  if (job.has_start_time()) j["start_time"] = FormatTime(job.start_time());
  if (job.has_finish_time()) j["finish_time"] = FormatTime(job.finish_time());
  if (job.has_error()) {
    j["error"] = {{"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(job.error().code()))},
                  {"message", job.error().message()}};
  }
  if (job.has_evidence_result()) {
    j["result"] = EvidenceResultToJson(bridge::FromProto(job.evidence_result()));
  }
  return j;
}

void PrintJobLine(const v1::Job& job) {
  std::cout << absl::StrFormat("%-31s %-9s %5.1f%%  attempts %d  %s", job.name(),
                               StateName(job.state()), 100.0 * job.progress().fraction(),
                               job.attempts(), job.kernel());
  if (job.has_evidence_result()) {
    std::cout << absl::StrFormat("  log Z = %.4f ± %.4f", job.evidence_result().log_evidence(),
                                 job.evidence_result().log_evidence_error());
  }
  if (job.has_error()) std::cout << "  error: " << job.error().message();
  std::cout << "\n";
}

void PrintJob(const v1::Job& job, bool json) {
  if (json) {
    std::cout << JobToJson(job).dump(2) << "\n";
  } else {
    PrintJobLine(job);
  }
}

// ---- jobs -----------------------------------------------------------------------------------

struct JobsFlags {
  RemoteFlags remote;
  std::string id;
  std::string state;
  int page_size = 0;
  std::string page_token;
  bool all_pages = false;
  double wait_seconds = 0;  // 0 = no limit
};

int RunJobsList(const JobsFlags& flags) {
  absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags.remote.server, &flags.remote);
  if (!client.ok()) return ReportError(client.status());
  v1::ListJobsRequest request;
  request.set_page_size(flags.page_size);
  request.set_page_token(flags.page_token);
  if (!flags.state.empty()) {
    v1::JobState state;
    if (!v1::JobState_Parse("JOB_STATE_" + absl::AsciiStrToUpper(flags.state), &state) ||
        state == v1::JOB_STATE_UNSPECIFIED) {
      return ReportError(absl::InvalidArgumentError(
          "--state: expected queued, running, succeeded, failed or cancelled"));
    }
    request.set_state(state);
  }
  nlohmann::json jobs = nlohmann::json::array();
  std::string next;
  do {
    absl::StatusOr<v1::ListJobsResponse> page = (*client)->ListJobs(request);
    if (!page.ok()) return ReportError(page.status());
    for (const v1::Job& job : page->jobs()) {
      if (flags.remote.json) {
        jobs.push_back(JobToJson(job));
      } else {
        PrintJobLine(job);
      }
    }
    next = page->next_page_token();
    request.set_page_token(next);
  } while (flags.all_pages && !next.empty());
  if (flags.remote.json) {
    nlohmann::json out = {{"jobs", jobs}};
    if (!next.empty()) out["next_page_token"] = next;
    std::cout << out.dump(2) << "\n";
  } else if (!next.empty()) {
    std::cout << "(more: --page-token " << next << ")\n";
  }
  return kExitOk;
}

int RunJobsGet(const JobsFlags& flags) {
  absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags.remote.server, &flags.remote);
  if (!client.ok()) return ReportError(client.status());
  absl::StatusOr<v1::Job> job = (*client)->GetJob(flags.id);
  if (!job.ok()) return ReportError(job.status());
  PrintJob(*job, flags.remote.json);
  return kExitOk;
}

int RunJobsCancel(const JobsFlags& flags) {
  absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags.remote.server, &flags.remote);
  if (!client.ok()) return ReportError(client.status());
  absl::StatusOr<v1::Job> job = (*client)->CancelJob(flags.id);
  if (!job.ok()) return ReportError(job.status());
  PrintJob(*job, flags.remote.json);
  return kExitOk;
}

int RunJobsWait(const JobsFlags& flags) {
  absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags.remote.server, &flags.remote);
  if (!client.ok()) return ReportError(client.status());
  TerminalProgress progress(!flags.remote.json && StderrIsTerminal());
  ProgressCallback draw = progress.callback();
  absl::StatusOr<v1::Job> job = (*client)->WaitJob(
      flags.id,
      [&draw](const v1::Job& update) {
        if (draw) {
          (void)draw(Progress{StateName(update.state()), update.progress().fraction(),
                              update.progress().message()});
        }
      },
      flags.wait_seconds > 0 ? absl::Seconds(flags.wait_seconds) : absl::InfiniteDuration());
  progress.Finish();
  if (!job.ok()) return ReportError(job.status());
  PrintJob(*job, flags.remote.json);
  return job->state() == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailure;
}

std::function<int()> SetupJobs(CLI::App& sub) {
  sub.require_subcommand(1);
  auto flags = std::make_shared<JobsFlags>();
  CLI::App* list = sub.add_subcommand("list", "list jobs, oldest first");
  AddRemoteFlags(*list, flags->remote);
  list->add_option("--state", flags->state, "only jobs in this state (queued, running, ...)");
  list->add_option("--page-size", flags->page_size, "jobs per page (default 50)");
  list->add_option("--page-token", flags->page_token, "continue from a previous page");
  list->add_flag("--all", flags->all_pages, "follow every page");
  CLI::App* get = sub.add_subcommand("get", "show a job (with its result when done)");
  get->add_option("ID", flags->id, "job id or name (jobs/ID)")->required();
  AddRemoteFlags(*get, flags->remote);
  CLI::App* wait = sub.add_subcommand("wait", "follow a job until it ends (exit 0 if it succeeded)");
  wait->add_option("ID", flags->id, "job id or name (jobs/ID)")->required();
  wait->add_option("--wait-limit", flags->wait_seconds, "give up after this many seconds");
  AddRemoteFlags(*wait, flags->remote);
  CLI::App* cancel = sub.add_subcommand("cancel", "ask a job to stop (idempotent)");
  cancel->add_option("ID", flags->id, "job id or name (jobs/ID)")->required();
  AddRemoteFlags(*cancel, flags->remote);
  return [flags, list, get, wait, cancel]() -> int {
    if (list->parsed()) return RunJobsList(*flags);
    if (get->parsed()) return RunJobsGet(*flags);
    if (wait->parsed()) return RunJobsWait(*flags);
    if (cancel->parsed()) return RunJobsCancel(*flags);
    return kExitBadInput;
  };
}

GPSEL_REGISTER_COMMAND(jobs, "jobs", "list, show, wait for or cancel jobs on a gpsel-server",
                       SetupJobs);

// ---- health -----------------------------------------------------------------------------------

std::function<int()> SetupHealth(CLI::App& sub) {
  auto flags = std::make_shared<RemoteFlags>();
  auto service = std::make_shared<std::string>();
  AddRemoteFlags(sub, *flags);
  sub.add_option("--service", *service,
                 "service to check (default: the whole server; e.g. gpsel.v1.ModelSelectionService)");
  return [flags, service]() -> int {
    RemoteFlags quick = *flags;
    absl::StatusOr<std::unique_ptr<Client>> client = Connect(quick.server, &quick);
    if (!client.ok()) return ReportError(client.status());
    absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> status =
        (*client)->Health(*service);
    const std::string name =
        status.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status)
                    : "UNREACHABLE";
    if (flags->json) {
      nlohmann::json j = {{"status", name}};
      if (!status.ok()) j["error"] = std::string(status.status().message());
      std::cout << j.dump() << "\n";
    } else {
      std::cout << name << "\n";
      if (!status.ok()) std::cerr << "gpsel: " << status.status().message() << "\n";
    }
    return status.ok() && *status == grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk
                                                                                   : kExitFailure;
  };
}

GPSEL_REGISTER_COMMAND(health, "health", "check a gpsel-server (exit 0 only when SERVING)",
                       SetupHealth);

// ---- predict ----------------------------------------------------------------------------------

struct PredictFlags {
  FitFlags fit;
  RemoteFlags remote;
  std::string at_path;
  std::string grid;
  std::vector<std::string> hyperparameters;  // NAME=VALUE
  std::string objective = "map";
};

// Rows of numbers from a CSV file of inputs only (optional header, '#' comments).
absl::StatusOr<Eigen::MatrixXd> LoadInputs(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--at: cannot read '", path, "'"));
  std::vector<std::vector<double>> rows;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text.front() == '#') continue;
    std::vector<double> row;
    bool numeric = true;
    for (absl::string_view cell : absl::StrSplit(text, ',')) {
      double value = 0;
      if (!absl::SimpleAtod(absl::StripAsciiWhitespace(cell), &value)) numeric = false;
      row.push_back(value);
    }
    if (!numeric) {
      if (rows.empty()) continue;  // header
      return absl::InvalidArgumentError(
          absl::StrCat("--at: line ", line_number, " of '", path, "' is not numeric"));
    }
    if (!rows.empty() && row.size() != rows.front().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--at: line ", line_number, " has ", row.size(), " columns, expected ",
                       rows.front().size()));
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) return absl::InvalidArgumentError(absl::StrCat("--at: '", path, "' has no rows"));
  Eigen::MatrixXd x(rows.size(), rows.front().size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) x(i, j) = rows[i][j];
  }
  return x;
}

// "START:STOP:N" → N evenly spaced 1-D inputs.
absl::StatusOr<Eigen::MatrixXd> ParseGrid(const std::string& grid) {
  std::vector<std::string> parts = absl::StrSplit(grid, ':');
  double start = 0, stop = 0;
  int count = 0;
  if (parts.size() != 3 || !absl::SimpleAtod(parts[0], &start) ||
      !absl::SimpleAtod(parts[1], &stop) || !absl::SimpleAtoi(parts[2], &count) || count < 1) {
    return absl::InvalidArgumentError("--grid: expected START:STOP:N, e.g. 0:10:101");
  }
  Eigen::MatrixXd x(count, 1);
  for (int i = 0; i < count; ++i) {
    x(i, 0) = count == 1 ? start : start + (stop - start) * i / (count - 1);
  }
  return x;
}

int RunPredict(const PredictFlags& flags) {
  absl::StatusOr<Dataset> data = LoadCsvFile(flags.fit.data_path);
  if (!data.ok()) return ReportError(data.status());
  absl::StatusOr<KernelExpr> kernel = ParseSingleKernelFlag(flags.fit);
  if (!kernel.ok()) return ReportError(kernel.status());
  if (flags.at_path.empty() == flags.grid.empty()) {
    return ReportError(absl::InvalidArgumentError("give exactly one of --at FILE or --grid A:B:N"));
  }
  absl::StatusOr<Eigen::MatrixXd> x_new =
      flags.at_path.empty() ? ParseGrid(flags.grid) : LoadInputs(flags.at_path);
  if (!x_new.ok()) return ReportError(x_new.status());
  if (x_new->cols() != data->num_dims()) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat(
        "new inputs have ", x_new->cols(), " column(s) but the data has ", data->num_dims())));
  }
  std::map<std::string, double> given;
  for (const std::string& entry : flags.hyperparameters) {
    std::vector<std::string> name_value = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    double value = 0;
    if (name_value.size() != 2 || !absl::SimpleAtod(name_value[1], &value)) {
      return ReportError(absl::InvalidArgumentError(
          absl::StrCat("--hyperparameter '", entry, "': expected NAME=VALUE")));
    }
    given[name_value[0]] = value;
  }
  if (flags.objective != "map" && flags.objective != "mll") {
    return ReportError(absl::InvalidArgumentError("--objective: expected map or mll"));
  }
  PredictOptions options;
  options.hyperparameters = given;
  options.objective = flags.objective == "mll" ? FitObjective::kMaximumLikelihood
                                               : FitObjective::kMaximumAPosteriori;
  absl::StatusOr<HyperparameterSettings> settings = ParseHyperparameterFlags(flags.fit);
  if (!settings.ok()) return ReportError(settings.status());
  options.fit.fit.restarts = flags.fit.restarts;
  options.fit.fit.seed = flags.fit.seed;
  options.fit.standardize = !flags.fit.no_standardize;
  options.fit.hyperparameters = *settings;
  absl::StatusOr<XScaling> scale_x = ParseScaleXFlag(flags.fit);
  if (!scale_x.ok()) return ReportError(scale_x.status());
  options.fit.scale_x = *scale_x;

  absl::StatusOr<PredictResult> result;
  if (flags.remote.server.empty()) {
    result = FitAndPredict(*data, *kernel, *x_new, options);
  } else {
    absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags.remote.server, &flags.remote);
    if (!client.ok()) return ReportError(client.status());
    result = (*client)->Predict(*data, *kernel, *x_new, options);
  }
  if (!result.ok()) return ReportError(result.status());
  const PredictResult& out = *result;
  const Prediction& p = out.prediction;
  if (flags.fit.json || flags.remote.json) {
    nlohmann::json points = nlohmann::json::array();
    for (Eigen::Index i = 0; i < x_new->rows(); ++i) {
      nlohmann::json x = nlohmann::json::array();
      for (Eigen::Index c = 0; c < x_new->cols(); ++c) x.push_back((*x_new)(i, c));
      points.push_back({{"x", x},
                        {"mean", JsonNumber(p.mean(i))},
                        {"variance", JsonNumber(p.variance(i))},
                        {"noise_variance", JsonNumber(p.noise_variance(i))}});
    }
    nlohmann::json hyper = nlohmann::json::object();
    for (const auto& [name, value] : out.hyperparameters) hyper[name] = JsonNumber(value);
    nlohmann::json j = {{"kernel", out.kernel},
                        {"hyperparameters", hyper},
                        {"standardized", out.standardization.applied},
                        {"predictions", points}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "kernel " << out.kernel << " (y " << (out.standardization.applied ? "standardised" : "as given") << ")\n";
    for (const auto& [name, value] : out.hyperparameters) {
      std::cout << absl::StrFormat("  %-24s %.6g\n", name, value);
    }
    std::cout << absl::StrFormat("%-24s %14s %14s %14s\n", "x", "mean", "sd", "sd+noise");
    for (Eigen::Index i = 0; i < x_new->rows(); ++i) {
      std::string x;
      for (Eigen::Index c = 0; c < x_new->cols(); ++c) {
        absl::StrAppend(&x, c ? "," : "", absl::StrFormat("%.6g", (*x_new)(i, c)));
      }
      std::cout << absl::StrFormat("%-24s %14.6g %14.6g %14.6g\n", x, p.mean(i),
                                   std::sqrt(std::max(0.0, p.variance(i))),
                                   std::sqrt(std::max(0.0, p.variance(i) + p.noise_variance(i))));
    }
  }
  return kExitOk;
}

std::function<int()> SetupPredict(CLI::App& sub) {
  auto flags = std::make_shared<PredictFlags>();
  AddDataFlag(sub, flags->fit);
  sub.add_option("--kernel", flags->fit.kernels, "kernel expression")->required();
  sub.add_option("--at", flags->at_path, "CSV of new inputs (d columns, optional header)");
  sub.add_option("--grid", flags->grid, "1-D grid START:STOP:N of new inputs");
  sub.add_option("--hyperparameter", flags->hyperparameters,
                 "natural value NAME=VALUE of every parameter (default: fit them)");
  sub.add_option("--objective", flags->objective, "fit used when none are given: map or mll")
      ->capture_default_str();
  AddFitFlags(sub, flags->fit);
  sub.add_option("--server", flags->remote.server,
                 "HOST:PORT of a gpsel-server (default: run in-process)");
  sub.add_option("--timeout", flags->remote.timeout_seconds, "deadline, seconds (with --server)");
  sub.add_option("--token-file", flags->remote.token_file, "bearer token file (with --server)");
  sub.add_flag("--tls", flags->remote.tls, "connect with TLS");
  sub.add_option("--tls-ca", flags->remote.tls_ca, "PEM CA to trust (implies --tls)");
  return [flags] { return RunPredict(*flags); };
}

GPSEL_REGISTER_COMMAND(predict, "predict",
                       "posterior mean and variance of a kernel's GP at new inputs", SetupPredict);

// ---- hooks for score/evidence --server -------------------------------------------------------

const bool kHooksInstalled = [] {
  RemoteScoreHook() = [](const std::string& server, const Dataset& data,
                         const std::vector<KernelExpr>& kernels,
                         const ScoreOptions& options) -> absl::StatusOr<std::vector<KernelScore>> {
    absl::StatusOr<std::unique_ptr<Client>> client = Connect(server);
    if (!client.ok()) return client.status();
    return (*client)->Score(data, kernels, options);
  };
  RemoteEvidenceHook() = [](const std::string& server, const Dataset& data,
                            const KernelExpr& kernel, const EvidenceOptions& options,
                            const ProgressCallback& progress) -> absl::StatusOr<EvidenceResult> {
    absl::StatusOr<std::unique_ptr<Client>> client = Connect(server);
    if (!client.ok()) return client.status();
    return (*client)->Evidence(data, kernel, options, progress);
  };
  RemoteSubmitEvidenceHook() = [](const std::string& server, const Dataset& data,
                                  const KernelExpr& kernel,
                                  const EvidenceOptions& options) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::unique_ptr<Client>> client = Connect(server);
    if (!client.ok()) return client.status();
    absl::StatusOr<std::string> name = (*client)->SubmitEvidence(data, kernel, options);
    if (!name.ok()) return name.status();
    return std::string(absl::StripPrefix(*name, "jobs/"));
  };
#ifdef GPSEL_REMOTE_SEARCH_HOOK
  // Installed once cli_common.h declares RemoteSearchHook (and defines GPSEL_REMOTE_SEARCH_HOOK):
  //   using RemoteSearchFn = std::function<absl::StatusOr<SearchResult>(const std::string& server,
  //       const Dataset& data, const SearchOptions& options, const ProgressCallback& progress)>;
  RemoteSearchHook() = [](const std::string& server, const Dataset& data,
                          const SearchOptions& options,
                          const ProgressCallback& progress) -> absl::StatusOr<SearchResult> {
    absl::StatusOr<std::unique_ptr<Client>> client = Connect(server);
    if (!client.ok()) return client.status();
    return (*client)->Search(data, options, progress);
  };
#endif
  return true;
}();

}  // namespace
}  // namespace gpsel::cli

