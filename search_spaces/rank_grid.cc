// RankGrid: Megatron-Core rank order and group placement on nodes.
//
// Megatron-Core (megatron/core/parallel_state.py, RankGenerator and
// generate_masked_orthogonal_rank_groups) lays ranks out in the order
// "tp-cp-ep-dp-pp", tp fastest. The dense generator has ep = 1, so its grid is
// tp × cp × dp × pp; the expert generator has cp = 1 and etp = tp, so its grid
// is tp × ep × edp × pp with edp = cp·dp/ep (world % (etp·ep·pp) == 0 there).
//
// Every group kind we use masks a run of *adjacent* axes of one of these
// grids (tp; cp; dp; cp-dp; tp-cp; pp; ep; edp). The members of such a group
// therefore form an arithmetic progression {base + c·stride : c < size},
// where stride is the product of the sizes of the axes below the run. That
// makes groups and their placement cheap to compute without materialising
// the whole grid.
#include "search_spaces/rank_grid.h"

#include <algorithm>
#include <numeric>

#include "search_spaces/status.h"

namespace meshtune::search_spaces {
namespace {

// A group kind as an arithmetic progression in rank space.
struct Progression {
  int64_t stride;  // distance between consecutive members
  int64_t size;    // members per group
};

// How the members {x + c·stride : c < size} fall into buckets of `bucket`
// consecutive ranks (nodes or NVLink domains).
struct Spread {
  int64_t buckets;         // distinct buckets touched
  int64_t max_per_bucket;  // most members in one bucket
};

Spread SpreadOf(int64_t x, int64_t stride, int64_t size, int64_t bucket) {
  if (size == 1) return {1, 1};
  // Members at least a bucket apart never share a bucket.
  if (stride >= bucket) return {size, 1};
  // Steps shorter than a bucket visit consecutive buckets without gaps.
  const int64_t first = x / bucket;
  const int64_t last = (x + (size - 1) * stride) / bucket;
  int64_t max_count = 0;
  for (int64_t k = first; k <= last; ++k) {
    // Members c with k·bucket <= x + c·stride < (k+1)·bucket.
    const int64_t lo_num = k * bucket - x;
    const int64_t hi_num = (k + 1) * bucket - x;
    const int64_t lo = lo_num <= 0 ? 0 : (lo_num + stride - 1) / stride;
    const int64_t hi = std::min(size - 1, (hi_num + stride - 1) / stride - 1);
    max_count = std::max(max_count, hi - lo + 1);
  }
  return {last - first + 1, max_count};
}

// Orders placements from best to worst: more nodes is worse, then more NVLink
// domains, then fewer members sharing a node (less traffic stays local).
bool WorsePlacement(const GroupPlacement& a, const GroupPlacement& b) {
  if (a.nodes != b.nodes) return a.nodes > b.nodes;
  if (a.nvlink_domains != b.nvlink_domains) {
    return a.nvlink_domains > b.nvlink_domains;
  }
  return a.ranks_per_node < b.ranks_per_node;
}

}  // namespace

const char* ToString(GroupKind k) {
  switch (k) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kCp:
      return "cp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kDpCp:
      return "dp_cp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kEp:
      return "ep";
    case GroupKind::kEdp:
      return "edp";
    case GroupKind::kTpCp:
      return "tp_cp";
  }
  return "unknown";
}

RankGrid::RankGrid(const ParallelConfig& config, int64_t gpus_per_node,
                   int64_t nvlink_domain_gpus)
    : config_(config),
      world_(config.world()),
      gpus_per_node_(gpus_per_node),
      nvlink_domain_gpus_(nvlink_domain_gpus) {
  MESHTUNE_CHECK(config.tp >= 1 && config.pp >= 1 && config.cp >= 1 &&
                 config.dp >= 1 && config.ep >= 1);
  MESHTUNE_CHECK(gpus_per_node >= 1 && nvlink_domain_gpus >= 1);
  // The expert grid needs edp = cp·dp/ep to be whole (parallel_state.py
  // raises when world is not divisible by etp·ep·pp).
  MESHTUNE_CHECK((config.cp * config.dp) % config.ep == 0);
}

