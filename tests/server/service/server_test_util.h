// Helpers of the server integration tests: temporary directories, datasets, a real server on
// loopback (in-process GpselServer, one per suite with ServerFixture, or the gpsel-server
// binary), a tiny HTTP GET for /metrics, and running commands.
#ifndef GPSEL_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define GPSEL_TESTS_SERVER_SERVER_TEST_UTIL_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpsel/client/client.h"
#include "gpsel/core/dataset.h"
#include "gpsel/server/service/server.h"
#include "gtest/gtest.h"
#include "tests/test_timeout.h"

namespace gpsel::testing {

inline std::string DataPath(const std::string& name) {
  return std::string(GPSEL_DATA_DIR) + "/" + name;
}

inline Dataset LoadData(const std::string& name) {
  absl::StatusOr<Dataset> data = LoadCsvFile(DataPath(name));
  EXPECT_TRUE(data.ok()) << data.status();
  return *data;
}

// The first `n` points of the Mauna Loa series (a dataset large enough to keep a worker busy).
inline Dataset MaunaLoa(int n) {
  Dataset full = LoadData("mauna_loa_monthly.csv");
  Dataset out;
  out.x = full.x.topRows(n);
  out.y = full.y.head(n);
  return out;
}

inline std::filesystem::path MakeTempDir(const std::string& prefix) {
  std::random_device device;
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat(prefix, "-", getpid(), "-", device());
  std::filesystem::create_directories(dir);
  return dir;
}

// Test server options: loopback, any port, a fresh SQLite file.
inline ServerOptions TestServerOptions(const std::filesystem::path& dir) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "127.0.0.1:0";
  options.store_url = "sqlite:" + (dir / "jobs.db").string();
  options.rpc_workers = 2;
  options.max_queued_rpcs = 4;
  options.jobs.workers = 1;
  options.jobs.lease = absl::Seconds(3);
  options.jobs.poll_interval = absl::Milliseconds(100);
  options.service.watch_poll_interval = absl::Milliseconds(50);
  options.shutdown_grace = Scaled(absl::Seconds(5));
  return options;
}

// One in-process GpselServer for a whole test suite, in a fresh temporary directory: the suite
// derives from ServerFixture<Suite> and defines
//   static constexpr char kTempDirPrefix[] = "gpsel-...";
//   static void AdjustServerOptions(ServerOptions& options);  // on top of TestServerOptions
// Its tests reach the server as server_. One server per suite (not per test) because starting
// one costs a store, thread pools and two listeners, and the suites' tests leave no state behind
// that another test reads.
template <typename Suite>
class ServerFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(MakeTempDir(Suite::kTempDirPrefix));
    ServerOptions options = TestServerOptions(*dir_);
    Suite::AdjustServerOptions(options);
    absl::StatusOr<std::unique_ptr<GpselServer>> server = GpselServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  static inline GpselServer* server_ = nullptr;
  static inline std::filesystem::path* dir_ = nullptr;
};

// A SearchResult without its wall times (which differ between any two runs).
inline v1::SearchResult WithoutSeconds(v1::SearchResult result) {
  result.clear_seconds();
  result.mutable_best()->clear_seconds();
  for (v1::SearchStep& step : *result.mutable_steps()) {
    step.clear_seconds();
    if (step.has_kept_score()) step.mutable_kept_score()->clear_seconds();
    for (v1::SearchCandidate& candidate : *step.mutable_candidates()) candidate.clear_seconds();
  }
  return result;
}

// The default deadline is for calls expected to succeed, so it scales (tests/test_timeout.h); a
// test that expects DEADLINE_EXCEEDED passes its own, unscaled.
inline std::unique_ptr<Client> Connect(int port, absl::Duration timeout = Scaled(absl::Seconds(60)),
                                       const std::string& token = "") {
  ClientOptions options;
  options.target = absl::StrCat("127.0.0.1:", port);
  options.timeout = timeout;
  options.auth_token = token;
  options.initial_backoff = absl::Milliseconds(50);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return *std::move(client);
}

// GET http://127.0.0.1:port/path; the body, or "" on failure.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  std::array<char, 8192> buffer;
  ssize_t got;
  while ((got = read(fd, buffer.data(), buffer.size())) > 0) response.append(buffer.data(), got);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout
};

// Runs a shell command; stdout is captured, stderr goes to the test log.
inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t got;
  while ((got = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), got);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline bool OnPath(const std::string& program) {
  return RunCommand("command -v " + program + " >/dev/null 2>&1 && echo yes").output == "yes\n";
}

// The gpsel-server binary as a child process (for kill -9 tests).
class ServerProcess {
 public:
  // `address_space_bytes` > 0 caps the server's virtual memory (RLIMIT_AS), so that an
  // allocation too large for it fails with std::bad_alloc inside the server.
  ServerProcess(const std::vector<std::string>& args, const std::filesystem::path& log,
                int64_t address_space_bytes = 0) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      // Dies with the test: a test binary that crashes or is killed leaves no server behind.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (address_space_bytes > 0) {
        const rlimit limit{static_cast<rlim_t>(address_space_bytes),
                           static_cast<rlim_t>(address_space_bytes)};
        setrlimit(RLIMIT_AS, &limit);
      }
      dup2(out[1], STDOUT_FILENO);
      const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) dup2(err, STDERR_FILENO);
      close(out[0]);
      std::vector<char*> argv;
      std::string binary = GPSEL_SERVER_PATH;
      argv.push_back(binary.data());
      std::vector<std::string> copy = args;
      for (std::string& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    // The first stdout line names the ports: "gpsel-server listening on 127.0.0.1:PORT,
    // metrics on 127.0.0.1:PORT/metrics, store ..." (the metrics part only when enabled).
    FILE* stream = fdopen(out[0], "r");
    char line[4096] = {0};
    if (stream && fgets(line, sizeof(line), stream)) {
      const std::string text(line);
      const size_t colon = text.find("127.0.0.1:");
      if (colon != std::string::npos) port_ = std::atoi(text.c_str() + colon + 10);
      constexpr char kMetrics[] = "metrics on 127.0.0.1:";
      const size_t metrics = text.find(kMetrics);
      if (metrics != std::string::npos) {
        metrics_port_ = std::atoi(text.c_str() + metrics + sizeof(kMetrics) - 1);
      }
    }
    if (stream) fclose(stream);
  }
  ~ServerProcess() { Kill(SIGKILL); }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }  // 0 when metrics are disabled
  pid_t pid() const { return pid_; }                  // -1 once killed
  void Kill(int signal) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
};

}  // namespace gpsel::testing

#endif  // GPSEL_TESTS_SERVER_SERVER_TEST_UTIL_H_
