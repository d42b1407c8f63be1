// SyntheticDataset: tokens generated in code from a seeded xorshift stream,
// with structure (mostly "next = previous + 1", sometimes a random token) so
// that a model's loss falls over a run. Every machine gets the same tokens
// without a data file: the engine's tests, the step benchmark and the
// `tune regress` benchmarks ("synthetic-v1") train on it. Changing the
// generator changes every loss those record: only together with a new
// regress benchmark version.
#ifndef MESHTUNE_ENGINE_DATA_SYNTHETIC_DATASET_H_
#define MESHTUNE_ENGINE_DATA_SYNTHETIC_DATASET_H_

#include <cstdint>

#include "engine/data/dataset.h"

namespace meshtune::engine::data {

class SyntheticDataset : public TokenDataset {
 public:
  // Samples of seq + 1 tokens (inputs and shifted targets) below `vocab`.
  SyntheticDataset(int64_t seq, int64_t vocab,
                   int64_t num_samples = int64_t{1} << 30)
      : seq_(seq), vocab_(vocab), num_samples_(num_samples) {}
  int64_t num_samples() const override { return num_samples_; }
  int64_t seq_length() const override { return seq_; }
  int64_t vocab_size() const override { return vocab_; }
  void GetSample(int64_t index, int32_t* tokens) const override;

 private:
  int64_t seq_, vocab_, num_samples_;
};

}  // namespace meshtune::engine::data

#endif  // MESHTUNE_ENGINE_DATA_SYNTHETIC_DATASET_H_
