#include "engine/model_layout.h"

#include <gtest/gtest.h>

#include "tests/engine/engine_test_util.h"

namespace meshtune::engine {
namespace {

// 4 layers over pp 2 · vpp 2, one layer per virtual stage (Megatron's
// order: chunk c of pipeline rank p is virtual stage c·2 + p). Pipeline
// rank 1 holds stages 1 and 3 (layers 1 and 3), the head on stage 3 and,
// tied, a last-stage copy of the word embedding; tp rank 1 of 2 holds the
// upper half of the padded vocabulary (100 -> 256 = 128·tp rows).
TEST(ModelLayout, PlacesChunksLayersAndEndsInMegatronsOrder) {
  TrainConfig c = testing::TinyConfig(false);
  c.parallel.tp = 2;
  c.parallel.pp = 2;
  c.parallel.vpp = 2;
  ParamStore store;
  const ModelLayout layout(c, /*tp_rank=*/1, /*pp_rank=*/1, &store);
  ASSERT_EQ(layout.num_chunks(), 2);
  EXPECT_EQ(layout.FirstLayer(0), 1);
  EXPECT_EQ(layout.FirstLayer(1), 3);
  EXPECT_EQ(layout.NumLayers(0), 1);
  EXPECT_FALSE(layout.HasEmbedding(0));
  EXPECT_FALSE(layout.HasHead(0));
  EXPECT_TRUE(layout.HasHead(1));
  EXPECT_EQ(layout.word_embedding(), -1);
  EXPECT_EQ(layout.position_embedding(), -1);
  ASSERT_GE(layout.output_weight(), 0);
  EXPECT_EQ(store.info(layout.output_weight()).name,
            "embedding.word_embeddings.weight");
  EXPECT_TRUE(store.info(layout.output_weight()).tied_embedding);
  EXPECT_EQ(layout.vocab_start(), 128);
  EXPECT_EQ(layout.vocab_local(), 128);
  // Without recompute every layer is its own kept segment.
  ASSERT_EQ(layout.Segments(1).size(), 1u);
  EXPECT_FALSE(layout.Segments(1)[0].recompute);
}

// Pipeline rank 0 of the same model: the embeddings (learned positions for
// GPT) on stage 0, no head; full uniform recompute of 1 layer makes each
// layer a recomputed segment.
TEST(ModelLayout, FirstStageHoldsTheEmbeddingsAndRecomputeSegments) {
  TrainConfig c = testing::TinyConfig(false);
  c.parallel.pp = 2;
  c.parallel.vpp = 2;
  c.parallel.recompute.granularity = search_spaces::RecomputeGranularity::kFull;
  c.parallel.recompute.method = search_spaces::RecomputeMethod::kUniform;
  c.parallel.recompute.num_layers = 1;
  ParamStore store;
  const ModelLayout layout(c, 0, 0, &store);
  EXPECT_TRUE(layout.HasEmbedding(0));
  EXPECT_FALSE(layout.HasHead(1));
  EXPECT_GE(layout.word_embedding(), 0);
  EXPECT_GE(layout.position_embedding(), 0);
  EXPECT_EQ(layout.output_weight(), -1);
  EXPECT_EQ(layout.FirstLayer(1), 2);
  ASSERT_EQ(layout.Segments(0).size(), 1u);
  EXPECT_TRUE(layout.Segments(0)[0].recompute);
}

}  // namespace
}  // namespace meshtune::engine
