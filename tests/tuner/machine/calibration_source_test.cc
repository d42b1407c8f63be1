#include "tuner/machine/calibration_source.h"

#include <gtest/gtest.h>

#include "search_spaces/presets/presets.h"
#include "tuner/inputs/local_cluster.h"

namespace meshtune::tuner {
namespace {

using costmodel::Collective;
using search_spaces::Precision;

results::Measurement Row(const std::string& op, const std::string& dtype,
                         double median_s) {
  results::Measurement r;
  r.hardware_id = "hw1";
  r.op = op;
  r.dtype = dtype;
  r.median_s = median_s;
  r.samples = 10;
  return r;
}

TEST(TablesFromMeasurements, MapsOpsDtypesAndStreamBandwidth) {
  results::Measurement gemm = Row("gemm", "fp32", 2e-3);
  gemm.m = gemm.n = gemm.k = 1024;
  results::Measurement slow_stream = Row("stream", "fp32", 1.0);
  slow_stream.bytes = 4e9;  // 4 GB/s
  results::Measurement fast_stream = Row("stream", "fp32", 0.5);
  fast_stream.bytes = 4e9;  // 8 GB/s
  results::Measurement ar = Row("all_reduce", "fp32", 1e-4);
  ar.bytes = 1 << 20;
  ar.group_size = 2;
  results::Measurement unknown = Row("attention", "fp32", 1e-3);
  const costmodel::MeasuredTables t = TablesFromMeasurements(
      "hw1", {gemm, slow_stream, fast_stream, ar, unknown});
  EXPECT_EQ(t.hardware_id, "hw1");
  // fp32 (the CPU backend's) stands for both 16-bit precisions when no
  // 16-bit GEMM was measured.
  ASSERT_EQ(t.gemms.size(), 2u);
  EXPECT_EQ(t.gemms[0].precision, Precision::kBf16);
  EXPECT_EQ(t.gemms[1].precision, Precision::kFp16);
  EXPECT_DOUBLE_EQ(t.stream_gbps, 8.0);
  ASSERT_EQ(t.collectives.size(), 1u);
  EXPECT_EQ(t.collectives[0].op, Collective::kAllReduce);
  EXPECT_EQ(t.collectives[0].group_size, 2);

  results::Measurement bf16 = Row("gemm", "bf16", 1e-4);
  bf16.m = bf16.n = bf16.k = 4096;
  const costmodel::MeasuredTables g =
      TablesFromMeasurements("hw1", {gemm, bf16});
  ASSERT_EQ(g.gemms.size(), 1u);  // fp32 ignored next to a bf16 GEMM
  EXPECT_EQ(g.gemms[0].m, 4096);
}

TEST(TablesFromMeasurements, ReadsEngineKernelRows) {
  results::Measurement gelu = Row("elem:gelu:bwd", "fp32", 4e-4);
  gelu.m = 65536;
  results::Measurement ce = Row("elem:cross_entropy:fwd", "fp32", 1e-3);
  ce.m = 262144;
  results::Measurement attn = Row("attn:fwd", "fp32", 2e-3);
  attn.m = 2;
  attn.n = 128;
  attn.k = 64;
  // Unknown kernels, directions and empty shapes are skipped.
  results::Measurement future = Row("elem:softmax:fwd", "fp32", 1e-3);
  future.m = 10;
  results::Measurement sideways = Row("elem:gelu:up", "fp32", 1e-3);
  sideways.m = 10;
  results::Measurement no_shape = Row("attn:bwd", "fp32", 1e-3);
  const costmodel::MeasuredTables t = TablesFromMeasurements(
      "hw1", {gelu, ce, attn, future, sideways, no_shape});
  ASSERT_EQ(t.elementwise.size(), 2u);
  EXPECT_EQ(t.elementwise[0].op, costmodel::ElementwiseOp::kGelu);
  EXPECT_TRUE(t.elementwise[0].backward);
  EXPECT_DOUBLE_EQ(t.elementwise[0].elements, 65536);
  EXPECT_DOUBLE_EQ(t.elementwise[0].time_s, 4e-4);
  EXPECT_EQ(t.elementwise[1].op, costmodel::ElementwiseOp::kCrossEntropy);
  EXPECT_FALSE(t.elementwise[1].backward);
  ASSERT_EQ(t.attention.size(), 1u);
  EXPECT_EQ(t.attention[0].batch_heads, 2);
  EXPECT_EQ(t.attention[0].seq_len, 128);
  EXPECT_EQ(t.attention[0].head_dim, 64);
  EXPECT_FALSE(t.attention[0].backward);
  EXPECT_FALSE(t.empty());
}

TEST(MatchingHardwareId, LocalByIdAndGpuPresetsByModel) {
  results::HardwareFingerprint cpu;
  cpu.id = "cpu1";
  cpu.backend = "cpu";
  results::HardwareFingerprint h200;
  h200.id = "gpu1";
  h200.backend = "cuda";
  h200.gpu_model = "NVIDIA H200";
  const std::vector<results::HardwareFingerprint> machines = {cpu, h200};
  search_spaces::ClusterSpec local;
  local.name = kLocalCluster;
  EXPECT_EQ(MatchingHardwareId(machines, local, "cpu1"), "cpu1");
  EXPECT_EQ(MatchingHardwareId(machines, local, "other"), "");
  EXPECT_EQ(
      MatchingHardwareId(machines,
                         search_spaces::ResolveCluster("h200").value(), "cpu1"),
      "gpu1");
  EXPECT_EQ(
      MatchingHardwareId(machines,
                         search_spaces::ResolveCluster("h100").value(), "cpu1"),
      "");
}

TEST(ChooseCalibration, MeasuredWhenTheStoreHasTheMachine) {
  auto store = results::Store::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status().message();
  const search_spaces::ClusterSpec h200 =
      search_spaces::ResolveCluster("h200").value();
  auto none = ChooseCalibration(store.value().get(), h200, "");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value()->Name(), "datasheet");

  results::HardwareFingerprint hw;
  hw.backend = "cuda";
  hw.gpu_model = "NVIDIA H200";
  hw.gpu_count = 8;
  hw.id = results::ComputeHardwareId(hw);
  const results::Provenance prov = results::MakeProvenance("test", "test");
  ASSERT_TRUE(store.value()->PutHardware(hw, prov).ok());
  results::Measurement gemm = Row("gemm", "bf16", 1.8e-4);
  gemm.hardware_id = hw.id;
  gemm.m = gemm.n = gemm.k = 4096;
  ASSERT_TRUE(store.value()->PutMeasurements({gemm}, prov).ok());
  auto measured = ChooseCalibration(store.value().get(), h200, "");
  ASSERT_TRUE(measured.ok());
  EXPECT_EQ(measured.value()->Name(), "measured:" + hw.id);
  EXPECT_NEAR(measured.value()->GemmTime_s(4096, 4096, 4096, Precision::kBf16,
                                           costmodel::ModelOptions()),
              1.8e-4, 1e-12);
  // No store at all: the datasheet.
  EXPECT_EQ(ChooseCalibration(nullptr, h200, "").value()->Name(), "datasheet");
}

}  // namespace
}  // namespace meshtune::tuner
