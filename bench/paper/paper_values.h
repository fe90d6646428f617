// The paper's printed values (/work/shared/paper/laplace-model-selection.tex: Tables 1-4 and the
// shares of Fig. 2), the Mauna Loa kernels and Fisher's exact test: what paper_repro writes
// beside its own numbers and what its self-test checks.
#ifndef GPSEL_BENCH_PAPER_PAPER_VALUES_H_
#define GPSEL_BENCH_PAPER_PAPER_VALUES_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpsel::paper {

// Table 1: percent of 40 CKS runs per N that recognised the generating kernel.
inline nlohmann::json PaperTable1() {
  static const nlohmann::json table = {
      {"5", {{"mll", 2.5}, {"aic", 42.5}, {"bic", 45.0}, {"map", 0.0}, {"lap0", 42.5}, {"lap_aic", 42.5}, {"lap_bic", 45.0}}},
      {"10", {{"mll", 2.5}, {"aic", 47.5}, {"bic", 52.5}, {"map", 0.0}, {"lap0", 47.5}, {"lap_aic", 50.0}, {"lap_bic", 47.5}}},
      {"20", {{"mll", 0.0}, {"aic", 65.0}, {"bic", 60.0}, {"map", 0.0}, {"lap0", 55.0}, {"lap_aic", 55.0}, {"lap_bic", 55.0}}},
      {"30", {{"mll", 0.0}, {"aic", 60.0}, {"bic", 60.0}, {"map", 0.0}, {"lap0", 55.0}, {"lap_aic", 62.5}, {"lap_bic", 65.0}}},
      {"40", {{"mll", 0.0}, {"aic", 60.0}, {"bic", 60.0}, {"map", 0.0}, {"lap0", 62.5}, {"lap_aic", 67.5}, {"lap_bic", 65.0}}},
      {"50", {{"mll", 0.0}, {"aic", 57.5}, {"bic", 65.0}, {"map", 0.0}, {"lap0", 62.5}, {"lap_aic", 72.5}, {"lap_bic", 67.5}}},
      {"100", {{"mll", 0.0}, {"aic", 60.0}, {"bic", 70.0}, {"map", 0.0}, {"lap0", 67.5}, {"lap_aic", 75.0}, {"lap_bic", 72.5}}},
      {"200", {{"mll", 0.0}, {"aic", 70.0}, {"bic", 65.0}, {"map", 0.0}, {"lap0", 75.0}, {"lap_aic", 70.0}, {"lap_bic", 70.0}}},
      {"avg", {{"mll", 0.6}, {"aic", 57.8}, {"bic", 59.7}, {"map", 0.0}, {"lap0", 58.4}, {"lap_aic", 61.9}, {"lap_bic", 60.9}}}};
  return table;
}
// Table 2: mean log Z (dynamic nested sampling) of the chosen kernels, and its sd.
inline nlohmann::json PaperTable2() {
  static const nlohmann::json table = {
      {"5", {{"mll", -9.00}, {"aic", -5.38}, {"bic", -5.28}, {"map", -8.80}, {"lap0", -5.83}, {"lap_aic", -5.84}, {"lap_bic", -5.87}}},
      {"10", {{"mll", -14.12}, {"aic", -5.37}, {"bic", -5.72}, {"map", -13.90}, {"lap0", -5.32}, {"lap_aic", -5.46}, {"lap_bic", -5.63}}},
      {"20", {{"mll", -23.50}, {"aic", -2.54}, {"bic", -3.54}, {"map", -23.92}, {"lap0", -1.84}, {"lap_aic", -2.03}, {"lap_bic", -2.51}}},
      {"30", {{"mll", -33.30}, {"aic", 5.25}, {"bic", 4.53}, {"map", -33.32}, {"lap0", 4.11}, {"lap_aic", 3.84}, {"lap_bic", 3.39}}},
      {"40", {{"mll", -45.48}, {"aic", 12.33}, {"bic", 12.09}, {"map", -40.77}, {"lap0", 13.32}, {"lap_aic", 13.09}, {"lap_bic", 12.85}}},
      {"50", {{"mll", -49.42}, {"aic", 21.14}, {"bic", 21.29}, {"map", -48.06}, {"lap0", 18.35}, {"lap_aic", 18.02}, {"lap_bic", 17.79}}},
      {"100", {{"mll", -94.41}, {"aic", 57.92}, {"bic", 57.95}, {"map", -89.25}, {"lap0", 59.57}, {"lap_aic", 59.50}, {"lap_bic", 59.14}}},
      {"200", {{"mll", -163.60}, {"aic", 145.34}, {"bic", 146.40}, {"map", -189.39}, {"lap0", 147.13}, {"lap_aic", 147.06}, {"lap_bic", 146.66}}}};
  return table;
}
inline nlohmann::json PaperTable2Sd() {
  static const nlohmann::json table = {
      {"5", {{"mll", 2.56}, {"aic", 3.71}, {"bic", 3.85}, {"map", 2.69}, {"lap0", 4.45}, {"lap_aic", 4.43}, {"lap_bic", 4.38}}},
      {"10", {{"mll", 6.42}, {"aic", 5.82}, {"bic", 5.91}, {"map", 6.40}, {"lap0", 6.56}, {"lap_aic", 6.56}, {"lap_bic", 6.71}}},
      {"20", {{"mll", 15.63}, {"aic", 8.94}, {"bic", 8.52}, {"map", 15.90}, {"lap0", 8.91}, {"lap_aic", 9.04}, {"lap_bic", 9.12}}},
      {"30", {{"mll", 26.26}, {"aic", 11.29}, {"bic", 11.45}, {"map", 25.28}, {"lap0", 11.03}, {"lap_aic", 11.22}, {"lap_bic", 11.37}}},
      {"40", {{"mll", 37.89}, {"aic", 12.01}, {"bic", 12.03}, {"map", 36.68}, {"lap0", 11.56}, {"lap_aic", 11.63}, {"lap_bic", 11.78}}},
      {"50", {{"mll", 48.85}, {"aic", 14.19}, {"bic", 14.54}, {"map", 47.07}, {"lap0", 12.82}, {"lap_aic", 12.97}, {"lap_bic", 13.10}}},
      {"100", {{"mll", 100.15}, {"aic", 16.73}, {"bic", 17.10}, {"map", 96.13}, {"lap0", 18.63}, {"lap_aic", 18.73}, {"lap_bic", 18.73}}},
      {"200", {{"mll", 196.11}, {"aic", 19.33}, {"bic", 20.86}, {"map", 207.50}, {"lap0", 20.76}, {"lap_aic", 20.78}, {"lap_bic", 20.63}}}};
  return table;
}
// Table 3: test log-likelihood per point (10 fresh draws), and its sd.
inline nlohmann::json PaperTable3() {
  static const nlohmann::json table = {
      {"5", {{"mll", -1.53}, {"aic", -3.09}, {"bic", -2.92}, {"map", -1.47}, {"lap0", -1.76}, {"lap_aic", -1.76}, {"lap_bic", -1.76}}},
      {"10", {{"mll", -1.35}, {"aic", -0.82}, {"bic", -0.81}, {"map", -1.22}, {"lap0", -1.79}, {"lap_aic", -1.31}, {"lap_bic", -1.15}}},
      {"20", {{"mll", -1.34}, {"aic", -0.10}, {"bic", 0.02}, {"map", -1.29}, {"lap0", -3.01}, {"lap_aic", -2.82}, {"lap_bic", -0.59}}},
      {"30", {{"mll", -1.10}, {"aic", 0.20}, {"bic", 0.21}, {"map", -1.05}, {"lap0", -0.30}, {"lap_aic", -0.31}, {"lap_bic", 0.21}}},
      {"40", {{"mll", -1.16}, {"aic", 0.34}, {"bic", 0.34}, {"map", -1.46}, {"lap0", 0.23}, {"lap_aic", 0.33}, {"lap_bic", 0.32}}},
      {"50", {{"mll", -1.46}, {"aic", -0.12}, {"bic", -0.12}, {"map", -1.21}, {"lap0", -0.16}, {"lap_aic", -0.16}, {"lap_bic", -0.09}}},
      {"100", {{"mll", -1.14}, {"aic", 0.03}, {"bic", -0.26}, {"map", -1.16}, {"lap0", -0.31}, {"lap_aic", -0.31}, {"lap_bic", 0.58}}},
      {"200", {{"mll", -0.97}, {"aic", 0.44}, {"bic", 0.22}, {"map", -0.95}, {"lap0", 0.22}, {"lap_aic", 0.22}, {"lap_bic", 0.73}}}};
  return table;
}
inline nlohmann::json PaperTable3Sd() {
  static const nlohmann::json table = {
      {"5", {{"mll", 0.56}, {"aic", 3.67}, {"bic", 3.48}, {"map", 0.51}, {"lap0", 1.57}, {"lap_aic", 1.57}, {"lap_bic", 1.57}}},
      {"10", {{"mll", 0.65}, {"aic", 1.06}, {"bic", 1.00}, {"map", 0.78}, {"lap0", 3.44}, {"lap_aic", 1.98}, {"lap_bic", 1.70}}},
      {"20", {{"mll", 0.92}, {"aic", 0.72}, {"bic", 0.55}, {"map", 1.05}, {"lap0", 12.41}, {"lap_aic", 12.39}, {"lap_bic", 3.51}}},
      {"30", {{"mll", 0.88}, {"aic", 0.33}, {"bic", 0.33}, {"map", 0.88}, {"lap0", 2.45}, {"lap_aic", 2.45}, {"lap_bic", 0.40}}},
      {"40", {{"mll", 1.04}, {"aic", 0.28}, {"bic", 0.28}, {"map", 1.92}, {"lap0", 0.75}, {"lap_aic", 0.31}, {"lap_bic", 0.31}}},
      {"50", {{"mll", 2.68}, {"aic", 2.61}, {"bic", 2.64}, {"map", 2.21}, {"lap0", 3.35}, {"lap_aic", 3.35}, {"lap_bic", 3.34}}},
      {"100", {{"mll", 1.16}, {"aic", 3.70}, {"bic", 4.14}, {"map", 1.24}, {"lap0", 4.05}, {"lap_aic", 4.05}, {"lap_bic", 0.30}}},
      {"200", {{"mll", 1.04}, {"aic", 1.48}, {"bic", 1.89}, {"map", 1.03}, {"lap0", 1.87}, {"lap_aic", 1.87}, {"lap_bic", 0.09}}}};
  return table;
}

