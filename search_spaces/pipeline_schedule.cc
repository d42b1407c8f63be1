// PipelineSchedule: step order of Megatron-Core's pipeline schedules.
//
// Follows megatron/core/pipeline_parallel/schedules.py:
//  - forward_backward_pipelining_without_interleaving (1F1B): pp − rank − 1
//    warm-up forwards, then one-forward-one-backward, then the cool-down
//    backwards.
//  - forward_backward_pipelining_with_interleaving: get_pp_rank_microbatches
//    gives (pp − rank − 1)·2 + (vpp − 1)·G warm-up forwards over m·vpp
//    virtual micro-batches, with G = microbatch_group_size_per_vp_stage
//    (ModelParallelConfig defaults it to pp, which we assume). The order of
//    (micro-batch, chunk) pairs is get_schedule_table: groups of G
//    micro-batches, each group run through chunk 0, then chunk 1, ...; the
//    last group takes whatever micro-batches remain. Backward step k uses the
//    same table entry with the chunk mirrored (get_model_chunk_id with
//    forward=False: vpp − 1 − chunk).
#include "search_spaces/pipeline_schedule.h"

#include <algorithm>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {

PipelineSchedule::PipelineSchedule(int64_t pp, int64_t vpp,
                                   int64_t num_microbatches)
    : pp_(pp), vpp_(vpp), m_(num_microbatches) {
  MESHTUNE_CHECK(pp >= 1 && vpp >= 1 && num_microbatches >= 1);
}

double PipelineSchedule::BubbleMicrobatches() const {
  return static_cast<double>(pp_ - 1) / static_cast<double>(vpp_);
}

double PipelineSchedule::BubbleFraction() const {
  return BubbleMicrobatches() / static_cast<double>(m_);
}

int64_t PipelineSchedule::WarmupSteps(int64_t rank) const {
  MESHTUNE_CHECK(rank >= 0 && rank < pp_);
  // Without pipelining Megatron runs forward_backward_no_pipelining: every
  // micro-batch is forward then backward, nothing is held over.
  if (pp_ == 1) return 0;
  const int64_t total = m_ * vpp_;
  int64_t warmup = pp_ - rank - 1;
  if (interleaved()) {
    const int64_t group = pp_;  // microbatch_group_size_per_vp_stage default
    warmup = (pp_ - rank - 1) * 2 + (vpp_ - 1) * group;
  }
  return std::min(warmup, total);
}

double PipelineSchedule::InFlightMicrobatches(int64_t rank) const {
  // In the steady state a rank does one forward, then one backward, so the
  // peak number of chunk-forwards whose backward has not run yet is
  // warm-up + 1, unless everything is warm-up. Each chunk-forward holds the
  // activations of 1/vpp of the rank's layers. For rank 0 and m·vpp larger
  // than the warm-up this is pp·(1 + (pp−1)/(pp·vpp)) (Korthikanti et al.
  // 2022 §4.2.3); with fewer micro-batches it is less.
  const int64_t total = m_ * vpp_;
  const int64_t peak = std::min(WarmupSteps(rank) + 1, total);
  return static_cast<double>(peak) / static_cast<double>(vpp_);
}

std::vector<PipelineSchedule::Step> PipelineSchedule::StepsForRank(
    int64_t rank) const {
  MESHTUNE_CHECK(rank >= 0 && rank < pp_);
  const int64_t total = m_ * vpp_;
  // Forward order of (micro-batch, chunk) pairs (get_schedule_table).
  std::vector<Step> forward;
  forward.reserve(total);
  const int64_t group = interleaved() ? pp_ : m_;
  for (int64_t start = 0; start < m_; start += group) {
    const int64_t end = start + group >= m_ ? m_ : start + group;
    for (int64_t chunk = 0; chunk < vpp_; ++chunk) {
      for (int64_t mb = start; mb < end; ++mb) {
        forward.push_back({Step::Kind::kForward, mb, chunk});
      }
    }
    if (end == m_) break;
  }
  auto backward = [&](int64_t k) {
    const Step& f = forward[k];
    return Step{Step::Kind::kBackward, f.microbatch, vpp_ - 1 - f.chunk};
  };

  const int64_t warmup = WarmupSteps(rank);
  std::vector<Step> steps;
  steps.reserve(2 * total);
  for (int64_t k = 0; k < warmup; ++k) steps.push_back(forward[k]);
  for (int64_t k = 0; k < total - warmup; ++k) {
    steps.push_back(forward[warmup + k]);
    steps.push_back(backward(k));
  }
  for (int64_t k = total - warmup; k < total; ++k) {
    steps.push_back(backward(k));
  }
  return steps;
}

}  // namespace meshtune::search_spaces
