#include "tuner/render/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <sstream>
#include <string_view>
#include <utility>

#include "costmodel/estimate.h"
#include "search_spaces/cluster_spec.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/pipeline_schedule.h"
#include "tuner/io/text_format.h"
#include "tuner/render/pipeline_timeline.h"
#include "tuner/render/report_table.h"
#include "tuner/render/scale_html.h"
#include "tuner/render/svg_chart.h"

namespace meshtune::tuner {
namespace {

using costmodel::Estimate;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kChartWidth = 960;
// A limit (the usable HBM) joins a data axis only while it is at most this
// many times the largest value: beyond, the data would shrink into a corner
// (gpt-tiny uses 0.4 of 11 GiB), so the chart says where the limit is.
constexpr double kLimitOnAxisFactor = 4;
// Estimated width of a character of the charts' 11 px sans-serif text, for
// placing labels clear of the plot's edges (0.6 em: wider than the average
// glyph, so a label placed by it is not cut off).
constexpr double kCharPx = 0.6 * 11;

double TextPx(const std::string& text) {
  size_t chars = 0;
  for (const char ch : text)
    chars += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return kCharPx * static_cast<double>(chars);
}

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1000px;color:#1f2328;padding:0 12px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #d0d7de;padding-bottom:3px}
p.note{color:#57606a;margin:4px 0 8px}code,pre{font:12.5px ui-monospace,Menlo,Consolas,monospace}
pre{background:#f6f8fa;padding:8px 10px;overflow-x:auto;border-radius:6px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:right}
th{background:#f6f8fa}td.l,th.l{text-align:left}
svg.chart{display:block;max-width:100%;height:auto;font-size:11px}
.grid{stroke:#eaeef2;stroke-width:1}.frame{fill:none;stroke:#8c959f}
.tick{fill:#57606a}.title{fill:#1f2328;font-size:12px}
circle.feasible{fill:#54aeff;fill-opacity:.55}circle.frontier{fill:#0550ae;stroke:#fff;stroke-width:1}
circle.out_of_memory{fill:#afb8c1;fill-opacity:.45}circle.best{fill:#cf222e;stroke:#fff;stroke-width:1.5}
circle.validation{fill:#8250df}
polyline.frontier{fill:none;stroke:#0550ae;stroke-width:1.5}
line.limit{stroke:#cf222e;stroke-width:1.5;stroke-dasharray:6 4}text.limit{fill:#cf222e}
line.diagonal{stroke:#8c959f;stroke-dasharray:4 4}
rect.fwd{fill:#2da44e}rect.fwd.odd{fill:#7ee2a8}rect.bwd{fill:#0969da}rect.bwd.odd{fill:#80ccff}
rect.idle{fill:#ffebe9;stroke:#ff8182;stroke-width:.5}rect.elided{fill:#eaeef2;stroke:#8c959f;stroke-dasharray:3 3}
path.out_of_memory{fill:#6e7781}
text.total,text.limit{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}text.total{fill:#1f2328}
#summary{margin:6px 0}#summary span{display:block}
.swatch{display:inline-block;width:11px;height:11px;margin:0 4px 0 12px;vertical-align:-1px;border-radius:2px}
)";

// Legends and colors of the breakdown terms, in stacking order (the time
// terms in costmodel::kTimeTerms order, checked below).
struct Term {
  const char* name;   // data-term value
  const char* label;  // legend
  const char* color;
};
constexpr Term kTimeStyles[] = {
    {"compute", "compute", "#0969da"},
    {"recompute", "recompute", "#54aeff"},
    {"tp_comm", "TP comm", "#bf8700"},
    {"cp_comm", "CP comm", "#fb8f44"},
    {"ep_comm", "EP comm", "#8250df"},
    {"pp_comm", "PP comm", "#bf3989"},
    {"pp_bubble", "PP bubble", "#cf222e"},
    {"dp_comm", "DP comm", "#1a7f37"},
    {"optimizer", "optimizer", "#6e7781"},
    {"host_launch", "host launches", "#a40e26"},
    {"core_sharing", "ranks sharing cores", "#953800"},
};
constexpr Term kMemoryTerms[] = {
    {"weights", "weights", "#0969da"},
    {"gradients", "gradients", "#1a7f37"},
    {"optimizer", "optimizer states", "#bf8700"},
    {"activations", "activations", "#cf222e"},
    {"other", "other (logits, buffers, workspaces)", "#6e7781"},
};

// One style per term of costmodel::kTimeTerms, in its order.
constexpr bool StylesMatchTimeTerms() {
  if (std::size(kTimeStyles) != std::size(costmodel::kTimeTerms)) return false;
  for (size_t i = 0; i < std::size(kTimeStyles); ++i) {
    if (std::string_view(kTimeStyles[i].name) !=
        std::string_view(costmodel::kTimeTerms[i].name)) {
      return false;
    }
  }
  return true;
}
static_assert(StylesMatchTimeTerms(),
              "kTimeStyles must list costmodel::kTimeTerms in order");

std::vector<double> TimeValues(const Estimate& e) {
  std::vector<double> values;
  for (const costmodel::TimeTerm& term : costmodel::kTimeTerms) {
    values.push_back(e.time.*term.seconds);
  }
  return values;
}

std::vector<double> MemoryValuesGib(const Estimate& e) {
  const costmodel::MemoryBreakdown& m = e.memory;
  return {m.weights_bytes / kGiB, m.gradients_bytes / kGiB,
          m.optimizer_bytes / kGiB, m.activations_bytes / kGiB,
          m.rest_bytes() / kGiB};
}

std::string ConfigText(const Estimate& e) {
  return search_spaces::ToString(e.config);
}

template <size_t N>
std::string Legend(const Term (&terms)[N]) {
  std::string s = "<p class=\"note\">";
  for (const Term& t : terms) {
    s += "<span class=\"swatch\" style=\"background:" + std::string(t.color) +
         "\"></span>" + HtmlEscape(t.label);
  }
  return s + "</p>";
}

// ---- Pareto view ----------------------------------------------------------

std::string ParetoSection(const SearchResult& result,
                          const HtmlReportOptions& options) {
  const std::vector<Estimate>& ranked = result.ranked;
  const std::vector<size_t> frontier = ParetoFrontier(ranked);
  std::vector<size_t> frontier_sorted = frontier;
  std::sort(frontier_sorted.begin(), frontier_sorted.end());
  const Sample feasible =
      EveryNth(ranked.size(), options.max_feasible_points, frontier_sorted);
  const Sample oom = EveryNth(result.out_of_memory.size(),
                              options.max_out_of_memory_points, {});

  // Axes over the plotted feasible candidates (and the HBM limit, unless it
  // is far beyond them): the out-of-memory ones may need many times the
  // HBM (pp 1 with a 175B model) and would squeeze every feasible point
  // into a corner, so those beyond the axes are drawn at the frame's edge.
  // Step time is on a log axis: the slowest feasible plans take ~100x the
  // best one, which a linear axis flattens onto the x axis.
  const double capacity_gib = ranked.front().memory_capacity_bytes / kGiB;
  double max_mem = 0;
  double min_time = 0;
  double max_time = 0;
  auto widen = [&](const Estimate& e) {
    max_mem = std::max(max_mem, e.memory.total_bytes() / kGiB);
    min_time =
        min_time == 0 ? e.step_time_s : std::min(min_time, e.step_time_s);
    max_time = std::max(max_time, e.step_time_s);
  };
  for (const size_t i : frontier) widen(ranked[i]);
  for (const size_t i : feasible.indices) widen(ranked[i]);
  const bool limit_on_axis = capacity_gib <= kLimitOnAxisFactor * max_mem;
  const NiceAxis mem_axis = NiceAxisCovering(
      0, 1.06 * std::max(max_mem, limit_on_axis ? capacity_gib : 0), 10);
  // A step time range narrower than 1.3x is widened so that the log axis
  // has room for ticks.
  const double mid = std::sqrt(min_time * max_time);
  const double half = std::max(std::sqrt(max_time / min_time) * 1.12, 1.14);
  const double time_lo = mid / half;
  const double time_hi = mid * half;

  const PlotArea area{84, 12, kChartWidth - 84 - 24, 380};
  // Marks are placed `kInset` pixels inside the frame, so that a point at
  // the end of an axis (radius up to 6) stays inside it.
  constexpr double kInset = 8;
  const LinearScale x{mem_axis.lo, mem_axis.hi, area.left + kInset,
                      area.right() - kInset};
  const LogScale y{time_lo, time_hi, area.bottom() - kInset, area.top + kInset};
  const size_t plotted =
      frontier.size() + feasible.indices.size() + oom.indices.size();

  std::string s = "<h2>Step time against memory per GPU</h2>";
  s +=
      SvgOpen("pareto", kChartWidth, area.bottom() + 48, area,
              SvgAttr("data-points", static_cast<double>(plotted)) +
                  SvgAttr("data-feasible", static_cast<double>(ranked.size())) +
                  SvgAttr("data-out-of-memory",
                          static_cast<double>(result.out_of_memory.size())) +
                  SvgAttr("data-out-of-memory-shown",
                          static_cast<double>(oom.indices.size())));
  s += SvgAxes(area, TicksAt(mem_axis.ticks, x),
               "memory per GPU, most loaded rank (GiB)",
               TicksAt(LogTicks(time_lo, time_hi), y),
               "step time (s, log scale)", 62);
  // The usable HBM: a dashed line with its label at the top, on whichever
  // side of the line has room; or, off the axis, a note at the right edge.
  const std::string limit_text =
      "usable HBM " + FormatNumber(capacity_gib, 4) + " GiB";
  if (limit_on_axis) {
    const double at = x(capacity_gib);
    const bool right_of_line = at + 4 + TextPx(limit_text) <= area.right() - 2;
    s += "<line class=\"limit\" id=\"hbm-limit\"" +
         SvgAttr("data-gib", capacity_gib) + SvgAttr("x1", at) +
         SvgAttr("x2", at) + SvgAttr("y1", area.top) +
         SvgAttr("y2", area.bottom()) + "/>";
    s += "<text class=\"limit\"" +
         SvgAttr("x", right_of_line ? at + 4 : at - 4) +
         SvgAttr("y", area.top + 14) +
         (right_of_line ? "" : " text-anchor=\"end\"") + ">" +
         HtmlEscape(limit_text) + "</text>";
  } else {
    s += "<text class=\"limit\" id=\"hbm-limit\"" +
         SvgAttr("data-gib", capacity_gib) + SvgAttr("x", area.right() - 6) +
         SvgAttr("y", area.top + 14) + " text-anchor=\"end\">" +
         HtmlEscape(limit_text + ", beyond this axis \u2192") + "</text>";
  }

  auto title_of = [&](const Estimate& e, int64_t rank) {
    const double mem = e.memory.total_bytes() / kGiB;
    std::string title = ConfigText(e) + "\nstep " +
                        FormatNumber(e.step_time_s) + " s, " +
                        FormatNumber(mem) + " GiB per GPU";
    if (rank > 0) {
      return "#" + std::to_string(rank) + " " + title + ", MFU " +
             FormatNumber(100 * e.mfu, 3) + "%";
    }
    return title + "\ninfeasible: " +
           (e.infeasible_reason.empty() ? std::string("out_of_memory")
                                        : e.infeasible_reason) +
           " (needs " + FormatNumber(mem) + " GiB, " +
           FormatNumber(e.memory_capacity_bytes / kGiB) + " usable)";
  };
  auto data_attrs = [&](const Estimate& e, const std::string& kind,
                        int64_t rank) {
    std::string c = SvgAttr("data-kind", kind) +
                    SvgAttr("data-step-time-s", e.step_time_s) +
                    SvgAttr("data-memory-gib", e.memory.total_bytes() / kGiB);
    if (rank > 0) {
      c += SvgAttr("data-rank", static_cast<double>(rank));
    } else {
      c += SvgAttr("data-reason", e.infeasible_reason.empty()
                                      ? "out_of_memory"
                                      : e.infeasible_reason);
    }
    return c;
  };
  auto point = [&](const Estimate& e, const std::string& kind, int64_t rank) {
    std::string cls = kind;
    if (rank == 1) cls += " best";
    return "<circle" + SvgAttr("class", cls) + data_attrs(e, kind, rank) +
           SvgAttr("cx", x(e.memory.total_bytes() / kGiB)) +
           SvgAttr("cy", y(e.step_time_s)) +
           SvgAttr("r", rank == 1 ? 6 : (kind == "frontier" ? 4.5 : 3)) +
           "><title>" + HtmlEscape(title_of(e, rank)) + "</title></circle>";
  };
  // An out-of-memory candidate: a circle inside the axes, else a triangle
  // at the frame's edge pointing the way it lies off the axes.
  const double x_lo = x(mem_axis.lo), x_hi = x(mem_axis.hi);
  const double y_lo = y(time_hi), y_hi = y(time_lo);  // pixels, top < bottom
  size_t beyond = 0;
  auto oom_mark = [&](const Estimate& e) {
    const double px = x(e.memory.total_bytes() / kGiB);
    const double py = y(e.step_time_s);
    const double cx = std::clamp(px, x_lo, x_hi);
    const double cy = std::clamp(py, y_lo, y_hi);
    if (cx == px && cy == py) return point(e, "out_of_memory", 0);
    ++beyond;
    std::string d;
    if (px > x_hi) {  // right of the memory axis: the usual case
      d = "M" + FormatNumber(area.right() - 1, 6) + "," + FormatNumber(cy, 6) +
          " l-7,-4 v8 z";
    } else if (py < y_lo) {  // slower than the time axis
      d = "M" + FormatNumber(cx, 6) + "," + FormatNumber(area.top + 1, 6) +
          " l-4,7 h8 z";
    } else {  // faster than the time axis
      d = "M" + FormatNumber(cx, 6) + "," + FormatNumber(area.bottom() - 1, 6) +
          " l-4,-7 h8 z";
    }
    return "<path class=\"out_of_memory\"" + data_attrs(e, "out_of_memory", 0) +
           " data-beyond-axis=\"1\"" + SvgAttr("d", d) + "><title>" +
           HtmlEscape(title_of(e, 0) +
                      "\n(beyond the axes: drawn at the edge)") +
           "</title></path>";
  };
  // Drawn back to front: rejected, feasible, frontier line and points.
  for (const size_t i : oom.indices) s += oom_mark(result.out_of_memory[i]);
  for (const size_t i : feasible.indices) {
    s += point(ranked[i], "feasible", static_cast<int64_t>(i) + 1);
  }
  std::string line;
  for (const size_t i : frontier) {
    line += FormatNumber(x(ranked[i].memory.total_bytes() / kGiB), 6) + "," +
            FormatNumber(y(ranked[i].step_time_s), 6) + " ";
  }
  s += "<polyline class=\"frontier\"" + SvgAttr("points", line) + "/>";
  for (const size_t i : frontier) {
    s += point(ranked[i], "frontier", static_cast<int64_t>(i) + 1);
  }
  s += "</svg>";

  std::ostringstream note;
  note << "<p class=\"note\">"
       << "<span class=\"swatch\" style=\"background:#cf222e\"></span>best"
       << "<span class=\"swatch\" style=\"background:#0550ae\"></span>"
       << "Pareto frontier: all " << frontier.size() << " shown"
       << "<span class=\"swatch\" style=\"background:#54aeff\"></span>"
       << "other feasible: " << feasible.indices.size() << " of "
       << ranked.size() - frontier.size() << " shown";
  if (feasible.stride > 1) {
    note << " (every " << feasible.stride << "th by rank)";
  }
  note << "<span class=\"swatch\" style=\"background:#afb8c1\"></span>"
       << "out of memory: " << oom.indices.size() << " of "
       << result.out_of_memory.size() << " shown";
  if (oom.stride > 1) note << " (every " << oom.stride << "th searched)";
  if (beyond > 0) {
    note << "; the " << beyond
         << " beyond the axes are drawn as triangles at the frame's edge, "
            "pointing the way they lie";
  }
  note << ". Hover a point for its configuration; "
       << (limit_on_axis ? "the dashed line is the usable HBM per GPU"
                         : "the usable HBM per GPU lies far beyond the plans' "
                           "memory (the note at the top right)")
       << ".</p>";
  return s + note.str();
}

// ---- Breakdown bars -------------------------------------------------------

// Stacked bars, one row per candidate: its configuration above the bar, the
// bar's total (total_text, then `unit`) beside its end. The axis covers every
// total and `limit` (0 = none) unless the limit is far beyond them
// (kLimitOnAxisFactor); then a note at the top says where it is.
template <size_t N>
std::string StackedBars(const std::string& id, const Term (&terms)[N],
                        const std::vector<const Estimate*>& rows,
                        std::vector<double> (*values)(const Estimate&),
                        const std::string& axis_title, const std::string& unit,
                        std::string (*total_text)(double), double limit,
                        const std::string& limit_label) {
  constexpr double kRow = 40;  // label 16 px, bar 20 px, 4 px apart
  double max_total = 0;
  for (const Estimate* e : rows) {
    double total = 0;
    for (const double v : values(*e)) total += v;
    max_total = std::max(max_total, total);
  }
  const bool limit_on_axis =
      limit > 0 && limit <= kLimitOnAxisFactor * max_total;
  // The right margin holds the longest total ("1234.5 GiB").
  const PlotArea area{20, 22, kChartWidth - 20 - 100,
                      kRow * static_cast<double>(rows.size())};
  const NiceAxis axis =
      NiceAxisCovering(0, std::max(max_total, limit_on_axis ? limit : 0), 8);
  const LinearScale x{axis.lo, axis.hi, area.left, area.right()};
  std::string s =
      SvgOpen(id, kChartWidth, area.bottom() + 46, area,
              SvgAttr("data-rows", static_cast<double>(rows.size())));
  for (const double t : axis.ticks) {
    s += "<line class=\"grid\"" + SvgAttr("x1", x(t)) + SvgAttr("x2", x(t)) +
         SvgAttr("y1", area.top) + SvgAttr("y2", area.bottom()) + "/>";
    s += "<text class=\"tick\"" + SvgAttr("x", x(t)) +
         SvgAttr("y", area.bottom() + 16) + " text-anchor=\"middle\">" +
         FormatNumber(t) + "</text>";
  }
  s += "<text class=\"title\"" + SvgAttr("x", area.left + area.width / 2) +
       SvgAttr("y", area.bottom() + 36) + " text-anchor=\"middle\">" +
       HtmlEscape(axis_title) + "</text>";
  for (size_t r = 0; r < rows.size(); ++r) {
    const double top = area.top + kRow * static_cast<double>(r);
    s += "<text class=\"tick\"" + SvgAttr("x", area.left) +
         SvgAttr("y", top + 12) + ">#" + std::to_string(r + 1) + " " +
         HtmlEscape(ConfigText(*rows[r])) + "</text>";
    const std::vector<double> v = values(*rows[r]);
    double at = 0;
    for (size_t k = 0; k < N; ++k) {
      if (v[k] <= 0) continue;
      s += "<rect" + SvgAttr("data-rank", static_cast<double>(r + 1)) +
           SvgAttr("data-term", terms[k].name) + SvgAttr("data-value", v[k]) +
           SvgAttr("fill", terms[k].color) + SvgAttr("x", x(at)) +
           SvgAttr("y", top + 16) + SvgAttr("width", x(at + v[k]) - x(at)) +
           SvgAttr("height", 20) + "><title>" +
           HtmlEscape("#" + std::to_string(r + 1) + " " + terms[k].label +
                      ": " + FormatNumber(v[k]) + " " + unit) +
           "</title></rect>";
      at += v[k];
    }
    s += "<text class=\"total\"" + SvgAttr("x", x(at) + 4) +
         SvgAttr("y", top + 30) + ">" + total_text(at) + " " +
         HtmlEscape(unit) + "</text>";
  }
  if (limit_on_axis) {
    const double at = x(limit);
    const bool right_of_line = at + 4 + TextPx(limit_label) <= kChartWidth - 4;
    s += "<line class=\"limit\"" + SvgAttr("data-gib", limit) +
         SvgAttr("x1", at) + SvgAttr("x2", at) + SvgAttr("y1", area.top) +
         SvgAttr("y2", area.bottom()) + "/>";
    s += "<text class=\"limit\"" +
         SvgAttr("x", right_of_line ? at + 4 : at - 4) +
         SvgAttr("y", area.top - 6) +
         (right_of_line ? "" : " text-anchor=\"end\"") + ">" +
         HtmlEscape(limit_label) + "</text>";
  } else if (limit > 0) {
    s += "<text class=\"limit\"" + SvgAttr("x", area.right()) +
         SvgAttr("y", area.top - 6) + " text-anchor=\"end\">" +
         HtmlEscape(limit_label + ", beyond this axis \u2192") + "</text>";
  }
  return s + "</svg>";
}

std::string BreakdownSection(const SearchResult& result,
                             const HtmlReportOptions& options) {
  std::vector<const Estimate*> rows;
  for (size_t i = 0;
       i < result.ranked.size() && static_cast<int64_t>(i) < options.top_k;
       ++i) {
    rows.push_back(&result.ranked[i]);
  }
  const double capacity_gib =
      result.ranked.front().memory_capacity_bytes / kGiB;
  std::string s = "<h2>Where the step time goes (top " +
                  std::to_string(rows.size()) + ")</h2>";
  s += StackedBars(
      "time-breakdown", kTimeStyles, rows, &TimeValues,
      "exposed time per optimizer step (s)", "s",
      [](double v) { return FormatNumber(v); }, 0, "");
  s += Legend(kTimeStyles);
  s += "<h2>Memory per GPU (top " + std::to_string(rows.size()) + ")</h2>";
  s += StackedBars(
      "memory-breakdown", kMemoryTerms, rows, &MemoryValuesGib,
      "GiB on the most loaded rank", "GiB",
      [](double v) { return Fixed(v, 2); }, capacity_gib,
      "usable HBM " + Fixed(capacity_gib, 2) + " GiB");
  s += Legend(kMemoryTerms);
  return s;
}

// ---- Pipeline timeline ----------------------------------------------------

std::string TimelineSection(const Inputs& inputs, const Estimate& best) {
  const search_spaces::ParallelConfig& c = best.config;
  const int64_t m = std::max<int64_t>(
      1, c.num_microbatches(inputs.training.global_batch_size));
  const search_spaces::PipelineSchedule schedule(c.pp, c.vpp, m);
  std::string s = "<h2>Pipeline schedule of the best configuration</h2>";
  auto timeline = SimulatePipeline(schedule, StageTimesFromEstimate(best, m));
  if (!timeline.ok()) {
    return s + "<p class=\"note\">" + HtmlEscape(timeline.status().message()) +
           "</p>";
  }
  const PipelineTimeline& t = timeline.value();
  // The summary line: schedule, sizes, bubble, and what is drawn.
  const TimelineView view = PlanTimelineView(t, kTimelinePlotWidth);
  std::string summary =
      std::string(schedule.interleaved() ? "Interleaved 1F1B" : "1F1B") + ": " +
      std::to_string(c.pp) + " stage" + (c.pp == 1 ? "" : "s") +
      (schedule.interleaved()
           ? " x " + std::to_string(c.vpp) + " model chunks (vpp)"
           : std::string()) +
      ", " + std::to_string(m) + " micro-batch" + (m == 1 ? "" : "es") + ", " +
      std::to_string(t.ops.size()) + " steps; bubble " +
      FormatNumber(100 * schedule.BubbleFraction(), 3) +
      "% of the micro-batch work (cost model), " +
      FormatNumber(100 * t.IdleFraction(), 3) +
      "% of the stages' time idle here.";
  if (view.elided) {
    summary += " Drawn: the first and the last " +
               FormatNumber(view.head_end_s, 3) + " s of the " +
               FormatNumber(t.span_s, 4) + " s schedule; the " +
               FormatNumber(view.tail_start_s - view.head_end_s, 3) +
               " s of steady state between are elided (grey gap).";
  }
  s += "<p class=\"note\" id=\"pipeline-summary\">" + HtmlEscape(summary) +
       " Durations: the estimate's per-micro-batch time of a stage, backward "
       "= 2 x forward plus recompute.</p>";
  s += TimelineSvg(t, "pipeline-timeline");
  const bool odd = schedule.interleaved();
  s += std::string(
           "<p class=\"note\"><span class=\"swatch\" "
           "style=\"background:#2da44e\"></span>forward") +
       (odd ? "<span class=\"swatch\" style=\"background:#7ee2a8\"></span>"
              "forward, odd model chunk"
            : "") +
       "<span class=\"swatch\" style=\"background:#0969da\"></span>backward" +
       (odd ? "<span class=\"swatch\" style=\"background:#80ccff\"></span>"
              "backward, odd model chunk"
            : "") +
       "<span class=\"swatch\" style=\"background:#ffebe9;border:1px solid "
       "#ff8182\"></span>idle (bubble)" +
       (view.elided ? "<span class=\"swatch\" style=\"background:#eaeef2;"
                      "border:1px dashed #8c959f\"></span>elided steady state"
                    : "") +
       "</p>";
  return s;
}

// ---- Predicted against measured -------------------------------------------

std::string ValidationSection(
    const std::vector<results::PredictedVsMeasured>& runs,
    const HtmlReportSource& source) {
  std::string s = "<h2>Predicted against measured step time</h2>";
  if (runs.empty()) {
    return s +
           "<p class=\"note\">No measured runs of this search's "
           "candidates are stored" +
           std::string(source.search_id > 0
                           ? " (run 'tune validate --search " +
                                 std::to_string(source.search_id) + "')"
                           : " (report a recorded search with --search ID "
                             "after 'tune validate')") +
           ".</p>";
  }
  double hi = 0;
  for (const auto& r : runs) {
    hi = std::max({hi, r.predicted_step_time_s, r.measured_step_time_s});
  }
  const PlotArea area{70, 12, 400, 300};
  const NiceAxis axis = NiceAxisCovering(0, hi * 1.05, 6);
  constexpr double kInset = 6;  // the points' radius is 5
  const LinearScale x{0, axis.hi, area.left + kInset, area.right() - kInset};
  const LinearScale y{0, axis.hi, area.bottom() - kInset, area.top + kInset};
  s += SvgOpen("validation", kChartWidth, area.bottom() + 48, area,
               SvgAttr("data-points", static_cast<double>(runs.size())));
  s += SvgAxes(area, TicksAt(axis.ticks, x), "measured step time (s)",
               TicksAt(axis.ticks, y), "predicted step time (s)");
  s += "<line class=\"diagonal\"" + SvgAttr("x1", x(0)) + SvgAttr("y1", y(0)) +
       SvgAttr("x2", x(axis.hi)) + SvgAttr("y2", y(axis.hi)) + "/>";
  std::string table =
      "<table><tr><th>rank</th><th class=\"l\">configuration</th><th>run</th>"
      "<th>predicted (s)</th><th>measured (s)</th><th>error</th></tr>";
  for (const auto& r : runs) {
    s += "<circle class=\"validation\" data-kind=\"validation\"" +
         SvgAttr("data-rank", static_cast<double>(r.rank)) +
         SvgAttr("data-predicted-s", r.predicted_step_time_s) +
         SvgAttr("data-measured-s", r.measured_step_time_s) +
         SvgAttr("cx", x(r.measured_step_time_s)) +
         SvgAttr("cy", y(r.predicted_step_time_s)) + " r=\"5\"><title>" +
         HtmlEscape("#" + std::to_string(r.rank) + " " + r.config_text) +
         "</title></circle>";
    table += "<tr><td>" + std::to_string(r.rank) + "</td><td class=\"l\">" +
             HtmlEscape(r.config_text) + "</td><td>" +
             std::to_string(r.training_run_id) + "</td><td>" +
             FormatNumber(r.predicted_step_time_s) + "</td><td>" +
             FormatNumber(r.measured_step_time_s) + "</td><td>" +
             FormatNumber(100 * r.relative_error, 3) + "%</td></tr>";
  }
  s += "</svg>";
  return s + table + "</table>";
}

// ---- Inputs and provenance ------------------------------------------------

std::string InputsSection(const Inputs& inputs, const SearchResult& result,
                          const HtmlReportSource& source) {
  std::ostringstream header;
  PrintInputsHeader(header, inputs, result.ranked.front().calibration);
  std::string s = "<h2>Inputs</h2><pre id=\"inputs\">" +
                  HtmlEscape(header.str()) + "</pre>";
  s += "<p>Evaluated " + std::to_string(result.evaluated) +
       " configurations, " + std::to_string(result.feasible) +
       " feasible; rejected: " + HtmlEscape(FormatRejections(result)) + ".</p>";
  s += "<h2>Reproduce</h2><pre id=\"command\">" + HtmlEscape(source.command) +
       "</pre><p class=\"note\">Generated by <span id=\"version\">" +
       HtmlEscape(source.version) + "</span>";
  if (source.search_id > 0) {
    s += " from search " + std::to_string(source.search_id) + " in " +
         HtmlEscape(source.db_path) +
         " (its recorded inputs searched again, deterministically)";
  }
  return s + ".</p>";
}

// The summary: the best plan's numbers, its memory against the usable HBM,
// and why it wins: its step time against the runner-up and against the
// fastest plan with another tp/pp, and where its step time goes.
std::string SummarySection(const SearchResult& result) {
  const Estimate& best = result.ranked.front();
  const double used_gib = best.memory.total_bytes() / kGiB;
  const double usable_gib = best.memory_capacity_bytes / kGiB;
  std::string s =
      "<p id=\"summary\"><span>Best: <b>" + HtmlEscape(ConfigText(best)) +
      "</b> &mdash; step " + FormatNumber(best.step_time_s) + " s, " +
      FormatNumber(best.tokens_per_s) + " tokens/s, MFU " +
      FormatNumber(100 * best.mfu, 3) + "%, " +
      FormatNumber(best.days_to_train, 3) + " days to train.</span>";
  // GiB with two decimals, as the text table prints them.
  s += "<span id=\"summary-memory\">Memory: " + Fixed(used_gib, 2) + " of " +
       Fixed(usable_gib, 2) + " GiB usable per GPU (" +
       Fixed(100 * used_gib / usable_gib, 1) + "%), " +
       Fixed(usable_gib - used_gib, 2) + " GiB headroom" +
       (search_spaces::IsNearMemoryCapacity(best.memory.total_bytes(),
                                            best.memory_capacity_bytes)
            ? " &mdash; near capacity: allocator fragmentation varies from "
              "run to run, keep a margin with --memory-headroom"
            : "") +
       ".</span>";
  auto versus = [&](const Estimate& other) {
    const double slower = 100 * (other.step_time_s / best.step_time_s - 1);
    return HtmlEscape(ConfigText(other)) + " takes " +
           FormatNumber(other.step_time_s) + " s (" +
           (slower < 0.05 ? std::string("the same within 0.05%")
                          : "+" + FormatNumber(slower, 2) + "%") +
           ")";
  };
  std::string why = "Why this plan: ";
  if (result.ranked.size() == 1) {
    why += "it is the only feasible one";
  } else {
    why += "the 2nd best, " + versus(result.ranked[1]);
    const Estimate* other_shape = nullptr;
    for (const Estimate& e : result.ranked) {
      if (e.config.tp != best.config.tp || e.config.pp != best.config.pp) {
        other_shape = &e;
        break;
      }
    }
    why += other_shape != nullptr
               ? "; the fastest with another tp/pp, " + versus(*other_shape)
               : "; no feasible plan has another tp/pp";
  }
  const costmodel::TimeBreakdown& t = best.time;
  const double comm =
      t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.pp_comm_s + t.dp_comm_s;
  auto share = [&](double seconds) {
    return FormatNumber(100 * seconds / best.step_time_s, 3) + "%";
  };
  why += ". Its step: compute " + share(t.compute_s + t.recompute_s) +
         " (recompute " + share(t.recompute_s) + "), pipeline bubble " +
         share(t.pp_bubble_s) + ", exposed communication " + share(comm) + ".";
  s += "<span id=\"summary-why\">" + why + "</span></p>";
  return s;
}

}  // namespace

std::vector<size_t> ParetoFrontier(const std::vector<Estimate>& ranked) {
  std::vector<size_t> order(ranked.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Ascending memory, then step time, then rank: a point is on the frontier
  // when it is faster than every point that needs no more memory.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double ma = ranked[a].memory.total_bytes();
    const double mb = ranked[b].memory.total_bytes();
    if (ma != mb) return ma < mb;
    return ranked[a].step_time_s < ranked[b].step_time_s;
  });
  std::vector<size_t> frontier;
  for (const size_t i : order) {
    if (frontier.empty() ||
        ranked[i].step_time_s < ranked[frontier.back()].step_time_s) {
      frontier.push_back(i);
    }
  }
  return frontier;
}

Sample EveryNth(size_t count, size_t limit,
                const std::vector<size_t>& exclude) {
  Sample sample;
  if (limit == 0) return sample;
  sample.stride = count <= limit ? 1 : (count + limit - 1) / limit;
  for (size_t i = 0; i < count; i += sample.stride) {
    if (!std::binary_search(exclude.begin(), exclude.end(), i)) {
      sample.indices.push_back(i);
    }
  }
  return sample;
}

std::string HtmlPage(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width\">"
         "<title>" +
         HtmlEscape(title) + "</title><style>" + kStyle +
         "</style></head>\n<body><h1>" + HtmlEscape(title) + "</h1>\n" + body +
         "\n</body></html>\n";
}

std::string RenderHtmlReport(
    const Inputs& inputs, const SearchResult& result,
    const std::vector<results::PredictedVsMeasured>& validations,
    const HtmlReportSource& source, const HtmlReportOptions& options,
    const ScaleReport* scale, const PlanExplanation* explanation) {
  const std::string title = "meshtune: " + inputs.model.name + " on " +
                            std::to_string(inputs.training.num_gpus) + " x " +
                            inputs.cluster.name;
  std::string body = SummarySection(result);
  body += ParetoSection(result, options);
  body += BreakdownSection(result, options);
  if (explanation != nullptr) body += ExplanationHtml(inputs, *explanation);
  body += TimelineSection(inputs, result.ranked.front());
  if (scale != nullptr) body += ScaleSectionHtml(*scale);
  body += ValidationSection(validations, source);
  body += InputsSection(inputs, result, source);
  return HtmlPage(title, body);
}

}  // namespace meshtune::tuner
