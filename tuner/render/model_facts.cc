#include "tuner/render/model_facts.h"

#include "costmodel/model_stats.h"

namespace meshtune::tuner {

double ParameterCountB(const search_spaces::ModelSpec& model) {
  const int64_t padded_vocab =
      costmodel::PaddedVocabSize(model.vocab_size, /*tp=*/1);
  const costmodel::ModelStats stats =
      costmodel::ComputeModelStats(model, padded_vocab, model.seq_length);
  return stats.total_params / 1e9;
}

}  // namespace meshtune::tuner
