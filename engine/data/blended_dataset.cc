#include "engine/data/blended_dataset.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "search_spaces/status.h"

namespace meshtune::engine::data {

int64_t BlendedSubDatasetSamples(double normalized_weight,
                                 int64_t num_samples) {
  return static_cast<int64_t>(std::ceil(
             normalized_weight * static_cast<double>(num_samples) * 1.005)) +
         1;
}

BlendedDataset::BlendedDataset(
    std::vector<std::unique_ptr<TokenDataset>> datasets,
    const std::vector<double>& weights, int64_t num_samples)
    : datasets_(std::move(datasets)) {
  MESHTUNE_CHECK(!datasets_.empty());
  MESHTUNE_CHECK(weights.size() == datasets_.size());
  MESHTUNE_CHECK(num_samples >= 1);
  double sum = 0;
  for (double w : weights) {
    MESHTUNE_CHECK(w > 0 && std::isfinite(w));
    sum += w;
  }
  for (double w : weights) weights_.push_back(w / sum);
  for (const auto& d : datasets_) {
    MESHTUNE_CHECK(d->seq_length() == datasets_[0]->seq_length());
  }

  const size_t n = datasets_.size();
  std::vector<int64_t> taken(n, 0);
  dataset_index_.resize(static_cast<size_t>(num_samples));
  dataset_sample_index_.resize(static_cast<size_t>(num_samples));
  for (int64_t i = 0; i < num_samples; ++i) {
    // max(i, 1) as in Megatron: at i = 0 the lags are the weights, so the
    // heaviest dataset goes first.
    const double so_far = static_cast<double>(std::max<int64_t>(i, 1));
    size_t best = 0;
    double best_lag = weights_[0] * so_far - static_cast<double>(taken[0]);
    for (size_t d = 1; d < n; ++d) {
      const double lag = weights_[d] * so_far - static_cast<double>(taken[d]);
      if (lag > best_lag) {
        best = d;
        best_lag = lag;
      }
    }
    dataset_index_[i] = static_cast<int32_t>(best);
    dataset_sample_index_[i] = taken[best]++;
  }
  for (size_t d = 0; d < n; ++d) {
    MESHTUNE_CHECK(taken[d] <= datasets_[d]->num_samples());
  }
}

void BlendedDataset::GetSample(int64_t index, int32_t* tokens) const {
  MESHTUNE_CHECK(index >= 0 && index < num_samples());
  datasets_[dataset_index_[index]]->GetSample(dataset_sample_index_[index],
                                              tokens);
}

int64_t BlendedDataset::vocab_size() const {
  int64_t v = 0;
  for (const auto& d : datasets_) v = std::max(v, d->vocab_size());
  return v;
}

}  // namespace meshtune::engine::data
