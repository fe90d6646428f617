// Job-queue throughput (issue #17 item 6): how many tiny jobs per second W concurrent workers
// claim and complete through the JobStore (server/store/job_store.h), on PostgreSQL or SQLite. This is
// the queue's own ceiling — the rate at which it can hand out work — not that of any real job.
//
// Each round: PurgeFinished(0) (so every round starts from an empty table), Submit --jobs jobs
// of --bytes bytes from W threads, then W threads loop Claim + Complete (result of --bytes bytes)
// until Claim finds nothing. With --tasks the work is instead --jobs tasks of one RUNNING parent
// job (server/store/job_store.h "Tasks": SubmitTasks in batches of up to kMaxTasksPerBatch, one
// transaction each, as an evidence job's runs or a search step's candidates would be), which
// Claim hands out before jobs; "submit/s" is then tasks written per second. A thread either opens its own store (--per-worker-store, as W
// replicas or processes would: each PostgreSQL store has its own connections) or all share one
// (the default in gpsel-server: its job workers share the process's store, whose PostgreSQL
// connection pool has --connections connections). UNAVAILABLE (busy / unreachable) is retried
// after 1 ms and counted. Prints one line per round and the median over the rounds.
//
//   queue_bench --store postgresql://postgres@127.0.0.1:PORT/gpsel_test --workers 8
//   queue_bench --store sqlite:/tmp/q.db --workers 8 --per-worker-store
//   queue_bench --store postgresql://... --workers 8 --tasks
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpsel/server/store/job_store.h"

namespace {

using Clock = std::chrono::steady_clock;

struct WorkerStats {
  int64_t done = 0;
  int64_t retries = 0;  // UNAVAILABLE, retried
  int64_t errors = 0;   // anything else
  std::vector<double> claim_ms, complete_ms;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::string url;
  int workers = 8, jobs = 2000, rounds = 3, bytes = 100, connections = 4;
  bool per_worker_store = false, tasks = false;
  CLI::App app{"JobStore claim+complete throughput"};
  app.add_option("--store", url, "sqlite:PATH or postgresql://...")->required();
  app.add_option("--workers", workers, "concurrent worker threads")->check(CLI::Range(1, 256));
  app.add_option("--jobs", jobs, "jobs per round")->check(CLI::Range(1, 10000000));
  app.add_option("--rounds", rounds)->check(CLI::Range(1, 100));
  app.add_option("--bytes", bytes, "request and result size")->check(CLI::Range(0, 1 << 20));
  app.add_option("--connections", connections,
                 "PostgreSQL connections per store instance (JobStoreOptions)")
      ->check(CLI::Range(1, 64));
  app.add_flag("--per-worker-store", per_worker_store,
               "each worker opens its own store (default: all share one)");
  app.add_flag("--tasks", tasks, "tasks of one running parent job instead of jobs");
  CLI11_PARSE(app, argc, argv);

  gpsel::JobStoreOptions options;
  options.postgres_max_connections = connections;
  const int num_stores = per_worker_store ? workers : 1;
  std::vector<std::unique_ptr<gpsel::JobStore>> stores;
  for (int i = 0; i < num_stores; ++i) {
    absl::StatusOr<std::unique_ptr<gpsel::JobStore>> store = gpsel::OpenJobStore(url, options);
    if (!store.ok()) {
      std::cerr << "open " << gpsel::RedactStoreUrl(url) << ": " << store.status() << "\n";
      return 1;
    }
    stores.push_back(*std::move(store));
  }
  auto store_of = [&](int worker) { return stores[per_worker_store ? worker : 0].get(); };
  const std::string payload(bytes, 'x');

