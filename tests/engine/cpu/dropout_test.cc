// Counter-based dropout masks (engine/cpu/dropout_mask.h) and hidden
// dropout: the keep rate matches p, kept elements are scaled by 1/(1 − p),
// masks depend only on global coordinates (a sequence-parallel shard and a
// different micro-batch size draw the same mask), and streams differ.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::cpu {
namespace {

using test_util::BitIdentical;
using test_util::RandomFloats;

TEST(CpuDropoutTest, KeepRateAndUniformMoments) {
  const uint64_t key = DropoutKey(1234, 3, DropoutSite::kMlpOut);
  const int64_t rows = 200, cols = 1000;
  double sum = 0, sum_sq = 0;
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t seed = DropoutRowSeed(key, r % 7, r);
    for (int64_t c = 0; c < cols; ++c) {
      const double u = DropoutUniform(seed, c);
      ASSERT_GE(u, 0.0);
      ASSERT_LT(u, 1.0);
      sum += u;
      sum_sq += u * u;
      kept += u >= 0.1;
    }
  }
  const double count = static_cast<double>(rows * cols);
  // 200k draws: the standard error of the keep rate is 0.0007, of the mean
  // 0.0006; 5 sigma bounds.
  EXPECT_NEAR(kept / count, 0.9, 0.0035);
  EXPECT_NEAR(sum / count, 0.5, 0.003);
  EXPECT_NEAR(sum_sq / count, 1.0 / 3.0, 0.003);
}

TEST(CpuDropoutTest, HiddenDropoutScalesKeptAndZeroesDropped) {
  const int64_t s = 8, b = 2, h = 64;
  const auto x = RandomFloats(s * b * h, 5, 0.5f, 1.5f);  // never 0
  auto y = x;
  DropoutSpec d;
  d.p = 0.25f;
  d.key = DropoutKey(7, 0, DropoutSite::kAttentionOut);
  d.first_sample = 40;
  HiddenDropout(y.data(), s * b, h, b, d);
  int64_t zeros = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (y[i] == 0.0f) {
      ++zeros;
    } else {
      ASSERT_EQ(y[i], x[i] * (1.0f / 0.75f)) << i;
    }
  }
  // 1024 elements, 25% dropped: 256 ± 14 (1 sigma).
  EXPECT_GT(zeros, 256 - 70);
  EXPECT_LT(zeros, 256 + 70);

  // p = 0 is a no-op.
  auto z = x;
  d.p = 0.0f;
  HiddenDropout(z.data(), s * b, h, b, d);
  EXPECT_TRUE(BitIdentical(z, x));
}

TEST(CpuDropoutTest, SequenceShardsDrawTheFullMask) {
  const int64_t s = 8, b = 2, h = 16, tp = 4;
  const int64_t n = s * b, nl = n / tp;
  const auto x = RandomFloats(n * h, 9);
  DropoutSpec d;
  d.p = 0.3f;
  d.key = DropoutKey(1, 2, DropoutSite::kMlpOut);
  d.first_sample = 100;
  auto full = x;
  HiddenDropout(full.data(), n, h, b, d);
  for (int64_t r = 0; r < tp; ++r) {
    std::vector<float> shard(x.begin() + r * nl * h,
                             x.begin() + (r + 1) * nl * h);
    DropoutSpec ds = d;
    ds.first_row = r * nl;
    HiddenDropout(shard.data(), nl, h, b, ds);
    EXPECT_TRUE(BitIdentical(
        shard, std::vector<float>(full.begin() + r * nl * h,
                                  full.begin() + (r + 1) * nl * h)))
        << "shard " << r;
  }
}

TEST(CpuDropoutTest, MicroBatchSizeDoesNotChangeTheMask) {
  // One micro-batch of samples 10, 11 (b = 2) against two of b = 1: the
  // element (sample, position, column) must get the same decision.
  const int64_t s = 6, h = 32;
  const auto x = RandomFloats(s * 2 * h, 11, 0.5f, 1.5f);
  DropoutSpec d;
  d.p = 0.5f;
  d.key = DropoutKey(3, -1, DropoutSite::kEmbedding);
  d.first_sample = 10;
  auto both = x;
  HiddenDropout(both.data(), s * 2, h, 2, d);
  for (int64_t bi = 0; bi < 2; ++bi) {
    std::vector<float> one(s * h);
    for (int64_t si = 0; si < s; ++si) {
      for (int64_t j = 0; j < h; ++j) {
        one[si * h + j] = x[(si * 2 + bi) * h + j];
      }
    }
    DropoutSpec d1 = d;
    d1.first_sample = 10 + bi;
    HiddenDropout(one.data(), s, h, 1, d1);
    for (int64_t si = 0; si < s; ++si) {
      for (int64_t j = 0; j < h; ++j) {
        ASSERT_EQ(one[si * h + j], both[(si * 2 + bi) * h + j])
            << "sample " << bi << " position " << si << " column " << j;
      }
    }
  }
}

TEST(CpuDropoutTest, StreamsDiffer) {
  // Layers, sites, seeds and samples each get their own masks.
  auto mask = [](uint64_t key, int64_t first_sample) {
    std::vector<float> x(4 * 64, 1.0f);
    DropoutSpec d;
    d.p = 0.5f;
    d.key = key;
    d.first_sample = first_sample;
    HiddenDropout(x.data(), 4, 64, 1, d);
    return x;
  };
  const auto base = mask(DropoutKey(1, 0, DropoutSite::kMlpOut), 0);
  EXPECT_TRUE(
      BitIdentical(base, mask(DropoutKey(1, 0, DropoutSite::kMlpOut), 0)));
  EXPECT_FALSE(
      BitIdentical(base, mask(DropoutKey(1, 1, DropoutSite::kMlpOut), 0)));
  EXPECT_FALSE(BitIdentical(
      base, mask(DropoutKey(1, 0, DropoutSite::kAttentionOut), 0)));
  EXPECT_FALSE(
      BitIdentical(base, mask(DropoutKey(2, 0, DropoutSite::kMlpOut), 0)));
  EXPECT_FALSE(
      BitIdentical(base, mask(DropoutKey(1, 0, DropoutSite::kMlpOut), 1)));
}

}  // namespace
}  // namespace meshtune::engine::cpu
