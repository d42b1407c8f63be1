#include "search_spaces/comm_ops.h"

namespace meshtune::search_spaces {

std::vector<TpCommOp> TransformerLayerTpCommOps(const ParallelConfig& config,
                                                int64_t seq, int64_t hidden,
                                                bool full_recompute) {
  std::vector<TpCommOp> ops;
  if (config.tp <= 1) return ops;
  const int64_t n = config.mbs * seq * hidden;
  using K = Collective;
  using P = TpCommOp::Phase;
  auto forward = [&](P phase) {
    if (config.sp) {
      ops.push_back({K::kAllGather, phase, n, "qkv input"});
      ops.push_back({K::kReduceScatter, phase, n, "attention output"});
      ops.push_back({K::kAllGather, phase, n, "fc1 input"});
      ops.push_back({K::kReduceScatter, phase, n, "mlp output"});
    } else {
      ops.push_back({K::kAllReduce, phase, n, "attention output"});
      ops.push_back({K::kAllReduce, phase, n, "mlp output"});
    }
  };
  forward(P::kForward);
  if (full_recompute) forward(P::kRecomputeForward);
  // Backward runs the MLP first, then attention.
  if (config.sp) {
    ops.push_back({K::kAllGather, P::kBackward, n, "mlp output grad"});
    ops.push_back({K::kAllGather, P::kBackward, n, "fc1 input re-gather"});
    ops.push_back({K::kReduceScatter, P::kBackward, n, "fc1 input grad"});
    ops.push_back({K::kAllGather, P::kBackward, n, "attention output grad"});
    ops.push_back({K::kAllGather, P::kBackward, n, "qkv input re-gather"});
    ops.push_back({K::kReduceScatter, P::kBackward, n, "qkv input grad"});
  } else {
    ops.push_back({K::kAllReduce, P::kBackward, n, "fc1 input grad"});
    ops.push_back({K::kAllReduce, P::kBackward, n, "qkv input grad"});
  }
  return ops;
}

}  // namespace meshtune::search_spaces
