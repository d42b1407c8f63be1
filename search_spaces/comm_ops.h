// The tensor-parallel collectives one transformer layer issues for one
// micro-batch: the single list that both the cost model (costmodel/
// cost_model.cc prices it) and the training engine (engine/transformer_layer.cc
// issues it; tests/contracts/engine_comm_ops_test.cc compares the engine's recorded
// calls with it) follow.
//
// Megatron-Core semantics (tensor_parallel/mappings.py, layers.py):
// - tp only: forward all-reduces the outputs of the two row-parallel linears
//   (attention projection, fc2); backward all-reduces the input gradients of
//   the two column-parallel linears (qkv, fc1).
// - tp + sequence parallel: forward all-gathers the sequence-sharded input of
//   each column-parallel linear and reduce-scatters the output of each
//   row-parallel one. Backward: all-gather of the output gradient of each
//   row-parallel linear, re-gather of each column-parallel input for its
//   weight gradient (Megatron keeps only the shard), and reduce-scatter of
//   each column-parallel input gradient.
// - full recompute repeats the forward's collectives before the backward.
// Sizes follow the nccl-tests convention on the full [s·b, h] activation:
// all-reduce and all-gather/reduce-scatter all count s·b·h elements.
#ifndef MESHTUNE_SEARCH_SPACES_COMM_OPS_H_
#define MESHTUNE_SEARCH_SPACES_COMM_OPS_H_

#include <cstdint>
#include <vector>

#include "search_spaces/collective.h"
#include "search_spaces/parallel_config.h"

namespace meshtune::search_spaces {

struct TpCommOp {
  Collective kind;  // all-reduce, all-gather or reduce-scatter
  enum class Phase { kForward, kRecomputeForward, kBackward } phase;
  int64_t elements;  // s·b·h of the full activation (nccl-tests convention)
  const char* why;   // "qkv input", "attention output", ...
};

// In issue order for one layer and one micro-batch of `mbs` sequences of
// `seq` tokens (per context-parallel rank). Empty when tp == 1.
// `full_recompute`: this layer's forward is recomputed before its backward.
std::vector<TpCommOp> TransformerLayerTpCommOps(const ParallelConfig& config,
                                                int64_t seq, int64_t hidden,
                                                bool full_recompute);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_COMM_OPS_H_
