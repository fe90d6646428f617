// rpc_bench: latency and throughput of the Score RPC against an in-process gpsel-server on
// loopback, versus calling ScoreKernel directly, and behaviour beyond capacity.
//
//   build-svc/server/rpc_bench [--seconds 3] [--restarts 5] [--workers 0]
// Prints a Markdown table (bench/RESULTS.md keeps the numbers with the machine they came from).
// Workload: n = 50 points of a noisy sine, kernel SE, the eight paper metrics, fixed seed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/client/client.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/score.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/server/service/server.h"

namespace {

using Clock = std::chrono::steady_clock;

gpsel::Dataset SineData(int n) {
  std::mt19937_64 generator(42);
  std::normal_distribution<double> noise(0.0, 0.1);
  gpsel::Dataset data;
  data.x.resize(n, 1);
  data.y.resize(n);
  for (int i = 0; i < n; ++i) {
    data.x(i, 0) = 10.0 * i / (n - 1);
    data.y(i) = std::sin(data.x(i, 0)) + noise(generator);
  }
  return data;
}

struct Stats {
  double p50_ms = 0, p99_ms = 0, throughput = 0;
  double overhead_p50_ms = 0;  // latency minus the server's own compute time (KernelScore.seconds)
  int ok = 0, exhausted = 0, other = 0;
};

Stats Summarize(std::vector<double> latencies_ms, double seconds, int exhausted, int other) {
  Stats s;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto quantile = [&](double q) {
    if (latencies_ms.empty()) return 0.0;
    const size_t index = std::min(latencies_ms.size() - 1,
                                  static_cast<size_t>(std::ceil(q * latencies_ms.size())) - 1);
    return latencies_ms[index];
  };
  s.p50_ms = quantile(0.50);
  s.p99_ms = quantile(0.99);
  s.ok = static_cast<int>(latencies_ms.size());
  s.throughput = s.ok / seconds;
  s.exhausted = exhausted;
  s.other = other;
  return s;
}

// `clients` threads call Score back to back for `seconds`.
Stats RunClients(int port, const gpsel::v1::ScoreRequest& request, int clients, double seconds) {
  std::mutex mutex;
  std::vector<double> latencies, overheads;
  std::atomic<int> exhausted{0}, other{0};
  const auto stop = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      gpsel::ClientOptions options;
      options.target = absl::StrCat("127.0.0.1:", port);
      options.max_attempts = 1;  // measure the server's answer, not the client's retries
      options.timeout = absl::Seconds(60);
      auto client = gpsel::Client::Create(options);
      std::vector<double> mine, mine_overhead;
      while (Clock::now() < stop) {
        const auto start = Clock::now();
        absl::StatusOr<gpsel::v1::ScoreResponse> response = (*client)->Score(request);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        if (response.ok()) {
          mine.push_back(ms);
          double compute_ms = 0;
          for (const auto& score : response->scores()) compute_ms += 1000.0 * score.seconds();
          mine_overhead.push_back(ms - compute_ms);
        } else if (absl::IsResourceExhausted(response.status())) {
          ++exhausted;
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } else {
          ++other;
        }
      }
      std::lock_guard<std::mutex> lock(mutex);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
      overheads.insert(overheads.end(), mine_overhead.begin(), mine_overhead.end());
    });
  }
  for (std::thread& t : threads) t.join();
  Stats stats = Summarize(latencies, seconds, exhausted.load(), other.load());
  stats.overhead_p50_ms = Summarize(overheads, seconds, 0, 0).p50_ms;
  return stats;
}

}  // namespace

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  double seconds = 3;
  int restarts = 5;
  int workers = 0;
  CLI::App app{"rpc_bench: Score RPC latency/throughput vs in-process"};
  app.add_option("--seconds", seconds, "duration of each concurrency level")->capture_default_str();
  app.add_option("--restarts", restarts, "fit restarts per score")->capture_default_str();
  app.add_option("--workers", workers, "server worker threads (0 = one per core)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const gpsel::Dataset data = SineData(50);
  const gpsel::KernelExpr kernel = *gpsel::ParseKernel("SE");
  gpsel::ScoreOptions options;
  options.fit.restarts = restarts;
  options.fit.seed = 1;

  // In-process baseline (the same work the server does per request).
  std::vector<double> local;
  const auto local_stop = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < local_stop) {
    const auto start = Clock::now();
    absl::StatusOr<gpsel::KernelScore> score = gpsel::ScoreKernel(data, kernel, options);
    if (!score.ok()) {
      std::cerr << "ScoreKernel: " << score.status() << "\n";
      return 1;
    }
    local.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  const Stats in_process = Summarize(local, seconds, 0, 0);

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("gpsel-rpc-bench-", getpid());
  std::filesystem::create_directories(dir);
  gpsel::ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.metrics_listen = "";
  server_options.store_url = "sqlite:" + (dir / "jobs.db").string();
  server_options.rpc_workers = workers;
  server_options.jobs.workers = 0;
  auto server = gpsel::GpselServer::Start(server_options);
  if (!server.ok()) {
    std::cerr << "server: " << server.status() << "\n";
    return 1;
  }
  const int pool = workers > 0 ? workers : std::max(1u, std::thread::hardware_concurrency());
  const int capacity = pool + 2 * pool;  // running + default queue (2 × workers)

  gpsel::v1::ScoreRequest request;
  gpsel::bridge::ToProto(data, request.mutable_dataset());
  request.add_kernels("SE");
  gpsel::bridge::ScoreOptionsToProto(options, &request);

  std::cout << absl::StrFormat(
      "workload: n = 50, kernel SE, 8 metrics, %d restarts; server: %d workers, queue %d "
      "(capacity %d in flight)\n\n",
      restarts, pool, 2 * pool, capacity);
  std::cout << "| clients | p50 ms | p99 ms | throughput /s | ok | RESOURCE_EXHAUSTED | other errors | p50 latency - server compute, ms |\n"
               "|---|---|---|---|---|---|---|---|\n";
  std::cout << absl::StrFormat("| in-process | %.2f | %.2f | %.1f | %d | - | - | - |\n",
                               in_process.p50_ms, in_process.p99_ms, in_process.throughput,
                               in_process.ok);
  Stats one;
  for (int clients : {1, 4, 16, 2 * capacity}) {
    const Stats s = RunClients((*server)->port(), request, clients, seconds);
    if (clients == 1) one = s;
    std::cout << absl::StrFormat("| %d%s | %.2f | %.2f | %.1f | %d | %d | %d | %.3f |\n", clients,
                                 clients == 2 * capacity ? " (2x capacity)" : "", s.p50_ms,
                                 s.p99_ms, s.throughput, s.ok, s.exhausted, s.other,
                                 s.overhead_p50_ms);
  }
  std::cout << absl::StrFormat(
      "\nRPC overhead, 1 client: p50 latency minus in-process p50 = %.3f ms; per-request p50 of "
      "(latency - server compute time) = %.3f ms\n",
      one.p50_ms - in_process.p50_ms, one.overhead_p50_ms);
  server->reset();
  std::filesystem::remove_all(dir);
  return 0;
}
