#include "tuner/render/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <sstream>
#include <string_view>
#include <utility>

#include "costmodel/estimate.h"
#include "search_spaces/parallel_config.h"
#include "search_spaces/pipeline_schedule.h"
#include "tuner/render/pipeline_timeline.h"
#include "tuner/render/report_table.h"
#include "tuner/render/scale_html.h"
#include "tuner/render/svg_chart.h"

namespace meshtune::tuner {
namespace {

using costmodel::Estimate;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kChartWidth = 960;
// The Pareto axes reach this factor beyond the feasible candidates.
constexpr double kOutOfMemoryRoom = 1.5;

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
rect.idle{fill:#ffebe9;stroke:#ff8182;stroke-width:.5}
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

std::string SvgOpen(const std::string& id, double height,
                    const std::string& extra_attrs) {
  return "<svg" + SvgAttr("id", id) +
         " class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\"" +
         SvgAttr("viewBox", "0 0 " + FormatNumber(kChartWidth, 6) + " " +
                                FormatNumber(height, 6)) +
         SvgAttr("width", kChartWidth) + SvgAttr("height", height) +
         extra_attrs + ">";
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

  // Axes over the feasible candidates and the HBM limit, with room for
  // the nearer out-of-memory ones: those needing many times the HBM (pp 1
  // with a 175B model) would squeeze every feasible point into a corner.
  const double capacity_gib = ranked.front().memory_capacity_bytes / kGiB;
  double max_mem = capacity_gib;
  double max_time = 0;
  for (const Estimate& e : ranked) {
    max_mem = std::max(max_mem, e.memory.total_bytes() / kGiB);
    max_time = std::max(max_time, e.step_time_s);
  }
  max_mem *= kOutOfMemoryRoom;
  max_time *= kOutOfMemoryRoom;
  std::vector<size_t> oom_shown;
  for (const size_t i : oom.indices) {
    const Estimate& e = result.out_of_memory[i];
    if (e.memory.total_bytes() / kGiB <= max_mem && e.step_time_s <= max_time) {
      oom_shown.push_back(i);
    }
  }

  const PlotArea area{70, 12, kChartWidth - 90, 380};
  const std::vector<double> x_ticks = NiceTicks(0, max_mem, 10);
  const std::vector<double> y_ticks = NiceTicks(0, max_time, 8);
  const LinearScale x{0, x_ticks.back(), area.left, area.right()};
  const LinearScale y{0, y_ticks.back(), area.bottom(), area.top};
  const size_t plotted =
      frontier.size() + feasible.indices.size() + oom_shown.size();

  std::string s = "<h2>Step time against memory per GPU</h2>";
  s +=
      SvgOpen("pareto", area.bottom() + 48,
              SvgAttr("data-points", static_cast<double>(plotted)) +
                  SvgAttr("data-feasible", static_cast<double>(ranked.size())) +
                  SvgAttr("data-out-of-memory",
                          static_cast<double>(result.out_of_memory.size())) +
                  SvgAttr("data-out-of-memory-shown",
                          static_cast<double>(oom_shown.size())));
  s += SvgAxes(area, x, x_ticks, "memory per GPU, most loaded rank (GiB)", y,
               y_ticks, "step time (s)");
  s += "<line class=\"limit\" id=\"hbm-limit\"" +
       SvgAttr("data-gib", capacity_gib) + SvgAttr("x1", x(capacity_gib)) +
       SvgAttr("x2", x(capacity_gib)) + SvgAttr("y1", area.top) +
       SvgAttr("y2", area.bottom()) + "/>";
  s += "<text class=\"limit\"" + SvgAttr("x", x(capacity_gib) + 4) +
       SvgAttr("y", area.top + 12) + ">usable HBM " +
       HtmlEscape(FormatNumber(capacity_gib, 4)) + " GiB</text>";

  auto point = [&](const Estimate& e, const std::string& kind, int64_t rank) {
    const double mem = e.memory.total_bytes() / kGiB;
    std::string title = ConfigText(e) + "\nstep " +
                        FormatNumber(e.step_time_s) + " s, " +
                        FormatNumber(mem) + " GiB per GPU";
    if (rank > 0) {
      title = "#" + std::to_string(rank) + " " + title + ", MFU " +
              FormatNumber(100 * e.mfu, 3) + "%";
    } else {
      title += "\ninfeasible: " +
               (e.infeasible_reason.empty() ? std::string("out_of_memory")
                                            : e.infeasible_reason) +
               " (needs " + FormatNumber(mem) + " GiB, " +
               FormatNumber(e.memory_capacity_bytes / kGiB) + " usable)";
    }
    std::string cls = kind;
    if (rank == 1) cls += " best";
    std::string c = "<circle" + SvgAttr("class", cls) +
                    SvgAttr("data-kind", kind) +
                    SvgAttr("data-step-time-s", e.step_time_s) +
                    SvgAttr("data-memory-gib", mem);
    if (rank > 0) c += SvgAttr("data-rank", static_cast<double>(rank));
    if (rank <= 0) {
      c += SvgAttr("data-reason", e.infeasible_reason.empty()
                                      ? "out_of_memory"
                                      : e.infeasible_reason);
    }
    c += SvgAttr("cx", x(mem)) + SvgAttr("cy", y(e.step_time_s)) +
         SvgAttr("r", rank == 1 ? 6 : (kind == "frontier" ? 4.5 : 3)) +
         "><title>" + HtmlEscape(title) + "</title></circle>";
    return c;
  };
  // Drawn back to front: rejected, feasible, frontier line and points.
  for (const size_t i : oom_shown) {
    s += point(result.out_of_memory[i], "out_of_memory", 0);
  }
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
       << "out of memory: " << oom_shown.size() << " of "
       << result.out_of_memory.size() << " shown (";
  if (oom.stride > 1) note << "every " << oom.stride << "th searched, ";
  note << "those within " << kOutOfMemoryRoom
       << "x the feasible candidates' memory and step time)";
  note << ". Hover a point for its configuration; the dashed line is the "
          "usable HBM per GPU.</p>";
  return s + note.str();
}

// ---- Breakdown bars -------------------------------------------------------

template <size_t N>
std::string StackedBars(const std::string& id, const Term (&terms)[N],
                        const std::vector<const Estimate*>& rows,
                        std::vector<double> (*values)(const Estimate&),
                        const std::string& unit_title, double limit,
                        const std::string& limit_label) {
  constexpr double kRow = 30;
  double max_total = limit;
  for (const Estimate* e : rows) {
    double total = 0;
    for (const double v : values(*e)) total += v;
    max_total = std::max(max_total, total);
  }
  const PlotArea area{340, 10, kChartWidth - 380,
                      kRow * static_cast<double>(rows.size())};
  const std::vector<double> ticks = NiceTicks(0, max_total * 1.02, 8);
  const LinearScale x{0, ticks.back(), area.left, area.right()};
  std::string s =
      SvgOpen(id, area.bottom() + 46,
              SvgAttr("data-rows", static_cast<double>(rows.size())));
  for (const double t : ticks) {
    s += "<line class=\"grid\"" + SvgAttr("x1", x(t)) + SvgAttr("x2", x(t)) +
         SvgAttr("y1", area.top) + SvgAttr("y2", area.bottom()) + "/>";
    s += "<text class=\"tick\"" + SvgAttr("x", x(t)) +
         SvgAttr("y", area.bottom() + 16) + " text-anchor=\"middle\">" +
         FormatNumber(t) + "</text>";
  }
  s += "<text class=\"title\"" + SvgAttr("x", area.left + area.width / 2) +
       SvgAttr("y", area.bottom() + 36) + " text-anchor=\"middle\">" +
       HtmlEscape(unit_title) + "</text>";
  for (size_t r = 0; r < rows.size(); ++r) {
    const double top = area.top + kRow * static_cast<double>(r);
    s += "<text class=\"tick\"" + SvgAttr("x", area.left - 6) +
         SvgAttr("y", top + kRow / 2 + 4) + " text-anchor=\"end\">#" +
         std::to_string(r + 1) + " " + HtmlEscape(ConfigText(*rows[r])) +
         "</text>";
    const std::vector<double> v = values(*rows[r]);
    double at = 0;
    for (size_t k = 0; k < N; ++k) {
      if (v[k] <= 0) continue;
      s += "<rect" + SvgAttr("data-rank", static_cast<double>(r + 1)) +
           SvgAttr("data-term", terms[k].name) + SvgAttr("data-value", v[k]) +
           SvgAttr("fill", terms[k].color) + SvgAttr("x", x(at)) +
           SvgAttr("y", top + 4) + SvgAttr("width", x(at + v[k]) - x(at)) +
           SvgAttr("height", kRow - 8) + "><title>" +
           HtmlEscape("#" + std::to_string(r + 1) + " " + terms[k].label +
                      ": " + FormatNumber(v[k])) +
           "</title></rect>";
      at += v[k];
    }
    s += "<text class=\"tick\"" + SvgAttr("x", x(at) + 4) +
         SvgAttr("y", top + kRow / 2 + 4) + ">" + FormatNumber(at) + "</text>";
  }
  if (limit > 0) {
    s += "<line class=\"limit\"" + SvgAttr("x1", x(limit)) +
         SvgAttr("x2", x(limit)) + SvgAttr("y1", area.top) +
         SvgAttr("y2", area.bottom()) + "/>";
    s += "<text class=\"limit\"" + SvgAttr("x", x(limit) - 4) +
         SvgAttr("y", area.bottom() - 4) + " text-anchor=\"end\">" +
         HtmlEscape(limit_label) + "</text>";
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
  s += StackedBars("time-breakdown", kTimeStyles, rows, &TimeValues,
                   "exposed time per optimizer step (s)", 0, "");
  s += Legend(kTimeStyles);
  s += "<h2>Memory per GPU (top " + std::to_string(rows.size()) + ")</h2>";
  s += StackedBars("memory-breakdown", kMemoryTerms, rows, &MemoryValuesGib,
                   "GiB on the most loaded rank", capacity_gib,
                   "usable HBM " + FormatNumber(capacity_gib) + " GiB");
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
  s += "<p class=\"note\">" +
       std::string(schedule.interleaved() ? "Interleaved 1F1B" : "1F1B") +
       ", " + std::to_string(c.pp) + " stage" + (c.pp == 1 ? "" : "s") +
       (schedule.interleaved() ? " x " + std::to_string(c.vpp) + " model chunks"
                               : std::string()) +
       ", " + std::to_string(m) + " micro-batches. Idle (bubble) " +
       FormatNumber(100 * t.IdleFraction(), 3) + "% of the stages' time; " +
       "the cost model's bubble fraction is " +
       FormatNumber(100 * schedule.BubbleFraction(), 3) +
       "% of the micro-batch work. Durations: the estimate's per-micro-batch "
       "time of a stage, backward = 2 x forward plus recompute.</p>";
  s += TimelineSvg(t, "pipeline-timeline");
  s +=
      "<p class=\"note\"><span class=\"swatch\" "
      "style=\"background:#2da44e\"></span>forward"
      "<span class=\"swatch\" style=\"background:#0969da\"></span>backward"
      "<span class=\"swatch\" style=\"background:#ffebe9;border:1px solid "
      "#ff8182\"></span>idle" +
      std::string(schedule.interleaved() ? " (lighter shades: odd model chunks)"
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
  const std::vector<double> ticks = NiceTicks(0, hi * 1.05, 6);
  const LinearScale x{0, ticks.back(), area.left, area.right()};
  const LinearScale y{0, ticks.back(), area.bottom(), area.top};
  s += SvgOpen("validation", area.bottom() + 48,
               SvgAttr("data-points", static_cast<double>(runs.size())));
  s += SvgAxes(area, x, ticks, "measured step time (s)", y, ticks,
               "predicted step time (s)");
  s += "<line class=\"diagonal\"" + SvgAttr("x1", x(0)) + SvgAttr("y1", y(0)) +
       SvgAttr("x2", x(ticks.back())) + SvgAttr("y2", y(ticks.back())) + "/>";
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

std::string SummarySection(const SearchResult& result) {
  const Estimate& best = result.ranked.front();
  return "<p id=\"summary\">Best: <b>" + HtmlEscape(ConfigText(best)) +
         "</b> &mdash; step " + FormatNumber(best.step_time_s) + " s, " +
         FormatNumber(best.tokens_per_s) + " tokens/s, MFU " +
         FormatNumber(100 * best.mfu, 3) + "%, " +
         FormatNumber(best.memory.total_bytes() / kGiB) + " of " +
         FormatNumber(best.memory_capacity_bytes / kGiB) + " GiB per GPU, " +
         FormatNumber(best.days_to_train, 3) + " days to train.</p>";
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
    const ScaleReport* scale) {
  const std::string title = "meshtune: " + inputs.model.name + " on " +
                            std::to_string(inputs.training.num_gpus) + " x " +
                            inputs.cluster.name;
  std::string body = SummarySection(result);
  body += ParetoSection(result, options);
  body += BreakdownSection(result, options);
  body += TimelineSection(inputs, result.ranked.front());
  if (scale != nullptr) body += ScaleSectionHtml(*scale);
  body += ValidationSection(validations, source);
  body += InputsSection(inputs, result, source);
  return HtmlPage(title, body);
}

}  // namespace meshtune::tuner
