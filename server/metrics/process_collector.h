// ProcessCollector: the standard process_* metrics of Prometheus client libraries, which
// prometheus-cpp lacks, read from /proc/self at scrape time (Linux only):
//   process_cpu_seconds_total        user + system CPU time (/proc/self/stat utime + stime)
//   process_resident_memory_bytes    resident set size (/proc/self/stat rss × page size)
//   process_virtual_memory_bytes     virtual memory size (/proc/self/stat vsize)
//   process_start_time_seconds       start time since the Unix epoch (stat starttime + btime)
//   process_open_fds                 open file descriptors (entries of /proc/self/fd)
//   process_max_fds                  the soft "Max open files" limit (/proc/self/limits)
// A value that cannot be read is left out of the scrape rather than reported as 0.
//
//   exposer.RegisterCollectable(std::make_shared<gpsel::ProcessCollector>());
#ifndef GPSEL_METRICS_PROCESS_COLLECTOR_H_
#define GPSEL_METRICS_PROCESS_COLLECTOR_H_

#include <optional>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

namespace gpsel {

// One reading of the values above (each empty when it could not be read).
struct ProcessStats {
  std::optional<double> cpu_seconds;
  std::optional<double> resident_memory_bytes;
  std::optional<double> virtual_memory_bytes;
  std::optional<double> start_time_seconds;
  std::optional<double> open_fds;
  std::optional<double> max_fds;
};

// Reads /proc/self now.
ProcessStats ReadProcessStats();

class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace gpsel

#endif  // GPSEL_METRICS_PROCESS_COLLECTOR_H_
