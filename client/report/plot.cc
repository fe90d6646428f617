// RenderFigure on PLplot; see plot.h. PLplot keeps global state per stream and is not
// thread-safe, so every figure is drawn under one mutex, on a stream of its own (plmkstrm ...
// plend1), once per device.
#include "gpsel/client/report/plot.h"

#include <plplot/plplot.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gpsel/core/status_macros.h"

namespace gpsel::report {
namespace {

std::mutex& PlplotMutex() {
  static std::mutex mutex;
  return mutex;
}

// The devices this PLplot build offers (drivers are plugins: libplplot17 has svg, the cairo
// driver package has pngcairo).
std::set<std::string> AvailableDevices() {
  // plgDevs writes into arrays the caller provides, one entry per device, and sets the count.
  std::vector<const char*> menu_room(256), device_room(256);
  const char** menu = menu_room.data();
  const char** devices = device_room.data();
  int count = static_cast<int>(device_room.size());
  plgDevs(&menu, &devices, &count);
  std::set<std::string> out;
  for (int i = 0; i < count; ++i) {
    if (devices[i] != nullptr) out.insert(devices[i]);
  }
  return out;
}

// Colour map 0 holds the figure's colours: 0 white (background), 1 black (axes), 2 the grid,
// then one entry per use.
class Palette {
 public:
  Palette() { plscmap0n(kSize); }
  int Add(Rgb c, double alpha) {
    const int index = std::min(next_++, kSize - 1);
    plscol0a(index, c.r, c.g, c.b, alpha);
    return index;
  }

