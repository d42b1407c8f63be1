// Tests for RankGrid: Megatron-Core rank order and group placement.
//
// Groups are checked against an independent coordinate-based reference (a
// rank's coordinates in the dense grid tp × cp × dp × pp and the expert grid
// tp × ep × edp × pp, tp fastest, as parallel_state.py's RankGenerator lays
// them out), and Placement against a brute force over all groups.
#include "search_spaces/rank_grid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace meshtune::search_spaces {
namespace {

using Groups = std::vector<std::vector<int64_t>>;

constexpr std::array<GroupKind, 9> kAllKinds = {
    GroupKind::kTp,   GroupKind::kCp,   GroupKind::kDp,
    GroupKind::kDpCp, GroupKind::kPp,   GroupKind::kEp,
    GroupKind::kEdp,  GroupKind::kTpCp, GroupKind::kEtp};

ParallelConfig Config(int64_t tp, int64_t cp, int64_t dp, int64_t pp,
                      int64_t ep = 1, int64_t etp = 0) {
  ParallelConfig c;
  c.tp = tp;
  c.cp = cp;
  c.dp = dp;
  c.pp = pp;
  c.ep = ep;
  c.etp = etp;
  return c;
}

std::string Name(const ParallelConfig& c, int64_t gpn, int64_t domain) {
  return "tp" + std::to_string(c.tp) + " cp" + std::to_string(c.cp) + " dp" +
         std::to_string(c.dp) + " pp" + std::to_string(c.pp) + " ep" +
         std::to_string(c.ep) + " etp" + std::to_string(c.expert_tp()) +
         " gpus_per_node " + std::to_string(gpn) + " nvlink " +
         std::to_string(domain);
}

// Reference: the key that members of one group share (all coordinates
// outside the group's axes), computed from explicit coordinates.
std::vector<int64_t> ReferenceKey(const ParallelConfig& c, GroupKind kind,
                                  int64_t rank) {
  const int64_t tp = rank % c.tp;
  const int64_t cp = (rank / c.tp) % c.cp;
  const int64_t dp = (rank / (c.tp * c.cp)) % c.dp;
  const int64_t pp = rank / (c.tp * c.cp * c.dp);
  // Expert grid: the tp·cp·dp ranks of one stage are re-read as etp × ep ×
  // edp.
  const int64_t in_stage = rank % (c.tp * c.cp * c.dp);
  const int64_t etp = in_stage % c.expert_tp();
  const int64_t ep = (in_stage / c.expert_tp()) % c.ep;
  const int64_t edp = in_stage / (c.expert_tp() * c.ep);
  switch (kind) {
    case GroupKind::kTp:
      return {cp, dp, pp};
    case GroupKind::kCp:
      return {tp, dp, pp};
    case GroupKind::kDp:
      return {tp, cp, pp};
    case GroupKind::kDpCp:
      return {tp, pp};
    case GroupKind::kTpCp:
      return {dp, pp};
    case GroupKind::kPp:
      return {tp, cp, dp};
    case GroupKind::kEp:
      return {etp, edp, pp};
    case GroupKind::kEdp:
      return {etp, ep, pp};
    case GroupKind::kEtp:
      return {ep, edp, pp};
  }
  return {};
}

Groups ReferenceGroups(const ParallelConfig& c, GroupKind kind) {
  std::map<std::vector<int64_t>, std::vector<int64_t>> by_key;
  for (int64_t r = 0; r < c.world(); ++r) {
    by_key[ReferenceKey(c, kind, r)].push_back(r);
  }
  Groups out;
  for (auto& [key, members] : by_key) out.push_back(members);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t ExpectedSize(const ParallelConfig& c, GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp:
      return c.tp;
    case GroupKind::kCp:
      return c.cp;
    case GroupKind::kDp:
      return c.dp;
    case GroupKind::kDpCp:
      return c.dp * c.cp;
    case GroupKind::kTpCp:
      return c.tp * c.cp;
    case GroupKind::kPp:
      return c.pp;
    case GroupKind::kEp:
      return c.ep;
    case GroupKind::kEdp:
      return c.tp * c.cp * c.dp / (c.expert_tp() * c.ep);
    case GroupKind::kEtp:
      return c.expert_tp();
  }
  return 0;
}

GroupPlacement BrutePlacement(const Groups& groups, int64_t gpn,
                              int64_t domain) {
  GroupPlacement worst;
  bool first = true;
  for (const auto& g : groups) {
    std::map<int64_t, int64_t> per_node;
    std::set<int64_t> domains;
    for (int64_t r : g) {
      ++per_node[r / gpn];
      domains.insert(r / domain);
    }
    GroupPlacement p;
    p.size = static_cast<int64_t>(g.size());
    p.nodes = static_cast<int64_t>(per_node.size());
    p.nvlink_domains = static_cast<int64_t>(domains.size());
    p.ranks_per_node = 0;
    for (auto& [node, count] : per_node) {
      p.ranks_per_node = std::max(p.ranks_per_node, count);
    }
    const bool worse = p.nodes != worst.nodes ? p.nodes > worst.nodes
                       : p.nvlink_domains != worst.nvlink_domains
                           ? p.nvlink_domains > worst.nvlink_domains
                           : p.ranks_per_node < worst.ranks_per_node;
    if (first || worse) worst = p;
    first = false;
  }
  return worst;
}

// Every (tp, cp, dp, pp, ep, etp) with etp·ep | tp·cp·dp from small sets, on
// several node and NVLink-domain sizes, including ones that do not divide the
// group sizes.
TEST(RankGridTest, PropertiesOverManyShapes) {
  int checked = 0;
  for (int64_t tp : {1, 2, 3, 4, 8}) {
    for (int64_t cp : {1, 2, 4}) {
      for (int64_t dp : {1, 2, 3, 4}) {
        for (int64_t pp : {1, 2, 3, 4}) {
          for (int64_t ep : {1, 2, 3, 4, 8}) {
            for (int64_t etp : {int64_t{0}, int64_t{1}, int64_t{2}}) {
              if (etp == tp) continue;  // the same grid as etp 0
              if ((tp * cp * dp) % ((etp > 0 ? etp : tp) * ep) != 0) continue;
              for (auto [gpn, domain] :
                   std::vector<std::pair<int64_t, int64_t>>{
                       {8, 8}, {4, 72}, {6, 6}, {1, 1}, {8, 16}}) {
                const ParallelConfig c = Config(tp, cp, dp, pp, ep, etp);
                SCOPED_TRACE(Name(c, gpn, domain));
                RankGrid grid(c, gpn, domain);
                ASSERT_EQ(grid.world(), tp * cp * dp * pp);
                for (GroupKind kind : kAllKinds) {
                  SCOPED_TRACE(ToString(kind));
                  const Groups groups = grid.Groups(kind);
                  // Same groups as the coordinate reference, each sorted, so
                  // they partition [0, world) and have the right size.
                  Groups sorted = groups;
                  for (const auto& g : sorted) {
                    ASSERT_TRUE(std::is_sorted(g.begin(), g.end()));
                    ASSERT_EQ(static_cast<int64_t>(g.size()),
                              ExpectedSize(c, kind));
                  }
                  std::sort(sorted.begin(), sorted.end());
                  ASSERT_EQ(sorted, ReferenceGroups(c, kind));
                  for (const auto& g : groups) {
                    for (int64_t r : g) ASSERT_EQ(grid.GroupOf(kind, r), g);
                  }
                  const GroupPlacement placement = grid.Placement(kind);
                  const GroupPlacement brute =
                      BrutePlacement(groups, gpn, domain);
                  EXPECT_EQ(placement.size, brute.size);
                  EXPECT_EQ(placement.nodes, brute.nodes);
                  EXPECT_EQ(placement.ranks_per_node, brute.ranks_per_node);
                  EXPECT_EQ(placement.nvlink_domains, brute.nvlink_domains);
                  EXPECT_EQ(placement.crosses_nodes(), brute.nodes > 1);
                }
                // Strides: consecutive dp members are tp·cp apart, pp members
                // tp·cp·dp apart, cp members tp apart, tp members adjacent.
                const auto stride_is = [&](GroupKind kind, int64_t stride) {
                  for (const auto& g : grid.Groups(kind)) {
                    for (size_t i = 1; i < g.size(); ++i) {
                      if (g[i] - g[i - 1] != stride) return false;
                    }
                  }
                  return true;
                };
                EXPECT_TRUE(stride_is(GroupKind::kTp, 1));
                EXPECT_TRUE(stride_is(GroupKind::kCp, tp));
                EXPECT_TRUE(stride_is(GroupKind::kDp, tp * cp));
                EXPECT_TRUE(stride_is(GroupKind::kPp, tp * cp * dp));
                EXPECT_TRUE(stride_is(GroupKind::kEtp, 1));
                EXPECT_TRUE(stride_is(GroupKind::kEp, c.expert_tp()));
                EXPECT_TRUE(stride_is(GroupKind::kEdp, c.expert_tp() * ep));
                // A tp group that fits a node and tiles it stays on one node.
                if (tp <= gpn && gpn % tp == 0) {
                  EXPECT_EQ(grid.Placement(GroupKind::kTp).nodes, 1);
                  EXPECT_EQ(grid.Placement(GroupKind::kTp).ranks_per_node, tp);
                }
                for (int64_t r = 0; r < grid.world(); ++r) {
                  const RankGrid::Coord k = grid.CoordOf(r);
                  ASSERT_EQ(k.tp + tp * (k.cp + cp * (k.dp + dp * k.pp)), r);
                }
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// parallel_state.py's docstring example for generate_masked_orthogonal_rank_
// groups: sizes [tp, dp, pp] = [2, 3, 4] give dp groups [0, 2, 4],
// [1, 3, 5], ..., [19, 21, 23], in that order.
TEST(RankGridTest, MegatronDocstringDataParallelGroups) {
  RankGrid grid(Config(2, 1, 3, 4), 8, 8);
  const Groups dp = grid.Groups(GroupKind::kDp);
  ASSERT_EQ(dp.size(), 8u);
  EXPECT_EQ(dp[0], (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(dp[1], (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(dp[2], (std::vector<int64_t>{6, 8, 10}));
  EXPECT_EQ(dp[7], (std::vector<int64_t>{19, 21, 23}));
}

// initialize_model_parallel's docstring: 16 GPUs, tp 2, pp 4 -> tp groups
// [g0, g1], [g2, g3], ...; pipeline groups [g0, g4, g8, g12], ...
TEST(RankGridTest, MegatronDocstringSixteenGpus) {
  RankGrid grid(Config(2, 1, 2, 4), 8, 8);
  const Groups tp = grid.Groups(GroupKind::kTp);
  EXPECT_EQ(tp.size(), 8u);
  EXPECT_EQ(tp[0], (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(tp[7], (std::vector<int64_t>{14, 15}));
  const Groups pp = grid.Groups(GroupKind::kPp);
  ASSERT_EQ(pp.size(), 4u);
  EXPECT_EQ(pp[0], (std::vector<int64_t>{0, 4, 8, 12}));
  EXPECT_EQ(pp[3], (std::vector<int64_t>{3, 7, 11, 15}));
  const Groups dp = grid.Groups(GroupKind::kDp);
  EXPECT_EQ(dp[0], (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(dp[1], (std::vector<int64_t>{1, 3}));
}

// GPT-3 175B on 1024 GPUs (tp 8, pp 16, dp 8): tp inside a node, every dp
// and pp group one rank per node.
TEST(RankGridTest, Gpt3PlacementOnEightGpuNodes) {
  RankGrid grid(Config(8, 1, 8, 16), 8, 8);
  const GroupPlacement tp = grid.Placement(GroupKind::kTp);
  EXPECT_EQ(tp.nodes, 1);
  EXPECT_EQ(tp.ranks_per_node, 8);
  EXPECT_FALSE(tp.crosses_nodes());
  const GroupPlacement dp = grid.Placement(GroupKind::kDp);
  EXPECT_EQ(dp.size, 8);
  EXPECT_EQ(dp.nodes, 8);
  EXPECT_EQ(dp.ranks_per_node, 1);
  const GroupPlacement pp = grid.Placement(GroupKind::kPp);
  EXPECT_EQ(pp.nodes, 16);
  EXPECT_EQ(pp.nvlink_domains, 16);
}

// An 8-way tp group on 4-GPU nodes inside a 72-GPU NVLink domain spans two
// nodes but one domain.
TEST(RankGridTest, TpAcrossNodesInsideNvlinkDomain) {
  RankGrid grid(Config(8, 1, 9, 1), 4, 72);
  const GroupPlacement tp = grid.Placement(GroupKind::kTp);
  EXPECT_EQ(tp.nodes, 2);
  EXPECT_EQ(tp.ranks_per_node, 4);
  EXPECT_EQ(tp.nvlink_domains, 1);
  const GroupPlacement dp = grid.Placement(GroupKind::kDp);
  EXPECT_EQ(dp.nodes, 9);
  EXPECT_EQ(dp.nvlink_domains, 1);
}

}  // namespace
}  // namespace meshtune::search_spaces
