// Megatron-FSDP sharding, CPU activation offloading and the column-wise
// saved MXFP8 inputs of the memory model, against hand-computed values.
#include <gtest/gtest.h>

#include "costmodel/memory_model.h"
#include "costmodel/model_stats.h"
#include "search_spaces/pipeline_schedule.h"
#include "search_spaces/training_spec.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::PipelineSchedule;
using search_spaces::Precision;
using search_spaces::TrainingSpec;

// A 4-layer GPT, h 1024, 16 heads, vocab 51200 (a multiple of 128: no
// padding at tp 1), seq 2048, tied embeddings, on 8 GPUs of data parallel.
constexpr double kH = 1024, kV = 51200, kS = 2048, kLayers = 4, kDp = 8;
// A GPT layer with biases: QKV 3h²+3h, proj h²+h, fc1 4h²+4h, fc2 4h²+h,
// two LayerNorms 4h.
constexpr double kLayerParams = 12 * kH * kH + 13 * kH;
// Word embeddings V·h and learned positions s·h (stage 0's unit).
constexpr double kEmbeddingParams = kV * kH + kS * kH;
constexpr double kModelParams =
    kLayers * kLayerParams + kEmbeddingParams + 2 * kH;  // + final norm

ModelSpec SmallGpt() { return testing::Gpt(4, 1024, 16, 51200, 2048); }

ParallelConfig Dp8() {
  ParallelConfig c;
  c.dp = 8;
  c.mbs = 1;
  return c;
}

MemoryBreakdown Memory(const ModelSpec& m, const ParallelConfig& c, Precision p,
                       const MemoryRecipe& r) {
  const ModelStats st = ComputeModelStats(m, 51200, 2048);
  const PipelineSchedule sched(1, 1, 8);
  return StageMemory(m, st, c, 2048, p, sched, 0, true, r);
}

TEST(MegatronFsdp, ParamsOfTheSmallGptAreHandCounted) {
  const ModelSpec m = SmallGpt();
  const ModelStats st = ComputeModelStats(m, 51200, 2048);
  EXPECT_DOUBLE_EQ(StageLocalParams(m, st, Dp8(), 0).dense, kModelParams);
}

TEST(MegatronFsdp, ShardsEveryStateAndGathersTwoUnits) {
  MemoryRecipe r;  // bf16 weights, fp32 main grads
  r.megatron_fsdp = true;
  const MemoryBreakdown mem = Memory(SmallGpt(), Dp8(), Precision::kBf16, r);
  // Persistent: 2 + 4 + 12 bytes per parameter over dp = 8. Working set:
  // the two largest units, the embedding (54.5 M) and one layer (12.6 M),
  // gathered in bf16 with their fp32 gradient bucket.
  const double working = kEmbeddingParams + kLayerParams;
  EXPECT_DOUBLE_EQ(mem.weights_bytes, 2 * kModelParams / kDp + 2 * working);
  EXPECT_DOUBLE_EQ(mem.gradients_bytes, 4 * kModelParams / kDp + 4 * working);
  EXPECT_DOUBLE_EQ(mem.optimizer_bytes, 12 * kModelParams / kDp);
}

TEST(MegatronFsdp, UsesLessStateThanTheDistributedOptimizer) {
  ParallelConfig c = Dp8();
  c.dist_opt = true;
  const MemoryBreakdown ddp =
      Memory(SmallGpt(), c, Precision::kBf16, MemoryRecipe());
  // DDP with the distributed optimizer: 2 + 4 full, 12 / 8.
  EXPECT_DOUBLE_EQ(ddp.weights_bytes + ddp.gradients_bytes, 6 * kModelParams);
  EXPECT_DOUBLE_EQ(ddp.optimizer_bytes, 12 * kModelParams / kDp);
  MemoryRecipe r;
  r.megatron_fsdp = true;
  const MemoryBreakdown fsdp = Memory(SmallGpt(), c, Precision::kBf16, r);
  EXPECT_LT(fsdp.weights_bytes + fsdp.gradients_bytes,
            ddp.weights_bytes + ddp.gradients_bytes);
  // Activations do not change with the sharding.
  EXPECT_DOUBLE_EQ(fsdp.activations_bytes, ddp.activations_bytes);
}

TEST(MegatronFsdp, RecipeFollowsTrainingSpec) {
  TrainingSpec t;
  EXPECT_FALSE(MemoryRecipeFor(t).megatron_fsdp);
  t.megatron_fsdp = true;
  t.cpu_offloading_num_layers = 3;
  const MemoryRecipe r = MemoryRecipeFor(t);
  EXPECT_TRUE(r.megatron_fsdp);
  EXPECT_EQ(r.cpu_offloading_num_layers, 3);
}

TEST(CpuOffloading, MovesAllButOneOffloadedLayerToTheHost) {
  const ModelSpec m = SmallGpt();
  const ParallelConfig c = Dp8();
  const MemoryBreakdown kept = Memory(m, c, Precision::kBf16, MemoryRecipe());
  MemoryRecipe r;
  r.cpu_offloading_num_layers = 3;
  const MemoryBreakdown off = Memory(m, c, Precision::kBf16, r);
  // GPT layer, tp 1, no SP: s·b·h·(10 + 24) bytes + LSE 4·a·s; three
  // layers offloaded, one of them in flight: two layers' worth leaves.
  const double layer = kS * kH * 34 + 4 * 16 * kS;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, c, 2048, Precision::kBf16, false),
                   layer);
  EXPECT_DOUBLE_EQ(kept.activations_bytes - off.activations_bytes, 2 * layer);
  EXPECT_DOUBLE_EQ(off.weights_bytes, kept.weights_bytes);
}

TEST(SavedInputs, Mxfp8KeepsOnlyTheColumnwiseCopy) {
  EXPECT_DOUBLE_EQ(SavedInputBytesPerElement(Precision::kMxfp8), 1.03125);
  EXPECT_DOUBLE_EQ(QuantizedBytesPerElement(Precision::kMxfp8), 2.0625);
  EXPECT_DOUBLE_EQ(SavedInputBytesPerElement(Precision::kFp8Tensorwise), 1.0);
  EXPECT_DOUBLE_EQ(SavedInputBytesPerElement(Precision::kNvfp4), 0.5625);
  EXPECT_DOUBLE_EQ(SavedInputBytesPerElement(Precision::kBf16), 2.0);
}

TEST(SavedInputs, Mxfp8LayerSavesOneThirtySecondMoreThanFp8) {
  // The saved quantised linear inputs of a GPT layer per token: QKV in (h),
  // proj in (q = h), fc1 in (h), fc2 in (f = 4h): 7h elements; MXFP8 keeps
  // 1/32 byte of scales more per element than FP8.
  const ModelSpec m = SmallGpt();
  const ParallelConfig c = Dp8();
  const double fp8 = LayerActivationBytes(m, c, 2048, Precision::kFp8, false);
  const double mx = LayerActivationBytes(m, c, 2048, Precision::kMxfp8, false);
  EXPECT_DOUBLE_EQ(mx - fp8, kS * 7 * kH / 32);
}

}  // namespace
}  // namespace meshtune::costmodel
