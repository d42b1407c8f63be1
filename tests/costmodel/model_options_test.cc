// ModelOptions: the refinement table is complete and stable, the default is
// the 5-argument EstimateConfig, and switching each refinement off moves the
// estimate of a configuration where it applies in the expected direction.
#include "costmodel/model_options.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::ParallelConfig;
using search_spaces::Precision;
using search_spaces::RecomputeGranularity;
using search_spaces::TrainingSpec;

TEST(ModelOptions, TableListsEveryRefinementOnceInEnumOrder) {
  const auto& all = AllRefinements();
  ASSERT_EQ(all.size(), static_cast<size_t>(Refinement::kCount));
  std::set<std::string> names;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(all[i].id), i);
    EXPECT_TRUE(names.insert(all[i].name).second) << all[i].name;
    EXPECT_GT(std::string(all[i].description).size(), 10u);
    Refinement r;
    ASSERT_TRUE(FindRefinement(all[i].name, &r));
    EXPECT_EQ(r, all[i].id);
  }
  EXPECT_FALSE(FindRefinement("no_such_refinement", nullptr));
}

TEST(ModelOptions, MaskBitsToggleOneRefinementEach) {
  ModelOptions o;
  for (const RefinementInfo& r : AllRefinements()) EXPECT_TRUE(o.enabled(r.id));
  o.Disable(Refinement::kDpOverlap);
  EXPECT_FALSE(o.enabled(Refinement::kDpOverlap));
  EXPECT_TRUE(o.enabled(Refinement::kCpOverlap));
  o.Enable(Refinement::kDpOverlap);
  EXPECT_EQ(o.disabled_mask, 0u);
}

// GPT-3 175B on 16 nodes of 8 H100, fp8, tp8 pp4 dp4 with SP and TP comm
// overlap: every refinement except those for CP, MoE and interleaving
// applies (kTpOverlap is superseded by the userbuffers overlap).
struct Gpt175bFp8 {
  search_spaces::ModelSpec model = testing::Gpt(96, 12288, 96);
  search_spaces::ClusterSpec cluster = testing::H100Cluster();
  TrainingSpec training;
  ParallelConfig config;
  Gpt175bFp8() {
    training.num_gpus = 128;
    training.global_batch_size = 256;
    training.seq_length = 2048;
    training.precision = Precision::kFp8;
    config.tp = 8;
    config.pp = 4;
    config.vpp = 1;
    training.tp_comm_overlap = true;
    config.dp = 4;
    config.sp = true;
    config.dist_opt = true;
    config.mbs = 1;
    config.recompute.granularity = RecomputeGranularity::kSelective;
  }
};

TEST(ModelOptions, DefaultOptionsEqualFiveArgumentForm) {
  const Gpt175bFp8 s;
  const DatasheetCalibration cal(s.cluster);
  const Estimate a =
      EstimateConfig(s.model, s.cluster, s.training, s.config, cal);
  const Estimate b = EstimateConfig(s.model, s.cluster, s.training, s.config,
                                    cal, ModelOptions());
  EXPECT_DOUBLE_EQ(a.step_time_s, b.step_time_s);
  EXPECT_DOUBLE_EQ(a.memory.total_bytes(), b.memory.total_bytes());
}

TEST(ModelOptions, SwitchingOffMovesTheEstimateTheExpectedWay) {
  const Gpt175bFp8 s;
  const DatasheetCalibration cal(s.cluster);
  // GPT-3 175B's fp8 layers at tp8 are about as short as their eager
  // launches, so the host-launch bound would hide the work the others
  // remove: they are compared with it off (and it, with everything on).
  ModelOptions no_host;
  no_host.Disable(Refinement::kHostLaunch);
  EXPECT_LT(
      EstimateConfig(s.model, s.cluster, s.training, s.config, cal, no_host)
          .step_time_s,
      EstimateConfig(s.model, s.cluster, s.training, s.config, cal)
          .step_time_s);
  const double base =
      EstimateConfig(s.model, s.cluster, s.training, s.config, cal, no_host)
          .step_time_s;
  // Refinements that remove work (switching them off makes the step
  // faster) and those that add speed (off makes it slower).
  const std::set<Refinement> removes_work = {
      Refinement::kFp8CastOverhead,
      Refinement::kElementwise,
      Refinement::kOutputLayer,
      Refinement::kOptimizerStep,
      Refinement::kPipelineP2p,
      Refinement::kCollectiveRamp,
      Refinement::kGemmSizeEfficiency,
      Refinement::kGemmShapeEfficiency,
      Refinement::kTrainingKernelEfficiency};
  const std::set<Refinement> adds_speed = {
      Refinement::kDpOverlap, Refinement::kNvls,
      Refinement::kTpCommOverlapUserbuffers};
  for (const RefinementInfo& r : AllRefinements()) {
    ModelOptions o = no_host;
    o.Disable(r.id);
    const double t =
        EstimateConfig(s.model, s.cluster, s.training, s.config, cal, o)
            .step_time_s;
    if (removes_work.count(r.id) > 0) {
      EXPECT_LT(t, base) << r.name;
    } else if (adds_speed.count(r.id) > 0) {
      EXPECT_GT(t, base) << r.name;
    }
  }
}

// Calibration-level switches, checked on single collectives: the hierarchy
// (two nodes of 8) and the ramp (a 64 KiB all-reduce is latency bound).
TEST(ModelOptions, CalibrationSwitchesChangeCollectiveTimes) {
  const DatasheetCalibration cal(testing::H100Cluster());
  ModelOptions flat;
  flat.Disable(Refinement::kHierarchicalCollectives);
  const CommGroup two_nodes{16, 2, 8};
  EXPECT_GT(cal.CollectiveTime_s(Collective::kAllReduce, 1e9, two_nodes, flat),
            cal.CollectiveTime_s(Collective::kAllReduce, 1e9, two_nodes,
                                 ModelOptions()));
  ModelOptions no_ramp;
  no_ramp.Disable(Refinement::kCollectiveRamp);
  const CommGroup node{8, 1, 8};
  const double bytes = 65536;
  EXPECT_NEAR(
      cal.CollectiveTime_s(Collective::kAllGather, bytes, node, no_ramp),
      bytes * 7 / 8 / 370e9, 1e-12);
  EXPECT_GT(
      cal.CollectiveTime_s(Collective::kAllGather, bytes, node, ModelOptions()),
      10 * bytes * 7 / 8 / 370e9);
}

}  // namespace
}  // namespace meshtune::costmodel
