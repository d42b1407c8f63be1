#include "engine/data/synthetic_dataset.h"

namespace meshtune::engine::data {

void SyntheticDataset::GetSample(int64_t index, int32_t* tokens) const {
  uint64_t x = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(index + 1);
  for (int64_t i = 0; i <= seq_; ++i) {
    x ^= x >> 12;  // xorshift64* (Vigna 2016)
    x ^= x << 25;
    x ^= x >> 27;
    const uint64_t r = x * 0x2545f4914f6cdd1dULL;
    tokens[i] = static_cast<int32_t>(i > 0 && (r >> 60) < 12
                                         ? (tokens[i - 1] + 1) % vocab_
                                         : (r >> 33) % vocab_);
  }
}

}  // namespace meshtune::engine::data
