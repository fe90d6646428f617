// Tests of ProcessCollector (server/metrics/process_collector.h) against values checked by other
// means: open descriptors, touched memory, getrusage CPU time, the start time seen from a
// freshly forked child, and getrlimit.
#include "gpsel/server/metrics/process_collector.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/service/server_test_util.h"

namespace gpsel::testing {
namespace {

double RusageCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

TEST(ProcessCollectorTest, EveryMetricIsThereWithItsType) {
  const std::vector<prometheus::MetricFamily> families = ProcessCollector().Collect();
  std::map<std::string, prometheus::MetricType> types;
  for (const auto& family : families) {
    ASSERT_EQ(family.metric.size(), 1u) << family.name;
    EXPECT_FALSE(family.help.empty());
    types[family.name] = family.type;
  }
  using prometheus::MetricType;
  EXPECT_EQ(types, (std::map<std::string, MetricType>{
                       {"process_cpu_seconds_total", MetricType::Counter},
                       {"process_max_fds", MetricType::Gauge},
                       {"process_open_fds", MetricType::Gauge},
                       {"process_resident_memory_bytes", MetricType::Gauge},
                       {"process_start_time_seconds", MetricType::Gauge},
                       {"process_virtual_memory_bytes", MetricType::Gauge}}));
}

TEST(ProcessCollectorTest, OpenFdsRiseByTheDescriptorsOpened) {
  const double before = ReadProcessStats().open_fds.value();
  std::vector<int> fds;
  for (int i = 0; i < 17; ++i) fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(ReadProcessStats().open_fds.value(), before + 17);
  for (int fd : fds) close(fd);
  EXPECT_EQ(ReadProcessStats().open_fds.value(), before);
}

TEST(ProcessCollectorTest, MaxFdsIsTheSoftLimit) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur == RLIM_INFINITY) GTEST_SKIP() << "no limit on open files";
  EXPECT_EQ(ReadProcessStats().max_fds.value(), static_cast<double>(limit.rlim_cur));
}

TEST(ProcessCollectorTest, ResidentMemoryGrowsWithATouched64MiBBuffer) {
  constexpr size_t kBytes = 64u << 20;
  const ProcessStats before = ReadProcessStats();
  // Fresh anonymous pages, mapped and unmapped explicitly (the compiler may drop a malloc'ed
  // buffer that nothing reads).
  void* mapped =
      mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  char* buffer = static_cast<char*>(mapped);
  const ProcessStats mapped_only = ReadProcessStats();
  for (size_t i = 0; i < kBytes; i += 4096) buffer[i] = 1;
  asm volatile("" : : "r"(buffer) : "memory");
  const ProcessStats touched = ReadProcessStats();
  munmap(mapped, kBytes);
  const ProcessStats after = ReadProcessStats();
  // Within 1 MiB: the allocator may return a small mapping of its own between the readings
  // (seen: 8 KiB less under load).
  EXPECT_GE(mapped_only.virtual_memory_bytes.value() - before.virtual_memory_bytes.value(),
            static_cast<double>(kBytes) - (1 << 20));
  const double grew =
      touched.resident_memory_bytes.value() - mapped_only.resident_memory_bytes.value();
  EXPECT_GT(grew, 0.95 * kBytes);
  EXPECT_LT(grew, 1.2 * kBytes);  // other threads are quiet here
  EXPECT_LT(after.resident_memory_bytes.value(),
            touched.resident_memory_bytes.value() - 0.95 * kBytes);
}

TEST(ProcessCollectorTest, CpuSecondsAgreeWithGetrusage) {
  // Burn 0.3 s of CPU (CPU time, not wall time: on a loaded machine the two differ) so that the
  // clock-tick granularity (10 ms) matters little.
  const double start = RusageCpuSeconds();
  volatile double x = 0;
  while (RusageCpuSeconds() < start + 0.3) {
    for (int i = 0; i < 10000; ++i) x = x + std::sqrt(x + 1.0);
  }
  const double before = RusageCpuSeconds();
  const double read = ReadProcessStats().cpu_seconds.value();
  const double after = RusageCpuSeconds();
  EXPECT_GT(read, 0.25);
  // /proc/self/stat counts whole ticks: up to a tick per thread behind getrusage.
  EXPECT_GE(read, before - 0.05);
  EXPECT_LE(read, after + 0.02);
}

TEST(ProcessCollectorTest, StartTimeOfAFreshChildIsNow) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const double forked_at = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  const pid_t pid = fork();
  if (pid == 0) {
    const std::optional<double> start = ReadProcessStats().start_time_seconds;
    const double value = start.value_or(-1);
    (void)!write(out[1], &value, sizeof(value));
    _exit(0);
  }
  close(out[1]);
  double child_start = 0;
  ASSERT_EQ(read(out[0], &child_start, sizeof(child_start)),
            static_cast<ssize_t>(sizeof(child_start)));
  close(out[0]);
  waitpid(pid, nullptr, 0);
  // btime is whole seconds and starttime whole ticks: within about a second.
  EXPECT_NEAR(child_start, forked_at, 1.5);
  // This process started before its child and before this test.
  const double own = ReadProcessStats().start_time_seconds.value();
  EXPECT_LE(own, child_start + 1.0);
}

}  // namespace
}  // namespace gpsel::testing
