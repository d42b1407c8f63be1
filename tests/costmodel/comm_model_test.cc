// Communication model: closed-form group placement (checked against
// RankGrid), nccl-tests bus factors, the message-size ramp against the
// measured 8×A100 all-reduce curve, hierarchical and NVLS collectives.
#include "costmodel/comm_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "costmodel/datasheet_calibration.h"
#include "search_spaces/rank_grid.h"
#include "tests/costmodel/test_specs.h"

namespace meshtune::costmodel {
namespace {

using search_spaces::GroupKind;
using search_spaces::ParallelConfig;
using search_spaces::RankGrid;

TEST(AxisGroup, MatchesRankGridPlacement) {
  int checked = 0;
  for (int64_t tp : {1, 2, 4, 8, 16}) {
    for (int64_t cp : {1, 2, 4}) {
      for (int64_t dp : {1, 2, 4, 8}) {
        for (int64_t pp : {1, 2, 4}) {
          for (int64_t ep : {1, 2, 4, 8}) {
            if ((dp * cp) % ep != 0) continue;
            ParallelConfig c;
            c.tp = tp;
            c.cp = cp;
            c.dp = dp;
            c.pp = pp;
            c.ep = ep;
            const RankGrid grid(c, 8, 8);
            const struct {
              GroupKind kind;
              int64_t stride, size;
            } axes[] = {
                {GroupKind::kTp, 1, tp},
                {GroupKind::kCp, tp, cp},
                {GroupKind::kDp, tp * cp, dp},
                {GroupKind::kDpCp, tp, dp * cp},
                {GroupKind::kPp, tp * cp * dp, pp},
                {GroupKind::kEp, tp, ep},
                {GroupKind::kEdp, tp * ep, dp * cp / ep},
            };
            for (const auto& ax : axes) {
              const search_spaces::GroupPlacement want =
                  grid.Placement(ax.kind);
              const CommGroup got = AxisGroup(ax.stride, ax.size, 8);
              ASSERT_EQ(got.size, want.size) << ToString(c);
              EXPECT_EQ(got.nodes, want.nodes)
                  << search_spaces::ToString(ax.kind) << " " << ToString(c);
              EXPECT_EQ(got.ranks_per_node, want.ranks_per_node)
                  << search_spaces::ToString(ax.kind) << " " << ToString(c);
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(BusFactor, NcclTestsConventions) {
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(RingSteps(Collective::kAllReduce, 8), 14.0);
  EXPECT_DOUBLE_EQ(RingSteps(Collective::kAllGather, 8), 7.0);
}

TEST(Collectives, A100AllReduceBusbwFollowsMeasuredCurve) {
  // ml-engineering 8×A100 all_reduce busbw (GB/s) by message size.
  const DatasheetCalibration cal(testing::A100Cluster());
  const CommGroup node{8, 1, 8};
  const struct {
    double bytes, measured_gbps;
  } points[] = {{1 << 20, 18},
                {8 << 20, 110},
                {64 << 20, 172},
                {256 << 20, 194},
                {1024.0 * (1 << 20), 229}};
  for (const auto& p : points) {
    const double t = cal.CollectiveTime_s(Collective::kAllReduce, p.bytes, node,
                                          ModelOptions());
    const double busbw = p.bytes * BusFactor(Collective::kAllReduce, 8) / t;
    std::printf("all_reduce %8.0f KiB: busbw %6.1f GB/s (measured %5.1f)\n",
                p.bytes / 1024, busbw / 1e9, p.measured_gbps);
    EXPECT_NEAR(busbw / 1e9 / p.measured_gbps, 1.0, 0.35) << p.bytes;
  }
}

TEST(Collectives, MultiNodeTakesTheFasterOfHierarchicalAndRailRing) {
  const DatasheetCalibration cal(testing::A100Cluster());
  const double bytes = 1e9;
  const double intra = cal.CollectiveTime_s(Collective::kAllReduce, bytes,
                                            CommGroup{8, 1, 8}, ModelOptions());
  const double hier = cal.CollectiveTime_s(Collective::kAllReduce, bytes,
                                           CommGroup{16, 2, 8}, ModelOptions());
  const double flat = cal.CollectiveTime_s(
      Collective::kAllReduce, bytes, CommGroup{16, 16, 1}, ModelOptions());
  EXPECT_LT(intra, hier);
  EXPECT_LT(hier, flat);
  // Hierarchical: the inter-node leg moves S/8 per NIC, 2·(1/2)·S/8 at
  // 24 GB/s ≈ 5.2 ms, plus two NVLink legs of 7/8·S at 230 GB/s ≈ 7.6 ms:
  // 12.8 ms. The rail ring is faster and NCCL takes it: 30 steps of 14 µs
  // + 2·15/16·(50 µs + S / min(230, 8·24 GB/s)) ≈ 10.3 ms.
  EXPECT_NEAR(hier, 30 * 14e-6 + 30.0 / 16 * (50e-6 + bytes / 192e9), 1e-6);
  ModelOptions no_hier;
  no_hier.Disable(Refinement::kHierarchicalCollectives);
  EXPECT_NEAR(cal.CollectiveTime_s(Collective::kAllReduce, bytes,
                                   CommGroup{16, 2, 8}, no_hier),
              30 * 14e-6 + 30.0 / 16 * (50e-6 + bytes / 24e9), 1e-6);
  // All-gather: hierarchical = network AG of S/8 (2.64 ms) + NVLink AG of
  // S (3.87 ms) = 6.5 ms; the rail ring's 15/16·S/192 GB/s is faster.
  const double ag = cal.CollectiveTime_s(Collective::kAllGather, bytes,
                                         CommGroup{16, 2, 8}, ModelOptions());
  EXPECT_NEAR(ag, 15 * 14e-6 + 15.0 / 16 * (50e-6 + bytes / 192e9), 1e-6);
  // Never slower than either form: r = 2 per node over 8 nodes.
  const double ag2 = cal.CollectiveTime_s(Collective::kAllGather, bytes,
                                          CommGroup{16, 8, 2}, ModelOptions());
  EXPECT_LE(ag2, 15 * 14e-6 + 15.0 / 16 * (50e-6 + bytes / 48e9) + 1e-12);
  EXPECT_LE(ag2, 7 * 14e-6 + 7.0 / 8 * (50e-6 + bytes / 2 / 24e9) + 3.4e-6 +
                     0.5 * (50e-6 + bytes / 230e9) + 1e-12);
}

TEST(Collectives, NvlsSpeedsUpIntraNodeAllReduceOnly) {
  search_spaces::ClusterSpec h100 = testing::H100Cluster();
  const DatasheetCalibration with(h100);
  h100.nvls_allreduce_busbw_gbps = 0;
  const DatasheetCalibration without(h100);
  const CommGroup node{8, 1, 8};
  EXPECT_LT(
      with.CollectiveTime_s(Collective::kAllReduce, 1e9, node, ModelOptions()),
      without.CollectiveTime_s(Collective::kAllReduce, 1e9, node,
                               ModelOptions()));
  EXPECT_DOUBLE_EQ(
      with.CollectiveTime_s(Collective::kAllGather, 1e9, node, ModelOptions()),
      without.CollectiveTime_s(Collective::kAllGather, 1e9, node,
                               ModelOptions()));
}

TEST(Collectives, TrivialGroupsCostNothing) {
  const DatasheetCalibration cal(testing::A100Cluster());
  EXPECT_EQ(cal.CollectiveTime_s(Collective::kAllReduce, 1e9, CommGroup{},
                                 ModelOptions()),
            0.0);
  EXPECT_EQ(cal.CollectiveTime_s(Collective::kAllGather, 0, CommGroup{8, 1, 8},
                                 ModelOptions()),
            0.0);
}

TEST(Gemm, EfficiencySaturatesAtTheCeilingAndFallsForSkinnyShapes) {
  const search_spaces::ClusterSpec a100 = testing::A100Cluster();
  const DatasheetCalibration cal(a100);
  const auto bf16 = search_spaces::Precision::kBf16;
  const double big = cal.GemmEfficiency(8192, 8192, 8192, bf16);
  EXPECT_LT(big, a100.gpu.gemm_max_efficiency_bf16);
  EXPECT_GT(big, 0.97 * a100.gpu.gemm_max_efficiency_bf16);
  EXPECT_LT(cal.GemmEfficiency(8192, 8192, 64, bf16), 0.6 * big);
  EXPECT_LT(cal.GemmEfficiency(512, 512, 512, bf16), 0.2 * big);
  // Time uses the efficiency (and the per-generation kernel efficiency).
  const double eta = DatasheetCalibration::TrainingKernelEfficiency(a100.gpu);
  EXPECT_NEAR(cal.GemmTime_s(8192, 8192, 8192, bf16, ModelOptions()),
              2.0 * 8192 * 8192 * 8192 / (312e12 * eta * big), 1e-12);
}

TEST(ExpectedDistinctBins, HandComputed) {
  // 4·(1 − 0.75^8) = 4·(1 − 0.1001129150390625).
  EXPECT_NEAR(ExpectedDistinctBins(4, 8), 3.59954833984375, 1e-12);
  // 8·(1 − (7/8)^8) = 8·(1 − 0.3436089158058167).
  EXPECT_NEAR(ExpectedDistinctBins(8, 8), 5.251128673553467, 1e-12);
  EXPECT_DOUBLE_EQ(ExpectedDistinctBins(1, 8), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedDistinctBins(16, 1), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedDistinctBins(0, 8), 0.0);
}

// DeepSeek-V3-like dispatch on H100 nodes: 4096 tokens of h = 7168 in bf16,
// top-8, EP 32 over 4 nodes of 8 (test_specs.h: NVLink 370 GB/s busbw,
// 3.4 us per step; NIC 47 GB/s, 14 us; ramp 50 us).
TEST(FlexDispatch, OneCopyPerRemoteNodeThenNvlinkForwarding) {
  const DatasheetCalibration cal(testing::H100Cluster());
  const double b = 2.0 * 4096 * 7168;  // one copy of the rank's tokens
  const CommGroup ep{32, 4, 8};
  // Network: 3·(1 − 0.75^8) = 2.69966 remote nodes per token, one send.
  const double remote = 3.0 * (1.0 - 0.1001129150390625);
  const double inter = 14e-6 + 50e-6 + remote * b / 47e9;
  // NVLink forwarding: all-to-all of the 8 copies among 8 ranks.
  const double intra = 7 * 3.4e-6 + 7.0 / 8 * 50e-6 + 7.0 / 8 * 8 * b / 370e9;
  const double flex = FlexDispatchTime_s(b, 8, ep, cal, {});
  EXPECT_NEAR(flex, std::max(inter, intra), 1e-12);
  EXPECT_NEAR(flex, 3.4368e-3, 1e-6);
  // The alltoall dispatcher sends all 8 copies, 24/32 of them on the NIC:
  // 31·14 us + 50 us + 8·b·(24/32)/47 GB/s = 7.98 ms.
  const double alltoall =
      cal.CollectiveTime_s(Collective::kAllToAll, 8 * b, ep, {});
  EXPECT_NEAR(alltoall, 31 * 14e-6 + 50e-6 + 8 * b * 24 / 32 / 47e9, 1e-12);
  EXPECT_LT(flex, 0.45 * alltoall);
  // Inside one node: once per destination rank, 8·(1 − (7/8)^8) copies.
  const CommGroup node{8, 1, 8};
  EXPECT_NEAR(FlexDispatchTime_s(b, 8, node, cal, {}),
              cal.CollectiveTime_s(Collective::kAllToAll, 5.251128673553467 * b,
                                   node, {}),
              1e-12);
  EXPECT_EQ(FlexDispatchTime_s(b, 8, CommGroup{}, cal, {}), 0.0);
}

}  // namespace
}  // namespace meshtune::costmodel
