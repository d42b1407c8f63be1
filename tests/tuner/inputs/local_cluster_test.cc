#include "tuner/inputs/local_cluster.h"

#include <gtest/gtest.h>

namespace meshtune::tuner {
namespace {

TEST(LocalCluster, DescribesThisMachinePerCore) {
  profiler::CpuInfo info;
  info.model = "Test CPU";
  info.logical_cpus = 4;
  info.mhz = 2500;
  info.avx2 = info.fma = true;
  info.memory_gib = 16;
  const search_spaces::ClusterSpec c = LocalCluster(info);
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().message();
  EXPECT_EQ(c.name, "local");
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(c.gpu.hbm_capacity_gib, 4.0);
  // AVX2 + FMA: 32 fp32 FLOPs per cycle at 2.5 GHz = 0.08 TFLOP/s per core.
  EXPECT_NEAR(c.gpu.peak_bf16_tflops,
              profiler::NominalFp32FlopsPerCycle(info) * 2.5e9 / 1e12, 1e-12);
  EXPECT_GT(c.UsableMemoryGib(), 3.0);
}

}  // namespace
}  // namespace meshtune::tuner
