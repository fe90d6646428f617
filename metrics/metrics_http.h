// MetricsHttpServer: serves a Prometheus registry as text on GET /metrics, on its own port.
//
// It replaces prometheus-cpp's civetweb-based Exposer. Debian's civetweb starts its request
// threads with a fixed 100 KiB stack, and glibc carves a process's static TLS out of such a
// stack: with Debian's pthread OpenBLAS linked in (60 KiB of TLS on its own) less than 30 KiB
// were left, and the first scrape overflowed it (SIGSEGV inside civetweb's mg_printf). This
// server handles one scrape at a time on one std::thread with the default stack; scrapes are
// rare and small, so that is plenty.
//
//   absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http =
//       MetricsHttpServer::Start("127.0.0.1:0", metrics.registry());
//   int port = (*http)->port();
//   http->reset();  // stops serving
#ifndef GPSEL_METRICS_METRICS_HTTP_H_
#define GPSEL_METRICS_METRICS_HTTP_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"

namespace gpsel {

class MetricsHttpServer {
 public:
  // Listens on `listen` ("HOST:PORT", "[V6ADDR]:PORT"; port 0 picks a free one).
  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsHttpServer();  // stops accepting and joins the thread
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;
  void Serve();
  void HandleConnection(int fd);

  std::shared_ptr<prometheus::Registry> registry_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: the destructor writes to it to end Serve()
  int port_ = 0;
  std::thread thread_;
};

}  // namespace gpsel

#endif  // GPSEL_METRICS_METRICS_HTTP_H_