 private:
  static constexpr int kSize = 256;
  int next_ = 3;
};

int LegendOption(const Series& s) {
  switch (s.kind) {
    case Series::Kind::kBand:
      return PL_LEGEND_COLOR_BOX;
    case Series::Kind::kPoints:
    case Series::Kind::kRings:
      return PL_LEGEND_SYMBOL;
    default:
      return PL_LEGEND_LINE;
  }
}

void DrawLegend(const Panel& panel, Palette& palette, double text_scale) {
  std::vector<const Series*> entries;
  for (const Series& s : panel.series) {
    if (!s.label.empty()) entries.push_back(&s);
  }
  if (entries.empty() || !panel.legend) return;
  const int n = static_cast<int>(entries.size());
  std::vector<PLINT> opts(n), colors(n), patterns(n, 0), styles(n), symbol_numbers(n, 1);
  std::vector<PLFLT> box_scales(n, 0.8), box_widths(n, 1.0), line_widths(n), symbol_scales(n);
  std::vector<std::string> texts(n), symbols(n);
  std::vector<const char*> text_ptrs(n), symbol_ptrs(n);
  std::vector<PLINT> text_colors(n, 1);
  for (int i = 0; i < n; ++i) {
    const Series& s = *entries[i];
    opts[i] = LegendOption(s);
    // Legend swatches are drawn opaque enough to read even for translucent bands.
    colors[i] = palette.Add(s.color, std::max(s.alpha, 0.45));
    styles[i] = s.dashed ? 2 : 1;
    line_widths[i] = s.width;
    symbol_scales[i] = s.marker_scale;
    texts[i] = PlotText(s.label);
    symbols[i] = s.kind == Series::Kind::kRings ? "○" : s.marker;
    text_ptrs[i] = texts[i].c_str();
    symbol_ptrs[i] = symbols[i].c_str();
  }
  const int background = palette.Add(Rgb{255, 255, 255}, 0.85);
  PLFLT width = 0, height = 0;
  pllegend(&width, &height, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
           (panel.legend_bottom ? PL_POSITION_BOTTOM : PL_POSITION_TOP) |
               (panel.legend_right ? PL_POSITION_RIGHT : PL_POSITION_LEFT) | PL_POSITION_INSIDE,
           0.01, 0.02, 0.06, background, 2, 1, 0, 0, n, opts.data(), 0.8, text_scale * 0.85, 1.6,
           0.0, text_colors.data(), text_ptrs.data(), colors.data(), patterns.data(),
           box_scales.data(), box_widths.data(), colors.data(), styles.data(), line_widths.data(),
           colors.data(), symbol_scales.data(), symbol_numbers.data(), symbol_ptrs.data());
}

// A length in pixels as data units along x and along y, through the viewport's size on the
// page, so that circles come out round.
std::pair<double, double> PixelsToData(double pixels, const Panel& panel,
                                       const FigureSpec& figure) {
  PLFLT left = 0, right = 0, bottom = 0, top = 0;
  plgvpd(&left, &right, &bottom, &top);
  return {pixels / ((right - left) * figure.width) * (panel.x_max - panel.x_min),
          pixels / ((top - bottom) * figure.height) * (panel.y_max - panel.y_min)};
}

void DrawSeries(const Series& s, Palette& palette, double text_scale, const Panel& panel,
                const FigureSpec& figure) {
  const int n = static_cast<int>(s.x.size());
  if (n == 0) return;
  plcol0(palette.Add(s.color, s.alpha));
  plwidth(s.width);
  pllsty(s.dashed ? 2 : 1);
  std::vector<PLFLT> x(s.x.begin(), s.x.end());
  switch (s.kind) {
    case Series::Kind::kLine: {
      std::vector<PLFLT> y(s.y.begin(), s.y.end());
      plline(n, x.data(), y.data());
      break;
    }
    case Series::Kind::kBand: {
      std::vector<PLFLT> px, py;
      for (int i = 0; i < n; ++i) {
        px.push_back(s.x[i]);
        py.push_back(s.y_high[i]);
      }
      for (int i = n - 1; i >= 0; --i) {
        px.push_back(s.x[i]);
        py.push_back(s.y_low[i]);
      }
      plfill(static_cast<PLINT>(px.size()), px.data(), py.data());
      break;
    }
    case Series::Kind::kPoints: {
      if (s.marker == "•" || s.marker == "●") {
        // Dots are filled discs drawn in data units: a text glyph sits a pixel or two off its
        // anchor (font metrics), which shows against rings and lines.
        const double radius = (s.marker == "•" ? 2.6 : 4.5) * s.marker_scale;
        const auto [rx, ry] = PixelsToData(radius, panel, figure);
        for (int i = 0; i < n; ++i) {
          std::vector<PLFLT> cx, cy;
          for (int t = 0; t < 16; ++t) {
            const double angle = 2 * M_PI * t / 16;
            cx.push_back(s.x[i] + rx * std::cos(angle));
            cy.push_back(s.y[i] + ry * std::sin(angle));
          }
          plfill(static_cast<PLINT>(cx.size()), cx.data(), cy.data());
        }
        break;
      }
      std::vector<PLFLT> y(s.y.begin(), s.y.end());
      plschr(0, text_scale * s.marker_scale);
      plstring(n, x.data(), y.data(), s.marker.c_str());
      plschr(0, text_scale);
      break;
    }
    case Series::Kind::kErrorBars: {
      std::vector<PLFLT> low(s.y_low.begin(), s.y_low.end()),
          high(s.y_high.begin(), s.y_high.end());
      plerry(n, x.data(), low.data(), high.data());
      break;
    }
    case Series::Kind::kRings: {
      const auto [rx, ry] = PixelsToData(s.ring_radius, panel, figure);
      for (int i = 0; i < n; ++i) {
        std::vector<PLFLT> cx, cy;
        for (int t = 0; t <= 48; ++t) {
          const double angle = 2 * M_PI * t / 48;
          cx.push_back(s.x[i] + rx * std::cos(angle));
          cy.push_back(s.y[i] + ry * std::sin(angle));
        }
        plline(static_cast<PLINT>(cx.size()), cx.data(), cy.data());
      }
      break;
    }
  }
  pllsty(1);
  plwidth(1.0);
}

// The viewport of a panel between `top` and `bottom` (fractions of the page): margins in pixels
// of the page, as fractions of it, for tick labels and axis titles.
struct Viewport {
  double left, right, lower, upper;
};
Viewport PanelViewport(const Panel& panel, double top, double bottom, const FigureSpec& figure) {
  const double left = 78.0 / figure.width, right = 1.0 - 22.0 / figure.width;
  const double lower = bottom + 60.0 / figure.height;
  const double upper = top - (panel.title.empty() ? 12.0 : 30.0) / figure.height;
  return {left, right, std::min(lower, upper - 0.02), upper};
}

void DrawPanel(const Panel& panel, double top, double bottom, const FigureSpec& figure,
               Palette& palette, double text_scale) {
  const Viewport v = PanelViewport(panel, top, bottom, figure);
  plvpor(v.left, v.right, v.lower, v.upper);
  plwind(panel.x_min, panel.x_max, panel.y_min, panel.y_max);
  plcol0(2);
  plwidth(0.5);
  const std::string y_grid = panel.log_y ? "gl" : "g";
  plbox(panel.x_categories.empty() ? "g" : "", panel.x_tick, 0, y_grid.c_str(), 0, 0);
  plwidth(1.0);
  for (const Series& s : panel.series) DrawSeries(s, palette, text_scale, panel, figure);
  plcol0(1);
  plschr(0, text_scale * 0.9);
  const std::string y_opt = panel.log_y ? "bcnstvl" : "bcnstv";
  if (panel.x_categories.empty()) {
    plbox("bcnst", panel.x_tick, 0, y_opt.c_str(), 0, 0);
  } else {
    plbox("bc", 0, 0, y_opt.c_str(), 0, 0);
    const double span = panel.x_max - panel.x_min;
    for (size_t i = 0; i < panel.x_categories.size(); ++i) {
      const double at = (static_cast<double>(i + 1) - panel.x_min) / span;
      plmtex("b", 1.4, at, 0.5, PlotText(panel.x_categories[i]).c_str());
    }
  }
  for (const Note& note : panel.notes) {
    plcol0(palette.Add(note.color, 1.0));
    plschr(0, text_scale * note.scale);
    plptex(note.x, note.y, 1.0, 0.0, note.justify, PlotText(note.text).c_str());
  }
  plschr(0, text_scale);
  plcol0(1);
  plmtex("b", panel.x_categories.empty() ? 2.6 : 2.9, 0.5, 0.5, PlotText(panel.x_label).c_str());
  plmtex("l", 4.2, 0.5, 0.5, PlotText(panel.y_label).c_str());
  if (!panel.title.empty()) plmtex("t", 0.8, 0.5, 0.5, PlotText(panel.title).c_str());
  DrawLegend(panel, palette, text_scale);
}

absl::Status DrawTo(const FigureSpec& figure, const std::string& device, const std::string& path,
                    double dpi) {
  // PLplot ends the process when it cannot open its output file, so make sure it can first.
  {
    std::ofstream probe(path, std::ios::binary | std::ios::trunc);
    if (!probe) return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  PLINT stream = 0;
  plmkstrm(&stream);
  if (stream < 0) return absl::InternalError("PLplot: no free plot stream");
  plsdev(device.c_str());
  plsfnam(path.c_str());
  plspage(dpi, dpi, figure.width, figure.height, 0, 0);
  plscolbg(255, 255, 255);
  plscol0(1, 0, 0, 0);
  plscol0(2, 222, 222, 222);
  plinit();
  Palette palette;
  plscol0(2, 222, 222, 222);
  pladv(0);
  const double text_scale = 0.95;
  plschr(0, text_scale);
  double weight_total = 0;
  for (const Panel& p : figure.panels) weight_total += p.height_weight;
  double top = 1.0;
  for (const Panel& p : figure.panels) {
    const double bottom = top - p.height_weight / weight_total;
    DrawPanel(p, top, std::max(0.0, bottom), figure, palette, text_scale);
    top = bottom;
  }
  plend1();
  return absl::OkStatus();
}

}  // namespace

Rgb SeriesColor(int i) {
  static constexpr Rgb kCycle[] = {kBlue,   kVermilion, kGreen, kOrange,
                                   kPurple, kSky,       kGrey,  kYellow};
  return kCycle[((i % 8) + 8) % 8];
}

PlotArea PanelPlotArea(const FigureSpec& figure, size_t index) {
  double weight_total = 0;
  for (const Panel& p : figure.panels) weight_total += p.height_weight;
  double top = 1.0;
  for (size_t i = 0; i < figure.panels.size() && weight_total > 0; ++i) {
    const double bottom = top - figure.panels[i].height_weight / weight_total;
    if (i == index) {
      const Viewport v = PanelViewport(figure.panels[i], top, std::max(0.0, bottom), figure);
      return {(v.right - v.left) * figure.width, (v.upper - v.lower) * figure.height};
    }
    top = bottom;
  }
  return {};
}

double TextWidthPixels(const std::string& text, double scale) {
  int code_points = 0;
  for (unsigned char c : text) code_points += (c & 0xC0) != 0x80;
  return 11.5 * scale * code_points;
}

double TextHeightPixels(double scale) { return 17.0 * scale; }

std::string PlotText(const std::string& text) { return absl::StrReplaceAll(text, {{"#", "##"}}); }

void FitRanges(Panel& panel, double margin) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  auto take = [](const std::vector<double>& v, double& lo, double& hi) {
    for (double value : v) {
      if (std::isfinite(value)) {
        lo = std::min(lo, value);
        hi = std::max(hi, value);
      }
    }
  };
  for (const Series& s : panel.series) {
    take(s.x, x_lo, x_hi);
    take(s.y, y_lo, y_hi);
    take(s.y_low, y_lo, y_hi);
    take(s.y_high, y_lo, y_hi);
  }
  auto widen = [margin](double& lo, double& hi) {
    if (!std::isfinite(lo)) {
      lo = 0;
      hi = 1;
      return;
    }
    if (hi - lo <= 1e-12 * std::max(1.0, std::abs(hi))) {
      const double pad = std::max(0.5, 0.1 * std::abs(hi));
      lo -= pad;
      hi += pad;
      return;
    }
    const double pad = margin * (hi - lo);
    lo -= pad;
    hi += pad;
  };
  widen(x_lo, x_hi);
  widen(y_lo, y_hi);
  panel.x_min = x_lo;
  panel.x_max = x_hi;
  panel.y_min = y_lo;
  panel.y_max = y_hi;
}

absl::Status RenderFigure(const FigureSpec& figure, const std::string& svg_path,
                          const std::string& png_path) {
  if (figure.panels.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("figure ", figure.id, ": no panels"));
  }
  std::lock_guard<std::mutex> lock(PlplotMutex());
  const std::set<std::string> devices = AvailableDevices();
  for (const char* needed : {"svg", "pngcairo"}) {
    if (devices.count(needed) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "PLplot has no '", needed,
          "' device: install libplplot17 and plplot-driver-cairo (scripts/install-deps.sh)"));
    }
  }
  // The svg driver takes its page size in points at 72 per inch, so a 960 × 480 page is
  // 960 × 480 SVG user units; the PNG is the same number of pixels.
  GPSEL_RETURN_IF_ERROR(DrawTo(figure, "svg", svg_path, 72.0));
  return DrawTo(figure, "pngcairo", png_path, 72.0);
}

}  // namespace gpsel::report
