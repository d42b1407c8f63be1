// CPU vocab-parallel token embedding and learned position embedding:
// sharded lookups summing to the full lookup, backward touching only owned
// rows, position offsets, and the overwrite/accumulate rules.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "tests/engine/cpu/test_util.h"

namespace meshtune::engine::cpu {
namespace {

using test_util::RandomFloats;

TEST(CpuEmbeddingTest, TwoVocabShardsSumToFullLookup) {
  const int64_t vocab = 8, h = 3, n = 6;
  const std::vector<int32_t> tokens = {0, 7, 3, 4, 3, 5};
  const auto table = RandomFloats(vocab * h, 81);
  std::vector<float> full(n * h, -1.0f);
  EmbeddingForward(tokens.data(), table.data(), full.data(), n, h, 0, vocab);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < h; ++j) {
      EXPECT_EQ(full[i * h + j], table[tokens[i] * h + j]);
    }
  }
  // Shard 0 holds rows [0, 4), shard 1 rows [4, 8) (its table starts at
  // global row 4).
  std::vector<float> shard0(n * h, -1.0f), shard1(n * h, -1.0f);
  EmbeddingForward(tokens.data(), table.data(), shard0.data(), n, h, 0, 4);
  EmbeddingForward(tokens.data(), table.data() + 4 * h, shard1.data(), n, h, 4,
                   4);
  for (int64_t i = 0; i < n; ++i) {
    const bool in_shard0 = tokens[i] < 4;
    for (int64_t j = 0; j < h; ++j) {
      EXPECT_EQ((in_shard0 ? shard1 : shard0)[i * h + j], 0.0f)
          << "row " << i << " must be zero off its shard";
      EXPECT_EQ(shard0[i * h + j] + shard1[i * h + j], full[i * h + j]);
    }
  }
}

TEST(CpuEmbeddingTest, BackwardAccumulatesOnlyOwnedRows) {
  const int64_t h = 2, n = 4;
  const std::vector<int32_t> tokens = {5, 2, 5, 6};
  const std::vector<float> dout = {1, 2, 10, 20, 100, 200, 1000, 2000};
  // Shard owning global rows [4, 8): local rows 1 (token 5) and 2 (token 6).
  std::vector<float> dtable(4 * h, 0.5f);
  EmbeddingBackward(tokens.data(), dout.data(), dtable.data(), n, h, 4, 4);
  EXPECT_EQ(dtable, (std::vector<float>{0.5f, 0.5f, 101.5f, 202.5f, 1000.5f,
                                        2000.5f, 0.5f, 0.5f}));
  // Accumulates on a second call; token 2 (off-shard) never lands.
  EmbeddingBackward(tokens.data(), dout.data(), dtable.data(), n, h, 4, 4);
  EXPECT_EQ(dtable, (std::vector<float>{0.5f, 0.5f, 202.5f, 404.5f, 2000.5f,
                                        4000.5f, 0.5f, 0.5f}));
}

TEST(CpuEmbeddingTest, BackwardIsBitIdenticalAcrossRuns) {
  // Many repeats of few tokens and h spanning several column blocks.
  const int64_t vocab = 5, h = 200, n = 500;
  std::vector<int32_t> tokens(n);
  for (int64_t i = 0; i < n; ++i)
    tokens[i] = static_cast<int32_t>(i * 7 % vocab);
  const auto dout = RandomFloats(n * h, 82);
  std::vector<float> a(vocab * h, 0.0f), b(vocab * h, 0.0f);
  EmbeddingBackward(tokens.data(), dout.data(), a.data(), n, h, 0, vocab);
  EmbeddingBackward(tokens.data(), dout.data(), b.data(), n, h, 0, vocab);
  EXPECT_TRUE(test_util::BitIdentical(a, b));
  // Row-order float sums: token 0's row equals a plain loop.
  for (int64_t j = 0; j < h; ++j) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      if (tokens[i] == 0) sum += dout[i * h + j];
    }
    EXPECT_EQ(a[j], sum) << j;
  }
}

TEST(CpuEmbeddingTest, PositionEmbeddingWithOffset) {
  // s = 2, b = 2, h = 2, pos_offset = 1: rows (si, bi) = (0, 0), (0, 1),
  // (1, 0), (1, 1) get positions 1, 1, 2, 2.
  const std::vector<float> pos_table = {0, 0, 1, 2, 3, 4, 9, 9};  // [4, 2]
  std::vector<float> x = {10, 10, 20, 20, 30, 30, 40, 40};
  PositionEmbeddingForward(pos_table.data(), x.data(), 2, 2, 2, 1);
  EXPECT_EQ(x, (std::vector<float>{11, 12, 21, 22, 33, 34, 43, 44}));

  const std::vector<float> dout = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> dpos(4 * 2, 0.25f);
  PositionEmbeddingBackward(dout.data(), dpos.data(), 2, 2, 2, 1);
  EXPECT_EQ(dpos, (std::vector<float>{0.25f, 0.25f, 4.25f, 6.25f, 12.25f,
                                      14.25f, 0.25f, 0.25f}));
  PositionEmbeddingBackward(dout.data(), dpos.data(), 2, 2, 2, 1);
  EXPECT_EQ(dpos, (std::vector<float>{0.25f, 0.25f, 8.25f, 12.25f, 24.25f,
                                      28.25f, 0.25f, 0.25f}));
}

}  // namespace
}  // namespace meshtune::engine::cpu
