// Data-informed starting points for a model's fits, in addition to the prior draws: lengthscales
// from the geometry of the inputs, periods from the Lomb–Scargle periodogram of y, the noise from
// the residual of a local smooth (core/data_heuristics.h). Random prior draws alone miss narrow
// basins that the data makes obvious, e.g. the 11-year sunspot cycle under a period prior centred
// near 1.
#ifndef GPSEL_CORE_DATA_STARTS_H_
#define GPSEL_CORE_DATA_STARTS_H_

#include <vector>

#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"

namespace gpsel {

// Starts for a fit of `model` (whose x and y are the modelled ones: scaled x, standardised y),
// deterministic functions of the data:
//   - "long": each top-level summand i of m gets the stationary lengthscale
//     ℓ_i = ℓ_long·(ℓ_short/ℓ_long)^(i/(m−1)) (ℓ_long = the median pairwise distance, ℓ_short =
//     four median spacings, capped at ℓ_long), periods at the strongest periodogram peak;
//   - "short": the same ladder reversed, periods at the second peak (the first when there is
//     one only);
//   - with a PER leaf, also the other two pairings: the short ladder at the strongest peak, then
//     the long ladder at the second. Which lengthscale basin a periodic fit ends in does not
//     follow from its period: on Mauna Loa SE+PER both basins of SE.lengthscale (0.72 and 2.36
//     years, 90 nats apart) lie at the annual period, and the first two starts reach only the
//     lower one (bench/RESULTS.md, "Data-informed starts for periodic kernels").
// A pairing that repeats an earlier start exactly (one periodogram peak) is left out.
// In all of them, a stationary factor next to a PER factor is its decay and keeps ℓ_long; PER's own
// lengthscale is 1 (one smooth bump per period); C constants and LIN variances share var(y)
// equally over the summands; RQ.alpha is 1; the noise variance is the smooth's residual. Fixed
// parameters stay fixed; a parameter the rules do not cover starts at its prior mean.
// A changepoint's location starts at the best split of y along its column into two straight
// lines with their own noise (a scan of every split, data_starts.cc ScanForChange: jumps, turns
// of the trend and changes of roughness), a changewindow's location and width at the
// window whose mean differs most (a scan on up to 80 boundaries); the transition at one median
// spacing (an abrupt change).
std::vector<StartPoint> DataInformedStarts(const GpModel& model);

}  // namespace gpsel

#endif  // GPSEL_CORE_DATA_STARTS_H_
