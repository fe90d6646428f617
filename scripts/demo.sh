#!/usr/bin/env bash
# The README's demo command: install packages, build the CLI and the server (no tests or
# benchmarks: scripts/test.sh builds those), then run gpsel on the bundled data.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_TARGETS="gpsel gpsel-server" bash scripts/build.sh
GPSEL="${BUILD_DIR:-build}/bin/gpsel"

echo
echo "== The paper's interpretable example (10 points, no standardisation): which kernel? =="
"$GPSEL" score --data data/interpretable_linear.csv --no-standardize \
  --kernel SE --kernel LIN --kernel SE+LIN --kernel MAT32 --kernel 'LIN*SE'

echo
echo "== Mauna Loa CO2 (521 monthly means): long-term trend vs trend + seasonality =="
"$GPSEL" score --data data/mauna_loa_monthly.csv \
  --kernel 'C*SE' --kernel 'C*SE + C*SE*PER'

echo
echo "== Yearly sunspots (309 years): do the default priors reach the 11-year cycle? =="
"$GPSEL" priors --kernel 'C*PER*SE' --data data/sunspots_yearly.csv
echo
echo "== ... x as given (the period prior sits near 1 year; warnings say so), then --scale-x auto =="
"$GPSEL" score --data data/sunspots_yearly.csv --kernel 'C*SE' --kernel 'C*PER*SE' \
  --metrics mll,map,bic,lap0
"$GPSEL" score --data data/sunspots_yearly.csv --kernel 'C*SE' --kernel 'C*PER*SE' \
  --metrics mll,map,bic,lap0 --scale-x auto

echo
echo "== The log evidence of the paper's example (exact -8.032 by quadrature): importance sampling =="
echo "== from the posterior modes' Laplace approximations, nested sampling if its diagnostics fail =="
"$GPSEL" evidence --data data/interpretable_linear.csv --kernel SE --no-standardize --method auto

echo
echo "== A report on the Nile's annual flow: fit, metrics, samples against the Laplace ellipse =="
report_dir="$(mktemp -d)/nile-report"
"$GPSEL" report --data data/nile.csv --kernel SE --kernel MAT12 --x-unit years --y-unit '10^8 m^3' \
  --evidence --method importance --out "$report_dir"
echo "open $report_dir/report.html in a browser (it needs no network)"
