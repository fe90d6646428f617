// libFuzzer target: the CSV readers of core/dataset.h (ParseCsv for datasets, ParseCsvInputs for
// prediction inputs) on arbitrary text, as `gpsel` reads user files (client/cli/) before any numerics.
// Invariants: OK or INVALID_ARGUMENT only; an accepted dataset has n×d inputs and n targets with
// 2 ≤ n ≤ max_points, 1 ≤ d ≤ max_dims, every value finite, and passes ValidateDataset; written
// back as CSV with 17 significant digits it parses to the same values bit for bit; the
// standardisation of y (score.cc's first step) is OK with finite results or INVALID_ARGUMENT.
// Accepted inputs have between 1 and max_rows rows, ≥ 1 column and finite values.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/dataset.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool AllFinite(const Eigen::MatrixXd& m) { return m.array().isFinite().all(); }

bool SameBits(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), sizeof(double) * a.size()) == 0);
}

std::string ToCsv(const gpsel::Dataset& data) {
  // A header as wide as the rows: ParseCsv takes the header's width as the table's.
  std::string out;
  for (int j = 0; j < data.num_dims(); ++j) absl::StrAppend(&out, "x", j, ",");
  out += "y\n";
  for (int i = 0; i < data.num_points(); ++i) {
    for (int j = 0; j < data.num_dims(); ++j) absl::StrAppendFormat(&out, "%.17g,", data.x(i, j));
    absl::StrAppendFormat(&out, "%.17g\n", data.y(i));
  }
  return out;
}

void CheckDataset(std::string_view text, const gpsel::DatasetLimits& limits) {
  absl::StatusOr<gpsel::Dataset> data = gpsel::ParseCsv(text, limits);
  GPSEL_FUZZ_CHECK_OK_OR_INVALID(data.status());
  if (!data.ok()) return;
  const int n = data->num_points();
  const int d = data->num_dims();
  const std::string shape = absl::StrCat(n, "×", d);
  GPSEL_FUZZ_CHECK(data->x.rows() == n, shape);
  GPSEL_FUZZ_CHECK(n >= limits.min_points && n <= limits.max_points, shape);
  GPSEL_FUZZ_CHECK(d >= 1 && d <= limits.max_dims, shape);
  GPSEL_FUZZ_CHECK(AllFinite(data->x) && AllFinite(data->y), shape);
  GPSEL_FUZZ_CHECK(gpsel::ValidateDataset(*data, limits).ok(), shape);

  absl::StatusOr<gpsel::Dataset> again = gpsel::ParseCsv(ToCsv(*data), limits);
  GPSEL_FUZZ_CHECK(again.ok(), again.status().ToString());
  GPSEL_FUZZ_CHECK(SameBits(again->x, data->x) && SameBits(again->y, data->y), shape);

  absl::StatusOr<gpsel::Standardization> s = gpsel::ComputeStandardization(data->y, true);
  GPSEL_FUZZ_CHECK_OK_OR_INVALID(s.status());
  if (s.ok()) {
    GPSEL_FUZZ_CHECK(
        s->applied && std::isfinite(s->mean) && std::isfinite(s->scale) && s->scale > 0,
        absl::StrCat(s->mean, " ", s->scale));
    GPSEL_FUZZ_CHECK(AllFinite(gpsel::ApplyStandardization(*s, data->y)), shape);
  }
}

void CheckInputs(std::string_view text, int max_rows) {
  absl::StatusOr<Eigen::MatrixXd> x = gpsel::ParseCsvInputs(text, max_rows);
  GPSEL_FUZZ_CHECK_OK_OR_INVALID(x.status());
  if (!x.ok()) return;
  const std::string shape = absl::StrCat(x->rows(), "×", x->cols());
  GPSEL_FUZZ_CHECK(x->rows() >= 1 && x->rows() <= max_rows && x->cols() >= 1, shape);
  GPSEL_FUZZ_CHECK(AllFinite(*x), shape);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckDataset(text, gpsel::DatasetLimits{});
  // Small limits too, so the fuzzer also meets the point and dimension limits.
  gpsel::DatasetLimits small;
  small.min_points = 3;
  small.max_points = 8;
  small.max_dims = 2;
  CheckDataset(text, small);
  CheckInputs(text, 1'000'000);
  CheckInputs(text, 4);
  return 0;
}