// Table 4: the Mauna Loa kernels of Rasmussen & Williams eq. 5.19 summand by summand (gpsel's
// spelling, as bench/mauna_loa_table.cc), and the paper's values (its AIC/BIC rows are −½·AIC and
// −½·BIC, i.e. gpsel's aic and bic; log Z errors ± 3.78, 3.441, 0.29, 5.19).
struct MaunaLoaColumn {
  const char* name;
  const char* kernel;
};
inline const std::vector<MaunaLoaColumn>& MaunaLoaColumns() {
  static const std::vector<MaunaLoaColumn> columns = {
      {"k1", "C*SE"},
      {"k1+2", "C*SE + C*SE*PER"},
      {"k1+2+3", "C*SE + C*SE*PER + C*RQ"},
      {"k1+2+3+4", "C*SE + C*SE*PER + C*RQ + C*SE"}};
  return columns;
}
inline nlohmann::json PaperTable4() {
  static const nlohmann::json table = {
      {"k1", {{"log_evidence", -1258.88}, {"log_evidence_error", 3.78}, {"lap0", -1305.48},
              {"lap_aic", -1308.10}, {"lap_bic", -1324.00}, {"aic", -1206.85},
              {"bic", -1213.30}, {"mll", -1203.85}, {"map", -1305.10}}},
      {"k1+2", {{"log_evidence", -581.45}, {"log_evidence_error", 3.441}, {"lap0", -655.84},
                {"lap_aic", -660.84}, {"lap_bic", -695.87}, {"aic", -554.67},
                {"bic", -569.72}, {"mll", -547.66}, {"map", -651.77}}},
      {"k1+2+3", {{"log_evidence", -293.40}, {"log_evidence_error", 0.29}, {"lap0", -288.03},
                  {"lap_aic", -295.95}, {"lap_bic", -348.29}, {"aic", -143.32},
                  {"bic", -164.83}, {"mll", -133.32}, {"map", -285.29}}},
      {"k1+2+3+4", {{"log_evidence", -286.81}, {"log_evidence_error", 5.19}, {"lap0", -288.76},
                    {"lap_aic", -298.69}, {"lap_bic", -361.64}, {"aic", -144.09},
                    {"bic", -169.89}, {"mll", -132.08}, {"map", -286.03}}}};
  return table;
}
// Fig. 2: % of the nested-sampling samples inside each variant's 2σ ellipse.
inline nlohmann::json PaperFigure2() {
  static const nlohmann::json shares = {
      {"laplace", 78.4}, {"lap0", 60.6}, {"lap_aic", 22.8}, {"lap_bic", 3.1}};
  return shares;
}

// Two-sided Fisher exact test of the 2×2 table [[a, b], [c, d]] (rows: ours, the paper's;
// columns: recognised, not): the probability, under the hypergeometric law of the first cell with
// all margins fixed, of the tables no more likely than the observed one (the usual two-sided
// rule, with a relative tolerance of 1e-7 for ties as R and SciPy use).
inline double FisherExactTwoSided(int a, int b, int c, int d) {
  const int row1 = a + b, col1 = a + c, total = a + b + c + d;
  auto log_choose = [](int n, int k) {
    return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
  };
  auto log_p = [&](int x) {
    return log_choose(col1, x) + log_choose(total - col1, row1 - x) - log_choose(total, row1);
  };
  const int lo = std::max(0, row1 + col1 - total), hi = std::min(row1, col1);
  const double observed = log_p(a);
  double p = 0;
  for (int x = lo; x <= hi; ++x) {
    const double lp = log_p(x);
    if (lp <= observed + 1e-7 * std::abs(observed) + 1e-12) p += std::exp(lp);
  }
  return std::min(1.0, p);
}

}  // namespace gpsel::paper

#endif  // GPSEL_BENCH_PAPER_PAPER_VALUES_H_
