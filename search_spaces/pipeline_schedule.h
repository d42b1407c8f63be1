// PipelineSchedule: Megatron's 1F1B and interleaved-1F1B schedules.
//
// The cost model reads the bubble and the number of in-flight micro-batches
// from it; the engine will execute its step list. Formulas: Narayanan et al.
// 2021 (arXiv:2104.04473 §2.2): bubble fraction (pp−1)/m for 1F1B and
// (pp−1)/(vpp·m) interleaved; Megatron-Core schedules.py warm-up counts.
#ifndef MESHTUNE_SEARCH_SPACES_PIPELINE_SCHEDULE_H_
#define MESHTUNE_SEARCH_SPACES_PIPELINE_SCHEDULE_H_

#include <cstdint>
#include <vector>

namespace meshtune::search_spaces {

class PipelineSchedule {
 public:
  // REQUIRES: pp >= 1, vpp >= 1, num_microbatches >= 1. Megatron runs the
  // interleaved schedule only when num_microbatches is a multiple of pp
  // (schedules.py, microbatch_group_size_per_vp_stage = pp); the step order
  // below is still defined otherwise, but it is not one Megatron would run.
  PipelineSchedule(int64_t pp, int64_t vpp, int64_t num_microbatches);

  int64_t pp() const { return pp_; }
  int64_t vpp() const { return vpp_; }
  int64_t num_microbatches() const { return m_; }
  bool interleaved() const { return vpp_ > 1; }

  // Idle time per step as a multiple of one micro-batch's fwd+bwd time on a
  // whole stage: (pp−1)/vpp. Bubble fraction = BubbleMicrobatches()/m.
  double BubbleMicrobatches() const;
  double BubbleFraction() const;

  // Warm-up forward passes on pipeline rank r (in model-chunk micro-batches,
  // Megatron schedules.py): 1F1B min(pp−r−1, m); interleaved
  // min((pp−r−1)·2 + (vpp−1)·pp, m·vpp) (all-forward when m·vpp is reached).
  int64_t WarmupSteps(int64_t rank) const;

  // Activations held at the peak on rank r, in units of "one micro-batch
  // through all of rank r's layers": min(WarmupSteps(r) + 1, m·vpp) / vpp
  // (the most chunk-forwards whose backward is pending, each 1/vpp of the
  // rank's layers). Rank 0 holds the most: min(m, pp) for 1F1B, and
  // pp·(1 + (pp−1)/(pp·vpp)) interleaved when m·vpp exceeds the warm-up
  // (Korthikanti et al. 2022 §4.2.3); less with fewer micro-batches.
  double InFlightMicrobatches(int64_t rank) const;

  // One step of the schedule on one pipeline rank.
  struct Step {
    enum class Kind { kForward, kBackward } kind;
    int64_t microbatch;  // [0, m)
    int64_t chunk;       // model chunk (virtual stage) [0, vpp)
  };
  // The ordered forward/backward steps that pipeline rank `rank` executes:
  // WarmupSteps(rank) forwards, then alternating forward/backward, then the
  // remaining backwards. Forwards visit (micro-batch, chunk) in Megatron's
  // get_schedule_table order (groups of pp micro-batches through chunk 0,
  // then chunk 1, ...); backward k mirrors forward k's chunk (vpp−1−chunk).
  // Size 2·m·vpp.
  std::vector<Step> StepsForRank(int64_t rank) const;

 private:
  int64_t pp_, vpp_, m_;
};

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_PIPELINE_SCHEDULE_H_
