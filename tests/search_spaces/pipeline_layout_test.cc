#include "search_spaces/pipeline_layout.h"

#include <gtest/gtest.h>

namespace meshtune::search_spaces {
namespace {

TEST(PipelineLayout, EvenSplitWhenLayersDivide) {
  EXPECT_TRUE(PipelineLayout::Valid(96, 8, 3));
  EXPECT_FALSE(PipelineLayout::AccountsEmbeddingAndLoss(96, 8, 3));
  const PipelineLayout l(96, 8, 3);
  EXPECT_EQ(l.units_per_chunk(), 4);
  for (int64_t s = 0; s < 8; ++s) EXPECT_EQ(l.LayersOnStage(s), 12);
  EXPECT_EQ(l.MaxLayersOnStage(), 12);
}

TEST(PipelineLayout, Llama3_405bOver16StagesCountsEmbeddingAndLoss) {
  // 126 layers + embedding + loss = 128 units, 8 per stage; the first and
  // last stage hold 7 transformer layers (NeMo's LLaMA-3 405B recipe).
  EXPECT_NE(126 % 16, 0);  // the even split does not exist
  ASSERT_TRUE(PipelineLayout::Valid(126, 16, 1));
  const PipelineLayout l(126, 16, 1);
  EXPECT_TRUE(l.accounts_embedding_and_loss());
  EXPECT_EQ(l.LayersOnStage(0), 7);
  EXPECT_EQ(l.LayersOnStage(1), 8);
  EXPECT_EQ(l.LayersOnStage(15), 7);
  EXPECT_EQ(l.MaxLayersOnStage(), 8);
}

TEST(PipelineLayout, InterleavedAccountingTouchesOnlyFirstAndLastChunk) {
  const PipelineLayout l(126, 8, 2);  // 128 units, 8 per chunk
  EXPECT_EQ(l.LayersInChunk(0, 0), 7);
  EXPECT_EQ(l.LayersInChunk(0, 1), 8);
  EXPECT_EQ(l.LayersInChunk(7, 0), 8);
  EXPECT_EQ(l.LayersInChunk(7, 1), 7);
  EXPECT_EQ(l.LayersOnStage(0), 15);
  EXPECT_EQ(l.LayersOnStage(3), 16);
}

TEST(PipelineLayout, LayersAlwaysAddUp) {
  for (int64_t layers = 1; layers <= 130; ++layers) {
    for (int64_t pp = 1; pp <= 64; ++pp) {
      for (int64_t vpp = 1; vpp <= 8; ++vpp) {
        if (!PipelineLayout::Valid(layers, pp, vpp)) continue;
        const PipelineLayout l(layers, pp, vpp);
        int64_t total = 0;
        for (int64_t s = 0; s < pp; ++s) {
          for (int64_t c = 0; c < vpp; ++c) {
            EXPECT_GE(l.LayersInChunk(s, c), 1) << layers << " " << pp;
            total += l.LayersInChunk(s, c);
          }
          EXPECT_LE(l.LayersOnStage(s), l.MaxLayersOnStage());
        }
        EXPECT_EQ(total, layers) << layers << " over " << pp << "x" << vpp;
      }
    }
  }
}

TEST(PipelineLayout, NeitherSplitIsInvalid) {
  EXPECT_FALSE(PipelineLayout::Valid(126, 5, 1));  // neither 126 nor 128
  EXPECT_FALSE(PipelineLayout::Valid(6, 8, 1));    // 8 units, 1 per stage
  EXPECT_FALSE(PipelineLayout::Valid(0, 1, 1));
}

}  // namespace
}  // namespace meshtune::search_spaces
