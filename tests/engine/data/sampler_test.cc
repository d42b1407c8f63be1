#include "engine/data/sampler.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace meshtune::engine::data {
namespace {

// Sample i holds tokens 100·i + t, t = 0..seq: every token names its sample
// and position, so the layout can be read off the output.
class CountingDataset : public TokenDataset {
 public:
  explicit CountingDataset(int64_t seq) : seq_(seq) {}
  int64_t num_samples() const override { return 1000; }
  int64_t seq_length() const override { return seq_; }
  void GetSample(int64_t index, int32_t* tokens) const override {
    for (int64_t t = 0; t <= seq_; ++t) {
      tokens[t] = static_cast<int32_t>(100 * index + t);
    }
  }
  int64_t vocab_size() const override { return 100000; }

 private:
  int64_t seq_;
};

// Megatron's MegatronPretrainingSampler by hand: mbs 2, dp 3. The global
// batch at consumed = 12 gives dp rank 1 the samples 12 + j·6 + 2, +1.
TEST(PretrainingSampler, FirstSampleIsMegatronsOrder) {
  CountingDataset data(4);
  const PretrainingSampler rank1(&data, /*mbs=*/2, /*dp=*/3, /*dp_rank=*/1);
  EXPECT_EQ(rank1.FirstSample(12, 0), 14);
  EXPECT_EQ(rank1.FirstSample(12, 1), 20);
  EXPECT_EQ(rank1.FirstSample(12, 2), 26);
  const PretrainingSampler rank0(&data, 2, 3, 0);
  EXPECT_EQ(rank0.FirstSample(0, 0), 0);
  EXPECT_EQ(rank0.FirstSample(0, 1), 6);
}

// Tokens are sequence-major ([s, b]: row si·mbs + bi) and the targets are
// the next tokens of the same sample.
TEST(PretrainingSampler, LoadsSequenceMajorWithNextTokenTargets) {
  const int64_t seq = 3, mbs = 2;
  CountingDataset data(seq);
  const PretrainingSampler sampler(&data, mbs, /*dp=*/2, /*dp_rank=*/1);
  std::vector<int32_t> tokens(seq * mbs), targets(seq * mbs);
  // consumed 4, micro-batch 1: samples 4 + 1·2·2 + 1·2 = 10 and 11.
  sampler.Load(4, 1, tokens.data(), targets.data());
  EXPECT_EQ(tokens,
            (std::vector<int32_t>{1000, 1100, 1001, 1101, 1002, 1102}));
  EXPECT_EQ(targets,
            (std::vector<int32_t>{1001, 1101, 1002, 1102, 1003, 1103}));
}

}  // namespace
}  // namespace meshtune::engine::data
