// A figure as data (panels of lines, bands, points, error bars, notes) and its rendering with
// PLplot to SVG (PLplot's own svg driver: one <polyline> per line, text as <text>) and PNG (its
// cairo driver, anti-aliased, fonts through pango). The same FigureSpec gives both files and the
// structure the report lists beside them (panels, axis ranges, series), which is what the tests
// compare instead of pixels.
//
//   FigureSpec figure;  figure.id = "fit";  figure.panels.push_back(panel);
//   absl::Status s = RenderFigure(figure, "/out/fit.svg", "/out/fit.png");
#ifndef GPSEL_REPORT_PLOT_H_
#define GPSEL_REPORT_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gpsel::report {

struct Rgb {
  int r = 0, g = 0, b = 0;
};
// The palette of the report (colour-blind safe, Okabe–Ito), by role.
inline constexpr Rgb kBlack{0, 0, 0};
inline constexpr Rgb kGrey{120, 120, 120};
inline constexpr Rgb kBlue{0, 114, 178};
inline constexpr Rgb kOrange{230, 159, 0};
inline constexpr Rgb kGreen{0, 158, 115};
inline constexpr Rgb kVermilion{213, 94, 0};
inline constexpr Rgb kPurple{204, 121, 167};
inline constexpr Rgb kSky{86, 180, 233};
inline constexpr Rgb kYellow{240, 228, 66};
// The i-th colour for the i-th of several like series (kernels, summands).
Rgb SeriesColor(int i);

struct Series {
  enum class Kind {
    kLine,       // x, y joined
    kBand,       // the region between y_low and y_high over x (filled, translucent)
    kPoints,     // a marker (`marker`, a UTF-8 glyph) at each (x, y)
    kErrorBars,  // vertical bars from y_low to y_high at each x
    kRings,      // a circle of `ring_radius` pixels around each (x, y)
  };
  Kind kind = Kind::kLine;
  std::string label;  // legend entry; empty: not in the legend
  Rgb color = kBlack;
  double alpha = 1.0;
  double width = 1.5;  // line width
  bool dashed = false;
  std::string marker = "•";   // kPoints
  double marker_scale = 1.0;  // kPoints, relative to the text size
  double ring_radius = 9.0;   // kRings, pixels
  std::vector<double> x, y, y_low, y_high;
};

// A text at data coordinates; `justify` 0 = left, 0.5 = centred, 1 = right.
struct Note {
  double x = 0, y = 0;
  std::string text;
  double justify = 0.0;
  double scale = 0.8;  // relative to the text size
  Rgb color = kBlack;
};

struct Panel {
  std::string title;
  std::string x_label, y_label;  // with units
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  bool log_y = false;  // y values are log10 of the quantity; ticks read 10^k
  double x_tick = 0;   // interval of the major x ticks; 0 = PLplot's choice
  // Categorical x: label i at x = i + 1 instead of numeric ticks.
  std::vector<std::string> x_categories;
  std::vector<Series> series;
  std::vector<Note> notes;
  bool legend = true;
  bool legend_right = false;   // legend on the right instead of the left ...
  bool legend_bottom = false;  // ... and at the bottom instead of the top
  double height_weight = 1.0;  // share of the figure's height
};

struct FigureSpec {
  std::string id;       // file stem: <id>.svg, <id>.png
  std::string title;    // heading in the report
  std::string caption;  // what the figure shows, in the report
  int width = 960;      // pixels (PNG) or points (SVG)
  int height = 480;
  std::vector<Panel> panels;  // stacked top to bottom
};

// Sets the axis ranges of `panel` to the data of its series with a margin (a fraction of the
// span on each side), and a sensible range when all values coincide.
void FitRanges(Panel& panel, double margin = 0.04);

// The plot area of figure.panels[index] inside its margins, in pixels, as RenderFigure lays it
// out: what a figure builder needs to keep titles and notes inside it and apart.
struct PlotArea {
  double width = 0.0;
  double height = 0.0;
};
PlotArea PanelPlotArea(const FigureSpec& figure, size_t index);
// Estimated extent in pixels of `text` drawn at `scale` (relative to the text size, as
// Note::scale): ~11.5 px per character (UTF-8 code point) and 17 px high at scale 1, measured on
// the report's SVG/PNG output (DejaVu Sans through pango).
double TextWidthPixels(const std::string& text, double scale);
double TextHeightPixels(double scale);

// Escapes PLplot's text escape character ('#') in a label.
std::string PlotText(const std::string& text);

// Renders the figure to an SVG and a PNG file. FAILED_PRECONDITION when PLplot lacks the
// drivers (the plplot-driver-cairo package); INTERNAL when a file cannot be written.
absl::Status RenderFigure(const FigureSpec& figure, const std::string& svg_path,
                          const std::string& png_path);

}  // namespace gpsel::report

#endif  // GPSEL_REPORT_PLOT_H_
