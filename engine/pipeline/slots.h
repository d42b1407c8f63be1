// Activation slots of a pipeline rank: which saved-activation slot each
// micro-batch in flight on a model chunk uses, and how many slots each chunk
// needs, for a trainer that moves activations with the groups of
// MakeP2pPlan (engine/pipeline/p2p.h) and keeps every micro-batch's saved
// activations on the device until its backward (engine/cuda/trainer.cc).
//
// A micro-batch takes a slot of its chunk at its first use (the receive of
// its input, or its forward on the first virtual stage) and gives it back
// once its last use is enqueued: the send of its input gradient (inside
// the group; a receive later in the same group may take the slot, since it
// fills the slot's input while the send reads its input gradient), or its
// backward on the first virtual stage, which sends nothing back.
#ifndef MESHTUNE_ENGINE_PIPELINE_SLOTS_H_
#define MESHTUNE_ENGINE_PIPELINE_SLOTS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "engine/pipeline/p2p.h"
#include "search_spaces/pipeline_schedule.h"

namespace meshtune::engine {

class PipelineSlots {
 public:
  explicit PipelineSlots(int64_t chunks);
  // The slot of (micro-batch, chunk): the one it holds, else the most
  // recently freed one, else a new one (numbered 0, 1, ... per chunk).
  int Take(int64_t microbatch, int64_t chunk);
  // Gives the slot back. REQUIRES: the micro-batch holds one.
  void Release(int64_t microbatch, int64_t chunk);
  // Whether the micro-batch holds a slot of the chunk.
  bool Holds(int64_t microbatch, int64_t chunk) const;
  // Distinct slots each chunk has handed out so far.
  const std::vector<int>& handed_out() const { return handed_out_; }

 private:
  std::vector<std::map<int64_t, int>> taken_;
  std::vector<std::vector<int>> free_;
  std::vector<int> handed_out_;
};

// The chunk of pipeline rank (virtual_stage mod pp) that runs the stage.
inline int64_t ChunkOfStage(int64_t virtual_stage, int64_t pp) {
  return virtual_stage / pp;
}
// The chunk whose slot a transfer reads (send: the producing step's) or
// fills (recv: the consuming step's).
int64_t TransferChunk(const P2pOp& op, int64_t pp);
// Whether a transfer is its slot's last use (a sent input gradient).
bool ReleasesSlot(const P2pOp& op);

// The slots each chunk of `pp_rank` needs: the rules above run over its
// steps and MakeP2pPlan's groups. A slot holds what moves between stages
// (a micro-batch's input, output and their gradients, and the head's
// logits); the layers' saved activations come from one pool per rank
// (PeakInFlightLayers), since the chunks' peaks fall at different times.
std::vector<int> CountPipelineSlots(
    const search_spaces::PipelineSchedule& schedule, int64_t pp_rank);

// The most layer activation sets `pp_rank` holds at once: over its steps,
// the largest Σ layers[c] over the (micro-batch, chunk c) whose forward has
// run and whose backward has not (layers[c]: the layers of chunk c that
// keep their activations). With every layer kept that is Megatron's
// in-flight count, min(WarmupSteps + 1, m·vpp) chunk-forwards
// (PipelineSchedule::InFlightMicrobatches · vpp), times the layers per
// chunk.
int64_t PeakInFlightLayers(const search_spaces::PipelineSchedule& schedule,
                           int64_t pp_rank, const std::vector<int64_t>& layers);

}  // namespace meshtune::engine

#endif  // MESHTUNE_ENGINE_PIPELINE_SLOTS_H_
