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
  EXPECT_EQ(c.host_cores, 4);
}

// More ranks than cores stay on the one machine: the node and its
// shared-memory domain grow, the cores do not.
TEST(LocalCluster, MoreRanksThanCoresShareTheOneNode) {
  profiler::CpuInfo info;
  info.logical_cpus = 2;
  info.memory_gib = 8;
  search_spaces::ClusterSpec c = LocalCluster(info);
  LocalNodeForRanks(2, &c);
  EXPECT_EQ(c.gpus_per_node, 2);
  EXPECT_DOUBLE_EQ(c.gpu.hbm_capacity_gib, 4.0);
  LocalNodeForRanks(4, &c);
  EXPECT_EQ(c.gpus_per_node, 4);
  // 8 GiB shared by 4 ranks.
  EXPECT_DOUBLE_EQ(c.gpu.hbm_capacity_gib, 2.0);
  EXPECT_EQ(c.nvlink_domain_gpus, 4);
  EXPECT_EQ(c.host_cores, 2);
}

}  // namespace
}  // namespace meshtune::tuner
