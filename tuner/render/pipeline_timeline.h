// The pipeline schedule of one configuration laid out in time, for the HTML
// report's timeline chart: every pipeline rank runs its
// PipelineSchedule::StepsForRank list in order, and each step starts when
// its rank is free and its input is ready (a forward needs the previous
// virtual stage's forward of the same micro-batch, a backward the next
// virtual stage's backward). The gaps are the pipeline bubble.
//
// Durations come from the estimate: one micro-batch's time on a whole stage
// is the estimate's per-micro-batch terms (compute, recompute, TP/CP/EP/PP
// communication) divided by the number of micro-batches. The estimate does
// not split forward from backward, so the split is the usual one for
// transformer GEMMs: backward = 2 x forward, recompute on the backward side,
// communication half and half. Point-to-point latency between stages is
// inside those terms, not added again.
#ifndef MESHTUNE_TUNER_RENDER_PIPELINE_TIMELINE_H_
#define MESHTUNE_TUNER_RENDER_PIPELINE_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/estimate.h"
#include "search_spaces/pipeline_schedule.h"
#include "search_spaces/status.h"

namespace meshtune::tuner {

// One micro-batch through all layers of one pipeline stage.
struct StageMicrobatchTimes {
  double forward_s = 0;
  double backward_s = 0;  // including recompute
};

// The split described above; `num_microbatches` >= 1.
StageMicrobatchTimes StageTimesFromEstimate(const costmodel::Estimate& e,
                                            int64_t num_microbatches);

struct TimelineOp {
  int64_t rank = 0;
  bool forward = true;
  int64_t microbatch = 0;
  int64_t chunk = 0;
  double start_s = 0;
  double end_s = 0;
};

struct PipelineTimeline {
  int64_t pp = 1;
  int64_t vpp = 1;
  int64_t num_microbatches = 1;
  std::vector<TimelineOp> ops;  // rank by rank, each in execution order
  double span_s = 0;            // end of the last op
  // Idle time of all ranks before span_s over pp·span_s.
  double IdleFraction() const;
};

// Lays out `schedule` with per-stage micro-batch times `times` (a chunk
// takes 1/vpp of them). An order that cannot complete (a rank waiting on a
// step that waits on it) is Internal.
StatusOr<PipelineTimeline> SimulatePipeline(
    const search_spaces::PipelineSchedule& schedule,
    const StageMicrobatchTimes& times);

// How the timeline fits the chart's width. A schedule with many
// micro-batches (GPT-3 175B on 1024 GPUs: 8 stages x 12 chunks x 24
// micro-batches = 4608 steps) has steps far narrower than a pixel at full
// width, which the browser blends into colours the legend does not have and
// in which the bubble disappears. Then only the first and the last part of
// the step are drawn, at a scale where the shortest step is kMinStepPx
// wide, with an explicit gap (the elided steady state) between them: the
// warm-up and the cool-down, where the bubble is, stay visible.
struct TimelineView {
  static constexpr double kMinStepPx = 3;  // shortest step drawn, pixels
  static constexpr double kGapPx = 44;     // the elision gap, pixels
  bool elided = false;
  double px_per_s = 0;
  double head_end_s = 0;    // drawn: [0, head_end_s] ...
  double tail_start_s = 0;  // ... and [tail_start_s, span_s]
};

// The width of TimelineSvg's plot, pixels (in a 960-pixel chart).
inline constexpr double kTimelinePlotWidth = 870;

// The view of `timeline` in a plot `width_px` pixels wide.
TimelineView PlanTimelineView(const PipelineTimeline& timeline,
                              double width_px);

// The timeline as an inline SVG with id `chart_id`, laid out by
// PlanTimelineView: one row per rank, a <rect> per step with
// data-kind="forward"|"backward", data-rank, data-microbatch, data-chunk, a
// <rect data-kind="idle"> per gap, a <rect class="elided"> for the elided
// part. A step or gap (or the part of one inside a drawn window) narrower
// than 2 pixels is not drawn; the <svg> has data-ops (steps drawn) and
// data-ops-total (all steps).
std::string TimelineSvg(const PipelineTimeline& timeline,
                        const std::string& chart_id);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_RENDER_PIPELINE_TIMELINE_H_
