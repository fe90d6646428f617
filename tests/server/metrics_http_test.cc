// Tests of the /metrics HTTP endpoint (server/metrics_http.h) over real loopback sockets:
// what it answers to scrapes and to other requests, bad listen addresses, and that it keeps
// serving (it once crashed the server on the first scrape: see metrics_http.h).
#include "metrics/metrics_http.h"

#include <prometheus/counter.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_test_util.h"

namespace gpsel::testing {
namespace {

using ::testing::HasSubstr;

// The whole response (status line and headers too) to a raw request.
std::string RawRequest(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    ssize_t got;
    while ((got = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, got);
  }
  close(fd);
  return response;
}

TEST(MetricsHttpServerTest, ServesTheRegistryAndNothingElse) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::Counter& counter = prometheus::BuildCounter()
                                     .Name("gpsel_test_total")
                                     .Help("A test counter.")
                                     .Register(*registry)
                                     .Add({{"label", "a"}});
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http =
      MetricsHttpServer::Start("127.0.0.1:0", registry);
  ASSERT_TRUE(http.ok()) << http.status();
  const int port = (*http)->port();
  ASSERT_GT(port, 0);

  // Many scrapes in a row, each seeing the current value.
  for (int i = 1; i <= 20; ++i) {
    counter.Increment();
    const std::string body = HttpGet(port, "/metrics");
    EXPECT_THAT(body, HasSubstr(absl::StrCat("gpsel_test_total{label=\"a\"} ", i, "\n")));
  }
  const std::string full = RawRequest(
      port, "GET /metrics?name[]=x HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n");
  EXPECT_THAT(full, HasSubstr("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(full, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(full, HasSubstr("# TYPE gpsel_test_total counter"));
  // HEAD: the headers only.
  const std::string head = RawRequest(port, "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_THAT(head, HasSubstr("200 OK"));
  EXPECT_THAT(head, ::testing::EndsWith("\r\n\r\n"));
  EXPECT_THAT(RawRequest(port, "GET / HTTP/1.0\r\n\r\n"), HasSubstr("404 Not Found"));
  EXPECT_THAT(RawRequest(port, "POST /metrics HTTP/1.0\r\n\r\n"), HasSubstr("405"));
  // A client that hangs up in the middle of its request: the next scrape is still answered.
  const int idle = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(idle, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  (void)!write(idle, "GET /met", 8);
  close(idle);
  EXPECT_THAT(HttpGet(port, "/metrics"), HasSubstr("gpsel_test_total"));

  http->reset();  // stops and releases the port
  EXPECT_EQ(HttpGet(port, "/metrics"), "");
}

TEST(MetricsHttpServerTest, BadAddressesAreErrors) {
  auto registry = std::make_shared<prometheus::Registry>();
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1", registry).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1:notaport", registry).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A port in use cannot be bound.
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> first =
      MetricsHttpServer::Start("127.0.0.1:0", registry);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(MetricsHttpServer::Start(absl::StrCat("127.0.0.1:", (*first)->port()), registry)
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  // IPv6 loopback in brackets, where the machine has it.
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> v6 =
      MetricsHttpServer::Start("[::1]:0", registry);
  if (v6.ok()) EXPECT_GT((*v6)->port(), 0);
}

}  // namespace
}  // namespace gpsel::testing
