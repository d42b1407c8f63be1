#include "tuner/render/pipeline_timeline.h"

#include <algorithm>

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

std::string TimelineSvg(const PipelineTimeline& timeline,
                        const std::string& chart_id) {
  constexpr double kRowHeight = 22;
  constexpr double kWidth = 960;
  const PlotArea area{70, 10, kWidth - 90,
                      kRowHeight * static_cast<double>(timeline.pp)};
  const double span = timeline.span_s > 0 ? timeline.span_s : 1;
  const LinearScale x{0, span, area.left, area.right()};
  const double height = area.bottom() + 46;
  std::string s =
      "<svg" + SvgAttr("id", chart_id) +
      " class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\"" +
      SvgAttr("viewBox", "0 0 " + FormatNumber(kWidth, 6) + " " +
                             FormatNumber(height, 6)) +
      SvgAttr("width", kWidth) + SvgAttr("height", height) +
      SvgAttr("data-ops", static_cast<double>(timeline.ops.size())) + ">";
  const std::vector<double> ticks = NiceTicks(0, span, 8);
  for (const double t : ticks) {
    const std::string px = FormatNumber(x(t), 6);
    s += "<line class=\"grid\" x1=\"" + px + "\" x2=\"" + px + "\" y1=\"" +
         FormatNumber(area.top, 6) + "\" y2=\"" +
         FormatNumber(area.bottom(), 6) + "\"/>";
    s += "<text class=\"tick\" x=\"" + px + "\" y=\"" +
         FormatNumber(area.bottom() + 16, 6) + "\" text-anchor=\"middle\">" +
         FormatNumber(t) + "</text>";
  }
  s += "<text class=\"title\"" + SvgAttr("x", area.left + area.width / 2) +
       SvgAttr("y", area.bottom() + 36) +
       " text-anchor=\"middle\">time in the step (s)</text>";

  // Ops are stored rank by rank in execution order, so gaps are the spaces
  // between consecutive ops of a rank (and before the first, after the
  // last up to the span).
  size_t i = 0;
  for (int64_t r = 0; r < timeline.pp; ++r) {
    const double y = area.top + kRowHeight * static_cast<double>(r);
    s += "<text class=\"tick\"" + SvgAttr("x", area.left - 6) +
         SvgAttr("y", y + kRowHeight / 2 + 4) + " text-anchor=\"end\">stage " +
         std::to_string(r) + "</text>";
    auto idle = [&](double from, double to) {
      if (to - from <= span * 1e-9) return;
      s += "<rect class=\"idle\" data-kind=\"idle\"" +
           SvgAttr("data-rank", static_cast<double>(r)) +
           SvgAttr("x", x(from)) + SvgAttr("y", y + 2) +
           SvgAttr("width", x(to) - x(from)) +
           SvgAttr("height", kRowHeight - 4) + "/>";
    };
    double last_end = 0;
    for (; i < timeline.ops.size() && timeline.ops[i].rank == r; ++i) {
      const TimelineOp& op = timeline.ops[i];
      idle(last_end, op.start_s);
      // Chunks of the interleaved schedule alternate in lightness.
      const std::string cls = std::string(op.forward ? "fwd" : "bwd") +
                              (op.chunk % 2 == 1 ? " odd" : "");
      s += "<rect" + SvgAttr("class", cls) +
           SvgAttr("data-kind", op.forward ? "forward" : "backward") +
           SvgAttr("data-rank", static_cast<double>(r)) +
           SvgAttr("data-microbatch", static_cast<double>(op.microbatch)) +
           SvgAttr("data-chunk", static_cast<double>(op.chunk)) +
           SvgAttr("x", x(op.start_s)) + SvgAttr("y", y + 2) +
           SvgAttr("width", x(op.end_s) - x(op.start_s)) +
           SvgAttr("height", kRowHeight - 4) + "/>";
      last_end = op.end_s;
    }
    idle(last_end, span);
  }
  s += "</svg>";
  return s;
}

}  // namespace meshtune::tuner
