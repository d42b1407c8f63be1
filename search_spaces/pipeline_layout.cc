#include "search_spaces/pipeline_layout.h"

#include "search_spaces/status.h"

namespace meshtune::search_spaces {

bool PipelineLayout::Valid(int64_t num_layers, int64_t pp, int64_t vpp) {
  if (num_layers < 1 || pp < 1 || vpp < 1) return false;
  return num_layers % (pp * vpp) == 0 ||
         AccountsEmbeddingAndLoss(num_layers, pp, vpp);
}

bool PipelineLayout::AccountsEmbeddingAndLoss(int64_t num_layers, int64_t pp,
                                              int64_t vpp) {
  // With one virtual stage the embedding and loss would share it with no
  // transformer layer to move, so the flags only help when pp·vpp >= 2; and
  // every virtual stage must keep at least one transformer layer.
  const int64_t stages = pp * vpp;
  return pp >= 2 && num_layers % stages != 0 &&
         (num_layers + 2) % stages == 0 && (num_layers + 2) / stages >= 2;
}

PipelineLayout::PipelineLayout(int64_t num_layers, int64_t pp, int64_t vpp)
    : pp_(pp),
      vpp_(vpp),
      accounts_(AccountsEmbeddingAndLoss(num_layers, pp, vpp)) {
  MESHTUNE_CHECK(Valid(num_layers, pp, vpp));
  units_per_chunk_ = (num_layers + (accounts_ ? 2 : 0)) / (pp * vpp);
}

int64_t PipelineLayout::LayersInChunk(int64_t stage, int64_t chunk) const {
  MESHTUNE_CHECK(stage >= 0 && stage < pp_ && chunk >= 0 && chunk < vpp_);
  int64_t layers = units_per_chunk_;
  if (accounts_ && stage == 0 && chunk == 0) --layers;  // embedding
  if (accounts_ && stage == pp_ - 1 && chunk == vpp_ - 1) --layers;  // loss
  return layers;
}

int64_t PipelineLayout::LayersOnStage(int64_t stage) const {
  int64_t layers = 0;
  for (int64_t chunk = 0; chunk < vpp_; ++chunk) {
    layers += LayersInChunk(stage, chunk);
  }
  return layers;
}

}  // namespace meshtune::search_spaces
