// Tests of the /metrics endpoint (server/metrics/exposer.h, prometheus-cpp-pull's Exposer) over real
// loopback sockets: scrapes see current values, bad or busy listen addresses are statuses (not
// exceptions), and the port is released when the exposer goes.
#include "gpsel/server/metrics/exposer.h"

#include <pthread.h>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "gmock/gmock.h"
#include "gpsel/server/metrics/thread_stack.h"
#include "gtest/gtest.h"
#include "tests/server/service/server_test_util.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

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

TEST(MetricsExposerTest, ServesTheCollectablesOnMetrics) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::Counter& counter = prometheus::BuildCounter()
                                     .Name("gpsel_test_total")
                                     .Help("A test counter.")
                                     .Register(*registry)
                                     .Add({{"label", "a"}});
  auto other = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("gpsel_other_total").Help("Another.").Register(*other).Add({});
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      MetricsExposer::Start("127.0.0.1:0", {registry, other});
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  ASSERT_GT(port, 0);

  // Many scrapes in a row, each seeing the current value, and every collectable.
  for (int i = 1; i <= 20; ++i) {
    counter.Increment();
    const std::string body = HttpGet(port, "/metrics");
    EXPECT_THAT(body, HasSubstr(absl::StrCat("gpsel_test_total{label=\"a\"} ", i, "\n")));
    EXPECT_THAT(body, HasSubstr("gpsel_other_total 0"));
  }
  const std::string full = RawRequest(
      port, "GET /metrics?name[]=x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            "Accept: */*\r\n\r\n");
  EXPECT_THAT(full, HasSubstr("HTTP/1.1 200 OK\r\n"));
  // prometheus-cpp 1.0 says "text/plain; charset=utf-8" (no version=0.0.4): Prometheus reads
  // plain text as the 0.0.4 text format.
  EXPECT_THAT(full, HasSubstr("Content-Type: text/plain"));
  EXPECT_THAT(full, HasSubstr("# TYPE gpsel_test_total counter"));
  // Only GET /metrics is served (civetweb answers HEAD and POST with 404 too).
  EXPECT_THAT(RawRequest(port, "GET / HTTP/1.0\r\n\r\n"), HasSubstr("404"));
  EXPECT_THAT(RawRequest(port, "GET /healthz HTTP/1.0\r\n\r\n"), HasSubstr("404"));
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

  exposer->reset();  // stops and releases the port
  EXPECT_EQ(HttpGet(port, "/metrics"), "");
  // The collectables were kept alive by the exposer only while it served them.
  EXPECT_EQ(registry.use_count(), 1);
}

TEST(MetricsExposerTest, BadAddressesAreErrors) {
  auto registry = std::make_shared<prometheus::Registry>();
  EXPECT_THAT(MetricsExposer::Start("127.0.0.1", {registry}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MetricsExposer::Start("127.0.0.1:notaport", {registry}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MetricsExposer::Start("127.0.0.1:70000", {registry}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MetricsExposer::Start("no-such-host.invalid:0", {registry}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A port in use cannot be bound: UNAVAILABLE, not an exception.
  absl::StatusOr<std::unique_ptr<MetricsExposer>> first =
      MetricsExposer::Start("127.0.0.1:0", {registry});
  ASSERT_TRUE(first.ok()) << first.status();
  const absl::Status busy =
      MetricsExposer::Start(absl::StrCat("127.0.0.1:", (*first)->port()), {registry}).status();
  EXPECT_EQ(busy.code(), absl::StatusCode::kUnavailable) << busy;
  EXPECT_THAT(std::string(busy.message()), HasSubstr("cannot serve metrics on 127.0.0.1:"));
  // The first one still serves.
  EXPECT_THAT(HttpGet((*first)->port(), "/metrics"), HasSubstr("# TYPE"));
  // A name is resolved.
  absl::StatusOr<std::unique_ptr<MetricsExposer>> named =
      MetricsExposer::Start("localhost:0", {registry});
  if (named.ok()) {
    EXPECT_GT((*named)->port(), 0);
  }
  // IPv6 loopback in brackets, where the machine has it.
  absl::StatusOr<std::unique_ptr<MetricsExposer>> v6 =
      MetricsExposer::Start("[::1]:0", {registry});
  if (v6.ok()) {
    EXPECT_GT((*v6)->port(), 0);
  }
}

// Civetweb's 100 KiB thread stacks (server/metrics/thread_stack.h): the requested size is usable, the
// static TLS (OpenBLAS's 60 KiB among it) comes on top. Without that, the thread below would
// overflow its stack and kill the test binary.
TEST(ThreadStackTest, SmallStacksGetRoomForTheStaticTls) {
  EXPECT_GE(ThreadStackExtraBytes(), 16u * 1024);
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 102400), 0);
  size_t size = 0;
  ASSERT_EQ(pthread_attr_getstacksize(&attr, &size), 0);
  EXPECT_EQ(size, 102400 + ThreadStackExtraBytes());
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void*) -> void* {
                  volatile char use[80 * 1024];
                  for (size_t i = 0; i < sizeof(use); i += 512) use[i] = 1;
                  return nullptr;
                },
                nullptr),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

}  // namespace
}  // namespace gpsel::testing
