#include "tuner/render/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace meshtune::tuner {

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string SvgAttr(std::string_view name, std::string_view value) {
  return " " + std::string(name) + "=\"" + HtmlEscape(value) + "\"";
}

std::string SvgAttr(std::string_view name, double value) {
  return SvgAttr(name, FormatNumber(value, 6));
}

std::string FormatNumber(double value, int significant) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : "inf";
  if (std::fabs(value) < 1e-12) return "0";
  // Digits after the point for `significant` significant digits, capped so
  // that the smallest printable magnitude is 1e-12 (above).
  const int magnitude =
      static_cast<int>(std::floor(std::log10(std::fabs(value))));
  const int decimals = std::clamp(significant - 1 - magnitude, 0, 12);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  std::string out = buf;
  if (out.find('.') != std::string::npos) {
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
  }
  // A value that rounds to zero prints as "0", not "-0".
  if (out == "-0") out = "0";
  return out;
}

double LinearScale::operator()(double value) const {
  const double span = domain_hi - domain_lo;
  if (span == 0) return range_lo;
  return range_lo + (value - domain_lo) / span * (range_hi - range_lo);
}

std::vector<double> NiceTicks(double lo, double hi, int target_count) {
  if (!(hi > lo) || target_count < 1) return {lo};
  const double raw = (hi - lo) / target_count;
  const int exponent = static_cast<int>(std::floor(std::log10(raw)));
  double factor = 10;
  for (const double f : {1.0, 2.0, 5.0, 10.0}) {
    if (f * std::pow(10.0, exponent) >= raw) {
      factor = f;
      break;
    }
  }
  // Tick k is k·factor·10^exponent; for negative exponents it is computed
  // as k·factor / 10^-exponent, which rounds correctly (3 x 0.1 would print
  // as 0.30000000000000004).
  const double scale = std::pow(10.0, std::abs(exponent));
  auto tick = [&](double k) {
    return exponent < 0 ? k * factor / scale : k * factor * scale;
  };
  std::vector<double> ticks;
  for (double k = std::ceil(lo / tick(1) - 1e-9);
       tick(k) <= hi + 1e-9 * tick(1); k += 1) {
    ticks.push_back(k == 0 ? 0.0 : tick(k));
  }
  return ticks;
}

NiceAxis NiceAxisCovering(double lo, double hi, int target_count) {
  if (!(hi > lo)) {
    // Widen an empty range by a tenth of its magnitude (one unit at zero).
    const double pad = std::max(std::fabs(lo), std::fabs(hi)) > 0
                           ? 0.1 * std::max(std::fabs(lo), std::fabs(hi))
                           : 1.0;
    lo = lo == 0 ? 0 : lo - pad;
    hi = hi + pad;
  }
  target_count = std::max(1, target_count);
  const std::vector<double> inner = NiceTicks(lo, hi, target_count);
  // The step NiceTicks chose, from two of its ticks or, with one tick, from
  // the range itself.
  double step = inner.size() >= 2 ? inner[1] - inner[0] : hi - lo;
  if (!(step > 0)) step = 1;
  NiceAxis axis;
  const double first = std::floor(lo / step + 1e-9);
  const double last = std::ceil(hi / step - 1e-9);
  for (double k = first; k <= last + 0.5; k += 1) {
    // k·step rounds like NiceTicks' values (0.1 steps print as 0.3, not
    // 0.30000000000000004) once formatted; exact zero stays zero.
    axis.ticks.push_back(k == 0 ? 0.0 : k * step);
  }
  if (axis.ticks.size() < 2) axis.ticks.push_back(axis.ticks.back() + step);
  axis.lo = axis.ticks.front();
  axis.hi = axis.ticks.back();
  return axis;
}

double LogScale::operator()(double value) const {
  const double lo = std::log(domain_lo);
  const double hi = std::log(domain_hi);
  if (!(hi > lo)) return range_lo;
  const double v = std::log(std::max(value, domain_lo * 1e-12));
  return range_lo + (v - lo) / (hi - lo) * (range_hi - range_lo);
}

std::vector<double> LogTicks(double lo, double hi) {
  std::vector<double> ticks;
  if (!(lo > 0) || !(hi > lo)) return {lo};
  for (int e = static_cast<int>(std::floor(std::log10(lo)));
       e <= static_cast<int>(std::ceil(std::log10(hi))); ++e) {
    for (const double f : {1.0, 2.0, 5.0}) {
      // f·10^e, computed as f / 10^-e for negative exponents so that 0.2
      // is 0.2 and not 0.20000000000000001.
      const double v = e < 0 ? f / std::pow(10.0, -e) : f * std::pow(10.0, e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
    }
  }
  if (ticks.size() < 3) return NiceTicks(lo, hi, 4);
  return ticks;
}

std::string SvgOpen(const std::string& id, double width, double height,
                    const PlotArea& plot, const std::string& extra_attrs) {
  return "<svg" + SvgAttr("id", id) +
         " class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\"" +
         SvgAttr("viewBox", "0 0 " + FormatNumber(width, 6) + " " +
                                FormatNumber(height, 6)) +
         SvgAttr("width", width) + SvgAttr("height", height) +
         SvgAttr("data-plot", FormatNumber(plot.left, 6) + " " +
                                  FormatNumber(plot.top, 6) + " " +
                                  FormatNumber(plot.width, 6) + " " +
                                  FormatNumber(plot.height, 6)) +
         extra_attrs + ">";
}

std::string SvgAxes(const PlotArea& area, const std::vector<AxisTick>& x_ticks,
                    const std::string& x_title,
                    const std::vector<AxisTick>& y_ticks,
                    const std::string& y_title, double y_title_offset) {
  std::string s = "<g class=\"axes\">";
  for (const AxisTick& t : x_ticks) {
    s += "<line class=\"grid\"" + SvgAttr("x1", t.pixel) +
         SvgAttr("x2", t.pixel) + SvgAttr("y1", area.top) +
         SvgAttr("y2", area.bottom()) + "/>";
    s += "<text class=\"tick\"" + SvgAttr("x", t.pixel) +
         SvgAttr("y", area.bottom() + 16) + " text-anchor=\"middle\">" +
         HtmlEscape(t.label) + "</text>";
  }
  for (const AxisTick& t : y_ticks) {
    s += "<line class=\"grid\"" + SvgAttr("x1", area.left) +
         SvgAttr("x2", area.right()) + SvgAttr("y1", t.pixel) +
         SvgAttr("y2", t.pixel) + "/>";
    s += "<text class=\"tick\"" + SvgAttr("x", area.left - 6) +
         SvgAttr("y", t.pixel + 4) + " text-anchor=\"end\">" +
         HtmlEscape(t.label) + "</text>";
  }
  s += "<rect class=\"frame\"" + SvgAttr("x", area.left) +
       SvgAttr("y", area.top) + SvgAttr("width", area.width) +
       SvgAttr("height", area.height) + "/>";
  s += "<text class=\"title\"" + SvgAttr("x", area.left + area.width / 2) +
       SvgAttr("y", area.bottom() + 36) + " text-anchor=\"middle\">" +
       HtmlEscape(x_title) + "</text>";
  s += "<text class=\"title\" transform=\"translate(" +
       FormatNumber(area.left - y_title_offset, 6) + "," +
       FormatNumber(area.top + area.height / 2, 6) +
       ") rotate(-90)\" text-anchor=\"middle\">" + HtmlEscape(y_title) +
       "</text>";
  s += "</g>";
  return s;
}

}  // namespace meshtune::tuner
