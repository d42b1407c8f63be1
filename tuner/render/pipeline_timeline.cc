#include "tuner/render/pipeline_timeline.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "tuner/render/svg_chart.h"

namespace meshtune::tuner {
namespace {

using search_spaces::PipelineSchedule;

constexpr double kUnfinished = -1;

}  // namespace

StageMicrobatchTimes StageTimesFromEstimate(const costmodel::Estimate& e,
                                            int64_t num_microbatches) {
  const double m = static_cast<double>(std::max<int64_t>(1, num_microbatches));
  const costmodel::TimeBreakdown& t = e.time;
  const double comm = t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.pp_comm_s;
  StageMicrobatchTimes out;
  out.forward_s = (t.compute_s / 3 + comm / 2) / m;
  out.backward_s = (2 * t.compute_s / 3 + t.recompute_s + comm / 2) / m;
  return out;
}

double PipelineTimeline::IdleFraction() const {
  if (span_s <= 0 || pp <= 0) return 0;
  double busy = 0;
  for (const TimelineOp& op : ops) busy += op.end_s - op.start_s;
  return 1.0 - busy / (static_cast<double>(pp) * span_s);
}

StatusOr<PipelineTimeline> SimulatePipeline(const PipelineSchedule& schedule,
                                            const StageMicrobatchTimes& times) {
  const int64_t pp = schedule.pp();
  const int64_t vpp = schedule.vpp();
  const int64_t m = schedule.num_microbatches();
  const int64_t stages = pp * vpp;  // virtual stages
  const double fwd = times.forward_s / vpp;
  const double bwd = times.backward_s / vpp;

  // Finish time of (forward?, micro-batch, virtual stage); chunk c of rank r
  // is virtual stage c·pp + r (Megatron's interleaved layer assignment).
  std::vector<double> finished(2 * m * stages, kUnfinished);
  auto slot = [&](bool forward, int64_t mb, int64_t stage) {
    return (forward ? 0 : m * stages) + mb * stages + stage;
  };

  std::vector<std::vector<PipelineSchedule::Step>> steps(pp);
  for (int64_t r = 0; r < pp; ++r) steps[r] = schedule.StepsForRank(r);
  std::vector<size_t> next(pp, 0);
  std::vector<double> free_at(pp, 0.0);
  std::vector<std::vector<TimelineOp>> per_rank(pp);

  // Each pass runs every rank as far as its inputs are ready; a pass that
  // runs nothing while steps remain means the order deadlocks.
  size_t remaining = 0;
  for (const auto& s : steps) remaining += s.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int64_t r = 0; r < pp; ++r) {
      while (next[r] < steps[r].size()) {
        const PipelineSchedule::Step& step = steps[r][next[r]];
        const bool forward =
            step.kind == PipelineSchedule::Step::Kind::kForward;
        const int64_t stage = step.chunk * pp + r;
        double ready = 0;
        if (forward && stage > 0) {
          ready = finished[slot(true, step.microbatch, stage - 1)];
        } else if (!forward) {
          ready = stage + 1 < stages
                      ? finished[slot(false, step.microbatch, stage + 1)]
                      : finished[slot(true, step.microbatch, stage)];
        }
        if (ready == kUnfinished) break;
        TimelineOp op;
        op.rank = r;
        op.forward = forward;
        op.microbatch = step.microbatch;
        op.chunk = step.chunk;
        op.start_s = std::max(free_at[r], ready);
        op.end_s = op.start_s + (forward ? fwd : bwd);
        free_at[r] = op.end_s;
        finished[slot(forward, step.microbatch, stage)] = op.end_s;
        per_rank[r].push_back(op);
        ++next[r];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      return Status::Internal(
          "the pipeline schedule (pp " + std::to_string(pp) + ", vpp " +
          std::to_string(vpp) + ", " + std::to_string(m) +
          " micro-batches) cannot complete: every rank waits on another "
          "(a bug in search_spaces/pipeline_schedule.cc)");
    }
  }

