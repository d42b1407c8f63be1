#include "costmodel/host_launch.h"

namespace meshtune::costmodel {

using search_spaces::CudaGraphs;
using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;

HostLaunch LayerHostLaunch(const search_spaces::ModelSpec& model,
                           const search_spaces::ParallelConfig& c,
                           LayerKind kind, const CudaGraphs& graphs,
                           bool ep_overlap, double host_factor) {
  HostLaunch h;
  if (graphs.full_iteration()) return h;
  auto eager = [&](uint32_t bit) {
    return graphs.Captures(bit) ? 0.0 : kHostBlockLaunch_s;
  };
  switch (kind.mixer) {
    case Mixer::kAttention:
    case Mixer::kMla:
      h.fwd_s += eager(search_spaces::kGraphAttn);
      break;
    case Mixer::kMamba:
      h.fwd_s += eager(search_spaces::kGraphMamba);
      break;
    case Mixer::kNone:
      break;
  }
  switch (kind.mlp) {
    case Mlp::kDense:
      h.fwd_s += eager(search_spaces::kGraphMlp);
      break;
    case Mlp::kMoe: {
      h.fwd_s += eager(search_spaces::kGraphMoeRouter);
      h.fwd_s += eager(search_spaces::kGraphMoePreprocess);
      const double local_experts =
          static_cast<double>(model.num_experts) / c.ep;
      // A graph of the whole MoE block (--cuda-graph-scope moe, which
      // needs padded expert capacity) launches the experts too.
      if (!graphs.Captures(search_spaces::kGraphMoe)) {
        h.fwd_s += kHostExpertLaunch_s * local_experts;
      }
      break;
    }
    case Mlp::kNone:
      break;
  }
  h.bwd_s =
      (kHostBackwardFactor + (ep_overlap ? kHostDelayedWgrad : 0.0)) * h.fwd_s;
  if (kind.mlp == Mlp::kMoe && !model.moe_pad_expert_input_to_capacity &&
      model.moe_token_dispatcher_type !=
          search_spaces::TokenDispatcher::kFlex) {
    h.sync_fwd_s = kHostSync_s;
  }
  h.fwd_s *= host_factor;
  h.bwd_s *= host_factor;
  h.sync_fwd_s *= host_factor;
  return h;
}

}  // namespace meshtune::costmodel
