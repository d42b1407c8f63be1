// PipelineLayout: how many transformer layers each pipeline stage and virtual
// chunk holds.
//
// Megatron-Core splits num_layers evenly over pp·vpp virtual stages. When that
// does not divide, --account-for-embedding-in-pipeline-split and
// --account-for-loss-in-pipeline-split count the embedding and the output
// layer + loss as one layer each: num_layers + 2 units are split evenly, and
// the first virtual stage (rank 0, chunk 0) and the last one (last rank, last
// chunk) hold one transformer layer fewer (megatron/core/transformer/
// transformer_layer.py get_transformer_layer_offset; NeMo's LLaMA-3 405B and
// Qwen3-235B recipes use it: 126 + 2 = 128 layers over pp 16).
//
// The layout is derived from (num_layers, pp, vpp): even when num_layers
// divides by pp·vpp, otherwise embedding/loss accounting when num_layers + 2
// does, otherwise invalid.
#ifndef MESHTUNE_SEARCH_SPACES_PIPELINE_LAYOUT_H_
#define MESHTUNE_SEARCH_SPACES_PIPELINE_LAYOUT_H_

#include <cstdint>

namespace meshtune::search_spaces {

class PipelineLayout {
 public:
  // True when some layout of num_layers over pp·vpp virtual stages exists.
  static bool Valid(int64_t num_layers, int64_t pp, int64_t vpp);
  // True when the layout needs the embedding/loss accounting flags.
  static bool AccountsEmbeddingAndLoss(int64_t num_layers, int64_t pp,
                                       int64_t vpp);

  // REQUIRES: Valid(num_layers, pp, vpp).
  PipelineLayout(int64_t num_layers, int64_t pp, int64_t vpp);

  bool accounts_embedding_and_loss() const { return accounts_; }
  // Layer units per virtual chunk: (num_layers [+ 2]) / (pp·vpp).
  int64_t units_per_chunk() const { return units_per_chunk_; }
  // Transformer layers in chunk `chunk` of pipeline rank `stage`.
  int64_t LayersInChunk(int64_t stage, int64_t chunk) const;
  // Transformer layers on pipeline rank `stage` (all its chunks).
  int64_t LayersOnStage(int64_t stage) const;
  // The most transformer layers any stage holds (the pipeline's critical
  // path per micro-batch).
  int64_t MaxLayersOnStage() const { return units_per_chunk_ * vpp_; }

 private:
  int64_t pp_, vpp_;
  bool accounts_;
  int64_t units_per_chunk_;
};

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_PIPELINE_LAYOUT_H_
