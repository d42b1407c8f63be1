// TrainingSpec: what is trained, independent of how it is parallelised.
#ifndef MESHTUNE_SEARCH_SPACES_TRAINING_SPEC_H_
#define MESHTUNE_SEARCH_SPACES_TRAINING_SPEC_H_

#include <cstdint>

#include "search_spaces/cluster_spec.h"

namespace meshtune::search_spaces {

struct TrainingSpec {
  int64_t num_gpus = 0;           // world size
  int64_t global_batch_size = 0;  // sequences per optimizer step (gbs)
  int64_t seq_length = 0;         // tokens per sequence
  Precision precision = Precision::kBf16;
  double train_tokens = 300e9;    // token budget for days_to_train

  int64_t tokens_per_step() const { return global_batch_size * seq_length; }
};

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_TRAINING_SPEC_H_
