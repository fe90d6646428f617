// Missing values (NaN) in data that did not come from a CSV: an RPC's gpsel.v1.Dataset or a
// Python client's DataFrame, where Dataset.missing plays the CSV reader's --missing
// (core/dataset.h MissingValues): an error naming the points, or the points left out.
//
//   std::vector<int> dropped;
//   Dataset clean = DropPointsWithMissingValues(data, &dropped);
#ifndef GPSEL_CORE_MISSING_VALUES_H_
#define GPSEL_CORE_MISSING_VALUES_H_

#include <string>
#include <vector>

#include "gpsel/core/dataset.h"

namespace gpsel {

// The 0-based points holding a NaN in x or y, ascending.
std::vector<int> PointsWithMissingValues(const Dataset& data);
// `data` without those points, the others in order; their indices in *dropped.
Dataset DropPointsWithMissingValues(const Dataset& data, std::vector<int>* dropped = nullptr);
// "3, 7, 12": the first 10 points, then "and N more".
std::string DescribePoints(const std::vector<int>& points);

}  // namespace gpsel

#endif  // GPSEL_CORE_MISSING_VALUES_H_