namespace {

Progression ProgressionOf(const ParallelConfig& c, GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp:
      return {1, c.tp};
    case GroupKind::kCp:
      return {c.tp, c.cp};
    case GroupKind::kDp:
      return {c.tp * c.cp, c.dp};
    case GroupKind::kDpCp:
      return {c.tp, c.cp * c.dp};
    case GroupKind::kTpCp:
      return {1, c.tp * c.cp};
    case GroupKind::kPp:
      return {c.tp * c.cp * c.dp, c.pp};
    case GroupKind::kEp:  // expert grid: etp (= tp) below ep
      return {c.tp, c.ep};
    case GroupKind::kEdp:
      return {c.tp * c.ep, c.cp * c.dp / c.ep};
  }
  MESHTUNE_CHECK(false);
  return {1, 1};
}

}  // namespace

std::vector<std::vector<int64_t>> RankGrid::Groups(GroupKind kind) const {
  const Progression p = ProgressionOf(config_, kind);
  const int64_t block = p.stride * p.size;  // ranks covered by one run
  std::vector<std::vector<int64_t>> groups;
  groups.reserve(world_ / p.size);
  // Megatron numbers groups by the unmasked coordinates, fastest axis first:
  // the offset below the run (low) varies fastest, then the block (high).
  for (int64_t high = 0; high < world_ / block; ++high) {
    for (int64_t low = 0; low < p.stride; ++low) {
      std::vector<int64_t> members(p.size);
      for (int64_t c = 0; c < p.size; ++c) {
        members[c] = high * block + low + c * p.stride;
      }
      groups.push_back(std::move(members));
    }
  }
  return groups;
}

std::vector<int64_t> RankGrid::GroupOf(GroupKind kind, int64_t rank) const {
  MESHTUNE_CHECK(rank >= 0 && rank < world_);
  const Progression p = ProgressionOf(config_, kind);
  const int64_t block = p.stride * p.size;
  const int64_t base = (rank / block) * block + rank % p.stride;
  std::vector<int64_t> members(p.size);
  for (int64_t c = 0; c < p.size; ++c) members[c] = base + c * p.stride;
  return members;
}

GroupPlacement RankGrid::Placement(GroupKind kind) const {
  const Progression p = ProgressionOf(config_, kind);
  const int64_t block = p.stride * p.size;
  const int64_t num_blocks = world_ / block;
  // A group's placement depends only on its base modulo the node size and
  // the NVLink domain size (shifting by a multiple of both moves every member
  // by whole buckets), so only bases that differ modulo their lcm need to be
  // looked at: at most lcm values of `low` and lcm/gcd(block, lcm) blocks.
  const int64_t period = std::lcm(gpus_per_node_, nvlink_domain_gpus_);
  const int64_t lows = std::min(p.stride, period);
  const int64_t highs = std::min(num_blocks, period / std::gcd(block, period));
  GroupPlacement worst;
  worst.size = p.size;
  bool first = true;
  for (int64_t high = 0; high < highs; ++high) {
    for (int64_t low = 0; low < lows; ++low) {
      const int64_t base = high * block + low;
      const Spread nodes = SpreadOf(base, p.stride, p.size, gpus_per_node_);
      const Spread domains =
          SpreadOf(base, p.stride, p.size, nvlink_domain_gpus_);
      GroupPlacement g;
      g.size = p.size;
      g.nodes = nodes.buckets;
      g.ranks_per_node = nodes.max_per_bucket;
      g.nvlink_domains = domains.buckets;
      if (first || WorsePlacement(g, worst)) worst = g;
      first = false;
    }
  }
  return worst;
}

RankGrid::Coord RankGrid::CoordOf(int64_t rank) const {
  MESHTUNE_CHECK(rank >= 0 && rank < world_);
  Coord c;
  c.tp = rank % config_.tp;
  c.cp = (rank / config_.tp) % config_.cp;
  c.dp = (rank / (config_.tp * config_.cp)) % config_.dp;
  c.pp = rank / (config_.tp * config_.cp * config_.dp);
  return c;
}

}  // namespace meshtune::search_spaces
