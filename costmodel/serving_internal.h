// What serving_model.cc and serving_loads.cc share beyond their public
// headers: the options every serving estimate runs with and the attention
// layers a prompt chunk's context is priced over. Not for other folders.
#ifndef MESHTUNE_COSTMODEL_SERVING_INTERNAL_H_
#define MESHTUNE_COSTMODEL_SERVING_INTERNAL_H_

#include <cstdint>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/model_options.h"
#include "search_spaces/model_spec.h"
#include "search_spaces/serving_spec.h"

namespace meshtune::costmodel::internal {

// The options of a serving estimate: inference engines replay their steps
// as CUDA graphs and reach the microbenchmark ceilings, so the training
// steps' kernel-efficiency discount is off. Their all-reduces run at the
// ring's bus bandwidth, not NVLink SHARP's: TensorRT-LLM's AllReduce plugin
// picks between NCCL and its own one- and two-shot kernels over NVLink
// peer memory, vLLM's and SGLang's custom all-reduce are the same one- and
// two-shot kernels (docs/serving.md §5 measures the difference).
ModelOptions ServingOptions(const ModelOptions& o);

// The attention layers of the heaviest pipeline stage, by head width and
// served window (0: none): a chunk's block against its prompt's earlier
// tokens costs the same on each layer of one kind (ChunkContextTime_s).
struct AttentionLayers {
  struct Kind {
    int64_t head_dim = 0;
    int64_t window = 0;
    int layers = 0;
  };
  int64_t heads = 1;  // the rank's share
  std::vector<Kind> kinds;
};

AttentionLayers AttentionLayersOf(const search_spaces::ModelSpec& m,
                                  const search_spaces::ServingConfig& c);

// Seconds a `chunk`-token chunk adds by attending to `prior` earlier
// tokens of its prompt over `a` (ChunkContextTime_s; `o` already the
// serving options).
double ChunkContextOf_s(const AttentionLayers& a, const Calibration& cal,
                        int64_t chunk, int64_t prior, const ModelOptions& o);

}  // namespace meshtune::costmodel::internal

#endif  // MESHTUNE_COSTMODEL_SERVING_INTERNAL_H_
