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

}  // namespace gpsel::testing

#endif  // GPSEL_TESTS_CORE_BUNDLED_DATA_H_