  std::printf("# store %s, %d workers, %s, %d connections per store, %d %s per round, %d B\n",
              gpsel::RedactStoreUrl(url).c_str(), workers,
              per_worker_store ? "one store per worker" : "one shared store", connections, jobs,
              tasks ? "tasks of one parent job" : "jobs", bytes);
  std::printf("%5s %10s %10s %9s %9s %9s %9s %9s %7s %6s\n", "round", "submit/s", "claim+c/s",
              "claim_p50", "claim_p99", "compl_p50", "compl_p99", "seconds", "retries", "errors");
  std::vector<double> submit_rates, claim_rates;
  for (int round = 0; round < rounds; ++round) {
    if (absl::StatusOr<int64_t> purged = stores[0]->PurgeFinished(absl::ZeroDuration());
        !purged.ok()) {
      std::cerr << "purge: " << purged.status() << "\n";
      return 1;
    }
    // Submit from all workers at once (jobs), or as batches of tasks of one parent job.
    std::atomic<int> next_submit{0};
    std::atomic<int64_t> submit_errors{0};
    std::optional<gpsel::Job> parent;
    if (tasks) {
      absl::StatusOr<gpsel::SubmitResult> s = stores[0]->Submit("bench-parent", payload, "", 0);
      absl::StatusOr<std::optional<gpsel::Job>> claimed =
          s.ok() ? stores[0]->Claim("bench-parent-worker", absl::Minutes(30))
                 : absl::StatusOr<std::optional<gpsel::Job>>(s.status());
      if (!claimed.ok() || !claimed->has_value() || (**claimed).id != s->job.id) {
        std::cerr << "parent job: " << (claimed.ok() ? "not claimed" : claimed.status().ToString())
                  << "\n";
        return 1;
      }
      parent = **claimed;
    }
    const auto submit_start = Clock::now();
    if (tasks) {
      for (int first = 0, batch = 0; first < jobs; ++batch) {
        const int count = std::min(jobs - first, gpsel::JobStore::kMaxTasksPerBatch);
        const std::vector<std::string> requests(count, payload);
        absl::StatusOr<std::vector<gpsel::Job>> made = stores[0]->SubmitTasks(
            parent->id, "batch-" + std::to_string(batch), "bench", requests);
        if (!made.ok()) {
          std::cerr << "SubmitTasks: " << made.status() << "\n";
          return 1;
        }
        first += count;
      }
    } else {
      std::vector<std::thread> threads;
      for (int w = 0; w < workers; ++w) {
        threads.emplace_back([&, w] {
          while (next_submit.fetch_add(1) < jobs) {
            for (;;) {
              absl::StatusOr<gpsel::SubmitResult> s =
                  store_of(w)->Submit("bench", payload, "", /*max_queued=*/0);
              if (s.ok()) break;
              if (absl::IsUnavailable(s.status())) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                continue;
              }
              ++submit_errors;
              break;
            }
          }
        });
      }
      for (std::thread& t : threads) t.join();
    }
    const double submit_seconds = std::chrono::duration<double>(Clock::now() - submit_start).count();

    // Claim + complete until the queue is empty.
    std::vector<WorkerStats> stats(workers);
    const auto start = Clock::now();
    {
      std::vector<std::thread> threads;
      for (int w = 0; w < workers; ++w) {
        threads.emplace_back([&, w] {
          WorkerStats& st = stats[w];
          const std::string worker_id = "bench-" + std::to_string(w);
          for (;;) {
            const auto t0 = Clock::now();
            absl::StatusOr<std::optional<gpsel::Job>> job =
                store_of(w)->Claim(worker_id, absl::Seconds(30));
            if (!job.ok()) {
              if (absl::IsUnavailable(job.status())) {
                ++st.retries;
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
              } else {
                ++st.errors;
                if (st.errors < 3) std::cerr << "claim: " << job.status() << "\n";
              }
              if (st.errors > 100) return;
              continue;
            }
            if (!job->has_value()) return;  // empty: done
            const auto t1 = Clock::now();
            st.claim_ms.push_back(Ms(t1 - t0));
            const gpsel::Job& j = **job;
            for (;;) {
              absl::Status s = store_of(w)->Complete(j.id, j.attempts, payload);
              if (s.ok()) {
                ++st.done;
                break;
              }
              if (absl::IsUnavailable(s)) {
                ++st.retries;
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                continue;
              }
              ++st.errors;
              if (st.errors < 3) std::cerr << "complete: " << s << "\n";
              break;
            }
            st.complete_ms.push_back(Ms(Clock::now() - t1));
          }
        });
      }
      for (std::thread& t : threads) t.join();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (parent.has_value()) {
      if (absl::Status s = stores[0]->Complete(parent->id, parent->attempts, payload); !s.ok()) {
        std::cerr << "parent complete: " << s << "\n";
      }
    }
    WorkerStats all;
    for (const WorkerStats& st : stats) {
      all.done += st.done;
      all.retries += st.retries;
      all.errors += st.errors;
      all.claim_ms.insert(all.claim_ms.end(), st.claim_ms.begin(), st.claim_ms.end());
      all.complete_ms.insert(all.complete_ms.end(), st.complete_ms.begin(), st.complete_ms.end());
    }
    const double submit_rate = jobs / submit_seconds, claim_rate = all.done / seconds;
    submit_rates.push_back(submit_rate);
    claim_rates.push_back(claim_rate);
    std::printf("%5d %10.0f %10.0f %9.2f %9.2f %9.2f %9.2f %9.2f %7lld %6lld\n", round + 1,
                submit_rate, claim_rate, Percentile(all.claim_ms, 0.5),
                Percentile(all.claim_ms, 0.99), Percentile(all.complete_ms, 0.5),
                Percentile(all.complete_ms, 0.99), seconds, static_cast<long long>(all.retries),
                static_cast<long long>(all.errors + submit_errors.load()));
    std::fflush(stdout);
    if (all.done != jobs) {
      std::cerr << "round " << round + 1 << ": completed " << all.done << " of " << jobs
                << " jobs\n";
      return 1;
    }
  }
  std::printf("median submit/s %.0f, median claim+complete/s %.0f\n", Median(submit_rates),
              Median(claim_rates));
  return 0;
}
