// WriteReport and the figures of a report; see report.h. Each figure is first a FigureSpec
// (client/report/plot.h), so the HTML's structure list, the SVG and the PNG all come from one object.
#include "gpsel/client/report/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "gpsel/core/change_summary.h"
#include "gpsel/core/status_macros.h"

namespace gpsel::report {
namespace {

constexpr double kTwoPi = 6.283185307179586;

std::vector<double> ToStd(const Eigen::VectorXd& v) { return {v.data(), v.data() + v.size()}; }

// The display names of the paper's metrics (figure "metrics" and the HTML table).
const std::vector<std::pair<std::string, std::string>>& MetricLabels() {
  static const std::vector<std::pair<std::string, std::string>> labels = {
      {"mll", "MLL"}, {"map", "MAP"},   {"aic", "AIC"},        {"bic", "BIC"},
      {"lap", "Lap"}, {"lap0", "Lap0"}, {"lap_aic", "LapAIC"}, {"lap_bic", "LapBIC"}};
  return labels;
}

std::string HtmlEscape(absl::string_view text) {
  return absl::StrReplaceAll(text,
                             {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string HexColor(Rgb c) { return absl::StrFormat("#%02X%02X%02X", c.r, c.g, c.b); }

Series Line(std::string label, Rgb color, std::vector<double> x, std::vector<double> y,
            double width = 1.6) {
  Series s;
  s.kind = Series::Kind::kLine;
  s.label = std::move(label);
  s.color = color;
  s.width = width;
  s.x = std::move(x);
  s.y = std::move(y);
  return s;
}

Series Band(std::string label, Rgb color, double alpha, std::vector<double> x,
            std::vector<double> low, std::vector<double> high) {
  Series s;
  s.kind = Series::Kind::kBand;
  s.label = std::move(label);
  s.color = color;
  s.alpha = alpha;
  s.x = std::move(x);
  s.y_low = std::move(low);
  s.y_high = std::move(high);
  return s;
}

Series Points(std::string label, Rgb color, std::vector<double> x, std::vector<double> y,
              std::string marker = "•", double scale = 1.0) {
  Series s;
  s.kind = Series::Kind::kPoints;
  s.label = std::move(label);
  s.color = color;
  s.marker = std::move(marker);
  s.marker_scale = scale;
  s.x = std::move(x);
  s.y = std::move(y);
  return s;
}

// (a) the data with the posterior mean ± 2σ of f and of y = f + noise, on y's own scale.
FigureSpec FitFigure(const ReportInputs& in) {
  FigureSpec fig;
  fig.id = "fit";
  fig.title = "Fit: posterior mean ± 2σ";
  fig.caption = absl::StrCat(
      "The data (dots) with the posterior mean of ", in.chosen.kernel,
      " (line), ±2 sd of the latent function (dark band) and ±2 sd of a new observation, noise "
      "included (light band), on the original scale of y.");
  const std::vector<double> x = ToStd(in.grid.col(0));
  const Prediction& p = in.on_grid.prediction;
  std::vector<double> mean = ToStd(p.mean), f_low, f_high, y_low, y_high;
  for (Eigen::Index i = 0; i < p.mean.size(); ++i) {
    const double sd_f = std::sqrt(std::max(0.0, p.variance(i)));
    const double sd_y = std::sqrt(std::max(0.0, p.variance(i) + p.noise_variance(i)));
    f_low.push_back(mean[i] - 2 * sd_f);
    f_high.push_back(mean[i] + 2 * sd_f);
    y_low.push_back(mean[i] - 2 * sd_y);
    y_high.push_back(mean[i] + 2 * sd_y);
  }
  Panel panel;
  panel.x_label = in.x_label;
  panel.y_label = in.y_label;
  panel.series.push_back(Band("±2σ with noise", kSky, 0.25, x, y_low, y_high));
  panel.series.push_back(Band("±2σ of f", kBlue, 0.35, x, f_low, f_high));
  panel.series.push_back(
      Points("data", kBlack, ToStd(in.data.x.col(0)), ToStd(in.data.y), "•", 0.55));
  panel.series.push_back(Line("posterior mean", kBlue, x, mean, 1.4));
  FitRanges(panel, 0.02);
  panel.y_max += 0.22 * (panel.y_max - panel.y_min);  // headroom for the legend
  fig.panels.push_back(std::move(panel));
  return fig;
}

// (a') x with several columns: no curve over x to draw, so each observation against its
// posterior mean at its own inputs, with ±2 sd of a new observation there (noise included), and
// the diagonal where they agree. The error bars should cross it for about 95 % of the points.
FigureSpec ObservedVsPredictedFigure(const ReportInputs& in) {
  FigureSpec fig;
  fig.id = "observed_vs_predicted";
  fig.title = "Observed against predicted ± 2σ";
  const Prediction& p = in.on_data.prediction;
  std::vector<double> predicted = ToStd(p.mean), observed = ToStd(in.data.y), low, high;
  int covered = 0;
  for (Eigen::Index i = 0; i < p.mean.size(); ++i) {
    const double sd_y = std::sqrt(std::max(0.0, p.variance(i) + p.noise_variance(i)));
    low.push_back(predicted[i] - 2 * sd_y);
    high.push_back(predicted[i] + 2 * sd_y);
    if (observed[i] >= low.back() && observed[i] <= high.back()) ++covered;
  }
  fig.caption = absl::StrFormat(
      "x has %d columns, so instead of a curve over x: each observed %s (vertical) against the "
      "posterior mean of %s at that point's inputs (horizontal), with ±2 sd of a new observation "
      "there, noise included (bars), and the line observed = predicted. %d of %d bars (%.0f %%) "
      "cross the line; about 95 %% should. The mean is conditioned on every point including "
      "the one drawn, so this shows fit, not out-of-sample accuracy.",
      in.data.num_dims(), in.y_label, in.chosen.kernel, covered, static_cast<int>(observed.size()),
      observed.empty() ? 0.0 : 100.0 * covered / observed.size());
  Panel panel;
  panel.title = in.y_label;  // the axis titles stay short enough for the panel's height
  panel.x_label = "predicted (posterior mean)";
  panel.y_label = "observed";
  Series bars;
  bars.kind = Series::Kind::kErrorBars;
  bars.label = "±2σ of a new observation";
  bars.color = kSky;
  bars.width = 1.0;
  bars.x = predicted;
  bars.y = predicted;
  bars.y_low = low;
  bars.y_high = high;
  panel.series.push_back(bars);
  panel.series.push_back(Points("data", kBlack, predicted, observed, "•", 0.55));
  FitRanges(panel, 0.03);
  const double lo = std::min(panel.x_min, panel.y_min), hi = std::max(panel.x_max, panel.y_max);
  Series diagonal = Line("observed = predicted", kVermilion, {lo, hi}, {lo, hi}, 1.4);
  panel.series.push_back(diagonal);
  FitRanges(panel, 0.03);
  panel.y_max += 0.18 * (panel.y_max - panel.y_min);  // headroom for the legend
  fig.panels.push_back(std::move(panel));
  return fig;
}

// (b) one panel per summand: its posterior mean ± 2σ, as ABCD decomposes a series.
FigureSpec ComponentsFigure(const ReportInputs& in, const KernelDescription& words) {
  FigureSpec fig;
  fig.id = "components";
  fig.title = "Components of the additive kernel";
  fig.caption =
      "The posterior of each summand f_k of the kernel given all the data: mean "
      "K_k(x*,X)(K+σ²I)⁻¹y "
      "and ±2 sd, on y's scale without its mean (the components plus the mean of y add up to the "
      "fit).";
  const std::vector<double> x = ToStd(in.grid.col(0));
  const auto& components = in.on_grid.prediction.components;
  fig.height = std::max(in.on_grid.prediction.components.size() * 230, size_t{300});
  size_t summand = 0;
  for (size_t k = 0; k < components.size(); ++k) {
    const PredictionComponent& c = components[k];
    std::vector<double> mean = ToStd(c.mean), low, high;
    for (Eigen::Index i = 0; i < c.mean.size(); ++i) {
      const double sd = std::sqrt(std::max(0.0, c.variance(i)));
      low.push_back(mean[i] - 2 * sd);
      high.push_back(mean[i] + 2 * sd);
    }
    Panel panel;
    // words.components has one entry per summand; a change summand comes as two regimes
    // (first, second side), titled by their side.
    std::string said;
    if (c.regime.empty() && summand < words.components.size()) said = words.components[summand].text;
    const bool first_side = absl::EndsWith(c.regime, " before") || absl::EndsWith(c.regime, " outside");
    if (!first_side) ++summand;
    panel.title = absl::StrCat(k + 1, ". ", c.Name(), said.empty() ? "" : ": ", said);
    panel.x_label = k + 1 == components.size() ? in.x_label : "";
    panel.y_label = in.y_label;
    panel.legend = k == 0;
    panel.series.push_back(Band("±2σ", SeriesColor(static_cast<int>(k)), 0.3, x, low, high));
    panel.series.push_back(Line("posterior mean", SeriesColor(static_cast<int>(k)), x, mean));
    FitRanges(panel, 0.03);
    if (panel.legend) panel.y_max += 0.3 * (panel.y_max - panel.y_min);  // room for the legend
    fig.panels.push_back(std::move(panel));
  }
  return fig;
}

// (c) the search as a ladder: step on x, score on y; every candidate a dot, the kernel kept at
// each step joined by the path, the final choice starred.
FigureSpec SearchFigure(const ReportInputs& in) {
  const SearchResult& search = *in.search;
  FigureSpec fig;
  fig.id = "search";
  fig.title = "Kernel search";
  fig.caption = absl::StrCat(
      "Each step's candidates (dots) by their ", search.metric,
      " score (higher is better); the line joins the kernel kept after each step, labelled. "
      "Stopped: ",
      search.stop_reason.empty() ? "at the depth limit" : search.stop_reason, ".");
  Panel panel;
  panel.x_label = "search step (= base kernels in the candidate)";
  panel.y_label = absl::StrCat(search.metric, " (log-evidence scale)");
  std::vector<double> cx, cy, px, py;
  for (const SearchStep& step : search.steps) {
    std::vector<const CandidateRecord*> ok;
    for (const CandidateRecord& c : step.candidates) {
      if (c.ok) ok.push_back(&c);
    }
    std::sort(ok.begin(), ok.end(), [](const CandidateRecord* a, const CandidateRecord* b) {
      return a->score < b->score;
    });
    for (size_t i = 0; i < ok.size(); ++i) {
      // Spread a step's candidates a little sideways (by rank) so that close scores stay
      // apart.
      const double spread =
          ok.size() > 1 ? 0.3 * (static_cast<double>(i) / (ok.size() - 1) - 0.5) : 0.0;
      cx.push_back(step.depth + spread);
      cy.push_back(ok[i]->score);
    }
    if (!step.chosen.empty()) {
      for (const CandidateRecord* c : ok) {
        if (c->kernel == step.chosen.front()) {
          px.push_back(step.depth);
          py.push_back(c->score);
          Note note;
          note.x = step.depth + 0.1;
          note.y = c->score;
          note.text = c->kernel;
          note.color = kVermilion;
          panel.notes.push_back(note);
        }
      }
    }
  }
  panel.series.push_back(Points("candidate", kGrey, cx, cy, "•", 0.8));
  panel.series.push_back(Line("path taken", kVermilion, px, py, 2.0));
  panel.series.push_back(Points("kept after the step", kVermilion, px, py, "•", 1.3));
  // The kernel the search returned, starred.
  double best_depth = 0;
  for (const SearchStep& step : search.steps) {
    for (const CandidateRecord& c : step.candidates) {
      if (c.ok && c.kernel == search.best.kernel && best_depth == 0) best_depth = step.depth;
    }
  }
  if (best_depth > 0) {
    panel.series.push_back(
        Points("chosen", kVermilion, {best_depth}, {search.best_score}, "★", 2.0));
  }
  FitRanges(panel, 0.06);
  panel.x_min = 0.5;
  panel.x_max = static_cast<double>(search.steps.size()) + 0.9;
  panel.x_tick = 1;
  panel.legend_right = true;
  panel.legend_bottom = true;
  fig.panels.push_back(std::move(panel));
  return fig;
}

// (d) every metric of every kernel compared, on one log-evidence scale; the winner under each
// metric ringed; log Z ± its error where an evidence run was made.
FigureSpec MetricsFigure(const ReportInputs& in) {
  FigureSpec fig;
  fig.id = "metrics";
  fig.title = "Metrics side by side";
  fig.caption =
      "Each kernel's value under each metric, all on the log-evidence scale (higher is better); "
      "the best kernel under each metric is ringed. log Z is the evidence run's estimate (nested "
      "or importance sampling, whichever it reports) with its standard error, where one was "
      "computed.";
  Panel panel;
  panel.y_label = "log-evidence scale (nats)";
  std::vector<std::string> keys;
  for (const auto& [key, label] : MetricLabels()) {
    keys.push_back(key);
    panel.x_categories.push_back(label);
  }
  const bool with_evidence = in.evidence.has_value();
  if (with_evidence) panel.x_categories.push_back("log Z");
  const int kernels = static_cast<int>(in.scores.size());
  std::vector<double> wx, wy;
  for (size_t m = 0; m < keys.size(); ++m) {
    int best = -1;
    double best_value = -INFINITY;
    for (int k = 0; k < kernels; ++k) {
      auto it = in.scores[k].metrics.find(keys[m]);
      if (it != in.scores[k].metrics.end() && it->second > best_value) {
        best_value = it->second;
        best = k;
      }
    }
    if (best >= 0) {
      wx.push_back(static_cast<double>(m + 1) + 0.5 * ((best + 0.5) / kernels - 0.5));
      wy.push_back(best_value);
    }
  }
  Series rings;
  rings.kind = Series::Kind::kRings;
  rings.label = "best under the metric";
  rings.width = 1.6;
  rings.x = wx;
  rings.y = wy;
  for (int k = 0; k < kernels; ++k) {
    std::vector<double> x, y;
    const double offset = 0.5 * ((k + 0.5) / kernels - 0.5);
    for (size_t m = 0; m < keys.size(); ++m) {
      auto it = in.scores[k].metrics.find(keys[m]);
      if (it == in.scores[k].metrics.end()) continue;
      x.push_back(static_cast<double>(m + 1) + offset);
      y.push_back(it->second);
    }
    panel.series.push_back(Points(in.scores[k].kernel, SeriesColor(k), x, y, "●", 0.9));
  }
  panel.series.push_back(rings);
  if (with_evidence) {
    const EvidenceResult& ev = *in.evidence;
    int k = 0;
    for (int i = 0; i < kernels; ++i) {
      if (in.scores[i].kernel == in.evidence->kernel) k = i;
    }
    const double x = static_cast<double>(keys.size() + 1) + 0.5 * ((k + 0.5) / kernels - 0.5);
    Series bars;
    bars.kind = Series::Kind::kErrorBars;
    bars.label = absl::StrCat("log Z ± se of ", in.evidence->kernel,
                              ev.partial ? " (PARTIAL, not final)" : "");
    if (ev.partial) {
      absl::StrAppend(&fig.caption, " The log Z shown is PARTIAL, not a final answer: ",
                      ev.partial_reason,
                      ev.method == EvidenceMethod::kNested
                          ? absl::StrFormat("; its error bar includes the remaining-mass term "
                                            "%.3f nats.",
                                            ev.log_evidence_truncation)
                          : std::string("."));
    }
    bars.color = SeriesColor(k);
    bars.width = 2.0;
    bars.x = {x};
    bars.y_low = {ev.log_evidence - ev.log_evidence_error};
    bars.y_high = {ev.log_evidence + ev.log_evidence_error};
    panel.series.push_back(bars);
    panel.series.push_back(Points("", SeriesColor(k), {x}, {ev.log_evidence}, "◆", 1.2));
  }
  FitRanges(panel, 0.08);
  panel.x_min = 0.4;
  panel.x_max = static_cast<double>(panel.x_categories.size()) + 0.6;
  // Room above the points for the legend.
  panel.y_max += 0.12 * (kernels + 1) * (panel.y_max - panel.y_min);
  fig.panels.push_back(std::move(panel));
  return fig;
}

// The parameter pair of the laplace figure: the one named, or the most correlated pair.
absl::StatusOr<std::pair<int, int>> LaplacePair(const ReportInputs& in) {
  const std::vector<std::string>& names = in.chosen.parameter_names;
  auto index_of = [&names](const std::string& name) {
    return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  if (!in.pair.empty()) {
    if (in.pair.size() != 2) return absl::InvalidArgumentError("pair: give two parameter names");
    const int a = index_of(in.pair[0]), b = index_of(in.pair[1]);
    for (int i : {0, 1}) {
      if ((i == 0 ? a : b) >= static_cast<int>(names.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("pair: '", in.pair[i], "' is not a free parameter of ", in.chosen.kernel,
                         " (free: ", absl::StrJoin(names, ", "), ")"));
      }
    }
    if (a == b) return absl::InvalidArgumentError("pair: give two different parameters");
    return std::make_pair(a, b);
  }
  const Eigen::MatrixXd& c = in.chosen.laplace->covariance;
  std::pair<int, int> best{0, 1};
  double best_corr = -1;
  for (int i = 0; i < c.rows(); ++i) {
    for (int j = i + 1; j < c.cols(); ++j) {
      const double corr = std::abs(c(i, j)) / std::sqrt(c(i, i) * c(j, j));
      if (corr > best_corr) {
        best_corr = corr;
        best = {i, j};
      }
    }
  }
  return best;
}

// The weighted posterior samples of an evidence run: those of the method that gave its log Z,
// else the other's; null when none were returned.
struct WeightedSamples {
  EvidenceMethod method = EvidenceMethod::kNested;
  const Eigen::MatrixXd* samples = nullptr;
  const Eigen::VectorXd* log_weights = nullptr;
};
WeightedSamples EvidenceSamples(const EvidenceResult& ev) {
  const bool nested = ev.sampling.has_value() && ev.sampling->samples.rows() > 0;
  const bool importance = ev.importance.has_value() && ev.importance->samples.rows() > 0;
  if (importance && (ev.method == EvidenceMethod::kImportance || !nested)) {
    return {EvidenceMethod::kImportance, &ev.importance->samples, &ev.importance->log_weights};
  }
  if (nested) return {EvidenceMethod::kNested, &ev.sampling->samples, &ev.sampling->log_weights};
  return {};
}

// (e) the evidence run's samples of two hyperparameters (raw space) with the Laplace ellipses
// around the MAP point: the Gaussian N(θ̂_MAP, H⁻¹) that Lap stands for (paper Fig. 2).
absl::StatusOr<FigureSpec> LaplaceFigure(const ReportInputs& in) {
  const auto [a, b] = *LaplacePair(in);
  const std::string& name_a = in.chosen.parameter_names[a];
  const std::string& name_b = in.chosen.parameter_names[b];
  const EvidenceResult& ev = *in.evidence;
  const WeightedSamples samples_of = EvidenceSamples(ev);
  auto column_of = [&ev](const std::string& name) -> absl::StatusOr<int> {
    for (size_t i = 0; i < ev.parameter_names.size(); ++i) {
      if (ev.parameter_names[i] == name) return static_cast<int>(i);
    }
    return absl::InvalidArgumentError(absl::StrCat("evidence: has no samples of '", name, "'"));
  };
  absl::StatusOr<int> ca = column_of(name_a), cb = column_of(name_b);
  if (!ca.ok()) return ca.status();
  if (!cb.ok()) return cb.status();
  FigureSpec fig;
  fig.id = "laplace";
  fig.title = "Posterior samples and the Laplace approximation";
  fig.caption = absl::StrCat(
      "Posterior samples (", std::string(EvidenceMethodName(samples_of.method)), " sampling) of ",
      name_a, " and ", name_b,
      " (raw values, i.e. softplus⁻¹ of the parameter; the heaviest points making up 99.9 % of "
      "the posterior weight) with the 1σ and 2σ ellipses of the Laplace approximation "
      "N(θ̂_MAP, H⁻¹) around the MAP point (+).");
  fig.width = 640;
  fig.height = 560;
  const Eigen::MatrixXd& samples = *samples_of.samples;
  const Eigen::VectorXd& log_w = *samples_of.log_weights;
  std::vector<int> order(samples.rows());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&log_w](int i, int j) { return log_w(i) > log_w(j); });
  const double top = log_w.size() > 0 ? log_w.maxCoeff() : 0.0;
  double total = 0;
  for (Eigen::Index i = 0; i < log_w.size(); ++i) total += std::exp(log_w(i) - top);
  std::vector<double> sx, sy;
  double mass = 0;
  for (int i : order) {
    if (mass >= 0.999 * total) break;
    mass += std::exp(log_w(i) - top);
    sx.push_back(samples(i, *ca));
    sy.push_back(samples(i, *cb));
  }
  Panel panel;
  panel.x_label = absl::StrCat("raw ", name_a);
  panel.y_label = absl::StrCat("raw ", name_b);
  panel.legend_right = true;
  panel.legend_bottom = true;
  Series cloud = Points("posterior samples", kBlue, sx, sy, "•", 0.6);
  cloud.alpha = 0.45;
  panel.series.push_back(cloud);
  const Eigen::VectorXd& mode = in.chosen.map_fit->raw;
  Eigen::Matrix2d cov;
  const Eigen::MatrixXd& full = in.chosen.laplace->covariance;
  cov << full(a, a), full(a, b), full(b, a), full(b, b);
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d> eig(cov);
  for (double radius : {1.0, 2.0}) {
    std::vector<double> ex, ey;
    for (int t = 0; t <= 120; ++t) {
      const double angle = kTwoPi * t / 120;
      const Eigen::Vector2d unit(std::cos(angle), std::sin(angle));
      const Eigen::Vector2d point =
          eig.eigenvectors() * (eig.eigenvalues().cwiseMax(0).cwiseSqrt().asDiagonal() * unit);
      ex.push_back(mode(a) + radius * point(0));
      ey.push_back(mode(b) + radius * point(1));
    }
    Series ellipse = Line(radius == 1 ? "Laplace 1σ" : "Laplace 2σ", kVermilion, ex, ey,
                          radius == 1 ? 2.0 : 1.4);
    ellipse.dashed = radius == 2;
    panel.series.push_back(ellipse);
  }
  panel.series.push_back(Points("MAP", kVermilion, {mode(a)}, {mode(b)}, "+", 1.6));
  FitRanges(panel, 0.05);
  fig.panels.push_back(std::move(panel));
  return fig;
}

// Moves the notes of fig.panels[index] up or down, each by as little as it takes, so that none
// crosses a horizontal line at `levels` (data units) and no two overlap (issue 27: eigenvalue
// labels written over the Laplace floors and over each other). Sizes from PanelPlotArea and
// TextWidthPixels; a note that finds no free place within ±8 text heights stays at its point.
void SeparateNotesFromLevels(FigureSpec& fig, size_t index, const std::vector<double>& levels) {
  Panel& panel = fig.panels[index];
  const PlotArea area = PanelPlotArea(fig, index);
  if (!(area.width > 0 && area.height > 0)) return;
  const double y_per_px = (panel.y_max - panel.y_min) / area.height;
  const double x_per_px = (panel.x_max - panel.x_min) / area.width;
  struct Box {
    double x0, x1, y;
  };
  std::vector<Box> placed;
  for (Note& note : panel.notes) {
    const double half = 0.5 * TextHeightPixels(note.scale) * y_per_px;
    const double gap = 2.0 * y_per_px;  // pixels left between a note and a line or note
    const double x0 = note.x;
    const double x1 = note.x + TextWidthPixels(note.text, note.scale) * x_per_px;
    auto free = [&](double y) {
      if (y - half < panel.y_min || y + half > panel.y_max) return false;
      for (double level : levels) {
        if (std::abs(y - level) < half + gap) return false;
      }
      for (const Box& b : placed) {
        if (x0 < b.x1 && b.x0 < x1 && std::abs(y - b.y) < 2 * half + gap) return false;
      }
      return true;
    };
    const double step = 0.25 * half;
    for (int k = 0; k <= 64; ++k) {
      // 0, +1, −1, +2, −2, ... steps of a quarter of half a text height.
      const double y = note.y + (k % 2 == 1 ? 1 : -1) * ((k + 1) / 2) * step;
      if (free(y)) {
        note.y = y;
        break;
      }
    }
    placed.push_back({x0, x1, note.y});
  }
}

// (f) residuals y − mean at the data, and the Hessian's eigenvalues against the Laplace floors.
FigureSpec ResidualsFigure(const ReportInputs& in) {
  FigureSpec fig;
  fig.id = "residuals";
  fig.title = "Residuals and the Laplace Hessian";
  fig.caption =
      "Top: the residuals y − posterior mean at the data, with ±2 sd of the noise. Bottom: the "
      "eigenvalues λ of the negative Hessian at the MAP point (log scale) against the floors "
      "2π e^(−2r) of Lap0 (r = 0), LapAIC (r = −1) and LapBIC (r = −log n); an eigenvalue under "
      "a floor is raised to it by that metric (a direction the data does not determine) and is "
      "labelled with the parameters it loads on.";
  fig.height = 720;
  const bool one_d = in.data.num_dims() == 1;
  std::vector<double> x, r;
  const Prediction& p = in.on_data.prediction;
  for (int i = 0; i < in.data.num_points(); ++i) {
    x.push_back(one_d ? in.data.x(i, 0) : i + 1);
    r.push_back(in.data.y(i) - p.mean(i));
  }
  Panel top;
  top.x_label = one_d ? in.x_label : "data row";
  // The axis title runs along the panel's height: "residual of flow (10^8 m^3)" did not fit
  // (issue 27), so y's name goes to the panel's title, which has the figure's width.
  top.y_label = "residual";
  top.title = absl::StrCat("residuals: ", in.y_label, " − posterior mean at the data");
  top.series.push_back(Points("residual", kBlue, x, r, "•", 0.55));
  const double noise_sd = p.noise_variance.size() > 0 ? std::sqrt(p.noise_variance(0)) : 0.0;
  const double x_lo = *std::min_element(x.begin(), x.end());
  const double x_hi = *std::max_element(x.begin(), x.end());
  Series up = Line("±2 sd of the noise", kGrey, {x_lo, x_hi}, {2 * noise_sd, 2 * noise_sd}, 1.2);
  up.dashed = true;
  Series down = Line("", kGrey, {x_lo, x_hi}, {-2 * noise_sd, -2 * noise_sd}, 1.2);
  down.dashed = true;
  top.series.push_back(up);
  top.series.push_back(down);
  FitRanges(top, 0.03);
  top.y_max += 0.25 * (top.y_max - top.y_min);
  fig.panels.push_back(std::move(top));

  Panel bottom;
  bottom.x_label = "eigen-direction (ascending λ)";
  bottom.y_label = "λ of −∇² log posterior";
  bottom.log_y = true;
  if (in.chosen.laplace.has_value() && in.chosen.laplace->eigenvalues.size() > 0) {
    const LaplaceDiagnostics& lap = *in.chosen.laplace;
    const int u = static_cast<int>(lap.eigenvalues.size());
    const int n = in.chosen.num_points;
    const std::vector<std::pair<std::string, double>> floors = {
        {"Lap0 floor 2π", 0.0},
        {"LapAIC floor 2πe²", -1.0},
        {"LapBIC floor 2πn²", -std::log(static_cast<double>(std::max(n, 1)))}};
    std::vector<double> ex, ey;
    double lowest = INFINITY;
    for (int i = 0; i < u; ++i) {
      if (lap.eigenvalues(i) > 0) lowest = std::min(lowest, std::log10(lap.eigenvalues(i)));
    }
    const double floor_of_plot = std::min(lowest, std::log10(kTwoPi)) - 1.0;
    for (int i = 0; i < u; ++i) {
      const double lambda = lap.eigenvalues(i);
      ex.push_back(i + 1);
      ey.push_back(lambda > 0 ? std::log10(lambda) : floor_of_plot);
    }
    int f = 0;
    for (const auto& [label, rr] : floors) {
      const double level = std::log10(LaplaceEigenvalueFloor(rr));
      Series line = Line(label, SeriesColor(f + 1), {0.5, 1.3 * u + 0.5}, {level, level}, 1.4);
      line.dashed = true;
      bottom.series.push_back(line);
      ++f;
    }
    bottom.series.push_back(Points("eigenvalue", kBlack, ex, ey, "•", 1.4));
    // Label each eigenvalue under the highest floor with the parameters it loads on.
    const double highest = LaplaceEigenvalueFloor(floors.back().second);
    std::vector<double> levels;
    for (const auto& floor : floors) levels.push_back(std::log10(LaplaceEigenvalueFloor(floor.second)));
    for (int i = 0; i < u; ++i) {
      if (lap.eigenvalues(i) >= highest) continue;
      std::vector<std::pair<double, std::string>> loads;
      for (Eigen::Index j = 0; j < lap.eigenvectors.rows(); ++j) {
        const double w = std::abs(lap.eigenvectors(j, i));
        if (w >= 0.3 && j < static_cast<Eigen::Index>(in.chosen.parameter_names.size())) {
          loads.push_back({w, in.chosen.parameter_names[j]});
        }
      }
      std::sort(loads.rbegin(), loads.rend());
      std::vector<std::string> names;
      for (size_t k = 0; k < std::min<size_t>(2, loads.size()); ++k) {
        names.push_back(loads[k].second);
      }
      Note note;
      note.x = i + 1.12;
      note.y = ey[i];
      note.text = absl::StrJoin(names, ", ");
      note.scale = 0.7;
      note.color = kVermilion;
      bottom.notes.push_back(note);
    }
    FitRanges(bottom, 0.05);
    bottom.x_min = 0.5;
    bottom.x_max = u + 0.5 + 0.3 * u;
    bottom.x_tick = u > 12 ? 0 : 1;
    bottom.y_max += 0.3 * (bottom.y_max - bottom.y_min);
    bottom.legend_right = true;
    fig.panels.push_back(std::move(bottom));
    SeparateNotesFromLevels(fig, fig.panels.size() - 1, levels);
    return fig;
  } else {
    bottom.title = "no Laplace Hessian (the metric needs no MAP fit)";
  }
  fig.panels.push_back(std::move(bottom));
  return fig;
}

// The SVG element of a PLplot SVG file, for inline use: the XML prolog and DOCTYPE dropped, the
// size made relative (the viewBox keeps the proportions), and its ids made unique per figure so
// that several inline SVGs' clip paths do not collide.
std::string InlineSvg(const std::string& svg, const std::string& id, int width) {
  std::string out = svg.substr(std::min(svg.find("<svg"), svg.size()));
  const size_t tag_end = out.find('>');
  if (tag_end != std::string::npos) {
    std::string tag = out.substr(0, tag_end);
    for (const char* attribute : {"width=\"", "height=\""}) {
      const size_t at = tag.find(attribute);
      if (at == std::string::npos) continue;
      const size_t value_end = tag.find('"', at + std::string(attribute).size());
      tag.erase(at, value_end + 1 - at);
    }
    tag += absl::StrCat(" width=\"100%\" style=\"max-width: ", width, "px\" role=\"img\" ",
                        "aria-label=\"figure ", id, "\"");
    out = tag + out.substr(tag_end);
  }
  return absl::StrReplaceAll(
      out, {{"id=\"", absl::StrCat("id=\"", id, "-")}, {"url(#", absl::StrCat("url(#", id, "-")}});
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InternalError(absl::StrCat("cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string KindName(Series::Kind kind) {
  switch (kind) {
    case Series::Kind::kBand:
      return "band";
    case Series::Kind::kPoints:
      return "points";
    case Series::Kind::kErrorBars:
      return "error_bars";
    case Series::Kind::kRings:
      return "rings";
    default:
      return "line";
  }
}

FigureSummary Summarize(const FigureSpec& spec, const std::string& dir) {
  FigureSummary out;
  out.id = spec.id;
  out.title = spec.title;
  out.caption = spec.caption;
  out.svg_path = (std::filesystem::path(dir) / (spec.id + ".svg")).string();
  out.png_path = (std::filesystem::path(dir) / (spec.id + ".png")).string();
  for (const Panel& p : spec.panels) {
    PanelSummary ps;
    ps.title = p.title;
    ps.x_min = p.x_min;
    ps.x_max = p.x_max;
    ps.y_min = p.y_min;
    ps.y_max = p.y_max;
    for (const Series& s : p.series) {
      ps.series.push_back(SeriesSummary{s.label, KindName(s.kind), HexColor(s.color),
                                        static_cast<int>(s.x.size())});
    }
    out.panels.push_back(std::move(ps));
  }
  return out;
}

std::string MetricsTable(const ReportInputs& in) {
  std::string html = "<table class=\"metrics\"><thead><tr><th>kernel</th>";
  for (const auto& [key, label] : MetricLabels()) absl::StrAppend(&html, "<th>", label, "</th>");
  absl::StrAppend(&html, "</tr></thead><tbody>");
  std::map<std::string, double> best;
  for (const KernelScore& s : in.scores) {
    for (const auto& [key, value] : s.metrics) {
      if (!best.count(key) || value > best[key]) best[key] = value;
    }
  }
  for (const KernelScore& s : in.scores) {
    const bool chosen = s.kernel == in.chosen.kernel;
    absl::StrAppend(&html, "<tr", chosen ? " class=\"chosen\"" : "", "><td><code>",
                    HtmlEscape(s.kernel), "</code></td>");
    for (const auto& [key, label] : MetricLabels()) {
      auto it = s.metrics.find(key);
      if (it == s.metrics.end()) {
        absl::StrAppend(&html, "<td>–</td>");
      } else {
        const bool winner = it->second == best[key];
        absl::StrAppend(&html, "<td", winner ? " class=\"best\"" : "", ">",
                        absl::StrFormat("%.2f", it->second), "</td>");
      }
    }
    absl::StrAppend(&html, "</tr>");
  }
  absl::StrAppend(&html, "</tbody></table>");
  return html;
}

constexpr char kStyle[] = R"(
body { font-family: "DejaVu Sans", sans-serif; max-width: 1000px; margin: 2em auto; color: #222;
       line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.8em; }
p.description { font-size: 1.15em; background: #f3f7fb; border-left: 4px solid #0072B2;
                padding: 0.6em 1em; }
figure { margin: 1em 0 2em 0; }
figcaption { font-size: 0.92em; color: #444; }
table.metrics { border-collapse: collapse; font-size: 0.9em; }
table.metrics td, table.metrics th { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em;
                                     text-align: right; }
table.metrics td:first-child { text-align: left; }
tr.chosen { background: #fff6e0; }
td.best { font-weight: bold; }
code { font-size: 0.95em; }
.command { font-family: monospace; font-size: 0.85em; color: #555; word-break: break-all; }
)";

}  // namespace

absl::Status ReportOptions::Validate() const {
  if (out_dir.empty()) return absl::InvalidArgumentError("out_dir: must be given");
  if (width < 200 || width > 8000) {
    return absl::InvalidArgumentError("width: must be between 200 and 8000 pixels");
  }
  if (height < 150 || height > 8000) {
    return absl::InvalidArgumentError("height: must be between 150 and 8000 pixels");
  }
  return absl::OkStatus();
}

std::string ReportResult::Summary() const {
  std::string out = absl::StrCat("report ", html_path, "\nchosen kernel ", chosen_kernel, ": ",
                                 description.text, "\n");
  for (const FigureSummary& f : figures) {
    absl::StrAppend(&out, "  ", f.id, ": ", f.svg_path, ", ", f.png_path, "\n");
  }
  for (const std::string& o : omitted) absl::StrAppend(&out, "  (no ", o, ")\n");
  return out;
}

absl::StatusOr<KernelScore> BestByMetric(const std::vector<KernelScore>& scores,
                                         const std::string& metric) {
  const KernelScore* best = nullptr;
  for (const KernelScore& s : scores) {
    auto it = s.metrics.find(metric);
    if (it == s.metrics.end()) continue;
    if (best == nullptr || it->second > best->metrics.at(metric)) best = &s;
  }
  if (best != nullptr) return *best;
  // Why, from the first kernel that says; the lap0 hint only when lap0 was not the metric
  // (issue 27: it was given after --metric lap0 too).
  std::string why;
  for (const KernelScore& s : scores) {
    auto undefined = s.undefined_metrics.find(metric);
    if (undefined != s.undefined_metrics.end()) {
      why = absl::StrCat(" (", s.kernel, ": ", undefined->second, ")");
      break;
    }
  }
  return absl::FailedPreconditionError(absl::StrCat("no kernel has a defined ", metric, why,
                                                    metric == "lap0" ? "" : "; try --metric lap0"));
}

const FitResult* FitForMetric(const KernelScore& score, std::string_view metric) {
  const bool mll = metric == "mll" || metric == "aic" || metric == "bic";
  const std::optional<FitResult>& fit = mll ? score.mll_fit : score.map_fit;
  if (fit.has_value()) return &*fit;
  const std::optional<FitResult>& other = mll ? score.map_fit : score.mll_fit;
  return other.has_value() ? &*other : nullptr;
}

Eigen::MatrixXd FitGrid(const Dataset& data, int points) {
  if (data.num_dims() != 1 || data.num_points() == 0 || points < 2) return Eigen::MatrixXd();
  const double lo = data.x.col(0).minCoeff(), hi = data.x.col(0).maxCoeff();
  const double pad = 0.05 * (hi - lo);
  return Eigen::VectorXd::LinSpaced(points, lo - pad, hi + pad);
}

std::map<std::string, double> ComponentAmplitudes(const ReportInputs& in) {
  std::map<std::string, double> amplitudes;
  if (in.data.num_dims() != 1 || in.grid.cols() != 1 || in.data.num_points() == 0) {
    return amplitudes;
  }
  const double lo = in.data.x.col(0).minCoeff(), hi = in.data.x.col(0).maxCoeff();
  for (const PredictionComponent& c : in.on_grid.prediction.components) {
    if (c.mean.size() != in.grid.rows()) continue;
    // Only where there are data: beyond them a summand's mean falls back to its prior mean.
    double sum = 0, sum_squares = 0;
    int count = 0;
    for (Eigen::Index i = 0; i < in.grid.rows(); ++i) {
      if (in.grid(i, 0) < lo || in.grid(i, 0) > hi) continue;
      sum += c.mean[i];
      sum_squares += c.mean[i] * c.mean[i];
      ++count;
    }
    if (count < 2) continue;
    const double mean = sum / count;
    amplitudes[c.Name()] = std::sqrt(std::max(0.0, sum_squares / count - mean * mean));
  }
  return amplitudes;
}

namespace {
// The levels of y on either side of a top-level change (Units::change_levels): the mean of
// each regime's posterior over the grid points inside the data on its side (CP: before/after
// the location; CW: outside/inside the window), plus y's mean. Absent when the grid has no
// such points or the prediction has no regimes for the change.
std::optional<std::pair<double, double>> ChangeLevels(const ReportInputs& in,
                                                      const ChangeSummary& change) {
  if (in.grid.cols() != 1 || change.column != 0 || in.data.num_points() == 0) return std::nullopt;
  const double lo = in.data.x.col(0).minCoeff(), hi = in.data.x.col(0).maxCoeff();
  const bool point = change.kind == KernelExpr::Kind::kChangePoint;
  auto second_side = [&](double x) {
    return point ? x > change.location
                 : std::abs(x - change.location) < 0.5 * change.width;
  };
  const double shift = in.on_grid.standardization.applied ? in.on_grid.standardization.mean : 0.0;
  std::optional<double> levels[2];
  for (const PredictionComponent& c : in.on_grid.prediction.components) {
    for (int side = 0; side < 2; ++side) {
      const std::string name =
          absl::StrCat(change.label, " ", point ? (side ? "after" : "before")
                                                : (side ? "inside" : "outside"));
      if (c.regime != name || c.mean.size() != in.grid.rows()) continue;
      double sum = 0;
      int count = 0;
      for (Eigen::Index i = 0; i < in.grid.rows(); ++i) {
        const double x = in.grid(i, 0);
        if (x < lo || x > hi || second_side(x) != (side == 1)) continue;
        sum += c.mean(i);
        ++count;
      }
      if (count > 0) levels[side] = sum / count + shift;
    }
  }
  if (!levels[0] || !levels[1]) return std::nullopt;
  return std::make_pair(*levels[0], *levels[1]);
}

// The chosen kernel in words (client/report/describe.h): its fit for the metric, the data's x range,
// the summands' amplitudes.
absl::StatusOr<KernelDescription> DescribeChosen(const ReportInputs& in) {
  absl::StatusOr<KernelExpr> kernel = ParseKernel(in.chosen.kernel);
  if (!kernel.ok()) return kernel.status();
  const FitResult* fit = FitForMetric(in.chosen, in.metric);
  if (fit == nullptr) return absl::InvalidArgumentError("chosen: has no fit");
  Units units = in.units;
  if (units.x_range <= 0 && in.data.num_dims() == 1) {
    units.x_range = in.data.x.col(0).maxCoeff() - in.data.x.col(0).minCoeff();
  }
  // Prior-dominated is a property of the MAP fit (KernelScore::prior_dominated).
  if (fit->objective == FitObjective::kMaximumAPosteriori) {
    units.prior_dominated = in.chosen.prior_dominated;
  }
  if (ContainsChange(*kernel) && in.data.num_points() > 0) {
    // Changes are placed on column 0's range, with their Laplace sd (core/change_summary.h).
    units.x_min = in.data.x.col(0).minCoeff();
    units.x_range = in.data.x.col(0).maxCoeff() - units.x_min;
    absl::StatusOr<std::vector<ChangeSummary>> changes = SummarizeChanges(in.data, in.chosen);
    if (changes.ok()) {
      for (const ChangeSummary& change : *changes) {
        if (change.location_sd) units.change_location_sd[change.label] = *change.location_sd;
        if (auto levels = ChangeLevels(in, change)) units.change_levels[change.label] = *levels;
      }
    }
  }
  return DescribeKernel(*kernel, fit->values, in.chosen.standardization, units,
                        ComponentAmplitudes(in));
}
}  // namespace

absl::StatusOr<std::vector<FigureSpec>> BuildFigures(const ReportInputs& in,
                                                     std::vector<std::string>* omitted) {
  const int n = in.data.num_points();
  if (n == 0) return absl::InvalidArgumentError("data: no points");
  if (in.on_data.prediction.mean.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("on_data: has ",
                                                   in.on_data.prediction.mean.size(),
                                                   " predictions for ", n, " data points"));
  }
  if (in.chosen.kernel.empty()) return absl::InvalidArgumentError("chosen: no kernel");
  std::vector<FigureSpec> figures;
  absl::StatusOr<KernelDescription> words = DescribeChosen(in);  // checks the kernel and fit
  if (!words.ok()) return words.status();

  const bool one_d = in.data.num_dims() == 1 && in.grid.rows() > 0;
  if (one_d) {
    if (in.on_grid.prediction.mean.size() != in.grid.rows()) {
      return absl::InvalidArgumentError("on_grid: one prediction per grid point is needed");
    }
    figures.push_back(FitFigure(in));
    if (in.on_grid.prediction.components.size() > 1) {
      figures.push_back(ComponentsFigure(in, *words));
    } else {
      omitted->push_back("components: the kernel is not a sum");
    }
  } else if (in.data.num_dims() > 1) {
    figures.push_back(ObservedVsPredictedFigure(in));
    omitted->push_back("fit and components: x has several columns (observed against predicted "
                       "instead)");
  } else {
    omitted->push_back("fit and components: no prediction grid");
  }
  if (in.search.has_value() && !in.search->steps.empty()) {
    figures.push_back(SearchFigure(in));
  } else {
    omitted->push_back("search: the kernels were given, not searched");
  }
  if (!in.scores.empty()) figures.push_back(MetricsFigure(in));
  const bool can_ellipse = in.chosen.laplace.has_value() &&
                           in.chosen.laplace->covariance.rows() >= 2 &&
                           in.chosen.map_fit.has_value();
  if (in.evidence.has_value() && EvidenceSamples(*in.evidence).samples != nullptr && can_ellipse) {
    if (absl::StatusOr<std::pair<int, int>> pair = LaplacePair(in); !pair.ok()) {
      return pair.status();
    }
    absl::StatusOr<FigureSpec> laplace = LaplaceFigure(in);
    if (!laplace.ok()) return laplace.status();
    figures.push_back(*std::move(laplace));
  } else if (!in.evidence.has_value()) {
    omitted->push_back("laplace: no evidence run (add --evidence)");
  } else {
    omitted->push_back(
        "laplace: needs evidence samples and a Laplace covariance of two or more parameters");
  }
  figures.push_back(ResidualsFigure(in));
  return figures;
}

absl::StatusOr<ReportResult> WriteReport(const ReportInputs& in, const ReportOptions& options) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  ReportResult result;
  absl::StatusOr<std::vector<FigureSpec>> figures = BuildFigures(in, &result.omitted);
  if (!figures.ok()) return figures.status();
  std::error_code error;
  std::filesystem::create_directories(options.out_dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("out_dir: cannot create ", options.out_dir, ": ", error.message()));
  }
  absl::StatusOr<KernelDescription> words = DescribeChosen(in);
  if (!words.ok()) return words.status();
  result.description = *words;
  result.chosen_kernel = in.chosen.kernel;
  // Prior-dominated parameters (KernelScore::prior_dominated, of the MAP fit) are the prior's
  // values, not structure the data show: a summand whose words use one says so instead of
  // presenting it as found (issue 27: "smooth variations on a scale of about 0.6" was the
  // lengthscale prior's median).
  std::string prior_dominated_note;
  const FitResult* described = FitForMetric(in.chosen, in.metric);
  if (!in.chosen.prior_dominated.empty() && described != nullptr &&
      described->objective == FitObjective::kMaximumAPosteriori) {
    for (ComponentDescription& c : result.description.components) {
      std::vector<std::string> own;
      for (const std::string& name : in.chosen.prior_dominated) {
        const std::string leaf = name.substr(0, name.rfind('.'));
        if (name != leaf && absl::StrContains(c.kernel, leaf)) own.push_back(name);
      }
      // An ARD product's words name their prior-dominated lengthscales already (describe.cc).
      if (own.empty() || absl::StrContains(c.text, "the prior's value")) continue;
      absl::StrAppend(&c.text, " — not structure: ", absl::StrJoin(own, ", "),
                      own.size() == 1 ? " is" : " are",
                      " prior-dominated (the prior's value, which the data do not determine)");
    }
    prior_dominated_note = absl::StrCat(
        " Prior-dominated, so not structure the data show: ",
        absl::StrJoin(in.chosen.prior_dominated, ", "), ".");
  }

  std::string body;
  for (FigureSpec& spec : *figures) {
    spec.width = spec.id == "laplace" ? spec.width : options.width;
    if (spec.id == "fit" || spec.id == "search" || spec.id == "metrics") {
      spec.height = options.height;
    }
    FigureSummary summary = Summarize(spec, options.out_dir);
    GPSEL_RETURN_IF_ERROR(RenderFigure(spec, summary.svg_path, summary.png_path));
    absl::StatusOr<std::string> svg = ReadFile(summary.svg_path);
    if (!svg.ok()) return svg.status();
    int series = 0;
    for (const PanelSummary& p : summary.panels) series += static_cast<int>(p.series.size());
    absl::StrAppend(&body, "<figure id=\"fig-", spec.id, "\" data-panels=\"", summary.panels.size(),
                    "\" data-series=\"", series, "\">\n<h2>", HtmlEscape(spec.title), "</h2>\n",
                    InlineSvg(*svg, spec.id, spec.width), "\n<figcaption>",
                    HtmlEscape(spec.caption), " Files: <a href=\"", spec.id, ".svg\">", spec.id,
                    ".svg</a>, <a href=\"", spec.id, ".png\">", spec.id,
                    ".png</a>.</figcaption>\n</figure>\n");
    result.figures.push_back(std::move(summary));
  }

  std::string components_list;
  for (const ComponentDescription& c : result.description.components) {
    absl::StrAppend(&components_list, "<li><code>", HtmlEscape(c.kernel),
                    "</code>: ", HtmlEscape(c.text), "</li>");
  }
  // A chosen kernel whose optimum only one start reached (after the capped extra draws) says so
  // beside its name, not only in a detail line (FitResult::may_not_be_global).
  const std::string not_global = MayNotBeGlobalNote(in.chosen);
  const std::string not_global_html =
      not_global.empty() ? ""
                         : absl::StrCat(" <b class=\"not-global\" id=\"may-not-be-global\">",
                                        HtmlEscape(absl::StripLeadingAsciiWhitespace(not_global)),
                                        "</b>");
  std::string omitted_list;
  for (const std::string& o : result.omitted) {
    absl::StrAppend(&omitted_list, "<li>", HtmlEscape(o), "</li>");
  }
  const std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
      "<title>gpsel report: ", HtmlEscape(in.title), "</title>\n<style>", kStyle,
      "</style>\n</head>\n<body>\n<h1>Which kernel does ", HtmlEscape(in.title),
      " support?</h1>\n<p>Chosen kernel: <code id=\"chosen-kernel\">", HtmlEscape(in.chosen.kernel),
      "</code>", not_global_html, ", by <b>", HtmlEscape(in.metric),
      "</b> (log-evidence scale, higher is better), on ",
      in.data.num_points(), " points; y ", in.chosen.standardized ? "standardised" : "as given",
      " for fitting.</p>\n",
      in.chosen.method == "sparse"
          ? absl::StrCat("<p id=\"method\">Method: sparse GP with m = ", in.chosen.num_inducing,
                         " inducing points; each score is the lower end of an interval that "
                         "holds the exact value (the table's values are those lower ends)",
                         in.chosen.approx_note.empty()
                             ? std::string()
                             : absl::StrCat("; ", HtmlEscape(in.chosen.approx_note)),
                         ".</p>\n")
          : absl::StrCat("<p id=\"method\">Method: exact GP",
                         in.chosen.approx_note.empty()
                             ? std::string()
                             : absl::StrCat(" (", HtmlEscape(in.chosen.approx_note), ")"),
                         ".</p>\n"),
      "<p class=\"description\" id=\"description\">The data look like ",
      HtmlEscape(result.description.text), ".", HtmlEscape(prior_dominated_note),
      "</p>\n<ul class=\"components\">", components_list,
      "</ul>\n<h2>Kernels compared</h2>\n", MetricsTable(in), "\n", body,
      omitted_list.empty() ? "" : "<h2>Not shown</h2>\n<ul>", omitted_list,
      omitted_list.empty() ? "" : "</ul>\n", "<p class=\"command\">Made by <code>",
      HtmlEscape(in.command), "</code></p>\n</body>\n</html>\n");
  result.html_path = (std::filesystem::path(options.out_dir) / "report.html").string();
  std::ofstream out(result.html_path, std::ios::binary | std::ios::trunc);
  out << html;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", result.html_path));
  return result;
}

}  // namespace gpsel::report
