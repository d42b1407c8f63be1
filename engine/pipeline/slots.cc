#include "engine/pipeline/slots.h"

#include <algorithm>

#include "search_spaces/status.h"

namespace meshtune::engine {

using search_spaces::PipelineSchedule;

PipelineSlots::PipelineSlots(int64_t chunks)
    : taken_(chunks), free_(chunks), handed_out_(chunks, 0) {}

int PipelineSlots::Take(int64_t microbatch, int64_t chunk) {
  auto it = taken_[chunk].find(microbatch);
  if (it != taken_[chunk].end()) return it->second;
  int slot;
  if (!free_[chunk].empty()) {
    slot = free_[chunk].back();
    free_[chunk].pop_back();
  } else {
    slot = handed_out_[chunk]++;
  }
  taken_[chunk][microbatch] = slot;
  return slot;
}

void PipelineSlots::Release(int64_t microbatch, int64_t chunk) {
  auto it = taken_[chunk].find(microbatch);
  MESHTUNE_CHECK(it != taken_[chunk].end());
  free_[chunk].push_back(it->second);
  taken_[chunk].erase(it);
}

bool PipelineSlots::Holds(int64_t microbatch, int64_t chunk) const {
  return taken_[chunk].count(microbatch) > 0;
}

int64_t TransferChunk(const P2pOp& op, int64_t pp) {
  const bool send = op.direction == P2pDirection::kSend;
  // Activations flow v−1 -> v, gradients v+1 -> v (v: the consumer).
  const int64_t producer = op.kind == P2pKind::kActivation
                               ? op.virtual_stage - 1
                               : op.virtual_stage + 1;
  return ChunkOfStage(send ? producer : op.virtual_stage, pp);
}

bool ReleasesSlot(const P2pOp& op) {
  return op.direction == P2pDirection::kSend && op.kind == P2pKind::kGradient;
}

std::vector<int> CountPipelineSlots(const PipelineSchedule& schedule,
                                    int64_t pp_rank) {
  const int64_t pp = schedule.pp();
  const std::vector<PipelineSchedule::Step> steps =
      schedule.StepsForRank(pp_rank);
  const P2pPlan plan = MakeP2pPlan(schedule, pp_rank);
  MESHTUNE_CHECK(plan.size() == steps.size() + 1);
  PipelineSlots slots(schedule.vpp());
  for (size_t i = 0; i <= steps.size(); ++i) {
    for (const P2pOp& op : plan[i].ops) {
      const int64_t c = TransferChunk(op, pp);
      slots.Take(op.microbatch, c);
      if (ReleasesSlot(op)) slots.Release(op.microbatch, c);
    }
    if (i == steps.size()) break;
    const PipelineSchedule::Step& step = steps[i];
    slots.Take(step.microbatch, step.chunk);
    const bool first_stage = step.chunk * pp + pp_rank == 0;
    if (step.kind == PipelineSchedule::Step::Kind::kBackward && first_stage) {
      slots.Release(step.microbatch, step.chunk);
    }
  }
  return slots.handed_out();
}

int64_t PeakInFlightLayers(const PipelineSchedule& schedule, int64_t pp_rank,
                           const std::vector<int64_t>& layers) {
  MESHTUNE_CHECK(static_cast<int64_t>(layers.size()) == schedule.vpp());
  int64_t live = 0, peak = 0;
  for (const PipelineSchedule::Step& step : schedule.StepsForRank(pp_rank)) {
    const bool forward = step.kind == PipelineSchedule::Step::Kind::kForward;
    live += forward ? layers[step.chunk] : -layers[step.chunk];
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace meshtune::engine
