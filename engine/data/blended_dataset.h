// BlendedDataset: several TokenDatasets mixed by weight (Megatron-LM
// megatron/core/datasets/blended_dataset.py, with the greedy assignment of
// megatron/core/datasets/helpers.cpp build_blending_indices).
//
// Weights are normalized to sum to 1. Sample i goes to the dataset whose
// share so far lags its weight the most: argmax_d (w_d * max(i, 1) - n_d),
// where n_d counts the samples dataset d got among 0..i-1 (ties to the
// lowest d); it takes that dataset's next sample n_d. After i samples every
// n_d is within one sample of w_d * i. There is no extra shuffle: the
// sub-datasets are shuffled themselves.
#ifndef MESHTUNE_ENGINE_DATA_BLENDED_DATASET_H_
#define MESHTUNE_ENGINE_DATA_BLENDED_DATASET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/data/dataset.h"

namespace meshtune::engine::data {

// How many samples a sub-dataset of weight `normalized_weight` must provide
// so that a blend of num_samples never runs out: ceil(w * n * 1.005) + 1
// (Megatron's 0.5% margin, plus one for the greedy rounding).
int64_t BlendedSubDatasetSamples(double normalized_weight, int64_t num_samples);

class BlendedDataset : public TokenDataset {
 public:
  // Takes ownership of `datasets` (same seq_length, checked); `weights` are
  // positive, one per dataset (checked), and need not sum to 1. Each
  // dataset must hold BlendedSubDatasetSamples(w_d, num_samples) samples.
  BlendedDataset(std::vector<std::unique_ptr<TokenDataset>> datasets,
                 const std::vector<double>& weights, int64_t num_samples);

  int64_t num_samples() const override {
    return static_cast<int64_t>(dataset_index_.size());
  }
  int64_t seq_length() const override { return datasets_[0]->seq_length(); }
  void GetSample(int64_t index, int32_t* tokens) const override;
  // The largest vocabulary among the sub-datasets.
  int64_t vocab_size() const override;

  // Which dataset sample `index` comes from, and its sample number there.
  int64_t dataset_of(int64_t index) const { return dataset_index_[index]; }
  int64_t sample_in_dataset(int64_t index) const {
    return dataset_sample_index_[index];
  }
  const std::vector<double>& normalized_weights() const { return weights_; }

 private:
  std::vector<std::unique_ptr<TokenDataset>> datasets_;
  std::vector<double> weights_;                // normalized
  std::vector<int32_t> dataset_index_;         // [num_samples]
  std::vector<int64_t> dataset_sample_index_;  // [num_samples]
};

}  // namespace meshtune::engine::data

#endif  // MESHTUNE_ENGINE_DATA_BLENDED_DATASET_H_