  PipelineTimeline timeline;
  timeline.pp = pp;
  timeline.vpp = vpp;
  timeline.num_microbatches = m;
  for (int64_t r = 0; r < pp; ++r) {
    timeline.span_s = std::max(timeline.span_s, free_at[r]);
    timeline.ops.insert(timeline.ops.end(), per_rank[r].begin(),
                        per_rank[r].end());
  }
  return timeline;
}

TimelineView PlanTimelineView(const PipelineTimeline& timeline,
                              double width_px) {
  TimelineView view;
  const double span = timeline.span_s > 0 ? timeline.span_s : 1;
  view.px_per_s = width_px / span;
  view.head_end_s = span;
  view.tail_start_s = span;
  double shortest = 0;
  for (const TimelineOp& op : timeline.ops) {
    const double d = op.end_s - op.start_s;
    if (d > 0 && (shortest == 0 || d < shortest)) shortest = d;
  }
  if (shortest == 0 || shortest * view.px_per_s >= TimelineView::kMinStepPx) {
    return view;
  }
  const double px_per_s = TimelineView::kMinStepPx / shortest;
  const double window_s = (width_px - TimelineView::kGapPx) / 2 / px_per_s;
  if (window_s <= 0 || 2 * window_s >= span) return view;
  view.elided = true;
  view.px_per_s = px_per_s;
  view.head_end_s = window_s;
  view.tail_start_s = span - window_s;
  return view;
}

