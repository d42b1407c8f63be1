#include "costmodel/measured_calibration.h"

#include <gtest/gtest.h>

#include <cmath>

#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::Precision;

MeasuredTables Tables() {
  MeasuredTables t;
  t.hardware_id = "abc123";
  t.gemms = {{4096, 4096, 4096, Precision::kBf16, 1.0e-3},
             {1024, 1024, 1024, Precision::kBf16, 4.0e-5}};
  t.collectives = {{Collective::kAllReduce, 8, 1, 1e3, 1e-5},
                   {Collective::kAllReduce, 8, 1, 1e6, 1e-4},
                   {Collective::kAllReduce, 8, 1, 1e6, 2e-4}};  // slower rerun
  t.stream_gbps = 50;
  return t;
}

TEST(MeasuredCalibration, NameCarriesTheHardwareId) {
  const MeasuredCalibration cal(testing::A100Cluster(), Tables());
  EXPECT_EQ(cal.Name(), "measured:abc123");
}

TEST(MeasuredCalibration, MeasuredShapesAnswerForThemselves) {
  const ModelOptions all_on;
  const MeasuredCalibration cal(testing::A100Cluster(), Tables());
  EXPECT_NEAR(cal.GemmTime_s(4096, 4096, 4096, Precision::kBf16, all_on),
              1.0e-3, 1e-12);
  EXPECT_NEAR(cal.GemmTime_s(1024, 1024, 1024, Precision::kBf16, all_on),
              4.0e-5, 1e-15);
}

TEST(MeasuredCalibration, OtherShapesRunAtTheNearestShapesThroughput) {
  const ModelOptions all_on;
  const search_spaces::ClusterSpec cluster = testing::A100Cluster();
  const DatasheetCalibration sheet(cluster);
  const MeasuredCalibration cal(cluster, Tables());
  // (8192, 4096, 2048) is nearest to 4096³ in log space and has as many
  // FLOPs, so it takes the same 1 ms; twice the FLOPs take twice as long.
  EXPECT_NEAR(cal.GemmTime_s(8192, 4096, 2048, Precision::kBf16, all_on),
              1.0e-3, 1e-12);
  EXPECT_NEAR(cal.GemmTime_s(8192, 8192, 2048, Precision::kBf16, all_on),
              2.0e-3, 1e-12);
  // Nothing measured in fp16: the datasheet answers.
  EXPECT_EQ(cal.GemmTime_s(8192, 4096, 2048, Precision::kFp16, all_on),
            sheet.GemmTime_s(8192, 4096, 2048, Precision::kFp16, all_on));
  EXPECT_EQ(cal.NearestGemm(8192, 4096, 2048, Precision::kFp16), nullptr);
}

TEST(MeasuredCalibration, CollectivesInterpolateInLogSize) {
  const ModelOptions all_on;
  const search_spaces::ClusterSpec cluster = testing::A100Cluster();
  const MeasuredCalibration cal(cluster, Tables());
  CommGroup g;
  g.size = 8;
  g.nodes = 1;
  g.ranks_per_node = 8;
  // Geometric midpoint of (1e3, 1e-5) and (1e6, 1e-4); the faster of the
  // two 1e6 measurements is kept.
  EXPECT_NEAR(
      cal.CollectiveTime_s(Collective::kAllReduce, std::sqrt(1e9), g, all_on),
      std::sqrt(1e-9), 1e-12);
  EXPECT_NEAR(cal.CollectiveTime_s(Collective::kAllReduce, 1e6, g, all_on),
              1e-4, 1e-15);
  // Beyond the range: the end point's bandwidth; below: its latency.
  EXPECT_NEAR(cal.CollectiveTime_s(Collective::kAllReduce, 4e6, g, all_on),
              4e-4, 1e-15);
  EXPECT_NEAR(cal.CollectiveTime_s(Collective::kAllReduce, 10, g, all_on), 1e-5,
              1e-15);
  // An unmeasured group size or op falls back to the datasheet.
  const DatasheetCalibration sheet(cluster);
  g.size = 4;
  g.ranks_per_node = 4;
  EXPECT_EQ(cal.CollectiveTime_s(Collective::kAllReduce, 1e6, g, all_on),
            sheet.CollectiveTime_s(Collective::kAllReduce, 1e6, g, all_on));
}

TEST(MeasuredCalibration, StreamingUsesTheMeasuredBandwidth) {
  const MeasuredCalibration cal(testing::A100Cluster(), Tables());
  EXPECT_NEAR(cal.MemoryTime_s(1e9, ModelOptions()), 1e9 / 50e9, 1e-15);
}

TEST(MeasuredCalibration, EstimatesSayWhereTheirNumbersCameFrom) {
  const search_spaces::ClusterSpec cluster = testing::A100Cluster();
  search_spaces::TrainingSpec t;
  t.num_gpus = 8;
  t.global_batch_size = 8;
  t.seq_length = 2048;
  search_spaces::ParallelConfig c;
  c.tp = 8;
  c.sp = true;
  const search_spaces::ModelSpec m = testing::Gpt(24, 2048, 16);
  const Estimate measured =
      EstimateConfig(m, cluster, t, c, MeasuredCalibration(cluster, Tables()));
  const Estimate sheet =
      EstimateConfig(m, cluster, t, c, DatasheetCalibration(cluster));
  EXPECT_EQ(measured.calibration, "measured:abc123");
  EXPECT_EQ(sheet.calibration, "datasheet");
  EXPECT_NE(measured.step_time_s, sheet.step_time_s);
}

}  // namespace
}  // namespace meshtune::costmodel
