// Training data as the trainer sees it: a fixed, seeded sequence of samples
// of seq_length + 1 tokens (inputs are tokens[0..seq), targets [1..seq]).
//
// Implementations: GptDataset (Megatron's GPT sample windows over one
// indexed dataset, gpt_dataset.h) and BlendedDataset (several, by weight,
// blended_dataset.h). OpenTrainingData builds the right one from the
// command line's --data value, or from the built-in corpus.
#ifndef MESHTUNE_ENGINE_DATA_DATASET_H_
#define MESHTUNE_ENGINE_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::engine::data {

class TokenDataset {
 public:
  virtual ~TokenDataset() = default;
  // Number of samples available (>= what was asked for at construction).
  virtual int64_t num_samples() const = 0;
  virtual int64_t seq_length() const = 0;
  // tokens[seq_length + 1] of sample `index` in [0, num_samples()).
  // Deterministic: the same index always gives the same tokens.
  virtual void GetSample(int64_t index, int32_t* tokens) const = 0;
  // Largest token id that can appear + 1 (the tokenizer's vocabulary).
  virtual int64_t vocab_size() const = 0;
};

struct DataConfig {
  // Megatron --data-path: "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ..." where a
  // PREFIX names PREFIX.bin + PREFIX.idx. Empty: the built-in corpus.
  std::vector<std::string> data_path;
  int64_t seq_length = 0;
  int64_t num_samples = 0;  // samples the run will consume
  uint64_t seed = 1234;     // shuffle seed (Megatron --seed)
};

// OK when a sample index of `bytes` (for `num_samples` samples) fits in this
// machine's physical memory; otherwise InvalidArgument naming both. An index
// that cannot fit (a --steps typo, an edited checkpoint's consumed_samples)
// would end in std::bad_alloc part-way through building it.
Status CheckSampleIndexFits(long double bytes, int64_t num_samples);

// Opens, validates and indexes the training data; every problem (missing
// file, bad header, weights that do not parse, tokens >= model_vocab_size)
// is an error naming the path and the fix. model_vocab_size is the model's
// vocab_size (tokens must be below it).
StatusOr<std::unique_ptr<TokenDataset>> OpenTrainingData(
    const DataConfig& config, int64_t model_vocab_size);

}  // namespace meshtune::engine::data

#endif  // MESHTUNE_ENGINE_DATA_DATASET_H_
