// MetricsHttpServer; see metrics_http.h.
#include "metrics/metrics_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <prometheus/text_serializer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpsel {
namespace {

// A request head larger than this is refused; a scraper sends a few hundred bytes.
constexpr size_t kMaxRequestBytes = 16 * 1024;
// A client that sends or reads nothing for this long is dropped, so one stalled connection
// cannot hold the (single) serving thread for long.
constexpr int kIoTimeoutMs = 5000;

bool WaitFor(int fd, short events) {
  pollfd p{fd, events, 0};
  int rc;
  do {
    rc = poll(&p, 1, kIoTimeoutMs);
  } while (rc < 0 && errno == EINTR);
  return rc == 1 && (p.revents & (events | POLLHUP)) != 0;
}

void WriteAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    if (!WaitFor(fd, POLLOUT)) return;
    // MSG_NOSIGNAL: a scraper that hung up must not kill the server with SIGPIPE.
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string Response(const std::string& status, const std::string& content_type,
                     const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", listen, "': must be HOST:PORT"));
  }
  std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints,
                                 &addresses);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", listen, "': ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string last_error = "no address";
  for (addrinfo* a = addresses; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
      last_error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(addresses);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": ",
                                               last_error));
  }
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_size);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("metrics: eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->registry_ = std::move(registry);
  server->listen_fd_ = fd;
  server->wake_fd_ = wake;
  server->port_ = bound_port;
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void MetricsHttpServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;  // the destructor asked us to stop
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // e.g. the client gave up already
    HandleConnection(fd);
    close(fd);
  }
}

void MetricsHttpServer::HandleConnection(int fd) {
  std::string request;
  char buffer[2048];
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.find("\n\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes || !WaitFor(fd, POLLIN)) return;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  const std::string line = request.substr(0, request.find_first_of("\r\n"));
  // "GET /metrics HTTP/1.1"; a query string (e.g. Prometheus' ?name[]=) is ignored.
  const size_t space = line.find(' ');
  const std::string method = line.substr(0, space);
  std::string target = space == std::string::npos ? "" : line.substr(space + 1);
  target = target.substr(0, target.find(' '));
  target = target.substr(0, target.find('?'));
  if (target != "/metrics") {
    WriteAll(fd, Response("404 Not Found", "text/plain", "not found: try /metrics\n"));
    return;
  }
  if (method != "GET" && method != "HEAD") {
    WriteAll(fd, Response("405 Method Not Allowed", "text/plain", "use GET\n"));
    return;
  }
  std::string body = prometheus::TextSerializer().Serialize(registry_->Collect());
  std::string response =
      Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body);
  if (method == "HEAD") response.resize(response.size() - body.size());
  WriteAll(fd, response);
}

}  // namespace gpsel
