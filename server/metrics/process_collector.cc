// ProcessCollector; see process_collector.h. Field numbers are those of proc(5).
#include "gpsel/server/metrics/process_collector.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpsel {
namespace {

bool ReadWholeFile(const char* path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

// Seconds since the epoch at which the machine booted: "btime" in /proc/stat.
std::optional<double> BootTimeSeconds() {
  std::string stat;
  if (!ReadWholeFile("/proc/stat", &stat)) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(stat, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      double value = 0;
      if (absl::SimpleAtod(line, &value)) return value;
    }
  }
  return std::nullopt;
}

// /proc/self/stat: the fields after "pid (comm)" (comm may hold spaces and parentheses, so
// split after the last ')'). fields[0] is field 3 (state).
void ReadStat(ProcessStats& stats) {
  std::string stat;
  if (!ReadWholeFile("/proc/self/stat", &stat)) return;
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return;
  const std::vector<std::string> fields =
      absl::StrSplit(absl::string_view(stat).substr(paren + 1), ' ', absl::SkipEmpty());
  auto field = [&fields](int number, double* value) {  // proc(5) numbering, from 1
    const size_t index = static_cast<size_t>(number - 3);
    return index < fields.size() && absl::SimpleAtod(fields[index], value);
  };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  double utime = 0, stime = 0, starttime = 0, vsize = 0, rss = 0;
  if (ticks > 0 && field(14, &utime) && field(15, &stime)) {
    stats.cpu_seconds = (utime + stime) / ticks;
  }
  if (ticks > 0 && field(22, &starttime)) {
    if (std::optional<double> boot = BootTimeSeconds()) {
      stats.start_time_seconds = *boot + starttime / ticks;
    }
  }
  if (field(23, &vsize)) stats.virtual_memory_bytes = vsize;
  if (page > 0 && field(24, &rss)) stats.resident_memory_bytes = rss * page;
}

// Entries of /proc/self/fd, not counting the descriptor that lists them.
void ReadOpenFds(ProcessStats& stats) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const std::string own = std::to_string(dirfd(dir));
  double count = 0;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == ".." || name == own) continue;
    ++count;
  }
  closedir(dir);
  stats.open_fds = count;
}

// "Max open files            1024                 1048576              files" in
// /proc/self/limits: the soft limit ("unlimited" is left out).
void ReadMaxFds(ProcessStats& stats) {
  std::string limits;
  if (!ReadWholeFile("/proc/self/limits", &limits)) return;
  for (absl::string_view line : absl::StrSplit(limits, '\n')) {
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double value = 0;
    if (!words.empty() && absl::SimpleAtod(words[0], &value)) stats.max_fds = value;
  }
}

void AddFamily(std::vector<prometheus::MetricFamily>& out, const char* name, const char* help,
              prometheus::MetricType type, const std::optional<double>& value) {
  if (!value) return;
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = *value;
  } else {
    metric.gauge.value = *value;
  }
  family.metric.push_back(std::move(metric));
  out.push_back(std::move(family));
}

}  // namespace

ProcessStats ReadProcessStats() {
  ProcessStats stats;
  ReadStat(stats);
  ReadOpenFds(stats);
  ReadMaxFds(stats);
  return stats;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  const ProcessStats stats = ReadProcessStats();
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  AddFamily(out, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
           MetricType::Counter, stats.cpu_seconds);
  AddFamily(out, "process_resident_memory_bytes", "Resident memory size in bytes.",
           MetricType::Gauge, stats.resident_memory_bytes);
  AddFamily(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
           MetricType::Gauge, stats.virtual_memory_bytes);
  AddFamily(out, "process_start_time_seconds",
           "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
           stats.start_time_seconds);
  AddFamily(out, "process_open_fds", "Number of open file descriptors.", MetricType::Gauge,
           stats.open_fds);
  AddFamily(out, "process_max_fds", "Maximum number of open file descriptors.",
           MetricType::Gauge, stats.max_fds);
  return out;
}

}  // namespace gpsel
