// Memory terms against hand-computed Korthikanti et al. 2022 examples and
// Megatron's bytes-per-parameter table.
#include "costmodel/memory_model.h"

#include <gtest/gtest.h>

#include "search_spaces/pipeline_schedule.h"
#include "search_spaces/training_spec.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::PipelineSchedule;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::RecomputeMethod;
using search_spaces::TrainingSpec;

constexpr double s = 2048, h = 12288, a = 96, t = 8;

ModelSpec Gpt175() { return testing::Gpt(96, 12288, 96); }

ParallelConfig Tp8(bool sp, RecomputeGranularity g) {
  ParallelConfig c;
  c.tp = 8;
  c.sp = sp;
  c.mbs = 1;
  c.recompute.granularity = g;
  return c;
}

// fp32 log-sum-exp flash attention keeps per (token, head): 4·a·s·b/t.
constexpr double kLse = 4 * a * s / t;

TEST(LayerActivations, SpSelective175bIs34sbhOverT) {
  const double got = LayerActivationBytes(
      Gpt175(), Tp8(true, RecomputeGranularity::kSelective), 2048,
      Precision::kBf16, false);
  EXPECT_DOUBLE_EQ(got, 34 * s * h / t + kLse);
  EXPECT_NEAR(got / (34 * s * h / t), 1.0, 0.001);
}

TEST(LayerActivations, TpWithoutSpIs10Plus24OverT) {
  const double got =
      LayerActivationBytes(Gpt175(), Tp8(false, RecomputeGranularity::kNone),
                           2048, Precision::kBf16, false);
  EXPECT_DOUBLE_EQ(got, s * h * (10 + 24 / t) + kLse);
}

TEST(LayerActivations, UnfusedAttentionWithoutRecomputeStoresScores) {
  // Korthikanti Table 2, tensor parallel: sbh(10 + 24/t + 5as/(ht)).
  const double got =
      LayerActivationBytes(Gpt175(), Tp8(false, RecomputeGranularity::kNone),
                           2048, Precision::kBf16, false,
                           /*flash_attention=*/false);
  EXPECT_DOUBLE_EQ(got, s * h * (10 + 24 / t + 5 * a * s / (h * t)) + kLse);
  // Selective recompute removes the score term again.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(
                       Gpt175(), Tp8(false, RecomputeGranularity::kSelective),
                       2048, Precision::kBf16, false, false),
                   s * h * (10 + 24 / t) + kLse);
}

TEST(LayerActivations, LlamaLayerFollowsTheDerivedFormula) {
  // s·b·(12h + 4h·g/a + 6f) + LSE for RMSNorm, SwiGLU, GQA, no dropout.
  const ModelSpec m = testing::Llama(80, 8192, 64, 8, 28672, 128256, 4096);
  ParallelConfig c;
  c.mbs = 2;
  const double sb = 4096.0 * 2;
  const double expected =
      sb * (12 * 8192 + 4 * 8192 * 8 / 64.0 + 6 * 28672 + 4 * 64);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, c, 4096, Precision::kBf16, false),
                   expected);
  // Context parallel splits the sequence.
  c.cp = 2;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, c, 4096, Precision::kBf16, false),
                   expected / 2);
}

TEST(Checkpoint, FullRecomputeKeeps2sbh) {
  EXPECT_DOUBLE_EQ(
      CheckpointBytes(Gpt175(), Tp8(false, RecomputeGranularity::kFull), 2048),
      2 * s * h);
  EXPECT_DOUBLE_EQ(
      CheckpointBytes(Gpt175(), Tp8(true, RecomputeGranularity::kFull), 2048),
      2 * s * h / t);
}

