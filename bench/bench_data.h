// Bench inputs of any size from a real series: its first n points, continued beyond its length
// by repeats of its inputs shifted by 1e-3 per repeat (so no two inputs coincide) with a smooth
// target plus noise (fixed seed). Run time and memory depend on n and the kernel only.
#ifndef GPSEL_BENCH_BENCH_DATA_H_
#define GPSEL_BENCH_BENCH_DATA_H_

#include <algorithm>
#include <cmath>
#include <random>

#include "gpsel/core/dataset.h"

namespace gpsel::bench {

inline Dataset FirstPointsOrSynthetic(const Dataset& full, int n) {
  Dataset data;
  const int have = std::min(n, full.num_points());
  data.x.resize(n, full.num_dims());
  data.y.resize(n);
  data.x.topRows(have) = full.x.topRows(have);
  data.y.head(have) = full.y.head(have);
  std::mt19937_64 rng(17);
  std::normal_distribution<double> noise(0.0, 0.1);
  for (int i = have; i < n; ++i) {
    data.x.row(i) = full.x.row(i % full.num_points()).array() + 1e-3 * (i / full.num_points());
    data.y(i) = full.y(i % full.num_points()) + noise(rng);
  }
  return data;
}

}  // namespace gpsel::bench

#endif  // GPSEL_BENCH_BENCH_DATA_H_
