// RankGrid: which global ranks form each process group, in Megatron-Core's
// rank order tp-cp-ep-dp-pp (tp fastest), and where those groups sit on nodes.
//
// Dense layers use the grid tp × cp × dp × pp. Expert layers use Megatron's
// expert grid etp × ep × edp × pp over the same ranks (etp =
// ParallelConfig::expert_tp(), edp = tp·cp·dp/(etp·ep)), so ep folds over
// whatever dense axes lie above etp: dp, cp and tp ranks alike.
// The same object tells the cost model which groups cross node boundaries
// and will tell the engine which communicators to build.
#ifndef MESHTUNE_SEARCH_SPACES_RANK_GRID_H_
#define MESHTUNE_SEARCH_SPACES_RANK_GRID_H_

#include <cstdint>
#include <vector>

#include "search_spaces/parallel_config.h"

namespace meshtune::search_spaces {

enum class GroupKind {
  kTp,    // tensor parallel
  kCp,    // context parallel
  kDp,    // data parallel (dense parameters)
  kDpCp,  // data × context: distributed-optimizer and gradient reduction group
  kPp,    // pipeline parallel
  kEp,    // expert parallel
  kEdp,   // expert data parallel (expert parameter gradients)
  kTpCp,  // tensor × context (a rank's model-parallel peers in one stage)
  kEtp,   // expert tensor parallel (one expert's FFN split)
};
const char* ToString(GroupKind k);

// Where one process group lies: its size, how many nodes it spans, and the
// most ranks it has on one node and on one NVLink domain.
struct GroupPlacement {
  int64_t size = 1;
  int64_t nodes = 1;           // distinct nodes touched
  int64_t ranks_per_node = 1;  // max members on one node
  int64_t nvlink_domains = 1;  // distinct NVLink domains touched
  bool crosses_nodes() const { return nodes > 1; }
};

class RankGrid {
 public:
  // REQUIRES: all sizes >= 1; etp·ep divides tp·cp·dp; gpus_per_node >= 1;
  // nvlink_domain_gpus >= 1. Ranks are numbered from 0 on node 0; node n
  // holds ranks [n·gpus_per_node, (n+1)·gpus_per_node) and NVLink domain d
  // ranks [d·nvlink_domain_gpus, (d+1)·nvlink_domain_gpus).
  RankGrid(const ParallelConfig& config, int64_t gpus_per_node,
           int64_t nvlink_domain_gpus);

  int64_t world() const { return world_; }

  // Every group of one kind, each as a sorted list of global ranks. The
  // groups of a kind partition [0, world).
  std::vector<std::vector<int64_t>> Groups(GroupKind kind) const;
  // The group of `kind` that contains `rank`.
  std::vector<int64_t> GroupOf(GroupKind kind, int64_t rank) const;
  // Placement of the worst-placed group of `kind`: most nodes spanned, ties
  // broken by most NVLink domains, then fewest members on one node. Cheap
  // (O(lcm(gpus_per_node, nvlink_domain_gpus)) group bases at most, no
  // allocation): the cost model calls it for every candidate.
  GroupPlacement Placement(GroupKind kind) const;

  // Coordinates of a rank in the dense grid.
  struct Coord {
    int64_t tp, cp, dp, pp;
  };
  Coord CoordOf(int64_t rank) const;

 private:
  // Every kind is a run of adjacent grid axes, so its members are an
  // arithmetic progression in rank space (stride, size); see rank_grid.cc.
  ParallelConfig config_;
  int64_t world_;
  int64_t gpus_per_node_;
  int64_t nvlink_domain_gpus_;
};

}  // namespace meshtune::search_spaces

#endif  // MESHTUNE_SEARCH_SPACES_RANK_GRID_H_
