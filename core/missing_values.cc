// Points with missing values, and dropping them; see missing_values.h.
#include "gpsel/core/missing_values.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace gpsel {

std::vector<int> PointsWithMissingValues(const Dataset& data) {
  std::vector<int> points;
  for (int i = 0; i < data.num_points(); ++i) {
    bool missing = std::isnan(data.y(i));
    for (Eigen::Index j = 0; j < data.x.cols() && !missing; ++j) missing = std::isnan(data.x(i, j));
    if (missing) points.push_back(i);
  }
  return points;
}

Dataset DropPointsWithMissingValues(const Dataset& data, std::vector<int>* dropped) {
  const std::vector<int> missing = PointsWithMissingValues(data);
  if (dropped != nullptr) *dropped = missing;
  if (missing.empty()) return data;
  Dataset out;
  const int kept = data.num_points() - static_cast<int>(missing.size());
  out.x.resize(kept, data.x.cols());
  out.y.resize(kept);
  size_t next_missing = 0;
  int row = 0;
  for (int i = 0; i < data.num_points(); ++i) {
    if (next_missing < missing.size() && missing[next_missing] == i) {
      ++next_missing;
      continue;
    }
    out.x.row(row) = data.x.row(i);
    out.y(row) = data.y(i);
    ++row;
  }
  return out;
}

std::string DescribePoints(const std::vector<int>& points) {
  std::string out;
  const size_t shown = std::min<size_t>(points.size(), 10);
  for (size_t k = 0; k < shown; ++k) absl::StrAppend(&out, k ? ", " : "", points[k]);
  if (points.size() > shown) absl::StrAppend(&out, " and ", points.size() - shown, " more");
  return out;
}

}  // namespace gpsel
