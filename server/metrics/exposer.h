// MetricsExposer: serves Prometheus collectables as text on GET /metrics, on its own port,
// with prometheus-cpp-pull's prometheus::Exposer (civetweb). It wraps the Exposer to turn its
// failures — a malformed address, a port in use: the Exposer constructor throws — into
// absl::Status, and keeps the collectables alive as long as they are served.
//
//   absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
//       MetricsExposer::Start("127.0.0.1:0", {metrics.registry(),
//                                             std::make_shared<ProcessCollector>()});
//   int port = (*exposer)->port();
//   exposer->reset();  // stops serving
//
// Civetweb's request threads have a fixed 100 KiB stack (Debian's build), from which glibc also
// takes the process's static TLS — 60 KiB of it OpenBLAS's alone; server/metrics/thread_stack.h adds
// the TLS to such stacks process-wide so that a scrape cannot overflow them.
#ifndef GPSEL_METRICS_EXPOSER_H_
#define GPSEL_METRICS_EXPOSER_H_

#include <memory>
#include <string>
#include <vector>

#include <prometheus/collectable.h>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
}

namespace gpsel {

// A connection whose request has not arrived within kMetricsRequestTimeoutMs is closed, and
// kMetricsRequestThreads serve requests: idle or slow clients cannot starve the scrapes
// (issue 33: two idle connections delayed every scrape by 30 s).
inline constexpr int kMetricsRequestThreads = 16;
inline constexpr int kMetricsRequestTimeoutMs = 2000;

class MetricsExposer {
 public:
  // Listens on `listen` ("HOST:PORT", "[V6ADDR]:PORT", ":PORT" for every IPv4 address; HOST may
  // be a name, which is resolved; port 0 picks a free one). INVALID_ARGUMENT for a malformed
  // address, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(
      const std::string& listen,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);
  ~MetricsExposer();  // stops serving (at once: see exposer.cc)
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  int port() const { return port_; }

 private:
  MetricsExposer() = default;

  // Declared before exposer_: destroyed after it, so never while a scrape could read them.
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  std::string wake_host_;  // the listener's address as seen from here
};

}  // namespace gpsel

#endif  // GPSEL_METRICS_EXPOSER_H_
