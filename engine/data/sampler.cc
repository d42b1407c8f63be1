#include "engine/data/sampler.h"

#include <vector>

namespace meshtune::engine::data {

PretrainingSampler::PretrainingSampler(const TokenDataset* dataset, int64_t mbs,
                                       int64_t dp, int64_t dp_rank)
    : dataset_(dataset), mbs_(mbs), dp_(dp), dp_rank_(dp_rank) {}

int64_t PretrainingSampler::FirstSample(int64_t consumed,
                                        int64_t microbatch) const {
  return consumed + microbatch * mbs_ * dp_ + dp_rank_ * mbs_;
}

void PretrainingSampler::Load(int64_t consumed, int64_t microbatch,
                              int32_t* tokens, int32_t* targets) const {
  const int64_t s = dataset_->seq_length();
  std::vector<int32_t> sample(s + 1);  // [s + 1]: tokens and the next one
  const int64_t first = FirstSample(consumed, microbatch);
  for (int64_t bi = 0; bi < mbs_; ++bi) {
    dataset_->GetSample(first + bi, sample.data());
    for (int64_t si = 0; si < s; ++si) {
      tokens[si * mbs_ + bi] = sample[si];
      targets[si * mbs_ + bi] = sample[si + 1];
    }
  }
}

}  // namespace meshtune::engine::data
