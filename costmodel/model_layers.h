// A model's decoder layers by kind, prepared once so that the cost model can
// count the layers of any pipeline stage in O(kinds) instead of walking them.
//
// The search estimates 10^5 configurations of one model; every one needs the
// layer kinds of each of its stages (search_spaces::PipelineLayout gives the
// ranges). ModelSpec::DecoderLayers() builds the list on every call, so the
// cost model builds it once here and keeps, per distinct kind, the prefix
// count over the decoder layers.
#ifndef MESHTUNE_COSTMODEL_MODEL_LAYERS_H_
#define MESHTUNE_COSTMODEL_MODEL_LAYERS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "search_spaces/model_spec.h"

namespace meshtune::costmodel {

class ModelLayers {
 public:
  explicit ModelLayers(const search_spaces::ModelSpec& model);

  // ModelSpec::DecoderLayers() and MtpDepthLayers(), as built once.
  const std::vector<search_spaces::LayerKind>& decoder() const {
    return decoder_;
  }
  const std::vector<search_spaces::LayerKind>& mtp() const { return mtp_; }
  // The distinct kinds among the decoder layers, in order of first
  // appearance (at most 12: 4 mixers x 3 MLPs).
  const std::vector<search_spaces::LayerKind>& kinds() const { return kinds_; }

  // Decoder layers of kinds()[k] among layers [first, first + n).
  // REQUIRES: k < kinds().size(), 0 <= first, n >= 0,
  //           first + n <= decoder().size().
  int64_t CountInRange(size_t k, int64_t first, int64_t n) const {
    const int32_t* p = prefix_.data() + k * (decoder_.size() + 1);
    return p[first + n] - p[first];
  }

 private:
  std::vector<search_spaces::LayerKind> decoder_;
  std::vector<search_spaces::LayerKind> mtp_;
  std::vector<search_spaces::LayerKind> kinds_;
  // kinds_.size() rows of decoder_.size() + 1 prefix counts, row-major.
  std::vector<int32_t> prefix_;
};

}  // namespace meshtune::costmodel

#endif  // MESHTUNE_COSTMODEL_MODEL_LAYERS_H_
