// Parameter counts against published sizes and FLOPs against hand-computed
// values and the closed form for GPT.
#include "costmodel/model_stats.h"

#include <gtest/gtest.h>

#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::ModelSpec;

ModelSpec Gpt3_175b() { return testing::Gpt(96, 12288, 96); }

ModelSpec Mixtral8x7b() {
  ModelSpec m = testing::Llama(32, 4096, 32, 8, 14336, 32000, 4096);
  m.num_experts = 8;
  m.moe_router_topk = 2;
  return m;
}

double TotalB(const ModelSpec& m) {
  return ComputeModelStats(m, PaddedVocabSize(m.vocab_size, 1), m.seq_length)
             .total_params /
         1e9;
}

TEST(PaddedVocab, RoundsUpToMultipleOf128TimesTp) {
  EXPECT_EQ(PaddedVocabSize(51200, 8), 51200);
  EXPECT_EQ(PaddedVocabSize(50257, 1), 50304);
  EXPECT_EQ(PaddedVocabSize(50257, 8), 51200);
  EXPECT_EQ(PaddedVocabSize(128256, 1), 128256);
  EXPECT_EQ(PaddedVocabSize(128256, 8), 129024);
}

TEST(ModelStats, Gpt3_175bIs174_6Billion) {
  const double b = TotalB(Gpt3_175b());
  EXPECT_NEAR(b, 174.6, 0.1);
  EXPECT_NEAR(b / 175.0, 1.0, 0.01);
}

TEST(ModelStats, Llama3_70bAnd8b) {
  EXPECT_NEAR(TotalB(testing::Llama(80, 8192, 64, 8, 28672, 128256, 8192)),
              70.55, 0.705);
  EXPECT_NEAR(TotalB(testing::Llama(32, 4096, 32, 8, 14336, 128256, 8192)),
              8.03, 0.01);
}

TEST(ModelStats, Mixtral8x7bTotalAndActive) {
  const ModelSpec m = Mixtral8x7b();
  const ModelStats st = ComputeModelStats(m, 32000, 4096);
  EXPECT_NEAR(st.total_params / 1e9, 46.7, 0.1);
  EXPECT_NEAR(st.active_params / 1e9, 12.9, 0.1);
  // One expert of SwiGLU: 3·h·f_e.
  EXPECT_DOUBLE_EQ(st.expert_params, 3.0 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(st.router_params, 4096.0 * 8);
}

TEST(ModelStats, MoeLayerFrequencyCountsOnlyMoeLayers) {
  ModelSpec m = Mixtral8x7b();
  m.moe_layer_freq = 2;  // 16 MoE + 16 dense layers
  const ModelStats st = ComputeModelStats(m, 32000, 4096);
  const double layer_common = st.attention_params + st.norm_params;
  const double expected = 32 * layer_common + 16 * st.dense_mlp_params +
                          16 * (8 * st.expert_params + st.router_params) +
                          2 * 32000.0 * 4096 + 4096;
  EXPECT_DOUBLE_EQ(st.total_params, expected);
}

TEST(ModelFlops, SmallGptByHand) {
  // L=2, h=64, a=4, f=256, V=128, s=16, B=2 (tokens 32):
  //   per token: MLP 6·h·f·2·L = 393216; attention linears
  //   6·(h·3h + h·h)·L = 196608; logits 6·h·V = 49152
  //   core attention: B·s²·6·h·L = 393216
  //   total 32·638976 + 393216 = 20840448.
  const ModelSpec m = testing::Gpt(2, 64, 4, 128, 16);
  EXPECT_DOUBLE_EQ(ModelFlopsPerStep(m, 2, 16, 128), 20840448.0);
}

TEST(ModelFlops, Gpt3_175bMatchesClosedForm) {
  const double B = 1536, s = 2048, L = 96, h = 12288, V = 51200;
  const double closed =
      72 * B * s * L * h * h * (1 + s / (12 * h) + V / (12 * L * h));
  const double f = ModelFlopsPerStep(Gpt3_175b(), 1536, 2048, 51200);
  EXPECT_NEAR(f / closed, 1.0, 0.005);
}

TEST(ModelFlops, SwigluGqaCountsThreeMlpGemmsAndNarrowKv) {
  // LLaMA-3 8B per token (s ignored): 6·h·3f·L + 6·(h·(h+2·kv) + h·h)·L
  // + 6·h·V.
  const ModelSpec m = testing::Llama(32, 4096, 32, 8, 14336, 128256, 8192);
  const double h = 4096, f = 14336, kv = 1024, V = 128256, L = 32;
  const double per_token =
      6 * h * 3 * f * L + 6 * (h * (h + 2 * kv) + h * h) * L + 6 * h * V;
  const double core = 8192.0 * 6 * h * L;  // seq · 6·a·d_h·L per token
  EXPECT_NEAR(ModelFlopsPerStep(m, 1, 8192, 128256), 8192 * (per_token + core),
              1.0);
}

TEST(RecomputeFlops, SelectiveIsForwardCoreAttentionFullIsOneForward) {
  const ModelSpec m = Gpt3_175b();
  const double B = 64, s = 2048, L = 96, h = 12288;
  EXPECT_DOUBLE_EQ(SelectiveRecomputeFlopsPerStep(m, 64, 2048),
                   B * s * s * 2 * h * L);
  // Full: a third of the layer FLOPs (no logits):
  // 24·B·s·L·h²·(1 + s/(12h)).
  EXPECT_NEAR(FullRecomputeFlopsPerStep(m, 64, 2048, 1.0) /
                  (24 * B * s * L * h * h * (1 + s / (12 * h))),
              1.0, 1e-12);
  EXPECT_NEAR(FullRecomputeFlopsPerStep(m, 64, 2048, 0.25) /
                  FullRecomputeFlopsPerStep(m, 64, 2048, 1.0),
              0.25, 1e-12);
}

}  // namespace
}  // namespace meshtune::costmodel
