// The Blackwell Ultra presets (b300: HGX/DGX B300, gb300: GB300 NVL72):
// names and aliases resolve, the specs validate, and usable memory, peaks,
// GEMM ceilings and fabric numbers match the sources quoted in
// search_spaces/clusters/{b300,gb300}.yaml, checked by hand here.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "search_spaces/cluster_spec.h"
#include "search_spaces/presets/presets.h"

namespace meshtune::search_spaces {
namespace {

ClusterSpec Cluster(const std::string& name) {
  StatusOr<ClusterSpec> c = ResolveCluster(name);
  EXPECT_TRUE(c.ok()) << name << ": " << c.status().message();
  return c.ok() ? *c : ClusterSpec{};
}

// Position of a preset in the `tune gpus` listing; -1 if absent.
int ListingIndex(const std::string& name) {
  const std::vector<ClusterSpec>& all = ClusterPresets();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

TEST(BlackwellUltraPresetsTest, NamesAndAliasesResolve) {
  for (const char* alias : {"b300", "B300", "hgx-b300", "DGX-B300", "b300-sxm",
                            "b300-sxm6", "b300-288g", "B300-288GB"}) {
    SCOPED_TRACE(alias);
    StatusOr<ClusterSpec> c = ResolveCluster(alias);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->name, "b300");
  }
  for (const char* alias : {"gb300", "GB300", "gb300-nvl72", "GB300NVL72",
                            "gb300-288g", "gb300-288gb", "dgx-gb300"}) {
    SCOPED_TRACE(alias);
    StatusOr<ClusterSpec> c = ResolveCluster(alias);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->name, "gb300");
  }
  // "nvl72" stays with gb200, the preset that has always owned it.
  EXPECT_EQ(Cluster("nvl72").name, "gb200");
}

TEST(BlackwellUltraPresetsTest, ValidateAndListAfterTheirBlackwellSiblings) {
  for (const char* name : {"b300", "gb300"}) {
    SCOPED_TRACE(name);
    const ClusterSpec c = Cluster(name);
    const Status s = c.Validate();
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_FALSE(c.gpu.display_name.empty());
    EXPECT_EQ(c.memory_reserve_gib, 3.0);
  }
  // Sorted by BF16 peak, then vendor memory: b300 ties b200 on 2250 and sorts
  // after it on 288 > 180 GB; gb300 likewise after gb200 (2500; 288 > 186).
  EXPECT_EQ(ListingIndex("b300"), ListingIndex("b200") + 1);
  EXPECT_EQ(ListingIndex("gb200"), ListingIndex("b300") + 1);
  EXPECT_EQ(ListingIndex("gb300"), ListingIndex("gb200") + 1);
}

TEST(BlackwellUltraPresetsTest, B300HandComputedNumbers) {
  const ClusterSpec b300 = Cluster("hgx-b300");
  // nvidia-smi total 275040 MiB = 268.59375 GiB, minus the 3 GiB reserve.
  EXPECT_NEAR(b300.UsableMemoryGib(), 275040.0 / 1024 - 3.0, 1e-12);
  EXPECT_NEAR(b300.UsableMemoryGib(), 265.59375, 1e-12);
  EXPECT_EQ(b300.gpu.hbm_gb, 288);
  // Dense peaks: HGX B300 sparse 36 PF BF16 / 72 PF FP8 / 18 PF TF32 for 8
  // GPUs, halved and divided by 8.
  EXPECT_EQ(b300.gpu.PeakTflops(Precision::kBf16), 36000.0 / 2 / 8);
  EXPECT_EQ(b300.gpu.PeakTflops(Precision::kFp16), 2250);
  EXPECT_EQ(b300.gpu.PeakTflops(Precision::kFp8), 72000.0 / 2 / 8);
  EXPECT_EQ(b300.gpu.peak_tf32_tflops, 18000.0 / 2 / 8);
  EXPECT_EQ(b300.gpu.peak_fp32_tflops, 600.0 / 8);
  // Ceilings: the MAMF measurements, 1769.0 BF16 and 3353.3 FP8 TFLOP/s.
  EXPECT_NEAR(b300.gpu.GemmMaxEfficiency(Precision::kBf16) * 2250, 1769.0, 1);
  EXPECT_NEAR(b300.gpu.GemmMaxEfficiency(Precision::kFp8) * 4500, 3353.3, 1);
  EXPECT_EQ(b300.gpu.hbm_gbps, 8000);
  // HGX: 8 GPUs per NVLink domain; ConnectX-8 800 Gb/s = 100 GB/s per GPU.
  EXPECT_EQ(b300.gpus_per_node, 8);
  EXPECT_EQ(b300.nvlink_domain_gpus, 8);
  EXPECT_EQ(b300.nvlink_gbps, 1800.0 / 2);
  EXPECT_EQ(b300.nic_gbps, 800.0 / 8);
}

TEST(BlackwellUltraPresetsTest, Gb300HandComputedNumbers) {
  const ClusterSpec gb300 = Cluster("gb300-nvl72");
  // nvidia-smi total 284208 MiB = 277.546875 GiB, minus the 3 GiB reserve.
  EXPECT_NEAR(gb300.UsableMemoryGib(), 284208.0 / 1024 - 3.0, 1e-12);
  EXPECT_NEAR(gb300.UsableMemoryGib(), 274.546875, 1e-12);
  EXPECT_EQ(gb300.gpu.hbm_gb, 288);
  // Dense peaks: NVL72 sparse 360 PF BF16 / 720 PF FP8 / 180 PF TF32 for 72
  // GPUs, halved and divided by 72.
  EXPECT_NEAR(gb300.gpu.PeakTflops(Precision::kBf16), 360000.0 / 2 / 72, 1e-9);
  EXPECT_NEAR(gb300.gpu.PeakTflops(Precision::kFp8), 720000.0 / 2 / 72, 1e-9);
  EXPECT_NEAR(gb300.gpu.peak_tf32_tflops, 180000.0 / 2 / 72, 1e-9);
  // 576 TB/s of HBM per rack.
  EXPECT_NEAR(gb300.gpu.hbm_gbps * 72, 576000, 1e-9);
  // GEMM ceilings: GB200's measured MAMF (1822.0 BF16, 3615.6 FP8) is the
  // proxy until a GB300 measurement is published.
  EXPECT_NEAR(gb300.gpu.GemmMaxEfficiency(Precision::kBf16) * 2500, 1822.0, 2);
  EXPECT_NEAR(gb300.gpu.GemmMaxEfficiency(Precision::kFp8) * 5000, 3615.6, 2);
  // 18 trays x 4 GPUs in one NVLink domain; one 800 Gb/s NIC per GPU.
  EXPECT_EQ(gb300.gpus_per_node, 4);
  EXPECT_EQ(gb300.nvlink_domain_gpus, 72);
  EXPECT_EQ(gb300.nvlink_domain_gpus / gb300.gpus_per_node, 18);
  EXPECT_EQ(gb300.nic_gbps, 100);
}

// Where no Blackwell Ultra number is published, the presets take the stated
// proxy; these pin the derivations so a change to one side is noticed.
TEST(BlackwellUltraPresetsTest, ProxiesFollowTheirSources) {
  const ClusterSpec b200 = Cluster("b200");
  const ClusterSpec gb200 = Cluster("gb200");
  const ClusterSpec b300 = Cluster("b300");
  const ClusterSpec gb300 = Cluster("gb300");
  // Same NVLink 5 fabric: B200's measured ring busbw, no NVLS number.
  for (const ClusterSpec* c : {&b300, &gb300}) {
    SCOPED_TRACE(c->name);
    EXPECT_EQ(c->nvlink_busbw_gbps, b200.nvlink_busbw_gbps);
    EXPECT_EQ(c->nvls_allreduce_busbw_gbps, 0);
    EXPECT_EQ(c->nvlink_latency_us, b200.nvlink_latency_us);
    EXPECT_EQ(c->network_latency_us, b200.network_latency_us);
    // The NDR NIC's achieved fraction (47 of 50 GB/s), scaled to 800 Gb/s.
    EXPECT_NEAR(c->nic_busbw_gbps / c->nic_gbps,
                b200.nic_busbw_gbps / b200.nic_gbps, 1e-12);
    EXPECT_NEAR(c->nic_busbw_gbps, 94, 1e-12);
  }
  EXPECT_EQ(gb300.gpu.gemm_max_efficiency_bf16,
            gb200.gpu.gemm_max_efficiency_bf16);
  EXPECT_EQ(gb300.gpu.gemm_max_efficiency_fp8,
            gb200.gpu.gemm_max_efficiency_fp8);
  // Blackwell Ultra keeps Blackwell's dense BF16/FP8 rates (its gains are in
  // FP4 and attention) and adds memory: 89.5 GiB more usable on HGX.
  EXPECT_EQ(b300.gpu.peak_bf16_tflops, b200.gpu.peak_bf16_tflops);
  EXPECT_EQ(b300.gpu.peak_fp8_tflops, b200.gpu.peak_fp8_tflops);
  EXPECT_EQ(gb300.gpu.peak_bf16_tflops, gb200.gpu.peak_bf16_tflops);
  EXPECT_EQ(gb300.gpu.peak_fp8_tflops, gb200.gpu.peak_fp8_tflops);
  EXPECT_NEAR(b300.UsableMemoryGib() - b200.UsableMemoryGib(), 89.53, 0.01);
  EXPECT_GT(gb300.UsableMemoryGib(), gb200.UsableMemoryGib() + 90);
}

TEST(BlackwellUltraPresetsTest, SuggestionsAndTuneOutSection) {
  StatusOr<ClusterSpec> c = ResolveCluster("gb300-nvl36");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "unknown cluster preset 'gb300-nvl36'");
  EXPECT_EQ(c.status().hint(),
            "did you mean: gb300, b300, gb200? run 'tune gpus' for the list");
  // The cluster section `tune --out` writes (a preset plus the job size)
  // reads back as the preset, NVL72 domain included.
  c = ParseClusterYaml("cluster:\n  preset: gb300\n  num_gpus: 144\n",
                       "best.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "gb300");
  EXPECT_EQ(c->gpus_per_node, 4);
  EXPECT_EQ(c->nvlink_domain_gpus, 72);
  EXPECT_NEAR(c->UsableMemoryGib(), 274.546875, 1e-12);
}

}  // namespace
}  // namespace meshtune::search_spaces
