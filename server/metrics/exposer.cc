// MetricsExposer; see exposer.h.
#include "gpsel/server/metrics/exposer.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include <prometheus/exposer.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gpsel/server/metrics/thread_stack.h"

namespace gpsel {
namespace {

// Where to listen, for civetweb, and where to connect to reach it (see ~MetricsExposer).
struct ListenAddress {
  std::string civetweb;  // listening_ports entry: "ADDR:PORT", "[V6ADDR]:PORT" or "PORT"
  std::string wake_host;  // numeric address of the listener from this host
  std::string port;
};

// "HOST:PORT" as a civetweb listening_ports entry, with ADDR numeric, or "PORT" alone for an
// empty host (every IPv4 address).
absl::StatusOr<ListenAddress> ParseListen(const std::string& listen) {
  auto invalid = [&listen](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address '", listen, "': ", why));
  };
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return invalid("must be HOST:PORT");
  std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  int port_number = -1;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return absl::ascii_isdigit(c); }) ||
      !absl::SimpleAtoi(port, &port_number) || port_number > 65535) {
    return invalid("the port must be a number from 0 to 65535");
  }
  if (host.empty()) return ListenAddress{port, "127.0.0.1", port};
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  // A name (or an address in any notation) becomes the first numeric address it resolves to.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &addresses); rc != 0) {
    return invalid(gai_strerror(rc));
  }
  char numeric[NI_MAXHOST] = {0};
  const int family = addresses->ai_family;
  const int rc = getnameinfo(addresses->ai_addr, addresses->ai_addrlen, numeric, sizeof(numeric),
                             nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(addresses);
  if (rc != 0) return invalid(gai_strerror(rc));
  const std::string address = numeric;
  if (family == AF_INET6) {
    return ListenAddress{absl::StrCat("[", address, "]:", port),
                         address == "::" ? "::1" : address, port};
  }
  return ListenAddress{absl::StrCat(address, ":", port),
                       address == "0.0.0.0" ? "127.0.0.1" : address, port};
}

// Civetweb's master thread polls the listening socket in 2 s quanta (civetweb 1.15's
// SOCKET_TIMEOUT_QUANTUM) and sees the stop flag only between them, so stopping an Exposer took
// 2 s. Connecting to it while it stops wakes the poll at once.
void Connect(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* address = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &address) != 0) return;
  const int fd = socket(address->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    (void)connect(fd, address->ai_addr, address->ai_addrlen);
    close(fd);
  }
  freeaddrinfo(address);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    const std::string& listen,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  absl::StatusOr<ListenAddress> address = ParseListen(listen);
  if (!address.ok()) return address.status();
  // Civetweb's threads need room for the static TLS (thread_stack.h); this also links it in.
  (void)ThreadStackExtraBytes();
  std::unique_ptr<MetricsExposer> exposer(new MetricsExposer());
  exposer->collectables_ = std::move(collectables);
  try {
    // Civetweb gives each connection a request thread until its request has arrived, waiting
    // `request_timeout_ms` (30 s by default) for it: with prometheus-cpp's 2 threads, two idle
    // or half-open connections starved every scrape for 30 s (issue 33). So: a short wait for
    // the request (a scrape's request is one small packet) and enough threads that a handful
    // of idle clients leaves some free. Prometheus-cpp 1.0's option-list constructor passes
    // these to civetweb 1.15 as they are.
    exposer->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", address->civetweb,
        "num_threads", std::to_string(kMetricsRequestThreads),
        "request_timeout_ms", std::to_string(kMetricsRequestTimeoutMs),
        "enable_keep_alive", "no"});
    for (const auto& collectable : exposer->collectables_) {
      exposer->exposer_->RegisterCollectable(collectable);
    }
    const std::vector<int> bound = exposer->exposer_->GetListeningPorts();
    if (bound.empty()) {
      return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen));
    }
    exposer->port_ = bound.front();
    exposer->wake_host_ = address->wake_host;
  } catch (const std::exception& e) {
    // CivetServer's constructor throws CivetException when it cannot bind ("null context when
    // constructing CivetServer. Possible problem binding to port.").
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  return exposer;
}

MetricsExposer::~MetricsExposer() {
  if (!exposer_) return;
  std::mutex mutex;
  std::condition_variable stopped;
  bool done = false;
  std::thread waker([&] {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopped.wait_for(lock, std::chrono::milliseconds(20), [&] { return done; })) {
      Connect(wake_host_, std::to_string(port_));
    }
  });
  exposer_.reset();
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
  }
  stopped.notify_all();
  waker.join();
}

}  // namespace gpsel
