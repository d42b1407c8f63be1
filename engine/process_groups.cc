// MakeProcessGroups: one Split of the world per group kind, with membership
// taken from search_spaces::RankGrid (Megatron-Core's RankGenerator order
// tp-cp-ep-dp-pp, megatron/core/parallel_state.py).
//
// Every Split is collective over the world, so every rank makes the same
// calls in the same order; a rank that belongs to no group of a kind (the
// middle stages for "embd") still calls Split, with a color of its own.
#include "engine/process_groups.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "search_spaces/rank_grid.h"
#include "search_spaces/status.h"

namespace meshtune::engine {
namespace {

using search_spaces::GroupKind;
using search_spaces::RankGrid;

// Splits `world` into the groups of `kind`: color = the group's smallest
// member (unique per group), key = the position in the group, so the new
// rank is the coordinate along the group's axes.
std::unique_ptr<Communicator> SplitByKind(Communicator* world,
                                          const RankGrid& grid, GroupKind kind,
                                          const std::string& name) {
  const int64_t rank = world->rank();
  const std::vector<int64_t> members = grid.GroupOf(kind, rank);
  const int64_t position =
      std::find(members.begin(), members.end(), rank) - members.begin();
  MESHTUNE_CHECK(position < static_cast<int64_t>(members.size()));
  return world->Split(static_cast<int>(members.front()),
                      static_cast<int>(position), name);
}

}  // namespace

ProcessGroups MakeProcessGroups(Communicator* world,
                                const search_spaces::ParallelConfig& config) {
  MESHTUNE_CHECK(world != nullptr);
  MESHTUNE_CHECK(world->size() == config.world());
  // Node placement is irrelevant to membership; one node holds everything.
  const RankGrid grid(config, world->size(), world->size());
  const RankGrid::Coord coord = grid.CoordOf(world->rank());

  ProcessGroups groups;
  groups.world = world;
  groups.tp = SplitByKind(world, grid, GroupKind::kTp, "tp");
  groups.pp = SplitByKind(world, grid, GroupKind::kPp, "pp");
  // Gradients and the distributed optimizer reduce over dp and cp together
  // (Megatron's data_parallel_group_with_context_parallel).
  groups.dp = SplitByKind(world, grid, GroupKind::kDpCp,
                          config.cp > 1 ? "dp_cp" : "dp");
  // The ring of context parallelism's attention (ring_attention.h).
  groups.cp = SplitByKind(world, grid, GroupKind::kCp, "cp");

  groups.tp_cp = SplitByKind(world, grid, GroupKind::kTpCp, "tp_cp");

  // "mp": Megatron's model-parallel group, generator_wrapper('tp-pp'): the
  // ranks that share (cp, dp) coordinates, ordered tp fastest then pp.
  // RankGrid has no kind for it (tp and pp are not adjacent axes).
  const int64_t mp_color = coord.cp + config.cp * coord.dp;
  const int64_t mp_key = coord.tp + config.tp * coord.pp;
  groups.mp =
      world->Split(static_cast<int>(mp_color), static_cast<int>(mp_key), "mp");

  // Expert groups (parallel_state.py's expert RankGenerator, order
  // tp-ep-dp-pp with tp = etp): "emp" has no RankGrid kind either; its
  // color is the edp coordinate, its key the position in etp × ep × pp.
  groups.etp = SplitByKind(world, grid, GroupKind::kEtp, "etp");
  groups.ep = SplitByKind(world, grid, GroupKind::kEp, "ep");
  groups.edp = SplitByKind(world, grid, GroupKind::kEdp, "edp");
  const int64_t stage_ranks = config.tp * config.cp * config.dp;
  const int64_t in_stage = world->rank() % stage_ranks;
  const int64_t etp = config.expert_tp();
  const int64_t emp_color = in_stage / (etp * config.ep);
  const int64_t emp_key = in_stage % (etp * config.ep) +
                          etp * config.ep * (world->rank() / stage_ranks);
  groups.emp = world->Split(static_cast<int>(emp_color),
                            static_cast<int>(emp_key), "emp");

  // "embd": first and last stage of this rank's pipeline, which hold the
  // tied word embedding (parallel_state.py, _EMBEDDING_GROUP). Only built
  // with more than one stage; middle stages land in a throwaway group whose
  // color (world size) no real group uses, since real colors are ranks.
  if (config.pp > 1) {
    const std::vector<int64_t> pipeline =
        grid.GroupOf(GroupKind::kPp, world->rank());
    const bool first = coord.pp == 0;
    const bool last = coord.pp == config.pp - 1;
    const int color =
        first || last ? static_cast<int>(pipeline.front()) : world->size();
    std::unique_ptr<Communicator> embd =
        world->Split(color, last ? 1 : 0, "embd");
    if (first || last) groups.embd = std::move(embd);
  }
  return groups;
}

}  // namespace meshtune::engine
