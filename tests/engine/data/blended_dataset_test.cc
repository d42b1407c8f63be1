// BlendedDataset: the greedy assignment keeps every dataset within one
// sample of its weight at every prefix, and samples come from the right
// dataset in order.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/data/blended_dataset.h"

namespace meshtune::engine::data {
namespace {

// Sample s of dataset `id` is seq_length + 1 copies of 1000 * id + s.
class Tagged : public TokenDataset {
 public:
  Tagged(int id, int64_t num_samples) : id_(id), num_samples_(num_samples) {}
  int64_t num_samples() const override { return num_samples_; }
  int64_t seq_length() const override { return 2; }
  void GetSample(int64_t index, int32_t* tokens) const override {
    EXPECT_LT(index, num_samples_);
    for (int i = 0; i < 3; ++i) tokens[i] = 1000 * id_ + index;
  }
  int64_t vocab_size() const override { return 100 + id_; }

 private:
  int id_;
  int64_t num_samples_;
};

BlendedDataset MakeBlend(const std::vector<double>& weights, int64_t n) {
  double sum = 0;
  for (double w : weights) sum += w;
  std::vector<std::unique_ptr<TokenDataset>> parts;
  for (size_t d = 0; d < weights.size(); ++d) {
    parts.push_back(std::make_unique<Tagged>(
        d, BlendedSubDatasetSamples(weights[d] / sum, n)));
  }
  return BlendedDataset(std::move(parts), weights, n);
}

TEST(DataBlendedDataset, SubDatasetSizeHasMargin) {
  EXPECT_EQ(BlendedSubDatasetSamples(0.3, 1000), 303);  // ceil(301.5) + 1
  EXPECT_EQ(BlendedSubDatasetSamples(1.0, 1), 3);       // ceil(1.005) + 1
}

TEST(DataBlendedDataset, FractionsTrackWeightsWithinOneSample) {
  for (const std::vector<double>& weights :
       {std::vector<double>{5, 3, 2}, std::vector<double>{0.1, 0.9},
        std::vector<double>{1, 1, 1, 1, 1, 1, 1},
        std::vector<double>{0.001, 10}}) {
    const int64_t n = 997;
    const BlendedDataset blend = MakeBlend(weights, n);
    ASSERT_EQ(blend.num_samples(), n);
    const std::vector<double>& w = blend.normalized_weights();
    std::vector<int64_t> count(weights.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t d = blend.dataset_of(i);
      EXPECT_EQ(blend.sample_in_dataset(i), count[d]) << "in order";
      ++count[d];
      for (size_t e = 0; e < count.size(); ++e) {
        const double target = w[e] * static_cast<double>(i + 1);
        EXPECT_LE(std::abs(static_cast<double>(count[e]) - target), 1.0)
            << "dataset " << e << " after " << i + 1 << " samples";
      }
    }
  }
}

TEST(DataBlendedDataset, SamplesComeFromTheirDataset) {
  const BlendedDataset blend = MakeBlend({2, 1}, 30);
  EXPECT_EQ(blend.seq_length(), 2);
  EXPECT_EQ(blend.vocab_size(), 101);
  EXPECT_DOUBLE_EQ(blend.normalized_weights()[0], 2.0 / 3.0);
  std::vector<int32_t> tokens(3);
  int from_first = 0;
  for (int64_t i = 0; i < 30; ++i) {
    blend.GetSample(i, tokens.data());
    EXPECT_EQ(tokens[0],
              1000 * blend.dataset_of(i) + blend.sample_in_dataset(i));
    from_first += blend.dataset_of(i) == 0;
  }
  EXPECT_EQ(from_first, 20);
  // The first pick is the heaviest dataset.
  EXPECT_EQ(blend.dataset_of(0), 0);
}

}  // namespace
}  // namespace meshtune::engine::data
