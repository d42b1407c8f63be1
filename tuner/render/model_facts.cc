#include "tuner/render/model_facts.h"

#include "costmodel/model_stats.h"
#include "tuner/io/text_format.h"

namespace meshtune::tuner {

double ParameterCountB(const search_spaces::ModelSpec& model) {
  const int64_t padded_vocab =
      costmodel::PaddedVocabSize(model.vocab_size, /*tp=*/1);
  const costmodel::ModelStats stats =
      costmodel::ComputeModelStats(model, padded_vocab, model.seq_length);
  return stats.total_params / 1e9;
}

std::string FormatParameterCount(const search_spaces::ModelSpec& model) {
  const double count = ParameterCountB(model) * 1e9;
  if (count >= 1e9) return Fmt("%.1f B", count / 1e9);
  if (count >= 1e6) return Fmt("%.1f M", count / 1e6);
  return Fmt("%.1f K", count / 1e3);
}

}  // namespace meshtune::tuner
