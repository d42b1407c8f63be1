#include "tuner/render/scale_html.h"

#include <algorithm>

#include "search_spaces/parallel_config.h"
#include "tuner/render/svg_chart.h"

namespace meshtune::tuner {

std::string ScaleSectionHtml(const ScaleReport& report) {
  std::string s = "<h2>Scaling: the best configuration per GPU count</h2>";
  double max_per_gpu = 0;
  double max_efficiency = 0;
  size_t feasible = 0;
  for (const ScaleRow& row : report.rows) {
    if (!row.feasible) continue;
    ++feasible;
    max_per_gpu = std::max(max_per_gpu, row.best.tokens_per_s_per_gpu);
    max_efficiency = std::max(max_efficiency, row.scaling_efficiency);
  }
  // GPU counts are usually powers of two: evenly spaced categories read
  // better than a linear axis that crowds the small sizes.
  const double width = 960;
  const PlotArea area{80, 12, width - 160, 300};
  const double n = static_cast<double>(std::max<size_t>(1, report.rows.size()));
  auto x_at = [&](size_t i) {
    return area.left + area.width * (static_cast<double>(i) + 0.5) / n;
  };
  const NiceAxis axis = NiceAxisCovering(0, max_per_gpu * 1.1, 6);
  const LinearScale y{0, axis.hi, area.bottom(), area.top};
  // Efficiency on the right axis, up to 120 % or beyond the largest (a
  // larger size can beat the smallest: fewer pipeline stages); the points
  // (radius 5) stay 6 pixels inside the frame.
  const double eff_hi = std::max(1.2, 1.1 * max_efficiency);
  const LinearScale eff{0, eff_hi, area.bottom() - 6, area.top + 6};
  const double height = area.bottom() + 48;
  s += SvgOpen("scale", width, height, area,
               SvgAttr("data-points", static_cast<double>(feasible)));
  for (const double t : axis.ticks) {
    s += "<line class=\"grid\"" + SvgAttr("x1", area.left) +
         SvgAttr("x2", area.right()) + SvgAttr("y1", y(t)) +
         SvgAttr("y2", y(t)) + "/><text class=\"tick\"" +
         SvgAttr("x", area.left - 6) + SvgAttr("y", y(t) + 4) +
         " text-anchor=\"end\">" + FormatNumber(t) + "</text>";
  }
  for (const double e : NiceTicks(0, eff_hi, 5)) {
    s += "<text class=\"tick\"" + SvgAttr("x", area.right() + 6) +
         SvgAttr("y", eff(e) + 4) + ">" + FormatNumber(100 * e) + "%</text>";
  }
  std::string line;
  const double bar = area.width / n * 0.5;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const ScaleRow& row = report.rows[i];
    s += "<text class=\"tick\"" + SvgAttr("x", x_at(i)) +
         SvgAttr("y", area.bottom() + 16) + " text-anchor=\"middle\">" +
         std::to_string(row.gpus) + "</text>";
    if (!row.feasible) continue;
    const costmodel::Estimate& e = row.best;
    s += "<rect fill=\"#54aeff\"" + SvgAttr("x", x_at(i) - bar / 2) +
         SvgAttr("y", y(e.tokens_per_s_per_gpu)) + SvgAttr("width", bar) +
         SvgAttr("height", area.bottom() - y(e.tokens_per_s_per_gpu)) + "/>";
    line += FormatNumber(x_at(i), 6) + "," +
            FormatNumber(eff(row.scaling_efficiency), 6) + " ";
  }
  s += "<polyline class=\"frontier\"" + SvgAttr("points", line) + "/>";
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const ScaleRow& row = report.rows[i];
    if (!row.feasible) continue;
    const costmodel::Estimate& e = row.best;
    s += "<circle class=\"frontier\" data-kind=\"scale\"" +
         SvgAttr("data-gpus", static_cast<double>(row.gpus)) +
         SvgAttr("data-tokens-per-s-per-gpu", e.tokens_per_s_per_gpu) +
         SvgAttr("data-scaling-efficiency", row.scaling_efficiency) +
         SvgAttr("data-step-time-s", e.step_time_s) + SvgAttr("cx", x_at(i)) +
         SvgAttr("cy", eff(row.scaling_efficiency)) + " r=\"5\"><title>" +
         HtmlEscape(std::to_string(row.gpus) +
                    " GPUs: " + search_spaces::ToString(e.config) + ", " +
                    FormatNumber(e.tokens_per_s_per_gpu) +
                    " tokens/s per GPU, efficiency " +
                    FormatNumber(100 * row.scaling_efficiency, 3) + "%") +
         "</title></circle>";
  }
  s += "<text class=\"title\"" + SvgAttr("x", area.left + area.width / 2) +
       SvgAttr("y", area.bottom() + 36) +
       " text-anchor=\"middle\">GPUs</text></svg>";

  s += "<table id=\"scale-table\"><tr><th>GPUs</th><th class=\"l\">best "
       "configuration</th><th>step (s)</th><th>tokens/s</th><th>tokens/s/GPU"
       "</th><th>MFU</th><th>efficiency</th><th>days</th>";
  if (report.price_per_gpu_hour) s += "<th>cost (USD)</th>";
  s += "</tr>";
  for (const ScaleRow& row : report.rows) {
    s += "<tr><td>" + std::to_string(row.gpus) + "</td>";
    if (!row.feasible) {
      s += "<td class=\"l\" colspan=\"" +
           std::string(report.price_per_gpu_hour ? "8" : "7") +
           "\">no feasible configuration: " + HtmlEscape(row.reason) +
           "</td></tr>";
      continue;
    }
    const costmodel::Estimate& e = row.best;
    s += "<td class=\"l\">" + HtmlEscape(search_spaces::ToString(e.config)) +
         "</td><td>" + FormatNumber(e.step_time_s) + "</td><td>" +
         FormatNumber(e.tokens_per_s) + "</td><td>" +
         FormatNumber(e.tokens_per_s_per_gpu) + "</td><td>" +
         FormatNumber(100 * e.mfu, 3) + "%</td><td>" +
         FormatNumber(100 * row.scaling_efficiency, 3) + "%</td><td>" +
         FormatNumber(e.days_to_train, 3) + "</td>";
    if (report.price_per_gpu_hour) {
      s += "<td>" + FormatNumber(row.cost_usd.value_or(0), 4) + "</td>";
    }
    s += "</tr>";
  }
  s += "</table><p class=\"note\">The global batch is the same at every "
       "size; efficiency is tokens/s per GPU over that of the smallest "
       "feasible size.</p>";
  return s;
}

}  // namespace meshtune::tuner
