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

namespace meshtune::search_spaces {
namespace {

ParallelConfig Uneven(int64_t pp, int64_t vpp, int64_t first, int64_t last) {
  ParallelConfig c;
  c.pp = pp;
  c.vpp = vpp;
  c.layout_first_layers = first;
  c.layout_last_layers = last;
  return c;
}

TEST(PipelineLayoutUneven, DeepSeekV3Pp8Vpp4IsNvidiasLayout) {
  // Megatron-Bridge perf_recipes/deepseek: "Et|(tt|)*30mL" for 61 layers
  // + 1 MTP over pp 8 x vpp 4 = 32 virtual stages.
  const ParallelConfig c = Uneven(8, 4, 1, 0);
  ASSERT_TRUE(PipelineLayout::Valid(61, c));
  const PipelineLayout l(61, c);
  EXPECT_TRUE(l.uneven());
  EXPECT_EQ(l.units_per_chunk(), 2);
  EXPECT_EQ(l.LayersInChunk(0, 0), 1);
  EXPECT_EQ(l.LayersInChunk(1, 0), 2);
  EXPECT_EQ(l.LayersInChunk(7, 3), 0);
  // Chunk-major numbering: rank 1's first chunk starts after rank 0's.
  EXPECT_EQ(l.FirstLayerOfChunk(1, 0), 1);
  EXPECT_EQ(l.FirstLayerOfChunk(0, 1), 1 + 7 * 2);
  EXPECT_EQ(l.LayersOnStage(0), 1 + 3 * 2);
  EXPECT_EQ(l.LayersOnStage(7), 3 * 2);
  EXPECT_EQ(l.MaxLayersOnStage(), 8);
  EXPECT_EQ(l.MegatronString(1), "Et|(tt|)*30mL");
}

TEST(PipelineLayoutUneven, DeepSeekV3Pp16IsNvidiasLayout) {
  const PipelineLayout l(61, Uneven(16, 1, 4, 1));
  EXPECT_EQ(l.LayersOnStage(0), 4);
  EXPECT_EQ(l.LayersOnStage(8), 4);
  EXPECT_EQ(l.LayersOnStage(15), 1);
  EXPECT_EQ(l.MegatronString(1), "Et*4|(t*4|)*14tmL");
}

TEST(PipelineLayoutUneven, FamilyRules) {
  EXPECT_FALSE(PipelineLayout::ValidUneven(61, 1, 1, 61, 0));  // one stage
  EXPECT_TRUE(PipelineLayout::ValidUneven(61, 2, 1, 31, 30));  // two stages
  EXPECT_FALSE(PipelineLayout::ValidUneven(61, 2, 1, 31, 31));
  EXPECT_FALSE(PipelineLayout::ValidUneven(61, 16, 1, 5, 0));  // 56 / 14 = 4
  EXPECT_FALSE(PipelineLayout::ValidUneven(61, 4, 1, 0, 0));   // 61 / 2
  EXPECT_TRUE(PipelineLayout::ValidUneven(126, 16, 1, 7, 7));
}

TEST(PipelineLayoutUneven, LayersAddUpAndStartsFollow) {
  for (int64_t layers = 2; layers <= 70; ++layers) {
    for (int64_t pp : {2, 3, 4, 8}) {
      for (int64_t vpp : {1, 2, 4}) {
        for (int64_t f = 0; f <= 6; ++f) {
          for (int64_t l = 0; l <= 6; ++l) {
            if (!PipelineLayout::ValidUneven(layers, pp, vpp, f, l)) continue;
            const PipelineLayout p(layers, Uneven(pp, vpp, f, l));
            int64_t total = 0;
            for (int64_t chunk = 0; chunk < vpp; ++chunk) {
              for (int64_t s = 0; s < pp; ++s) {
                EXPECT_EQ(p.FirstLayerOfChunk(s, chunk), total);
                total += p.LayersInChunk(s, chunk);
              }
            }
            EXPECT_EQ(total, layers);
          }
        }
      }
    }
  }
}

TEST(ParsePipelineLayout, ReadsNvidiaLayoutsBack) {
  auto a = ParsePipelineLayout("Et|(tt|)*30mL", 61, 8, 1);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->vpp, 4);
  EXPECT_EQ(a->first_layers, 1);
  EXPECT_EQ(a->last_layers, 0);
  EXPECT_FALSE(a->even);
  auto b = ParsePipelineLayout("Et*4|(t*4|)*14tmL", 61, 4, 1);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->vpp, 4);
  EXPECT_EQ(b->first_layers, 4);
  EXPECT_EQ(b->last_layers, 1);
  auto k = ParsePipelineLayout("Et|(tt|)*30L", 61, 16, 0);  // Kimi-K2
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->vpp, 2);
  auto even = ParsePipelineLayout("E(t*4|)*3t*4L", 16, 4, 0);
  ASSERT_TRUE(even.ok()) << even.status().message();
  EXPECT_TRUE(even->even);
  // Round trip of the formatter over the whole family.
  for (int64_t f = 0; f <= 4; ++f) {
    for (int64_t l = 0; l <= 4; ++l) {
      if (!PipelineLayout::ValidUneven(61, 4, 4, f, l)) continue;
      const std::string s =
          PipelineLayout(61, Uneven(4, 4, f, l)).MegatronString(1);
      auto r = ParsePipelineLayout(s, 61, 4, 1);
      ASSERT_TRUE(r.ok()) << s << ": " << r.status().message();
      EXPECT_EQ(r->first_layers, f) << s;
      EXPECT_EQ(r->last_layers, l) << s;
    }
  }
}

TEST(ParsePipelineLayout, ErrorsNameTheProblem) {
  auto expect = [](const std::string& layout, int64_t layers, int64_t pp,
                   int64_t mtp, const std::string& needle) {
    auto r = ParsePipelineLayout(layout, layers, pp, mtp);
    ASSERT_FALSE(r.ok()) << layout;
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << r.status().message();
  };
  expect("Et|(tt|)*30mL", 60, 8, 1, "places 61 layers");
  expect("Et|(tt|)*30mL", 61, 8, 0, "places 1 MTP");
  expect("Et|(tt|)*30mL", 61, 5, 1, "not a multiple of pipeline size 5");
  expect("Et|(tx|)*30mL", 61, 8, 1, "unknown symbol 'x'");
  expect("Et|(tt|*30mL", 61, 8, 1, "missing ')'");
  expect("tE|(tt|)*30mL", 61, 8, 1, "E must open");
  expect("Et|tt|ttt|tt|L", 8, 5, 0, "different layer counts");
  expect("Et*3|t|t|L", 5, 4, 0, "more layers than a middle one");
}

}  // namespace
}  // namespace meshtune::search_spaces