TEST(BytesPerParam, EighteenOrSixPlusTwelveOverD) {
  const ModelSpec m = Gpt175();
  const ModelStats st = ComputeModelStats(m, 51200, 2048);
  ParallelConfig c = Tp8(true, RecomputeGranularity::kSelective);
  c.pp = 8;
  c.dp = 16;
  const PipelineSchedule sched(8, 1, 96);
  const LocalParams lp = StageLocalParams(m, st, c, 3);  // a middle stage
  EXPECT_DOUBLE_EQ(lp.expert, 0.0);
  const auto states = [&](const MemoryBreakdown& mb) {
    return mb.weights_bytes + mb.gradients_bytes + mb.optimizer_bytes;
  };
  c.dist_opt = false;
  EXPECT_NEAR(states(StageMemory(m, st, c, 2048, Precision::kBf16, sched, 3)) /
                  lp.dense,
              18.0, 1e-9);
  c.dist_opt = true;
  EXPECT_NEAR(states(StageMemory(m, st, c, 2048, Precision::kBf16, sched, 3)) /
                  lp.dense,
              6.0 + 12.0 / 16, 1e-9);
  // The distributed optimizer shards over dp·cp.
  c.dp = 8;
  c.cp = 2;
  EXPECT_NEAR(states(StageMemory(m, st, c, 2048, Precision::kBf16, sched, 3)) /
                  lp.dense,
              6.0 + 12.0 / 16, 1e-9);
  // fp8 weights (--fp8-param-gather) and bf16 main grads
  // (--grad-reduce-in-bf16): the linear weights (12h² per layer / t) are
  // held as 1-byte fp8 copies, norms and biases stay 16-bit: 2·(P − lin) +
  // lin + 2·P + 12/d·P.
  MemoryRecipe fp8_bf16;
  fp8_bf16.grad_bytes_per_param = 2.0;
  fp8_bf16.quantized_param_gather = true;
  const double linear = 12 * 12 * h * h / t;
  EXPECT_DOUBLE_EQ(lp.linear, linear);
  EXPECT_NEAR(states(StageMemory(m, st, c, 2048, Precision::kFp8, sched, 3,
                                 true, fp8_bf16)) /
                  lp.dense,
              (2 * (lp.dense - linear) + linear) / lp.dense + 2.0 + 12.0 / 16,
              1e-9);
  // Without param gather TE keeps the 16-bit weight and an fp8 copy.
  fp8_bf16.quantized_param_gather = false;
  EXPECT_NEAR(states(StageMemory(m, st, c, 2048, Precision::kFp8, sched, 3,
                                 true, fp8_bf16)) /
                  lp.dense,
              2.0 + linear / lp.dense + 2.0 + 12.0 / 16, 1e-9);
}

TEST(StateBytes, FollowTrainingSpecFlags) {
  TrainingSpec t;
  EXPECT_EQ(t.weight_bytes_per_param(), 2.0);
  EXPECT_EQ(t.grad_bytes_per_param(), 4.0);
  t.fp8_param_gather = true;  // ignored unless training in fp8
  EXPECT_EQ(t.weight_bytes_per_param(), 2.0);
  t.precision = Precision::kFp8;
  EXPECT_EQ(t.weight_bytes_per_param(), 1.0);
  t.grad_reduce_in_bf16 = true;
  EXPECT_EQ(t.grad_bytes_per_param(), 2.0);
}

TEST(StageParams, MiddleStageHoldsItsLayersOverTp) {
  const ModelSpec m = Gpt175();
  const ModelStats st = ComputeModelStats(m, 51200, 2048);
  ParallelConfig c = Tp8(true, RecomputeGranularity::kSelective);
  c.pp = 8;
  // The projection and fc2 biases (2h) are replicated over tp, not split
  // (Megatron RowParallelLinear adds them after the reduction).
  const double row_bias = 2.0 * m.hidden_size;
  EXPECT_EQ(st.row_parallel_bias_params, row_bias);
  const double layer_tp =
      st.attention_params + st.dense_mlp_params + 7 * row_bias;
  EXPECT_DOUBLE_EQ(StageLocalParams(m, st, c, 3).dense,
                   12 * layer_tp / 8 + 12 * st.norm_params);
  // Stage 0 adds the word embedding shard and the positions; the last stage
  // its tied copy of the word embeddings and the final norm.
  EXPECT_DOUBLE_EQ(
      StageLocalParams(m, st, c, 0).dense,
      12 * layer_tp / 8 + 12 * st.norm_params + 51200.0 * h / 8 + 2048 * h);
  EXPECT_DOUBLE_EQ(StageLocalParams(m, st, c, 7).dense,
                   12 * layer_tp / 8 + 12 * st.norm_params + 51200.0 * h / 8 +
                       st.final_norm_params);
}

TEST(StageParams, ExpertsAreShardedOverTpTimesEp) {
  ModelSpec m = testing::Llama(32, 4096, 32, 8, 14336, 32000, 4096);
  m.num_experts = 8;
  m.moe_router_topk = 2;
  const ModelStats st = ComputeModelStats(m, 32000, 4096);
  ParallelConfig c;
  c.tp = 2;
  c.ep = 4;
  c.dp = 8;
  EXPECT_DOUBLE_EQ(StageLocalParams(m, st, c, 0).expert,
                   32 * 8 * st.expert_params / (2 * 4));
}