std::string TimelineSvg(const PipelineTimeline& timeline,
                        const std::string& chart_id) {
  constexpr double kWidth = 960;
  // Rows shrink for deep pipelines; labels then go on every k-th stage so
  // that they do not overlap (a label is about 12 pixels tall).
  const double row_height =
      timeline.pp <= 16
          ? 22
          : std::max(8.0, 352.0 / static_cast<double>(timeline.pp));
  const int64_t label_every =
      static_cast<int64_t>(std::ceil(14.0 / row_height));
  const PlotArea area{kWidth - 20 - kTimelinePlotWidth, 10, kTimelinePlotWidth,
                      row_height * static_cast<double>(timeline.pp)};
  const double span = timeline.span_s > 0 ? timeline.span_s : 1;
  const TimelineView view = PlanTimelineView(timeline, area.width);
  const double head_px = view.head_end_s * view.px_per_s;
  // Time to pixels: the head window, then the gap, then the tail window.
  auto px = [&](double t) {
    if (!view.elided || t <= view.head_end_s) {
      return area.left + t * view.px_per_s;
    }
    return area.left + head_px + TimelineView::kGapPx +
           (t - view.tail_start_s) * view.px_per_s;
  };
  // The drawn pieces of [from, to]: its parts inside the windows, each at
  // least 2 pixels wide.
  auto pieces = [&](double from, double to) {
    std::vector<std::pair<double, double>> out;
    auto add = [&](double a, double b) {
      if (b > a && (b - a) * view.px_per_s >= 2 - 1e-9) out.push_back({a, b});
    };
    add(from, std::min(to, view.head_end_s));
    if (view.elided) add(std::max(from, view.tail_start_s), to);
    return out;
  };

  std::string body;
  size_t drawn = 0;
  // Ops are stored rank by rank in execution order, so gaps are the spaces
  // between consecutive ops of a rank (and before the first, after the
  // last up to the span).
  size_t i = 0;
  for (int64_t r = 0; r < timeline.pp; ++r) {
    const double y = area.top + row_height * static_cast<double>(r);
    const double bar = std::max(2.0, row_height - 4);
    if (r % label_every == 0) {
      body += "<text class=\"tick\"" + SvgAttr("x", area.left - 6) +
              SvgAttr("y", y + row_height / 2 + 4) +
              " text-anchor=\"end\">stage " + std::to_string(r) + "</text>";
    }
    auto idle = [&](double from, double to) {
      for (const auto& [a, b] : pieces(from, to)) {
        body += "<rect class=\"idle\" data-kind=\"idle\"" +
                SvgAttr("data-rank", static_cast<double>(r)) +
                SvgAttr("x", px(a)) + SvgAttr("y", y + (row_height - bar) / 2) +
                SvgAttr("width", px(b) - px(a)) + SvgAttr("height", bar) + "/>";
      }
    };
    double last_end = 0;
    for (; i < timeline.ops.size() && timeline.ops[i].rank == r; ++i) {
      const TimelineOp& op = timeline.ops[i];
      idle(last_end, op.start_s);
      // Chunks of the interleaved schedule alternate in lightness.
      const std::string cls = std::string(op.forward ? "fwd" : "bwd") +
                              (op.chunk % 2 == 1 ? " odd" : "");
      for (const auto& [a, b] : pieces(op.start_s, op.end_s)) {
        body += "<rect" + SvgAttr("class", cls) +
                SvgAttr("data-kind", op.forward ? "forward" : "backward") +
                SvgAttr("data-rank", static_cast<double>(r)) +
                SvgAttr("data-microbatch", static_cast<double>(op.microbatch)) +
                SvgAttr("data-chunk", static_cast<double>(op.chunk)) +
                SvgAttr("x", px(a)) + SvgAttr("y", y + (row_height - bar) / 2) +
                SvgAttr("width", px(b) - px(a)) + SvgAttr("height", bar) + "/>";
        ++drawn;
      }
      last_end = op.end_s;
    }
    idle(last_end, span);
  }

  const double height = area.bottom() + 46;
  std::string s = SvgOpen(
      chart_id, kWidth, height, area,
      SvgAttr("data-ops", static_cast<double>(drawn)) +
          SvgAttr("data-ops-total", static_cast<double>(timeline.ops.size())) +
          (view.elided ? SvgAttr("data-elided-from-s", view.head_end_s) +
                             SvgAttr("data-elided-to-s", view.tail_start_s)
                       : std::string()));
  // Ticks inside each drawn window, about one per 100 pixels.
  std::vector<double> ticks;
  const double window_px = view.elided ? head_px : area.width;
  const int per_window = std::max(2, static_cast<int>(window_px / 100));
  ticks = NiceTicks(0, view.head_end_s, per_window);
  if (view.elided) {
    for (const double t : NiceTicks(view.tail_start_s, span, per_window)) {
      ticks.push_back(t);
    }
  }
  for (const double t : ticks) {
    s += "<line class=\"grid\"" + SvgAttr("x1", px(t)) + SvgAttr("x2", px(t)) +
         SvgAttr("y1", area.top) + SvgAttr("y2", area.bottom()) + "/>";
    s += "<text class=\"tick\"" + SvgAttr("x", px(t)) +
         SvgAttr("y", area.bottom() + 16) + " text-anchor=\"middle\">" +
         FormatNumber(t) + "</text>";
  }
  s += "<text class=\"title\"" + SvgAttr("x", area.left + area.width / 2) +
       SvgAttr("y", area.bottom() + 36) +
       " text-anchor=\"middle\">time in the step (s)</text>";
  s += body;
  if (view.elided) {
    s += "<rect class=\"elided\"" + SvgAttr("x", area.left + head_px + 2) +
         SvgAttr("y", area.top) + SvgAttr("width", TimelineView::kGapPx - 4) +
         SvgAttr("height", area.height) + "><title>" +
         HtmlEscape(FormatNumber(view.tail_start_s - view.head_end_s) +
                    " s of steady state elided (" +
                    FormatNumber(view.head_end_s) + " s to " +
                    FormatNumber(view.tail_start_s) + " s)") +
         "</title></rect>";
  }
  return s + "</svg>";
}

}  // namespace meshtune::tuner
