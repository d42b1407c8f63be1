// SVG and HTML building blocks for the self-contained HTML report
// (tuner/render/report_html.h): escaping, number formatting, linear and log
// scales with round tick values, and axes. Everything is emitted as text so
// that the report needs no script and no network fetch to render.
//
// Every chart declares its plot frame as data-plot="left top width height"
// on its <svg>, in the viewBox's units (pixels); every mark that carries
// data-* attributes lies inside that frame and every other mark inside the
// viewBox (tests/tuner/render/svg_geometry.h checks both).
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

// `value` in plain positional notation, never with an exponent: rounded to
// `significant` significant digits after the point, trailing zeros dropped
// (12.3456 -> "12.35", 0.000123456 -> "0.0001235"), and every digit before
// it (187734.4 -> "187734", as the text table's "%.0f" prints it). "0" for
// zero and for magnitudes below 1e-12, never "-0".
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

// Round tick values (1, 2 or 5 times a power of ten apart) inside
// [lo, hi], about `target_count` of them. lo == hi gives one tick.
std::vector<double> NiceTicks(double lo, double hi, int target_count);

// A linear axis whose round ticks enclose the data: the first tick at or
// below `lo`, the last at or above `hi`, about `target_count` steps apart.
// An empty range (hi <= lo) is widened (to [0, 1] around zero), so that the
// axis never has zero width.
struct NiceAxis {
  double lo = 0;
  double hi = 1;
  std::vector<double> ticks;  // lo and hi included
};
NiceAxis NiceAxisCovering(double lo, double hi, int target_count);

// Maps [domain_lo, domain_hi] (both > 0) onto [range_lo, range_hi] by the
// logarithm of the value; values are clamped to the domain's positive side
// (a value <= 0 maps to range_lo).
struct LogScale {
  double domain_lo = 1;
  double domain_hi = 10;
  double range_lo = 0;
  double range_hi = 1;
  double operator()(double value) const;
};

// Ticks of a log axis over [lo, hi] (0 < lo < hi): 1, 2 and 5 times powers
// of ten inside it; when fewer than three of those fit (a range narrower
// than a factor of about 3), NiceTicks' linear values instead.
std::vector<double> LogTicks(double lo, double hi);

// A tick of an axis: where it is drawn (pixels) and its label.
struct AxisTick {
  double pixel = 0;
  std::string label;
};

// `values` placed by `scale` (LinearScale or LogScale), labelled with
// FormatNumber.
template <typename Scale>
std::vector<AxisTick> TicksAt(const std::vector<double>& values,
                              const Scale& scale) {
  std::vector<AxisTick> ticks;
  for (const double v : values) ticks.push_back({scale(v), FormatNumber(v)});
  return ticks;
}

// The plot rectangle inside an SVG, in pixels.
struct PlotArea {
  double left = 0;
  double top = 0;
  double width = 0;
  double height = 0;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

// The opening <svg> of a chart `width` x `height` pixels (its viewBox) with
// id `id`, class "chart", data-plot for `plot`, and `extra_attrs` (already
// formatted, e.g. SvgAttr(...) + SvgAttr(...)).
std::string SvgOpen(const std::string& id, double width, double height,
                    const PlotArea& plot, const std::string& extra_attrs);

// Grid lines, tick labels, the frame and the axis titles of a plot in
// `area` (x ticks under it, y ticks left of it, the y title rotated
// `y_title_offset` pixels left of the frame).
std::string SvgAxes(const PlotArea& area, const std::vector<AxisTick>& x_ticks,
                    const std::string& x_title,
                    const std::vector<AxisTick>& y_ticks,
                    const std::string& y_title, double y_title_offset = 46);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_SVG_CHART_H_
