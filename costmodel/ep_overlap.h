// The EP overlap's paired steps: what of one layer's all-to-alls stays
// exposed when Megatron's combined 1F1B runs one micro-batch's forward
// beside another's backward (--overlap-moe-expert-parallel-comm with
// --delay-wgrad-compute; TrainingSpec::moe_ep_overlap).
//
// Megatron runs each layer pair as four stages
// (schedule_layer_1f1b in megatron/core/models/common/
// model_chunk_schedule_plan.py), each an all-to-all of one micro-batch on
// the communication stream beside compute of the other:
//   1. combine backward    beside attention forward
//   2. dispatch forward    beside the experts' backward (dgrad only: the
//                          delayed weight gradients run in stage 4)
//   3. dispatch backward   beside the experts' forward
//   4. combine forward     beside attention backward and the delayed wgrads
// A stage lasts as long as its longer side, so an all-to-all hides only
// behind the compute it is paired with, not behind the whole layer.
#ifndef MESHTUNE_COSTMODEL_EP_OVERLAP_H_
#define MESHTUNE_COSTMODEL_EP_OVERLAP_H_

namespace meshtune::costmodel {

// Exposed seconds of one paired layer step. `a2a_fwd_s`, `a2a_bwd_s`: one
// dispatch (equally one combine) all-to-all in forward and in backward;
// `fwd_s`, `bwd_s`: the layer's forward and backward compute; `moe_fwd_s`:
// its MoE block's forward, also taken as the experts' dgrad; `extra_s`:
// all-to-alls outside the four stages (recompute replays), which hide in
// the stages' idle compute. All seconds, for one micro-batch.
double PairedEpExposed_s(double a2a_fwd_s, double a2a_bwd_s, double fwd_s,
                         double bwd_s, double moe_fwd_s, double extra_s);

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_EP_OVERLAP_H_
