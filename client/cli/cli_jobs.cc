// `gpsel jobs list|get|wait|cancel`: the jobs of a gpsel-server's queue. --json prints the Job
// (or ListJobsResponse) messages in the protobuf JSON mapping.
//
//   gpsel jobs wait jobs/01J... --server 127.0.0.1:50051 --json
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gpsel/client/cli/backend.h"
#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"

namespace gpsel::cli {
namespace {

std::string StateName(v1::JobState state) {
  const std::string& name = v1::JobState_Name(state);
  return name.rfind("JOB_STATE_", 0) == 0 ? name.substr(10) : name;
}

// A job that succeeded with a partial result (a cap stopped it before its stopping rule): its
// outcome is PARTIAL, not SUCCEEDED, wherever a job is shown.
bool IsPartial(const v1::Job& job) {
  return job.state() == v1::JOB_STATE_SUCCEEDED && job.has_evidence_result() &&
         job.evidence_result().partial();
}

void PrintJobLine(const v1::Job& job) {
  std::cout << absl::StrFormat("%-31s %-8s %-9s %5.1f%%  attempts %d  %s", job.name(),
                               job.kind(), IsPartial(job) ? "PARTIAL" : StateName(job.state()),
                               100.0 * job.progress().fraction(), job.attempts(), job.kernel());
  if (job.has_evidence_result()) {
    std::cout << absl::StrFormat("  log Z = %.4f ± %.4f", job.evidence_result().log_evidence(),
                                 job.evidence_result().log_evidence_error());
    if (IsPartial(job)) {
      std::cout << "  [PARTIAL, not final: " << job.evidence_result().partial_reason() << "]";
    }
  }
  if (job.has_search_result()) {
    const v1::SearchResult& result = job.search_result();
    std::cout << absl::StrFormat("  best %s, %s = %.4f (%d candidates fitted)",
                                 result.best_kernel(), result.metric(), result.best_score(),
                                 result.candidates_scored());
  }
  if (job.has_score_result()) {
    std::cout << absl::StrFormat("  %d kernel(s) scored", job.score_result().scores_size());
  }
  if (job.has_error()) std::cout << "  error: " << job.error().message();
  std::cout << "\n";
}

void PrintJob(const v1::Job& job, bool json) {
  if (json) {
    PrintJson(job);
  } else {
    PrintJobLine(job);
  }
}

// ---- jobs -----------------------------------------------------------------------------------

struct JobsFlags {
  RemoteFlags remote;
  bool json = false;
  std::string id;
  std::string state;
  int page_size = 0;
  std::string page_token;
  bool all_pages = false;
  double wait_seconds = 0;  // 0 = no limit
};

int RunJobsList(const JobsFlags& flags) {
  absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags.remote);
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
  v1::ListJobsResponse all;  // every page's jobs, for --json
  std::string next;
  do {
    absl::StatusOr<v1::ListJobsResponse> page = (*client)->ListJobs(request);
    if (!page.ok()) return ReportError(page.status());
    for (const v1::Job& job : page->jobs()) {
      if (flags.json) {
        *all.add_jobs() = job;
      } else {
        PrintJobLine(job);
      }
    }
    next = page->next_page_token();
    request.set_page_token(next);
  } while (flags.all_pages && !next.empty());
  if (flags.json) {
    all.set_next_page_token(next);
    PrintJson(all);
  } else if (!next.empty()) {
    std::cout << "(more: --page-token " << next << ")\n";
  }
  return kExitOk;
}

int RunJobsGet(const JobsFlags& flags) {
  absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags.remote);
  if (!client.ok()) return ReportError(client.status());
  absl::StatusOr<v1::Job> job = (*client)->GetJob(flags.id);
  if (!job.ok()) return ReportError(job.status());
  PrintJob(*job, flags.json);
  return IsPartial(*job) ? kExitPartial : kExitOk;
}

int RunJobsCancel(const JobsFlags& flags) {
  absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags.remote);
  if (!client.ok()) return ReportError(client.status());
  absl::StatusOr<v1::Job> job = (*client)->CancelJob(flags.id);
  if (!job.ok()) return ReportError(job.status());
  PrintJob(*job, flags.json);
  return kExitOk;
}

int RunJobsWait(const JobsFlags& flags) {
  absl::StatusOr<std::unique_ptr<Client>> client = Connect(flags.remote);
  if (!client.ok()) return ReportError(client.status());
  TerminalProgress progress(!flags.json && StderrIsTerminal());
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
  PrintJob(*job, flags.json);
  if (IsPartial(*job)) return kExitPartial;
  return job->state() == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailure;
}

}  // namespace

CommandRunner SetupJobs(CLI::App& sub) {
  sub.require_subcommand(1);
  auto flags = std::make_shared<JobsFlags>();
  CLI::App* list = sub.add_subcommand("list", "list jobs, oldest first");
  AddRemoteFlags(*list, flags->remote, /*server_required=*/true);
  list->add_flag("--json", flags->json, "print the protobuf JSON mapping of the job(s)");
  list->add_option("--state", flags->state, "only jobs in this state (queued, running, ...)");
  list->add_option("--page-size", flags->page_size, "jobs per page (default 50)");
  list->add_option("--page-token", flags->page_token, "continue from a previous page");
  list->add_flag("--all", flags->all_pages, "follow every page");
  CLI::App* get = sub.add_subcommand("get", "show a job (with its result when done)");
  get->add_option("ID", flags->id, "job id or name (jobs/ID)")->required();
  AddRemoteFlags(*get, flags->remote, /*server_required=*/true);
  get->add_flag("--json", flags->json, "print the protobuf JSON mapping of the job(s)");
  CLI::App* wait = sub.add_subcommand(
      "wait", "follow a job until it ends (exit 0 if it succeeded, 3 if its result is partial)");
  wait->add_option("ID", flags->id, "job id or name (jobs/ID)")->required();
  wait->add_option("--wait-limit", flags->wait_seconds, "give up after this many seconds");
  AddRemoteFlags(*wait, flags->remote, /*server_required=*/true);
  wait->add_flag("--json", flags->json, "print the protobuf JSON mapping of the job(s)");
  CLI::App* cancel = sub.add_subcommand("cancel", "ask a job to stop (idempotent)");
  cancel->add_option("ID", flags->id, "job id or name (jobs/ID)")->required();
  AddRemoteFlags(*cancel, flags->remote, /*server_required=*/true);
  cancel->add_flag("--json", flags->json, "print the protobuf JSON mapping of the job(s)");
  return [flags, list, get, wait, cancel]() -> int {
    if (list->parsed()) return RunJobsList(*flags);
    if (get->parsed()) return RunJobsGet(*flags);
    if (wait->parsed()) return RunJobsWait(*flags);
    if (cancel->parsed()) return RunJobsCancel(*flags);
    return kExitBadInput;
  };
}

}  // namespace gpsel::cli
