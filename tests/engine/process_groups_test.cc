// MakeProcessGroups over the in-process communicator: for many (tp, pp, dp,
// cp) shapes with up to 8 ranks, each group's members (gathered through the
// group itself, so the order is the group's rank order) match
// search_spaces::RankGrid, and each rank's position matches its grid
// coordinate.
#include "engine/process_groups.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/comm/local_communicator.h"
#include "search_spaces/rank_grid.h"

namespace meshtune::engine {
namespace {

using search_spaces::GroupKind;
using search_spaces::ParallelConfig;
using search_spaces::RankGrid;

// What one rank saw of one group: name, its rank, and the world ranks of
// the members in group-rank order.
struct GroupView {
  std::string name;
  int rank = -1;
  std::vector<int64_t> members;
};

GroupView ViewOf(Communicator& group, int world_rank) {
  GroupView view;
  view.name = group.name();
  view.rank = group.rank();
  const float mine = static_cast<float>(world_rank);
  std::vector<float> all(group.size());
  group.AllGather(&mine, all.data(), 1);
  for (float x : all) view.members.push_back(static_cast<int64_t>(x));
  return view;
}

struct RankViews {
  GroupView tp, pp, dp, cp, mp;
  bool has_embd = false;
  GroupView embd;
  bool first_stage = false;
  bool last_stage = false;
};

ParallelConfig Shape(int64_t tp, int64_t pp, int64_t dp, int64_t cp) {
  ParallelConfig c;
  c.tp = tp;
  c.pp = pp;
  c.dp = dp;
  c.cp = cp;
  return c;
}

class ProcessGroupsShapes : public ::testing::TestWithParam<ParallelConfig> {};

TEST_P(ProcessGroupsShapes, MembersAndRanksFollowTheRankGrid) {
  const ParallelConfig config = GetParam();
  const int world_size = static_cast<int>(config.world());
  std::vector<RankViews> views(world_size);
  RunLocalRanks(world_size, [&](Communicator& world) {
    const int r = world.rank();
    ProcessGroups g = MakeProcessGroups(&world, config);
    RankViews& v = views[r];
    v.tp = ViewOf(*g.tp, r);
    v.pp = ViewOf(*g.pp, r);
    v.dp = ViewOf(*g.dp, r);
    v.cp = ViewOf(*g.cp, r);
    EXPECT_EQ(g.cp_rank(), g.cp->rank());
    v.mp = ViewOf(*g.mp, r);
    // Only the members of an embd group call into it.
    v.has_embd = g.embd != nullptr;
    if (v.has_embd) v.embd = ViewOf(*g.embd, r);
    v.first_stage = g.first_stage();
    v.last_stage = g.last_stage();
    EXPECT_EQ(g.world, &world);
  });

  const RankGrid grid(config, world_size, world_size);
  for (int r = 0; r < world_size; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const RankViews& v = views[r];
    const RankGrid::Coord c = grid.CoordOf(r);

    EXPECT_EQ(v.tp.name, "tp");
    EXPECT_EQ(v.tp.members, grid.GroupOf(GroupKind::kTp, r));
    EXPECT_EQ(v.tp.rank, c.tp);

    EXPECT_EQ(v.pp.name, "pp");
    EXPECT_EQ(v.pp.members, grid.GroupOf(GroupKind::kPp, r));
    EXPECT_EQ(v.pp.rank, c.pp);
    EXPECT_EQ(v.first_stage, c.pp == 0);
    EXPECT_EQ(v.last_stage, c.pp == config.pp - 1);

    EXPECT_EQ(v.dp.name, config.cp > 1 ? "dp_cp" : "dp");
    EXPECT_EQ(v.dp.members, grid.GroupOf(GroupKind::kDpCp, r));
    // cp is the faster of the two axes in the dp·cp group.
    EXPECT_EQ(v.dp.rank, c.cp + config.cp * c.dp);

    // cp: the ring of context parallelism, also built (size 1) at cp = 1.
    EXPECT_EQ(v.cp.name, "cp");
    EXPECT_EQ(v.cp.members, grid.GroupOf(GroupKind::kCp, r));
    EXPECT_EQ(v.cp.rank, c.cp);

    // mp: every rank with this rank's (cp, dp), ascending (tp fastest, then
    // pp), this rank at position tp + tp_size·pp.
    std::vector<int64_t> mp;
    for (int64_t q = 0; q < world_size; ++q) {
      const RankGrid::Coord d = grid.CoordOf(q);
      if (d.cp == c.cp && d.dp == c.dp) mp.push_back(q);
    }
    EXPECT_EQ(v.mp.name, "mp");
    EXPECT_EQ(v.mp.members, mp);
    EXPECT_EQ(v.mp.rank, c.tp + config.tp * c.pp);

    const std::vector<int64_t> pipeline = grid.GroupOf(GroupKind::kPp, r);
    const bool end_stage = c.pp == 0 || c.pp == config.pp - 1;
    EXPECT_EQ(v.has_embd, config.pp > 1 && end_stage);
    if (v.has_embd) {
      EXPECT_EQ(v.embd.name, "embd");
      EXPECT_EQ(v.embd.members,
                (std::vector<int64_t>{pipeline.front(), pipeline.back()}));
      EXPECT_EQ(v.embd.rank, c.pp == 0 ? 0 : 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    UpTo8Ranks, ProcessGroupsShapes,
    ::testing::Values(Shape(1, 1, 1, 1), Shape(2, 1, 1, 1), Shape(1, 2, 1, 1),
                      Shape(1, 1, 2, 1), Shape(2, 2, 1, 1), Shape(2, 1, 2, 1),
                      Shape(1, 2, 2, 1), Shape(1, 3, 1, 1), Shape(1, 3, 2, 1),
                      Shape(2, 2, 2, 1), Shape(4, 2, 1, 1), Shape(1, 4, 2, 1),
                      Shape(2, 4, 1, 1), Shape(1, 1, 8, 1), Shape(2, 1, 1, 2),
                      Shape(1, 2, 2, 2), Shape(2, 2, 1, 2)),
    [](const ::testing::TestParamInfo<ParallelConfig>& info) {
      const ParallelConfig& c = info.param;
      return "tp" + std::to_string(c.tp) + "pp" + std::to_string(c.pp) + "dp" +
             std::to_string(c.dp) + "cp" + std::to_string(c.cp);
    });

TEST(ProcessGroups, GroupsCarryTheWorldLogAndTheirNames) {
  // tp2 pp2: a tp all-reduce is logged under "tp" with group size 2.
  CommLog log;
  RunLocalRanks(
      4,
      [](Communicator& world) {
        ProcessGroups g = MakeProcessGroups(&world, Shape(2, 2, 1, 1));
        float x = 1.0f;
        g.tp->AllReduceSum(&x, 1);
        if (g.embd) g.embd->AllReduceSum(&x, 1);
      },
      &log);
  int tp_records = 0;
  int embd_records = 0;
  for (const CommRecord& rec : log.records()) {
    if (rec.group == "tp" && rec.kind == CommKind::kAllReduce) ++tp_records;
    if (rec.group == "embd" && rec.kind == CommKind::kAllReduce) {
      ++embd_records;
    }
  }
  EXPECT_EQ(tp_records, 4);
  EXPECT_EQ(embd_records, 4);  // both stages are ends when pp == 2
}

// The expert groups follow RankGrid's expert grid etp × ep × edp × pp: ep
// folded over dp (tp2 dp2 ep2), over tp (tp2 ep2 etp1), over cp and dp
// (cp2 dp2 ep4), with pp. "emp" holds the ranks of one edp position in
// etp-ep-pp order.
struct ExpertShape {
  int64_t tp, pp, dp, cp, ep, etp;
};

class ExpertGroupsShapes : public ::testing::TestWithParam<ExpertShape> {};

TEST_P(ExpertGroupsShapes, MembersFollowTheExpertGrid) {
  const ExpertShape e = GetParam();
  ParallelConfig config = Shape(e.tp, e.pp, e.dp, e.cp);
  config.ep = e.ep;
  config.etp = e.etp;
  const int world_size = static_cast<int>(config.world());
  std::vector<GroupView> etp(world_size), ep(world_size), edp(world_size),
      emp(world_size);
  RunLocalRanks(world_size, [&](Communicator& world) {
    const int r = world.rank();
    ProcessGroups g = MakeProcessGroups(&world, config);
    etp[r] = ViewOf(*g.etp, r);
    ep[r] = ViewOf(*g.ep, r);
    edp[r] = ViewOf(*g.edp, r);
    emp[r] = ViewOf(*g.emp, r);
  });
  const RankGrid grid(config, world_size, world_size);
  const int64_t stage = e.tp * e.cp * e.dp, etp_size = config.expert_tp();
  for (int r = 0; r < world_size; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(etp[r].name, "etp");
    EXPECT_EQ(etp[r].members, grid.GroupOf(GroupKind::kEtp, r));
    EXPECT_EQ(ep[r].name, "ep");
    EXPECT_EQ(ep[r].members, grid.GroupOf(GroupKind::kEp, r));
    EXPECT_EQ(ep[r].rank, (r % stage) / etp_size % e.ep);
    EXPECT_EQ(edp[r].name, "edp");
    EXPECT_EQ(edp[r].members, grid.GroupOf(GroupKind::kEdp, r));
    std::vector<int64_t> same_edp;
    for (int64_t q = 0; q < world_size; ++q) {
      if ((q % stage) / (etp_size * e.ep) == (r % stage) / (etp_size * e.ep)) {
        same_edp.push_back(q);
      }
    }
    EXPECT_EQ(emp[r].name, "emp");
    EXPECT_EQ(emp[r].members, same_edp);
  }
}

INSTANTIATE_TEST_SUITE_P(UpTo8Ranks, ExpertGroupsShapes,
                         ::testing::Values(ExpertShape{1, 1, 2, 1, 2, 0},
                                           ExpertShape{2, 1, 2, 1, 2, 0},
                                           ExpertShape{2, 1, 1, 1, 2, 1},
                                           ExpertShape{1, 1, 2, 2, 4, 0},
                                           ExpertShape{2, 2, 2, 1, 2, 1},
                                           ExpertShape{1, 2, 4, 1, 2, 0}),
                         [](const ::testing::TestParamInfo<ExpertShape>& info) {
                           const ExpertShape& c = info.param;
                           return "tp" + std::to_string(c.tp) + "pp" +
                                  std::to_string(c.pp) + "dp" +
                                  std::to_string(c.dp) + "cp" +
                                  std::to_string(c.cp) + "ep" +
                                  std::to_string(c.ep) + "etp" +
                                  std::to_string(c.etp);
                         });

}  // namespace
}  // namespace meshtune::engine