TEST(InFlight, Stage0HoldsAllLayersWorthIndependentOfPp) {
  // Korthikanti §4.2.3: 1F1B stage 0 keeps pp micro-batches of L/pp layers.
  const ModelSpec m = Gpt175();
  const ModelStats st = ComputeModelStats(m, 51200, 2048);
  const ParallelConfig base = Tp8(true, RecomputeGranularity::kSelective);
  const double layer =
      LayerActivationBytes(m, base, 2048, Precision::kBf16, false);
  for (int64_t pp : {2, 4, 8, 16}) {
    ParallelConfig c = base;
    c.pp = pp;
    const PipelineSchedule sched(pp, 1, 64);
    const MemoryBreakdown mb =
        StageMemory(m, st, c, 2048, Precision::kBf16, sched, 0);
    EXPECT_NEAR(mb.activations_bytes / (96 * layer), 1.0, 1e-9) << pp;
  }
  // Interleaving multiplies by 1 + (pp−1)/(pp·vpp).
  ParallelConfig c = base;
  c.pp = 8;
  c.vpp = 3;
  const PipelineSchedule sched(8, 3, 64);
  EXPECT_NEAR(StageMemory(m, st, c, 2048, Precision::kBf16, sched, 0)
                      .activations_bytes /
                  (96 * layer),
              1 + 7.0 / 24, 1e-9);
}

TEST(InFlight, FullRecomputeKeepsCheckpointsPlusOneChunk) {
  const ModelSpec m = Gpt175();
  const ModelStats st = ComputeModelStats(m, 51200, 2048);
  ParallelConfig c = Tp8(false, RecomputeGranularity::kFull);
  c.pp = 8;
  const PipelineSchedule sched(8, 1, 64);
  const double layer =
      LayerActivationBytes(m, c, 2048, Precision::kBf16, false);
  // Uniform, one layer per checkpoint: 96 checkpoints of 2sbh + one layer.
  EXPECT_NEAR(
      StageMemory(m, st, c, 2048, Precision::kBf16, sched, 0).activations_bytes,
      96 * 2 * s * h + layer, 1.0);
  // Block, 4 of 12 layers recomputed: 8 micro-batches × (4 checkpoints + 8
  // full layers) + one layer.
  c.recompute.method = RecomputeMethod::kBlock;
  c.recompute.num_layers = 4;
  EXPECT_NEAR(
      StageMemory(m, st, c, 2048, Precision::kBf16, sched, 0).activations_bytes,
      8 * (4 * 2 * s * h + 8 * layer) + layer, 1.0);
}

}  // namespace
}  // namespace meshtune::costmodel

namespace meshtune::costmodel {
namespace {

// LLaMA-3 405B: 126 layers only split over pp 16 with the embedding and
// the loss counted as layers (search_spaces::PipelineLayout).
TEST(UnevenPipeline, EdgeStagesHoldOneLayerFewer) {
  const ModelSpec m = testing::Llama(126, 16384, 128, 8, 53248, 128256, 8192);
  const ModelStats st = ComputeModelStats(m, 128256, 8192);
  ParallelConfig c;
  c.tp = 8;
  c.pp = 16;
  c.dp = 16;
  c.sp = true;
  EXPECT_EQ(LayersOnStage(m, c, 0).layers, 7);
  EXPECT_EQ(LayersOnStage(m, c, 1).layers, 8);
  EXPECT_EQ(LayersOnStage(m, c, 15).layers, 7);
  // Stage 1 holds one more layer's parameters than stage 0, which holds
  // the word embeddings instead.
  const double one_layer =
      (st.attention_params + st.dense_mlp_params) / c.tp + st.norm_params;
  EXPECT_NEAR(StageLocalParams(m, st, c, 1).dense -
                  (StageLocalParams(m, st, c, 0).dense -
                   st.word_embedding_params / c.tp - st.position_params),
              one_layer, 1.0);
  // Parameters over all stages add up to the model (per tp rank).
  double total = 0;
  for (int64_t s = 0; s < c.pp; ++s)
    total += StageLocalParams(m, st, c, s).dense;
  const double untied_embeddings = 2 * st.word_embedding_params / c.tp;
  EXPECT_NEAR(total, 126 * one_layer + untied_embeddings + st.final_norm_params,
              1e3);
}

}  // namespace
}  // namespace meshtune::costmodel
