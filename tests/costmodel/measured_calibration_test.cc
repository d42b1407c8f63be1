#include "costmodel/measured_calibration.h"

#include <gtest/gtest.h>

#include <cmath>

#include "costmodel/cost_model.h"
#include "costmodel/datasheet_calibration.h"
#include "search_spaces/presets/presets.h"
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

// The microbenchmarks time single GEMMs; an expert GEMM of GroupedLinear
// on Blackwell Ultra takes the datasheet's slowdown (0.90 / 0.72) on top,
// the fused grouped MLP none.
TEST(MeasuredCalibration, GroupedGemmsTakeTheDatasheetSlowdown) {
  const ModelOptions all_on;
  auto b300 = search_spaces::ResolveCluster("b300");
  ASSERT_TRUE(b300.ok());
  const MeasuredCalibration cal(*b300, Tables());
  EXPECT_NEAR(
      cal.GroupedGemmTime_s(4096, 4096, 4096, Precision::kBf16, false, all_on),
      1.0e-3 * 0.90 / 0.72, 1e-12);
  EXPECT_NEAR(
      cal.GroupedGemmTime_s(4096, 4096, 4096, Precision::kBf16, true, all_on),
      1.0e-3, 1e-12);
  const MeasuredCalibration a100(testing::A100Cluster(), Tables());
  EXPECT_NEAR(
      a100.GroupedGemmTime_s(4096, 4096, 4096, Precision::kBf16, false, all_on),
      1.0e-3, 1e-12);
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

// GELU forward measured at 1e4 and 1e6 elements, norm backward at 1e5;
// stream at 50 GB/s for the ops not measured.
MeasuredTables ElementwiseTables() {
  MeasuredTables t = Tables();
  t.elementwise = {{ElementwiseOp::kGelu, false, 1e6, 5e-4},
                   {ElementwiseOp::kGelu, false, 1e4, 1e-5},
                   {ElementwiseOp::kGelu, false, 1e4, 3e-5},  // slower rerun
                   {ElementwiseOp::kNorm, true, 1e5, 2e-4}};
  return t;
}

TEST(MeasuredCalibration, ElementwiseUsesTheNearestMeasuredCountsRate) {
  const ModelOptions o;
  const MeasuredCalibration cal(testing::A100Cluster(), ElementwiseTables());
  const auto gelu = [&](double elements) {
    return cal.ElementwiseTime_s(ElementwiseOp::kGelu, elements, false, o);
  };
  // Measured counts answer for themselves (the fastest of a repeat).
  EXPECT_NEAR(gelu(1e4), 1e-5, 1e-18);
  EXPECT_NEAR(gelu(1e6), 5e-4, 1e-15);
  // 2e4 is nearer 1e4 in log space: 1 ns per element → 20 µs.
  EXPECT_NEAR(gelu(2e4), 2e-5, 1e-18);
  // 3e5 is nearer 1e6 (log 3.3 < log 30): 0.5 ns per element → 150 µs.
  EXPECT_NEAR(gelu(3e5), 1.5e-4, 1e-15);
  // Beyond the measured range time ∝ elements: 1e8 → 50 ms; 100 → 0.1 µs.
  EXPECT_NEAR(gelu(1e8), 5e-2, 1e-13);
  EXPECT_NEAR(gelu(100), 1e-7, 1e-20);
  EXPECT_EQ(gelu(0), 0.0);
  EXPECT_NEAR(cal.ElementwiseTime_s(ElementwiseOp::kNorm, 4e5, true, o), 8e-4,
              1e-15);
}

TEST(MeasuredCalibration, ElementwiseNotMeasuredFallsBackToBytes) {
  const ModelOptions o;
  const MeasuredCalibration cal(testing::A100Cluster(), ElementwiseTables());
  // GELU backward was not measured: 8 B per element at 50 GB/s.
  EXPECT_NEAR(cal.ElementwiseTime_s(ElementwiseOp::kGelu, 1e6, true, o),
              8e6 / 50e9, 1e-15);
  // Cross-entropy was not measured at all: 38 B per logit forward.
  EXPECT_NEAR(
      cal.ElementwiseTime_s(ElementwiseOp::kCrossEntropy, 1e6, false, o),
      38e6 / 50e9, 1e-15);
}

MeasuredTables AttentionTables() {
  MeasuredTables t = Tables();
  // (batch_heads, seq_len, head_dim): 16 heads of 128 and of 1024 tokens.
  t.attention = {{16, 128, 64, false, 1e-3}, {16, 1024, 64, false, 0.1}};
  return t;
}

TEST(MeasuredCalibration, AttentionScalesTheNearestShapeByFlops) {
  const ModelOptions o;
  const search_spaces::ClusterSpec cluster = testing::A100Cluster();
  const DatasheetCalibration sheet(cluster);
  const MeasuredCalibration cal(cluster, AttentionTables());
  EXPECT_NEAR(cal.AttentionForwardTime_s(16, 128, 128, 64, true, o), 1e-3,
              1e-15);
  // Twice the heads: twice the FLOPs of the same class.
  EXPECT_NEAR(cal.AttentionForwardTime_s(32, 128, 128, 64, true, o), 2e-3,
              1e-15);
  // Not causal: all (query, key) pairs, twice the causal FLOPs.
  EXPECT_NEAR(cal.AttentionForwardTime_s(16, 128, 128, 64, false, o), 2e-3,
              1e-15);
  // 512 tokens are nearer 1024 than 128 in log space: 0.1 s · (512/1024)².
  EXPECT_NEAR(cal.AttentionForwardTime_s(16, 512, 512, 64, true, o), 0.025,
              1e-15);
  ASSERT_NE(cal.NearestAttention(16, 512, 512, 64, false), nullptr);
  EXPECT_EQ(cal.NearestAttention(16, 512, 512, 64, false)->seq_len, 1024);
  // No backward row: the datasheet answers.
  EXPECT_EQ(cal.NearestAttention(16, 128, 128, 64, true), nullptr);
  EXPECT_EQ(cal.AttentionBackwardTime_s(16, 128, 128, 64, true, o),
            sheet.AttentionBackwardTime_s(16, 128, 128, 64, true, o));
  // Nothing measured at all: the datasheet forward too.
  const MeasuredCalibration bare(cluster, Tables());
  EXPECT_EQ(bare.AttentionForwardTime_s(16, 128, 128, 64, true, o),
            sheet.AttentionForwardTime_s(16, 128, 128, 64, true, o));
}

TEST(MeasuredTables, KernelRowsAloneAreNotEmpty) {
  MeasuredTables t;
  t.hardware_id = "x";
  EXPECT_TRUE(t.empty());
  t.attention = {{16, 128, 64, true, 1e-3}};
  EXPECT_FALSE(t.empty());
}

}  // namespace
}  // namespace meshtune::costmodel
