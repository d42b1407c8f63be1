#include "tuner/render/svg_chart.h"

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
  if (value == 0 || !std::isfinite(value)) {
    return std::isfinite(value) ? "0" : (std::isnan(value) ? "nan" : "inf");
  }
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*g", significant, value);
  return buf;
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

std::string SvgAxes(const PlotArea& area, const LinearScale& x,
                    const std::vector<double>& x_ticks,
                    const std::string& x_title, const LinearScale& y,
                    const std::vector<double>& y_ticks,
                    const std::string& y_title) {
  std::string s = "<g class=\"axes\">";
  for (const double t : x_ticks) {
    const std::string px = FormatNumber(x(t), 6);
    s += "<line class=\"grid\" x1=\"" + px + "\" x2=\"" + px + "\" y1=\"" +
         FormatNumber(area.top, 6) + "\" y2=\"" +
         FormatNumber(area.bottom(), 6) + "\"/>";
    s += "<text class=\"tick\" x=\"" + px + "\" y=\"" +
         FormatNumber(area.bottom() + 16, 6) + "\" text-anchor=\"middle\">" +
         HtmlEscape(FormatNumber(t)) + "</text>";
  }
  for (const double t : y_ticks) {
    const std::string py = FormatNumber(y(t), 6);
    s += "<line class=\"grid\" x1=\"" + FormatNumber(area.left, 6) +
         "\" x2=\"" + FormatNumber(area.right(), 6) + "\" y1=\"" + py +
         "\" y2=\"" + py + "\"/>";
    s += "<text class=\"tick\" x=\"" + FormatNumber(area.left - 6, 6) +
         "\" y=\"" + FormatNumber(y(t) + 4, 6) + "\" text-anchor=\"end\">" +
         HtmlEscape(FormatNumber(t)) + "</text>";
  }
  s += "<rect class=\"frame\"" + SvgAttr("x", area.left) +
       SvgAttr("y", area.top) + SvgAttr("width", area.width) +
       SvgAttr("height", area.height) + "/>";
  s += "<text class=\"title\"" + SvgAttr("x", area.left + area.width / 2) +
       SvgAttr("y", area.bottom() + 36) + " text-anchor=\"middle\">" +
       HtmlEscape(x_title) + "</text>";
  s += "<text class=\"title\" transform=\"translate(" +
       FormatNumber(area.left - 46, 6) + "," +
       FormatNumber(area.top + area.height / 2, 6) +
       ") rotate(-90)\" text-anchor=\"middle\">" + HtmlEscape(y_title) +
       "</text>";
  s += "</g>";
  return s;
}

}  // namespace meshtune::tuner
