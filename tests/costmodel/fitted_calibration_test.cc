// Efficiency factors fitted to measured step times
// (costmodel/fitted_calibration.h): the scaled calibration multiplies each
// kind of time by its factor; the fit recovers known factors from synthetic
// "measurements" made with them, keeps an unexercised kind near 1, and
// lowers the error it reports.
#include "costmodel/fitted_calibration.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::ParallelConfig;
using search_spaces::Precision;
using search_spaces::TrainingSpec;

TEST(FittedCalibrationTest, ScalesEachKindByItsFactor) {
  const auto cluster = testing::H100Cluster();
  EfficiencyFactors f;
  f.compute = 1.5;
  f.memory = 0.5;
  f.collective = 3.0;
  FittedCalibration fitted(std::make_unique<DatasheetCalibration>(cluster), f,
                           "3 runs");
  const DatasheetCalibration base(cluster);
  const ModelOptions o;
  EXPECT_DOUBLE_EQ(
      fitted.GemmTime_s(4096, 4096, 4096, Precision::kBf16, o),
      1.5 * base.GemmTime_s(4096, 4096, 4096, Precision::kBf16, o));
  EXPECT_DOUBLE_EQ(
      fitted.GroupedGemmTime_s(2048, 1536, 2048, Precision::kBf16, false, o),
      1.5 *
          base.GroupedGemmTime_s(2048, 1536, 2048, Precision::kBf16, false, o));
  EXPECT_DOUBLE_EQ(
      fitted.AttentionForwardTime_s(32, 2048, 2048, 128, true, o),
      1.5 * base.AttentionForwardTime_s(32, 2048, 2048, 128, true, o));
  EXPECT_DOUBLE_EQ(
      fitted.AttentionBackwardTime_s(32, 2048, 2048, 128, true, o),
      1.5 * base.AttentionBackwardTime_s(32, 2048, 2048, 128, true, o));
  EXPECT_DOUBLE_EQ(fitted.MemoryTime_s(1e9, o),
                   0.5 * base.MemoryTime_s(1e9, o));
  CommGroup g;
  g.size = 8;
  g.ranks_per_node = 8;
  EXPECT_DOUBLE_EQ(
      fitted.CollectiveTime_s(Collective::kAllReduce, 1e8, g, o),
      3.0 * base.CollectiveTime_s(Collective::kAllReduce, 1e8, g, o));
  EXPECT_EQ(fitted.Name(), "datasheet+fit:3 runs");
}

// Runs of a 7B-class GPT on 64 H100s under several layouts: together they
// exercise compute, memory-bound work (the optimizer step's share changes
// with the distributed optimizer) and communication.
std::vector<ParallelConfig> Layouts() {
  std::vector<ParallelConfig> out;
  for (int64_t tp : {1, 2, 4, 8}) {
    for (int64_t pp : {1, 2, 4}) {
      for (bool dist_opt : {false, true}) {
        ParallelConfig c;
        c.tp = tp;
        c.pp = pp;
        c.dp = 64 / (tp * pp);
        c.mbs = 1;
        c.sp = tp > 1;
        c.dist_opt = dist_opt;
        c.recompute.granularity =
            search_spaces::RecomputeGranularity::kSelective;
        out.push_back(c);
      }
    }
  }
  return out;
}

std::vector<FitSample> Synthetic(const EfficiencyFactors& truth,
                                 const std::vector<ParallelConfig>& layouts,
                                 const search_spaces::ClusterSpec& cluster,
                                 const TrainingSpec& training) {
  const auto model = testing::Gpt(32, 4096, 32);
  const DatasheetCalibration base(cluster);
  std::vector<FitSample> samples;
  for (const ParallelConfig& c : layouts) {
    FitSample s;
    auto predict = [model, cluster, training, c](const Calibration& cal) {
      return EstimateConfig(model, cluster, training, c, cal).step_time_s;
    };
    s.measured_step_s = predict(ScaledCalibrationView(base, truth));
    s.predict_step_s = predict;
    samples.push_back(std::move(s));
  }
  return samples;
}

TrainingSpec Training(int64_t gpus) {
  TrainingSpec t;
  t.num_gpus = gpus;
  t.global_batch_size = 256;
  t.seq_length = 2048;
  // The fit learns from meshtune's engine runs, which launch from C++.
  t.python_launches = false;
  return t;
}

TEST(FittedCalibrationTest, FitRecoversKnownFactors) {
  const auto cluster = testing::H100Cluster();
  EfficiencyFactors truth;
  truth.compute = 1.6;
  truth.memory = 0.8;
  truth.collective = 2.0;
  const auto samples = Synthetic(truth, Layouts(), cluster, Training(64));
  const FitResult r =
      FitEfficiencyFactors(DatasheetCalibration(cluster), samples);
  EXPECT_EQ(r.runs, 24);
  // Compute and communication dominate these steps and are recovered.
  // Memory-bound work is a few percent of each step, so the data pins its
  // factor only weakly and the ridge shrinks it toward 1 (between the truth
  // and 1), which compute absorbs by a percent or two.
  EXPECT_NEAR(r.factors.compute, 1.6, 0.04);
  EXPECT_NEAR(r.factors.collective, 2.0, 0.1);
  EXPECT_GE(r.factors.memory, 0.8);
  EXPECT_LE(r.factors.memory, 1.05);
  EXPECT_GT(r.mape_before_pct, 20.0);
  EXPECT_LT(r.mape_after_pct, 1.0);
}

TEST(FittedCalibrationTest, UnexercisedKindStaysNearOne) {
  // One GPU: no communication at all, so nothing can move that factor.
  const auto cluster = testing::H100Cluster();
  EfficiencyFactors truth;
  truth.compute = 1.3;
  ParallelConfig c;
  c.mbs = 1;
  ParallelConfig c2 = c;
  c2.mbs = 2;
  const auto samples = Synthetic(truth, {c, c2}, cluster, Training(1));
  const FitResult r =
      FitEfficiencyFactors(DatasheetCalibration(cluster), samples);
  EXPECT_NEAR(r.factors.collective, 1.0, 1e-9);
  EXPECT_NEAR(r.factors.compute, 1.3, 0.05);
  EXPECT_LT(r.mape_after_pct, r.mape_before_pct);
  EXPECT_LT(r.mape_after_pct, 2.0);
}

TEST(FittedCalibrationTest, PerfectBaseKeepsIdentity) {
  const auto cluster = testing::H100Cluster();
  const auto samples =
      Synthetic(EfficiencyFactors(), Layouts(), cluster, Training(64));
  const FitResult r =
      FitEfficiencyFactors(DatasheetCalibration(cluster), samples);
  EXPECT_NEAR(r.factors.compute, 1.0, 1e-6);
  EXPECT_NEAR(r.factors.memory, 1.0, 1e-6);
  EXPECT_NEAR(r.factors.collective, 1.0, 1e-6);
  EXPECT_NEAR(r.mape_before_pct, 0.0, 1e-9);
}

}  // namespace
}  // namespace meshtune::costmodel
