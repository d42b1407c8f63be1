// SVG and HTML building blocks for the self-contained HTML report
// (tuner/render/report_html.h): escaping, number formatting, linear scales with
// round tick values, and axes. Everything is emitted as text so that the
// report needs no script and no network fetch to render.
#ifndef MESHTUNE_TUNER_RENDER_SVG_CHART_H_
#define MESHTUNE_TUNER_RENDER_SVG_CHART_H_

#include <string>
#include <string_view>
#include <vector>

namespace meshtune::tuner {

// `text` with &, <, >, " and ' replaced by entities: safe in element content
// and in double- or single-quoted attribute values.
std::string HtmlEscape(std::string_view text);

// ` name="value"` with the value escaped.
std::string SvgAttr(std::string_view name, std::string_view value);
// ` name="number"` (FormatNumber with 6 significant digits).
std::string SvgAttr(std::string_view name, double value);

// `value` with `significant` digits (%g), "0" for zero, never "-0".
std::string FormatNumber(double value, int significant = 4);

// Maps [domain_lo, domain_hi] onto [range_lo, range_hi] (a degenerate
// domain maps everything to range_lo).
struct LinearScale {
  double domain_lo = 0;
  double domain_hi = 1;
  double range_lo = 0;
  double range_hi = 1;
  double operator()(double value) const;
};

// Round tick values (1, 2 or 5 times a power of ten apart) covering
// [lo, hi], about `target_count` of them. lo == hi gives one tick.
std::vector<double> NiceTicks(double lo, double hi, int target_count);

// The plot rectangle inside an SVG, in pixels.
struct PlotArea {
  double left = 0;
  double top = 0;
  double width = 0;
  double height = 0;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

// Axis lines, tick marks, grid lines, tick labels and axis titles for a plot
// whose scales map into `area` (x left to right, y bottom to top).
std::string SvgAxes(const PlotArea& area, const LinearScale& x,
                    const std::vector<double>& x_ticks,
                    const std::string& x_title, const LinearScale& y,
                    const std::vector<double>& y_ticks,
                    const std::string& y_title);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_SVG_CHART_H_
