#include "costmodel/model_layers.h"

#include <algorithm>

namespace meshtune::costmodel {

ModelLayers::ModelLayers(const search_spaces::ModelSpec& model)
    : decoder_(model.DecoderLayers()), mtp_(model.MtpDepthLayers()) {
  for (const search_spaces::LayerKind& kind : decoder_) {
    if (std::find(kinds_.begin(), kinds_.end(), kind) == kinds_.end()) {
      kinds_.push_back(kind);
    }
  }
  const size_t row = decoder_.size() + 1;
  prefix_.assign(kinds_.size() * row, 0);
  for (size_t k = 0; k < kinds_.size(); ++k) {
    int32_t* p = prefix_.data() + k * row;
    for (size_t i = 0; i < decoder_.size(); ++i) {
      p[i + 1] = p[i] + (decoder_[i] == kinds_[k] ? 1 : 0);
    }
  }
}

}  // namespace meshtune::costmodel
