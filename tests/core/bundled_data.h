// The real series bundled in data/ (data/README.md), loaded for core tests: one helper instead of
// a copy per test file. GPSEL_DATA_DIR is set per test target in tests/CMakeLists.txt.
#ifndef GPSEL_TESTS_CORE_BUNDLED_DATA_H_
#define GPSEL_TESTS_CORE_BUNDLED_DATA_H_

#include <string>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"

namespace gpsel::testing {

// data/<name> as a Dataset; a failed load fails the calling test (and returns an empty one).
inline Dataset LoadBundled(const std::string& name) {
  absl::StatusOr<Dataset> data = LoadCsvFile(std::string(GPSEL_DATA_DIR "/") + name);
  EXPECT_TRUE(data.ok()) << data.status();
  return data.ok() ? *std::move(data) : Dataset{};
}

// Every k-th point of `data`, from the first: a real series thinned for a fast test.
inline Dataset EveryKth(const Dataset& data, int k) {
  Dataset thinned;
  const int n = (data.num_points() + k - 1) / k;
  thinned.x.resize(n, data.num_dims());
  thinned.y.resize(n);
  for (int i = 0; i < n; ++i) {
    thinned.x.row(i) = data.x.row(k * i);
    thinned.y(i) = data.y(k * i);
  }
  return thinned;
}

}  // namespace gpsel::testing

#endif  // GPSEL_TESTS_CORE_BUNDLED_DATA_H_
