// The search's prepared path (costmodel/model_layers.h, DistinctStages,
// StageStaticsOf, Estimator) against the plain per-stage walk it replaces.
#include "costmodel/model_layers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "costmodel/memory_model.h"
#include "search_spaces/pipeline_layout.h"
#include "search_spaces/pipeline_schedule.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::LayerKind;
using search_spaces::Mixer;
using search_spaces::Mlp;
using search_spaces::ModelSpec;
using search_spaces::ParallelConfig;
using search_spaces::PipelineLayout;
using search_spaces::PipelineSchedule;
using search_spaces::Precision;

ModelSpec Preset(const char* name) {
  auto m = search_spaces::ResolveModel(name);
  EXPECT_TRUE(m.ok()) << name;
  return m.value();
}

TEST(ModelLayers, CountsDeepSeekV3KindsFromPrefixes) {
  // moe_layer_freq ([0]*3+[1]*58): 3 dense MLA layers, then 58 MoE ones.
  const ModelLayers layers(Preset("deepseek-v3"));
  ASSERT_EQ(layers.decoder().size(), 61u);
  ASSERT_EQ(layers.kinds().size(), 2u);
  EXPECT_EQ(layers.kinds()[0], (LayerKind{Mixer::kMla, Mlp::kDense}));
  EXPECT_EQ(layers.kinds()[1], (LayerKind{Mixer::kMla, Mlp::kMoe}));
  EXPECT_EQ(layers.CountInRange(0, 0, 61), 3);
  EXPECT_EQ(layers.CountInRange(1, 0, 61), 58);
  EXPECT_EQ(layers.CountInRange(0, 2, 4), 1);  // layers 2..5: one dense
  EXPECT_EQ(layers.CountInRange(1, 2, 4), 3);
  EXPECT_EQ(layers.CountInRange(1, 10, 0), 0);
  EXPECT_EQ(layers.mtp().size(), 1u);  // one MTP depth of one MoE layer
}

// The most loaded stage by the plain walk: every stage, no deduplication.
StagePeak BruteForcePeak(const ModelSpec& m, const ModelStats& st,
                         const ParallelConfig& c, int64_t seq,
                         const PipelineSchedule& sched) {
  StagePeak best;
  for (int64_t s = 0; s < c.pp; ++s) {
    const MemoryBreakdown mem =
        StageMemory(m, st, c, seq, Precision::kBf16, sched, s);
    if (s == 0 || mem.allocated_bytes() > best.memory.allocated_bytes()) {
      best = {s, mem};
    }
  }
  return best;
}

struct Case {
  const char* model;
  int64_t pp, vpp, first, last, ep, m;
};

TEST(DistinctStages, MostLoadedStageMatchesEveryStageWalk) {
  const Case cases[] = {
      {"deepseek-v3", 8, 4, 1, 0, 8, 16},    // "Et|(tt|)*30mL"
      {"deepseek-v3", 16, 1, 4, 1, 8, 32},   // "Et*4|(t*4|)*14tmL"
      {"deepseek-v3", 4, 1, -1, -1, 8, 3},   // family default, m < pp
      {"llama3-405b", 16, 1, 7, 7, 1, 64},   // 126 layers
      {"nemotron-h-8b", 4, 1, -1, -1, 1, 8}  // hybrid M/*/- layers
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.model);
    const ModelSpec m = Preset(k.model);
    ParallelConfig c;
    c.pp = k.pp;
    c.vpp = k.vpp;
    c.ep = k.ep;
    c.dp = k.ep;
    c.layout_first_layers = k.first;
    c.layout_last_layers = k.last;
    ASSERT_TRUE(PipelineLayout::Valid(m.num_layers, c));
    const ModelStats st = ComputeModelStats(m, m.vocab_size, 4096);
    const PipelineSchedule sched(c.pp, c.vpp, k.m);
    const StagePeak fast =
        MostLoadedStage(m, st, c, 4096, Precision::kBf16, sched);
    const StagePeak slow = BruteForcePeak(m, st, c, 4096, sched);
    EXPECT_EQ(fast.stage, slow.stage);
    EXPECT_DOUBLE_EQ(fast.memory.allocated_bytes(),
                     slow.memory.allocated_bytes());
    // The first and the last stage are always candidates, ascending.
    const ModelLayers layers(m);
    const auto stages =
        DistinctStages(m, layers, PipelineLayout(m.num_layers, c), c);
    ASSERT_GE(stages.size(), c.pp > 1 ? 2u : 1u);
    EXPECT_EQ(stages.front().stage, 0);
    EXPECT_EQ(stages.back().stage, c.pp - 1);
    EXPECT_TRUE(std::is_sorted(stages.begin(), stages.end(),
                               [](const StageClass& a, const StageClass& b) {
                                 return a.stage < b.stage;
                               }));
  }
}

TEST(Estimator, SkipsTimeOfConfigurationsThatDoNotFit) {
  const ModelSpec m = Preset("gpt3-175b");
  auto cluster = search_spaces::ResolveCluster("a100-80g");
  ASSERT_TRUE(cluster.ok());
  search_spaces::TrainingSpec training;
  training.num_gpus = 64;
  training.global_batch_size = 64;
  training.seq_length = 2048;
  const DatasheetCalibration cal(cluster.value());
  const Estimator estimate(m, cluster.value(), training, cal);
  ParallelConfig c;  // tp1 pp1 dp64: 175B does not fit in 80 GB
  c.dp = 64;
  const Estimate full = estimate(c);
  const Estimate quick = estimate(c, /*time_out_of_memory=*/false);
  ASSERT_FALSE(full.fits);
  EXPECT_FALSE(quick.fits);
  EXPECT_EQ(quick.infeasible_reason, "out_of_memory");
  EXPECT_DOUBLE_EQ(quick.memory.total_bytes(), full.memory.total_bytes());
  EXPECT_GT(full.step_time_s, 0);
  EXPECT_EQ(quick.step_time_s, 0);
  // A configuration that fits is timed either way, the same as
  // EstimateConfig (which builds one Estimator per call).
  c.tp = 8;
  c.pp = 8;
  c.dp = 1;
  c.sp = true;
  c.recompute.granularity = search_spaces::RecomputeGranularity::kSelective;
  const Estimate fits = estimate(c, false);
  ASSERT_TRUE(fits.fits);
  EXPECT_DOUBLE_EQ(
      fits.step_time_s,
      EstimateConfig(m, cluster.value(), training, c, cal).step_time_s);
}

}  // namespace
}  // namespace meshtune::costmodel
