// CudaGraphs: which parts of a training step Megatron captures in CUDA
// graphs (--cuda-graph-impl, --cuda-graph-scope;
// megatron/training/arguments.py, megatron/core/transformer/cuda_graphs.py).
//
// Without a graph every kernel of a layer is launched from Python, and the
// GPU waits whenever a layer's kernels are shorter than their launches (the
// cost model's host-launch term, costmodel/host_launch.h). The experts of a
// dropless MoE layer have dynamic token counts and stay eager; only graphs
// of the whole MoE block or of the full iteration (both with padded expert
// capacity) launch them too.
#ifndef MESHTUNE_SEARCH_SPACES_CUDA_GRAPHS_H_
#define MESHTUNE_SEARCH_SPACES_CUDA_GRAPHS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {

// Megatron --cuda-graph-impl.
enum class CudaGraphImpl : uint8_t {
  kNone,               // Megatron's default: every kernel launched eagerly
  kLocal,              // Megatron Core's CudaGraphManager
  kTransformerEngine,  // TE make_graphed_callables per captured module
};

// Megatron --cuda-graph-scope values, one bit each (a set).
enum CudaGraphScopeBit : uint32_t {
  kGraphAttn = 1u << 0,           // TransformerLayer._forward_attention
  kGraphMlp = 1u << 1,            // _forward_mlp of a dense layer
  kGraphMoe = 1u << 2,            // _forward_mlp of a MoE layer (dropping)
  kGraphMoeRouter = 1u << 3,      // a MoE layer up to the router (shared
                                  // expert included)
  kGraphMoePreprocess = 1u << 4,  // and the dispatcher's preprocess
  kGraphMamba = 1u << 5,          // the Mamba mixer
  kGraphFullIteration = 1u << 6,  // forward and backward of the whole step
                                  // (--cuda-graph-impl local only)
};

struct CudaGraphs {
  CudaGraphImpl impl = CudaGraphImpl::kNone;
  // CudaGraphScopeBit set. Empty with an impl = Megatron's default scope:
  // each whole transformer layer (attention and MLP or MoE).
  uint32_t scope = 0;

  bool enabled() const { return impl != CudaGraphImpl::kNone; }
  // Whether `bit`'s module runs inside a graph.
  bool Captures(uint32_t bit) const;
  bool full_iteration() const {
    return enabled() && (scope & kGraphFullIteration) != 0;
  }
  bool operator==(const CudaGraphs& o) const {
    return impl == o.impl && scope == o.scope;
  }
};

// "none", "local", "transformer_engine".
const char* ToString(CudaGraphImpl impl);
// Every --cuda-graph-impl value and every --cuda-graph-scope name, in the
// order ToString and CudaGraphScopeString use: what readers of other
// spellings (NeMo overrides, train configs) accept.
const std::vector<std::string>& CudaGraphImplNames();
const std::vector<std::string>& CudaGraphScopeNames();
// Megatron scope names in a fixed order, joined by `separator` ("attn
// moe_router", or "attn,moe_router" for YAML and stored arguments); "" for
// the empty set.
std::string CudaGraphScopeString(uint32_t scope, char separator = ' ');

// Parses --cuda-graph-impl's value; InvalidArgument naming the choices.
Status ParseCudaGraphImpl(std::string_view text, CudaGraphImpl* out);
// Parses --cuda-graph-scope's values, separated by spaces or commas.
Status ParseCudaGraphScope(std::string_view text, uint32_t* out);
// A scope needs an impl (Megatron ignores it with a warning; we refuse it)
// and full_iteration needs `local` (arguments.py's help).
Status ValidateCudaGraphs(const CudaGraphs& graphs);
// Both flags' values parsed and validated ("" impl = none, "" scope =
// empty): what every reader of them (CLI, config files, Megatron
// arguments, NeMo overrides) calls.
StatusOr<CudaGraphs> ParseCudaGraphs(std::string_view impl,
                                     std::string_view scope);

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_CUDA_GRAPHS_H_
